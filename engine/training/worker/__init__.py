"""The app's background training worker: ``TrainingWorker``, the run's thread, its trainer callback, the state
its threads share (``LiveRun``), the ``RunState`` of a run with its allowed moves, what continues a named run
(``continue_run``) and the typed refusals
(``errors``)."""
