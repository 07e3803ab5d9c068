"""Deploying BERT Explorer to a Hugging Face Space: ``python -m deploy --space owner/name [--dry-run]``.

``deploy.space`` picks the app's files, checks what the Hub would refuse, and creates or updates the
Space through ``huggingface_hub`` (``HfApi.create_repo`` + ``upload_folder``). A tool for maintainers: it
is not part of the installed package and the app never imports it.
"""
