"""The Fill-mask tab: top-k predictions per [MASK], over checkpoints."""
