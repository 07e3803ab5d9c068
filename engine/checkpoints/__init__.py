"""Checkpoints: save/load in the Hugging Face layout, old-name key mapping, the hub."""
