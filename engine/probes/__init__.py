"""Probes: what the explorer asks of a model (tokenize, attention, head stats and ablation, embeddings,
fill-mask, QA) and the SQuAD metric. Each returns plain data, never tensors."""
