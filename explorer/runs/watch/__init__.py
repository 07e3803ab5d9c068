"""The run browser (the Training tab's *Run browser*): any run in the runs folder, read only, one or two overlaid:
``watcher`` (the runs followed, shared by every browser, and what each browser is sent), ``status`` (a run's
state told from its files), ``plots`` (its figures) and ``section`` (its widgets and events)."""
