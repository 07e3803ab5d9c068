"""Pretraining as a ``TrainingTask``: masked-LM (+ next-sentence prediction) on ``PretrainingDataset``s, or a
left-to-right LM (``PretrainingSettings.objective`` ``clm``: the encoder gets a causal attention mask and the MLM
head predicts each next token); ``PRETRAINING`` is its ``TaskDefinition`` (its data is the job's text:
``engine.training.jobs.setup``; its settings: ``engine.training.tasks.pretraining_settings``).

Metrics keep their keys whatever the objective, so the curves read them: ``mlm_loss`` / ``mlm_acc`` are the LM head's
loss and accuracy over its targets (masked tokens, or every next token); a left-to-right run logs the same values
as ``next_token_loss`` / ``next_token_acc`` too (held out: ``eval_next_token_acc``, BERT's Figure 5 comparison).
With ``pair_task`` ``sop`` (ALBERT's sentence order) the pair head is the NSP slot's (BERT's NSP head, or ALBERT's
own sentence-order head, which reads its labels as ``sentence_order_label``), and ``nsp_loss`` / ``nsp_acc`` are
logged as ``sop_loss`` / ``sop_acc`` too. Objective ``rtd`` (ELECTRA) is its own task object,
``engine.training.tasks.replaced_tokens.ReplacedTokenTask``, which ``PRETRAINING.make`` picks."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from engine.text.documents import Document
from engine.model.encoder import BertModel, causal_attention_mask
from engine.model.heads import IGNORE_INDEX, BertWithHeads
from engine.model.outputs import HeadsOutput
from engine.data.instance_plan import max_segment_tokens
from engine.data.pretraining import Batch, PretrainingDataset
from engine.data.token_store import TokenStore
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks.pretraining_checks import check_pretraining_data
from engine.training.tasks.pretraining_settings import TASK, PretrainingSettings, objective_of
from engine.training.tasks.registry import TaskDefinition
from engine.training.tasks.replaced_tokens import ReplacedTokenTask


def build_datasets(train_documents: Sequence[Document], eval_documents: Sequence[Document] | None,
                   tokenizer: WordPieceTokenizer, config: TrainingConfig, short_seq_prob: float = 0.1,
                   settings: PretrainingSettings | None = None) -> tuple[PretrainingDataset, PretrainingDataset | None]:
    """Training and held-out datasets built with the config's batch size, length and masking, and the objective of
    ``settings`` (None: BERT's masked LM)."""
    def make(documents: Sequence[Document], seed: int) -> PretrainingDataset:
        store = TokenStore.from_texts(documents, tokenizer, max_segment_tokens(config.max_seq_length, config.nsp))
        return PretrainingDataset(store, tokenizer, config.max_seq_length, config.batch_size,
                                  config.mlm_probability, short_seq_prob, config.nsp, config.whole_word_masking, seed,
                                  objective=objective_of(settings))
    evaluation = make(eval_documents, config.seed + 1) if eval_documents else None
    return make(train_documents, config.seed), evaluation


class PretrainingTask(TrainingTask):
    """MLM loss weighted by masked tokens (next tokens for ``clm``), NSP loss by sentence pairs (with
    ``config.nsp``)."""

    name, terms = TASK, 2
    stat_names = ("mlm_loss_sum", "mlm_correct", "nsp_loss_sum", "nsp_correct")

    def __init__(self, config: TrainingConfig, settings: PretrainingSettings | None = None) -> None:
        self.nsp = config.nsp
        self.settings = settings
        self.objective = objective_of(settings)

    def heads(self, config: TrainingConfig) -> tuple[str, ...]:
        return ("mlm", "nsp") if config.nsp else ("mlm",)

    def uses_pooler(self, config: TrainingConfig) -> bool:
        return config.nsp

    def check(self, model: BertWithHeads, train_data: PretrainingDataset, eval_data: PretrainingDataset | None,
              config: TrainingConfig) -> None:
        if "mlm" not in model.heads:
            raise ValueError("pretraining needs a model with a masked-LM head")
        if config.nsp and "nsp" not in model.heads:
            raise ValueError("next-sentence prediction is on but the model has no NSP head")
        if config.nsp and pair_label_name(model) == "sentence_order_label" and not self.objective.sentence_order:
            raise ValueError("this model's pair head predicts sentence order (ALBERT's): pretrain it with "
                             "--pair-task sop, or with next-sentence prediction off")
        if self.objective.causal:
            if config.nsp:
                raise ValueError("objective clm (a left-to-right LM) has no sentence pairs: turn NSP off")
            if not isinstance(model.bert, BertModel):
                raise ValueError(f"objective clm (a left-to-right LM) needs a BERT-layout encoder (BERT, RoBERTa, "
                                 f"ALBERT, ELECTRA); this model's is a {type(model.bert).__name__}")
        check_pretraining_data(train_data, config, "training", True, self.objective)
        if eval_data is not None:
            check_pretraining_data(eval_data, config, "evaluation", False, self.objective)

    def counts(self, batch: Batch) -> tuple[int, int]:
        masked = int((batch.labels != IGNORE_INDEX).sum())
        pairs = int((batch.next_sentence_label != IGNORE_INDEX).sum()) if self.nsp else 0
        return masked, pairs

    def forward(self, net: torch.nn.Module, batch: Batch, config: TrainingConfig) -> HeadsOutput:
        mask = causal_attention_mask(batch.attention_mask) if self.objective.causal else batch.attention_mask
        inputs = {"input_ids": batch.input_ids, "attention_mask": mask,             # (B, S), or (B, S, S) for clm
                  "token_type_ids": batch.token_type_ids, "labels": batch.labels}
        if self.nsp:                            # (B,) 1: NotNext, or swapped (an ALBERT's head names it its way)
            label = pair_label_name(net) if self.objective.sentence_order else "next_sentence_label"
            inputs[label] = batch.next_sentence_label
        return net(**inputs, sparse_mlm=True, compute=self.heads(config))

    def losses(self, out: HeadsOutput) -> list[torch.Tensor | None]:
        return [out.mlm.loss, out.nsp.loss if out.nsp is not None else None]

    def tally(self, out: HeadsOutput, batch: Batch, counts: Sequence[int]) -> torch.Tensor:
        """(mlm loss * n, mlm correct, nsp loss * k, nsp correct) of one micro-batch."""
        n, k = counts
        with torch.no_grad():
            targets = batch.labels[batch.labels != IGNORE_INDEX]                  # (N,)
            mlm_correct = (out.mlm.logits.argmax(-1) == targets).sum().float()   # sparse: (N, V) rows
            zero = torch.zeros((), device=targets.device)
            nsp_loss, nsp_correct = zero, zero
            if k:
                nsp_loss = out.nsp.loss.detach().float() * k
                nsp_correct = (out.nsp.logits.argmax(-1) == batch.next_sentence_label).sum().float()
            return torch.stack((out.mlm.loss.detach().float() * n, mlm_correct, nsp_loss, nsp_correct))

    def metrics(self, sums: Sequence[float], totals: Sequence[int]) -> dict[str, Any]:
        masked, pairs = max(1, totals[0]), totals[1]
        nsp = pairs > 0
        metrics = {"mlm_loss": sums[0] / masked, "mlm_acc": sums[1] / masked,
                   "nsp_loss": sums[2] / pairs if nsp else None, "nsp_acc": sums[3] / pairs if nsp else None}
        if self.objective.causal:            # the same numbers under the objective's own names
            metrics.update(next_token_loss=metrics["mlm_loss"], next_token_acc=metrics["mlm_acc"])
        if self.objective.sentence_order:
            metrics.update(sop_loss=metrics["nsp_loss"], sop_acc=metrics["nsp_acc"])
        return metrics

    def fingerprint(self, data: PretrainingDataset) -> str:
        """A hash of the training data's token ids and sampling settings (``PretrainingDataset.fingerprint``)."""
        return data.fingerprint()


def pair_label_name(net: torch.nn.Module) -> str:
    """The forward keyword of the pair head's label: ``next_sentence_label``, or ``sentence_order_label`` for a model
    whose head in the NSP slot is ALBERT's sentence order (``family_heads.SENTENCE_ORDER``)."""
    model = getattr(net, "module", net)                  # under DistributedDataParallel
    spec = getattr(model, "specs", {}).get("nsp")
    return spec.targets[0] if spec is not None and spec.targets else "next_sentence_label"


def make_pretraining_task(config: TrainingConfig, settings: PretrainingSettings | None = None) -> TrainingTask:
    """The task object of ``settings``' objective: ``ReplacedTokenTask`` for ``rtd``, else ``PretrainingTask``."""
    if settings is not None and settings.objective == "rtd":
        return ReplacedTokenTask(config, settings)
    return PretrainingTask(config, settings)


PRETRAINING = TaskDefinition(
    name=PretrainingTask.name, heads=("mlm", "nsp"), make=make_pretraining_task,
    loss="mlm_loss", metrics=("mlm_acc", "nsp_acc"), shown=(("mlm_loss", ".4f"), ("nsp_loss", ".4f")),
    finetuning=False, defaults=dict(seq_len=128, batch_size=32), settings=PretrainingSettings)
