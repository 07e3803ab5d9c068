"""Experiments: the BERT paper's ablations (and its successors'), re-run small.

An experiment is a named set of arms (pretraining runs that differ in one factor) sharing the corpus, the
vocabulary, the seeds, the step budget and the evaluation (``definitions``; the built-in ones with the source's
numbers: ``builtin``). ``runner`` trains each arm as an ordinary run folder (watchable, probe-able, resumable after a
stop or ``kill -9``), fine-tunes its final model on the bundled downstream data and measures it (``evaluation``);
``results`` lines ours up against the paper's, with a verdict per claim. The command line: ``python -m
engine.experiment``. Design: docs/design/experiments.md.
"""
