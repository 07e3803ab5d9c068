"""Data: masking, pretraining instances, fine-tuning features (QA windows, classification), collation."""
