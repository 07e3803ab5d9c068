"""Data: corpus sources, the token store and its cache, masking, pretraining instances, fine-tuning features (QA
windows, classification), collation."""
