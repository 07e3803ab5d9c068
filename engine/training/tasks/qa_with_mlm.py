"""QA fine-tuning that keeps the masked-LM (and NSP) objective alive: task ``qa_mlm``.

Fine-tuning the whole encoder for SQuAD alone moves it away from what the MLM head reads,
and fill-mask gets worse (re-fitting the heads on a frozen encoder recovers only part).
Here every optimizer step sees one QA micro-batch *and* one pretraining micro-batch from a
text corpus, and the loss is the sum of the three means, each weighted like its own task:

    loss = MLM (per masked token) + NSP (per sentence pair) + QA (per feature)

so the encoder learns the span head without forgetting the MLM head (multi-task learning,
as in MT-DNN). The QA features set the epoch; the pretraining batches run on in their own
epochs beside them, and both are rebuilt exactly from a (epoch, index) position, so a
resumed run sees the very same batches. One process only: two forward passes before one
backward do not suit DistributedDataParallel's gradient hooks. ``QA_MLM`` is its ``TaskDefinition``; its own
settings (``QAWithMLMSettings``) are QA's windows and the text its masked-LM term reads.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from engine.training.loop import distributed as dist
from engine.data.features import FeatureDataset, FinetuneBatch
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.tasks.job_documents import load_corpus, split_documents
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.task_data import Log, qa_data
from engine.model.heads import BertWithHeads
from engine.model.outputs import HeadsOutput
from engine.data.pretraining import Batch, PretrainingDataset
from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks.eval_examples import predict_span
from engine.checks import is_int
from engine.training.tasks.finetuning import QA, QASettings, QATask
from engine.training.tasks.pretraining import PRETRAINING, PretrainingTask, build_datasets
from engine.training.tasks.registry import TaskDefinition

MLM_EVAL_FRACTION = 0.05     # documents of the text corpus held out for the MLM/NSP evaluation


@dataclass
class JointBatch:
    """One QA micro-batch and one pretraining micro-batch, trained in the same step."""

    qa: FinetuneBatch
    pretraining: Batch

    @property
    def num_tokens(self) -> int:
        return self.qa.num_tokens + self.pretraining.num_tokens

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "JointBatch":
        return JointBatch(self.qa.to(device, non_blocking), self.pretraining.to(device, non_blocking))


@dataclass
class JointOutput:
    """The two passes of a joint step: MLM/NSP on the text batch, the span head on the QA batch."""

    pretraining: HeadsOutput
    qa: HeadsOutput


class JointDataset:
    """QA features paired with pretraining batches; batch ``i`` of epoch ``e`` is the QA batch
    (e, i) with the pretraining batch at the same running count, wrapping over its own epochs.
    The two may hold different numbers of sequences (``--mlm-batch-size``); ``batch_size`` is the
    QA one, which the run's config names."""

    def __init__(self, qa: FeatureDataset, pretraining: PretrainingDataset) -> None:
        self.qa, self.pretraining = qa, pretraining
        self.batch_size = qa.batch_size
        self._pretraining_epochs: list[int] = []       # batches per pretraining epoch, as far as read

    def __len__(self) -> int:
        return len(self.qa)

    @property
    def example_index(self):
        return self.qa.example_index

    @property
    def summary(self) -> str:
        """What the command line's start line adds: the masked-LM text's documents and batch."""
        return (f"{self.pretraining.num_documents} documents for the masked-LM term "
                f"(text batch {self.pretraining.batch_size})")

    def num_batches(self, epoch: int = 0) -> int:
        return self.qa.num_batches(epoch)

    def pretraining_position(self, count: int) -> tuple[int, int]:
        """(epoch, index) of the ``count``-th pretraining batch read (0-based, over all epochs)."""
        epoch = 0
        while True:
            if epoch == len(self._pretraining_epochs):
                self._pretraining_epochs.append(self.pretraining.num_batches(epoch))
            if count < self._pretraining_epochs[epoch]:
                return epoch, count
            count -= self._pretraining_epochs[epoch]
            epoch += 1

    def batch(self, epoch: int, index: int) -> JointBatch:
        count = sum(self.qa.num_batches(e) for e in range(epoch)) + index
        return JointBatch(self.qa.batch(epoch, index), self.pretraining.batch(*self.pretraining_position(count)))


