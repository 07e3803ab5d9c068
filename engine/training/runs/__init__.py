"""Runs on disk: the run folder's layout (``RunFolder``), the checkpoint state and its atomic writes, the
records read back from a run's files (typed, or ``Damaged``), the resume rules, the runs catalogue, a growing
``metrics.jsonl`` read a piece at a time, the download zip, and the readers of older run layouts
(``legacy``). The first of engine/training's sub-packages: it imports none of the others."""
