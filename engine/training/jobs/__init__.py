"""Training jobs: ``prepare_job`` (a ``JobSpec`` -> the data, the model, the tokenizer and a ``Trainer`` handed its
task object), a pretraining job's data (its corpus, vocabulary and token store), the start model, the newest good
checkpoint to continue from, and the command lines' shared arguments. Imports runs, loop and tasks; only the worker
imports it."""
