"""The training loop: ``TrainingConfig``, the ``Trainer`` and the ``TrainingTask`` contract it trains, resume,
its callbacks, optimizer and schedule, DDP plumbing, throughput and ``report_to`` logging. Imports only
``engine.training.runs`` (the run folder and checkpoint state); knows nothing of tasks by name, jobs or the app."""
