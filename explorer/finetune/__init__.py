"""The Fine-tune tab: fine-tune the picked model for a task in the background and watch it learn."""
