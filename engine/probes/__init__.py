"""Probes: what the explorer asks of a model, one sub-package per thing probed: ``attention`` (maps, head stats,
ablation, the neuron view), ``representations`` (embeddings, positions, neighbours), ``comparison`` (two models on
one input), ``heads`` (the task heads' predictions, the SQuAD metric), ``attribution`` (which tokens pushed a score)
and ``syntax``. ``inference`` (one function per tab) and ``forward_cache`` (one forward per input, kept) serve them
all. Each returns plain data, never tensors."""
