"""What a training job asks of the model it starts from, checked before any data is read or weights are changed.

1. **The heads.** Every head the task trains must exist for the model's family: its family reads that head's
   transformers class (``Family.classes``; BERT's own classes are the heads' classes, so BERT has every head).
   A RoBERTa has no next-sentence head, so ``qa_mlm`` with NSP and pretraining with NSP are refused for it, and a
   task whose head the family lacks is refused with one sentence naming the head, its class and the tasks the
   family can do.
2. **The length.** ``max_seq_length`` fits the model's positions (``BertConfig.max_tokens``: RoBERTa's and
   XLM-R's padding offset taken off, ``TrainingConfig.check_model``).
3. **QA windows.** The question and a context window longer than the stride fit ``max_seq_length`` with the
   special tokens of the tokenizer's own pair template (``num_special_tokens``: BERT's 3, RoBERTa's 4).

``prepare_job`` runs these on the loaded model (the command lines, the worker); the Fine-tune tab runs them on
the picked folder's ``config.json`` and tokenizer before it starts a run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from typing import Any

from engine.model.config import BertConfig, preset
from engine.model.families.registry import family_of
from engine.model.head_specs import HEADS
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.registry import TRAINING_TASKS, finetuning_tasks


def family_class(model: BertConfig, head: str) -> str:
    """transformers' class of ``head`` in ``model``'s family (``RobertaForSequenceClassification``)."""
    return family_of(model.model_type).architectures_to_theirs([HEADS[head].hf_class])[0]


def family_has_head(model: BertConfig, head: str) -> bool:
    """Whether the engine reads ``head`` for ``model``'s family: the family's class of it is one the family reads,
    or it is the head's own class (the family whose layout the heads are)."""
    family = family_of(model.model_type)
    theirs = family_class(model, head)
    return theirs == HEADS[head].hf_class or bool(family.architectures_to_ours([theirs]))


def missing_heads(model: BertConfig, heads: Sequence[str]) -> list[str]:
    """The ``heads`` the family of ``model`` does not have, in order."""
    return [head for head in heads if not family_has_head(model, head)]


def family_tasks(model: BertConfig) -> list[str]:
    """The fine-tuning tasks whose heads (``TaskDefinition.heads``, NSP included) ``model``'s family has."""
    return [name for name in finetuning_tasks() if not missing_heads(model, TRAINING_TASKS[name].heads)]


def check_heads(model: BertConfig, config: TrainingConfig, name: str) -> None:
    """``ValueError`` in one sentence when ``model``'s family lacks a head that ``config.task`` trains (the heads
    its task object runs for ``config``: NSP only when ``config.nsp``); ``name`` is the model as the user gave it."""
    definition = TRAINING_TASKS[config.task]
    lacking = missing_heads(model, definition.make_task(config).heads(config))
    if not lacking:
        return
    family = family_of(model.model_type).name
    heads = " or ".join(f"{HEADS[h].noun} head" for h in lacking)
    can = family_tasks(model)
    instead = (f"{family} models can be fine-tuned for {', '.join(can)}" if can
               else f"no fine-tuning task has every head it needs for {family} models yet")
    nsp = ", or with next-sentence prediction off" if lacking == ["nsp"] else ""
    raise ValueError(f"{name} is a {family} model, and the engine has no {heads} for {family} models yet, so it "
                     f"cannot train task {config.task}; {instead}{nsp}")


def check_start_model(spec: JobSpec, config: TrainingConfig, model: BertConfig,
                      tokenizer: WordPieceTokenizer | None, name: str) -> None:
    """The checks above for a job of ``spec`` (settings ``config``) starting from ``model`` with ``tokenizer``
    (None: its QA windows are checked when the tokenizer is read); ``ValueError`` with one sentence."""
    check_heads(model, config, name)
    config.check_model(model)
    settings = spec.settings
    if hasattr(settings, "check_tokenizer") and tokenizer is not None:     # QA's windows with its template
        settings.check_tokenizer(config, tokenizer)


def folder_tokenizer(folder: str | Path) -> WordPieceTokenizer | None:
    """The tokenizer in a model folder, or None when it has no tokenizer files (the job refuses it later)."""
    try:
        return WordPieceTokenizer.from_file(folder)
    except FileNotFoundError:
        return None


def dropout_overrides(spec: JobSpec) -> dict[str, Any]:
    """The config fields the job's ``dropout`` sets (none when it is not given)."""
    return {} if spec.dropout is None else dict(hidden_dropout_prob=spec.dropout,
                                                attention_probs_dropout_prob=spec.dropout)


def fresh_model_config(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer) -> BertConfig:
    """The config of a new model for a pretraining job: its preset with the job's overrides and dropout, the
    tokenizer's vocabulary, positions for at least 512 tokens (or the sequence length); not yet checked."""
    overrides = {**spec.model_overrides, **dropout_overrides(spec), "vocab_size": tokenizer.vocab_size}
    overrides.setdefault("max_position_embeddings", max(512, config.max_seq_length))
    return preset(spec.preset, **overrides)
