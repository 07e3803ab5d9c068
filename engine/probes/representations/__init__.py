"""What the model's vectors hold: the input embeddings and how they add up (``embeddings``), the learned position
embeddings compared with each other and over checkpoints (``position_similarity``), and a token's nearest
contextual neighbours in a corpus (``neighbours``)."""
