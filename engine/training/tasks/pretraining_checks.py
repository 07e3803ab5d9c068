"""What a pretraining task object (``PretrainingTask``, ``ReplacedTokenTask``) checks of its data before a run:
that it is a ``PretrainingDataset`` built with the run's data settings and objective (``build_datasets`` makes
such a pair from one job's settings)."""
from __future__ import annotations

from engine.data.pretraining import PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.training.loop.config import TrainingConfig


def check_pretraining_data(data: PretrainingDataset, config: TrainingConfig, name: str, check_batch: bool,
                           objective: PretrainingObjective) -> None:
    """``ValueError`` unless ``data`` was built with the config's data settings and ``objective`` (see
    ``build_datasets``)."""
    if not isinstance(data, PretrainingDataset):
        raise ValueError(f"the {name} data is a {type(data).__name__}, not pretraining data; "
                         f"the training config's task is {config.task!r}")
    pairs = [("max_seq_length", data.max_seq_length, config.max_seq_length),
             ("mlm_probability", data.mlm_probability, config.mlm_probability),
             ("nsp", data.nsp, config.nsp), ("whole_word_masking", data.whole_word, config.whole_word_masking)]
    if check_batch:
        pairs.append(("batch_size", data.batch_size, config.batch_size))
    if data.objective != objective:
        raise ValueError(f"the {name} data was built for {data.objective.describe()} but the task trains "
                         f"{objective.describe()}; build both from one job's settings (build_datasets)")
    for field_name, theirs, ours in pairs:
        if theirs != ours:
            raise ValueError(f"the {name} data was built with {field_name}={theirs} but the training config says "
                             f"{ours}; build both from one config (engine.training.tasks.build_datasets)")
