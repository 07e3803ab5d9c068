"""The Why tab: which input tokens pushed a prediction up or down (attributions on the word embeddings)."""
