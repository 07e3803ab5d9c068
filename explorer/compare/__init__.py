"""The Compare tab: two models side by side on one input."""
