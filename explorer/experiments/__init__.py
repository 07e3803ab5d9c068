"""The Experiments tab: re-run a paper's ablation small, arm after arm in the background, and see ours beside it."""
