"""Held-out evaluation: the task's metrics on a fixed set of held-out batches, with dropout off.

The batches are the evaluation set's first ``eval_batches`` of epoch 0 (all of them when that is 0 or the set has
fewer), with their seeded masks for pretraining; they are taken at the first evaluation and are the same at every
later one, so the numbers compare across steps. The task sums what it measures over them (``tally``), turns the
sums into metrics (``metrics``) and adds what it measures on whole examples (``answer_metrics``: a QA run's exact
match and F1). ``Trainer.evaluate`` runs it under the trainer's lock and names the metrics ``eval_<metric>``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.training_task import TaskOutput, TrainBatch, TrainData, TrainingTask, has_batches

Forward = Callable[[TrainBatch], tuple[TrainBatch, TaskOutput]]   # a batch on the device and the task's output


class HeldOutEvaluation:
    """The held-out batches of a run (taken at the first evaluation) and the task's metrics on them."""

    def __init__(self, task: TrainingTask, data: TrainData, limit: int) -> None:
        """``limit``: how many batches of epoch 0 to evaluate on (``TrainingConfig.eval_batches``; 0 all)."""
        self.task, self.data, self.limit = task, data, limit
        self._batches: list[TrainBatch] | None = None

    def batches(self) -> list[TrainBatch]:
        """The evaluation set's first ``limit`` batches of epoch 0 (all when ``limit`` is 0 or it has fewer)."""
        if self._batches is None:
            has_limit = bool(self.limit) and has_batches(self.data, 0, self.limit)
            count = self.limit if has_limit else self.data.num_batches(0)
            self._batches = [self.data.batch(0, i) for i in range(count)]
        return self._batches

    def metrics(self, model: BertWithHeads, tokenizer: WordPieceTokenizer | None, forward: Forward,
                device: torch.device) -> dict[str, Any]:
        """The task's metrics on the batches, each run through ``forward`` with ``model`` in eval mode and no
        gradients; ``model`` is put back in the mode it was in."""
        batches = self.batches()
        was_training = model.training
        model.eval()
        sums = torch.zeros(len(self.task.stat_names), device=device)
        totals = [0] * self.task.terms
        try:
            with torch.no_grad():
                for batch in batches:
                    counts = self.task.counts(batch)
                    totals = [a + b for a, b in zip(totals, counts)]
                    batch, out = forward(batch)
                    sums += self.task.tally(out, batch, counts)
            metrics = self.task.metrics(sums.tolist(), totals)
            metrics.update(self.task.answer_metrics(model, tokenizer, self.data, len(batches)))
        finally:
            model.train(was_training)
        return metrics
