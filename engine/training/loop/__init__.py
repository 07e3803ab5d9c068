"""The training loop: ``TrainingConfig``, the ``Trainer``, its callbacks, optimizer and schedule, state on disk,
DDP plumbing, throughput and ``report_to`` logging. Knows nothing of jobs, run folders' layout or the app."""
