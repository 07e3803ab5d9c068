"""The Training tab: start/pause/stop a run, live curves, the masking view, checkpoints."""