class QAWithMLMTask(TrainingTask):
    """Loss terms (MLM, NSP, QA); metrics of both tasks (mlm_loss, mlm_acc, nsp_*, qa_loss, *_acc)."""

    name, terms = "qa_mlm", 3

    def __init__(self, config: TrainingConfig, settings: "QAWithMLMSettings | None" = None) -> None:
        self.settings = settings
        self.pretraining_task, self.qa_task = PretrainingTask(config), QATask(settings)
        self.stat_names = self.pretraining_task.stat_names + self.qa_task.stat_names
        self._split = len(self.pretraining_task.stat_names)

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        return self.pretraining_task.heads(config) + (self.qa_task.head,)

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return config.nsp

    def check(self, model: BertWithHeads, train_data: JointDataset, eval_data: JointDataset | None,
              config: TrainingConfig) -> None:
        if dist.world_size() > 1:
            raise ValueError("QA with masked-LM (task qa_mlm) trains in one process; run it without torchrun")
        for name, data in (("training", train_data), ("evaluation", eval_data)):
            if data is not None and not isinstance(data, JointDataset):
                raise ValueError(f"the {name} data is a {type(data).__name__}, not QA features paired with "
                                 f"pretraining batches (engine.training.tasks.qa_with_mlm.JointDataset)")
        # the QA half: head, feature type, length and batch size, as QA alone checks them
        self.qa_task.check(model, train_data.qa, eval_data.qa if eval_data is not None else None, config)
        if "mlm" not in model.heads:
            raise ValueError("QA with masked-LM needs a model with a masked-LM head")
        if config.nsp and "nsp" not in model.heads:
            raise ValueError("next-sentence prediction is on but the model has no NSP head")
        for name, data in (("training", train_data), ("evaluation", eval_data)):   # the text half's own length
            if data is not None and (data.pretraining.mlm_probability, data.pretraining.nsp) != (
                    config.mlm_probability, config.nsp):
                raise ValueError(f"the {name} pretraining data was built with other masking or NSP settings "
                                 f"than the training config's")

    def counts(self, batch: JointBatch) -> tuple[int, int, int]:
        return self.pretraining_task.counts(batch.pretraining) + self.qa_task.counts(batch.qa)

    def forward(self, net: torch.nn.Module, batch: JointBatch, config: TrainingConfig) -> JointOutput:
        """Two passes: pretraining on the text batch, then QA on the QA batch."""
        return JointOutput(self.pretraining_task.forward(net, batch.pretraining, config),
                           self.qa_task.forward(net, batch.qa, config))

    def losses(self, out: JointOutput) -> list[torch.Tensor | None]:
        return self.pretraining_task.losses(out.pretraining) + self.qa_task.losses(out.qa)

    def tally(self, out: JointOutput, batch: JointBatch, counts: Sequence[int]) -> torch.Tensor:
        return torch.cat((self.pretraining_task.tally(out.pretraining, batch.pretraining, counts[:2]),
                          self.qa_task.tally(out.qa, batch.qa, counts[2:])))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        return {**self.pretraining_task.metrics(sums[:self._split], totals[:2]),
                **self.qa_task.metrics(sums[self._split:], totals[2:])}

    def answer_metrics(self, model: torch.nn.Module, tokenizer: Any, eval_data: JointDataset,
                       batches: int) -> dict[str, Any]:
        """The QA half's SQuAD exact match and F1."""
        return self.qa_task.answer_metrics(model, tokenizer, eval_data.qa, batches)

    def fingerprint(self, data: JointDataset) -> str:
        """Both datasets' fingerprints, hashed together (checked when a run resumes)."""
        both = f"{data.qa.fingerprint()}|{self.pretraining_task.fingerprint(data.pretraining)}"
        return hashlib.sha256(both.encode()).hexdigest()


