"""What the attention heads do: every head's maps for one input and over checkpoints (``maps``), their per-head
statistics (``head_stats``), heads switched off and what the model loses (``ablation``), and the queries, keys and
scores behind one row of one head's map (``neuron_view``)."""
