"""The BERT family: one module per family (BERT, RoBERTa and XLM-R, DistilBERT, ELECTRA, ALBERT) declaring what
it changes on top of the shared parts (``engine/model``); ``registry.py`` finds a family by ``model_type``
(docs/design/families.md)."""