@dataclass(frozen=True)
class QAWithMLMSettings(QASettings):
    """QA's windows (``QASettings``) and the text the masked-LM term trains on beside them."""

    mlm_corpus: str | None = field(default=None, metadata={
        "help": "text (.txt/.md/.jsonl) whose masked-LM and NSP losses train beside QA's (required)",
        "metavar": "FILE"})
    mlm_seq_len: int = field(default=128, metadata={"help": "length of the masked-LM sequences"})
    mlm_batch_size: int | None = field(default=None, metadata={
        "help": "masked-LM sequences per micro-batch (default: --batch-size)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mlm_corpus is not None and not isinstance(self.mlm_corpus, str):
            raise ValueError(f"mlm_corpus must be a file name, got {self.mlm_corpus!r}")
        if not is_int(self.mlm_seq_len) or self.mlm_seq_len < 8:
            raise ValueError(f"mlm_seq_len must be >= 8, got {self.mlm_seq_len!r}")
        if self.mlm_batch_size is not None and (not is_int(self.mlm_batch_size) or self.mlm_batch_size < 1):
            raise ValueError(f"mlm_batch_size must be >= 1, got {self.mlm_batch_size!r}")

    def check_job(self, spec: Any, config: TrainingConfig) -> None:
        """The masked-LM text is given and is a file, and QA's window checks."""
        if self.mlm_corpus is None:
            raise ValueError(f"mlm_corpus is required: task {QAWithMLMTask.name} needs the text its masked-LM "
                             "term trains on")
        if not Path(self.mlm_corpus).is_file():
            raise ValueError(f"mlm_corpus: no such file: {self.mlm_corpus}")
        super().check_job(spec, config)


def qa_mlm_data(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                id2label: dict[int, str] | None = None, log: Log = lambda message: None,
                known: dict[int, str] | None = None, *, settings: QAWithMLMSettings,
                ) -> tuple[JointDataset, JointDataset | None, None]:
    """QA's features (``qa_data``) paired with pretraining batches of ``settings.mlm_corpus`` (a seeded
    ``MLM_EVAL_FRACTION`` of its documents held out, paired with the held-out features)."""
    train, held_out, _ = qa_data(spec, config, tokenizer, log=log, settings=settings)
    if not settings.mlm_corpus:
        raise ValueError("task qa_mlm needs a text corpus for its masked-LM term (mlm_corpus)")
    train_docs, eval_docs = split_documents(load_corpus(settings.mlm_corpus), MLM_EVAL_FRACTION, config.seed,
                                            config.nsp)
    log(f"{settings.mlm_corpus}: {len(train_docs)} documents for the masked-LM term, {len(eval_docs)} held out")
    text_config = config.replace(max_seq_length=settings.mlm_seq_len,
                                 batch_size=settings.mlm_batch_size or config.batch_size)
    text_train, text_eval = build_datasets(train_docs, eval_docs, tokenizer, text_config)
    joint_eval = JointDataset(held_out, text_eval) if held_out is not None and text_eval is not None else None
    return JointDataset(train, text_train), joint_eval, None


QA_MLM = TaskDefinition(
    name=QAWithMLMTask.name, heads=QA.heads + PRETRAINING.heads,
    make=lambda config, settings: QAWithMLMTask(config, settings), loss=QA.loss,
    metrics=QA.metrics + ("mlm_acc",), shown=(("mlm_loss", ".4f"), ("qa_loss", ".4f"), ("start_acc", ".3f")),
    data=qa_mlm_data, defaults=QA.defaults, training=dict(nsp=True), predictor=predict_span,
    settings=QAWithMLMSettings, in_app=False)
