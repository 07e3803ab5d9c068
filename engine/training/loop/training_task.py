"""What the ``Trainer`` trains, as a small object: heads, batch weighting, loss, metrics, checks. This is the
loop's side of the contract; each task in ``engine.training.tasks`` implements it, and whoever builds the
``Trainer`` (``prepare_job``) hands it the task object, so the loop never looks a task up by name.

The trainer owns everything that does not depend on the task (optimizer, schedule,
accumulation, precision, DDP, divergence, checkpoints, resume); a ``TrainingTask`` says

* which heads run (``heads``) and whether the pooler is used (``uses_pooler``),
* how much each loss term of a micro-batch weighs (``counts``: e.g. masked tokens for
  MLM, sentence pairs for NSP, examples for QA and classification),
* how a batch goes through the model (``forward``) and the mean loss of each term (``losses``),
* what is summed over micro-batches and processes (``tally``) and the metrics from those
  sums (``metrics``; evaluation prefixes them with ``eval_``).

Losses of several micro-batches (and processes) are combined as ``sum_i loss_i * n_i / N``
per term, so an accumulated step has the gradient of the union of its micro-batches.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import torch

from engine.model.heads import BertWithHeads
from engine.training.loop.config import TrainingConfig


TaskOutput = Any
"""What a task's ``forward`` returns and its ``losses``/``tally`` read: the model's ``HeadsOutput``
for a one-pass task, the task's own dataclass otherwise (``qa_mlm``'s ``JointOutput``)."""


class TrainBatch(Protocol):
    """A collated micro-batch: tensors that move to a device, and its count of real tokens."""

    @property
    def num_tokens(self) -> int: ...

    def to(self, device: torch.device, non_blocking: bool = False) -> "TrainBatch": ...


class TrainData(Protocol):
    """A dataset the trainer reads by (epoch, index); every batch can be rebuilt exactly."""

    batch_size: int

    def num_batches(self, epoch: int) -> int: ...

    def batch(self, epoch: int, index: int) -> TrainBatch: ...


@runtime_checkable
class StreamingData(TrainData, Protocol):
    """A ``TrainData`` too large to count ahead (``PretrainingDataset`` over a big corpus): the trainer asks
    it whether batches exist instead of counting an epoch, and saves its position with each checkpoint."""

    def has_batches(self, epoch: int, end: int) -> bool:
        """Whether ``epoch`` has batches ``0 .. end-1`` (looking only that far)."""
        ...

    def position_state(self, epoch: int) -> dict[str, Any]:
        """What a checkpoint keeps so that ``restore_position`` finds the data position again at once."""
        ...

    def restore_position(self, epoch: int, state: dict[str, Any]) -> None: ...


def has_batches(data: TrainData, epoch: int, end: int) -> bool:
    """Whether ``data``'s ``epoch`` has batches ``0 .. end-1``."""
    return data.has_batches(epoch, end) if isinstance(data, StreamingData) else end <= data.num_batches(epoch)


def data_position(data: TrainData, epoch: int) -> dict[str, Any]:
    """What a checkpoint keeps of ``data``'s position beyond (epoch, index): a streaming dataset's state."""
    return data.position_state(epoch) if isinstance(data, StreamingData) else {}


def restore_data_position(data: TrainData, epoch: int, state: Any) -> None:
    """Give ``data`` back the position state a checkpoint kept (older checkpoints have none)."""
    if isinstance(data, StreamingData) and isinstance(state, dict):
        data.restore_position(epoch, state)


class TrainingTask:
    """Base class: one loss term per entry of ``counts``; subclasses fill in the rest."""

    name = "task"
    terms = 1                               # loss terms: the length of ``counts``
    stat_names: tuple[str, ...] = ()        # what ``tally`` sums, in order
    settings: Any = None                    # the task's own settings (its definition's dataclass), if it has any

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        """The heads this task runs (others the model has are carried along untouched)."""
        raise NotImplementedError

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return False

    def check(self, model: BertWithHeads, train_data: TrainData, eval_data: TrainData | None,
              config: TrainingConfig) -> None:
        """Raise ``ValueError`` when the model or the data cannot be trained with ``config``."""
        raise NotImplementedError

    def counts(self, batch: Any) -> tuple[int, ...]:
        """Per loss term, how many targets this (CPU) micro-batch has: its weight in the step."""
        raise NotImplementedError

    def forward(self, net: torch.nn.Module, batch: Any, config: TrainingConfig) -> TaskOutput:
        """Run ``net`` on a batch already on the device (the trainer sets the precision)."""
        raise NotImplementedError

    def losses(self, out: TaskOutput) -> list[torch.Tensor | None]:
        """The mean loss of each term, in ``counts`` order (``None`` for a term with no targets)."""
        raise NotImplementedError

    def tally(self, out: TaskOutput, batch: Any, counts: Sequence[int]) -> torch.Tensor:
        """Detached float sums of one micro-batch, shape (len(stat_names),)."""
        raise NotImplementedError

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        """Named metrics from the summed ``tally`` values and the summed ``counts``."""
        raise NotImplementedError

    def answer_metrics(self, model: torch.nn.Module, tokenizer: Any, eval_data: TrainData,
                       batches: int) -> dict[str, Any]:
        """Metrics of whole predictions on the held-out examples behind the first ``batches`` evaluated
        batches (QA: SQuAD exact match and F1 of answer texts), added to an evaluation; none by default."""
        return {}

    def fingerprint(self, data: TrainData) -> str:
        """A hash of the training data (checked when a run resumes)."""
        return data.fingerprint()   # type: ignore[attr-defined]
