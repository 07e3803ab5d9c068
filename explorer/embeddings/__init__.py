"""The Embeddings tab: token, segment and position embeddings and how they add up."""
