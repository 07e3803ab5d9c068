"""The Syntax tab: heads that follow dependencies, layers that know parts of speech, and both over training."""
