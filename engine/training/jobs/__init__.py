"""Training jobs: the ``JobSpec``, ``prepare_job`` (data, models, tokenizer), the run folder on disk, the run
catalogue, export to a downloadable model, and the command lines' shared arguments."""
