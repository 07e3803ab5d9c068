"""The app's background training worker: ``TrainingWorker``, the run's thread, its trainer callback, the state
its threads share and the ``RunState`` of a run."""
