"""Pretraining as a ``TrainingTask``: masked-LM (+ next-sentence prediction) on ``PretrainingDataset``s, or a
left-to-right LM (``PretrainingSettings.objective`` ``clm``: the encoder gets a causal attention mask and the MLM
head predicts each next token); ``PRETRAINING`` is its ``TaskDefinition`` (its data is the job's text:
``engine.training.jobs.setup``; its settings: ``engine.training.tasks.pretraining_settings``).

Metrics keep their keys whatever the objective, so the curves read them: ``mlm_loss`` / ``mlm_acc`` are the LM head's
loss and accuracy over its targets (masked tokens, or every next token); a left-to-right run logs the same values
as ``next_token_loss`` / ``next_token_acc`` too (held out: ``eval_next_token_acc``, BERT's Figure 5 comparison)."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from engine.text.documents import Document
from engine.model.encoder import BertModel, causal_attention_mask
from engine.model.heads import IGNORE_INDEX, BertWithHeads
from engine.model.outputs import HeadsOutput
from engine.data.instance_plan import max_segment_tokens
from engine.data.pretraining import Batch, PretrainingDataset
from engine.data.pretraining_objective import PretrainingObjective
from engine.data.token_store import TokenStore
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.loop.training_task import TrainingTask
from engine.training.tasks.pretraining_settings import PretrainingSettings, objective_of
from engine.training.tasks.registry import TaskDefinition


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

    name, terms = "pretraining", 2
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
        if self.objective.causal:
            if config.nsp:
                raise ValueError("objective clm (a left-to-right LM) has no sentence pairs: turn NSP off")
            if not isinstance(model.bert, BertModel):
                raise ValueError(f"objective clm (a left-to-right LM) needs a BERT-layout encoder (BERT, RoBERTa, "
                                 f"ALBERT, ELECTRA); this model's is a {type(model.bert).__name__}")
        _check_dataset(train_data, config, "training", True, self.objective)
        if eval_data is not None:
            _check_dataset(eval_data, config, "evaluation", False, self.objective)

    def counts(self, batch: Batch) -> tuple[int, int]:
        masked = int((batch.labels != IGNORE_INDEX).sum())
        pairs = int((batch.next_sentence_label != IGNORE_INDEX).sum()) if self.nsp else 0
        return masked, pairs

    def forward(self, net: torch.nn.Module, batch: Batch, config: TrainingConfig) -> HeadsOutput:
        mask = causal_attention_mask(batch.attention_mask) if self.objective.causal else batch.attention_mask
        inputs = {"input_ids": batch.input_ids, "attention_mask": mask,             # (B, S), or (B, S, S) for clm
                  "token_type_ids": batch.token_type_ids, "labels": batch.labels}
        if self.nsp:
            inputs["next_sentence_label"] = batch.next_sentence_label
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
        return metrics

    def fingerprint(self, data: PretrainingDataset) -> str:
        """A hash of the training data's token ids and sampling settings (``PretrainingDataset.fingerprint``)."""
        return data.fingerprint()


PRETRAINING = TaskDefinition(
    name=PretrainingTask.name, heads=("mlm", "nsp"), make=lambda config, settings: PretrainingTask(config, settings),
    loss="mlm_loss", metrics=("mlm_acc", "nsp_acc"), shown=(("mlm_loss", ".4f"), ("nsp_loss", ".4f")),
    finetuning=False, defaults=dict(seq_len=128, batch_size=32), settings=PretrainingSettings)


def _check_dataset(data: PretrainingDataset, config: TrainingConfig, name: str, check_batch: bool,
                   objective: PretrainingObjective) -> None:
    """The dataset must have been built with the config's data settings (see ``build_datasets``)."""
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
