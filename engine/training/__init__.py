"""Training, in sub-packages that import in one direction only: ``runs`` (what is on disk) < ``loop`` (the
trainer) < ``tasks`` (what is trained, and the job spec their data reads) < ``jobs`` (a spec to a ready trainer)
< ``worker`` (the app's background run). Each imports only those before it (tests/test_architecture.py)."""
