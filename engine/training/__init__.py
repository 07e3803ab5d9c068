"""Training: job specs and setup, the trainer, optimizer and schedule, state on disk, tasks, the worker, DDP."""
