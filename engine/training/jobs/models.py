"""The model and tokenizer a training job starts from: a fresh preset, or an existing BERT with the
heads its task needs added (freshly initialised) and every head it already has kept, except a
classifier head of another kind: a model carries one of classifier / token_classifier /
multiple_choice (they share transformers' ``classifier`` keys), so fine-tuning one kind drops the other."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch

from engine.checkpoints.hf_format import load
from engine.model.loaded_model import LoadedModel
from engine.training.tasks.start_model import dropout_overrides, fresh_model_config
from engine.model.heads import BertWithHeads, head_specs_for
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.runs.run_folder import RunFolder, resolve_checkpoint
from engine.training.tasks.registry import task_definition
from engine.training.tasks.replaced_tokens import discriminator_model

Log = Callable[[str], None]


def model_source(source: str) -> str:
    """A run directory stands for its newest complete checkpoint; anything else (``default``, a model
    directory, a hub id) goes to ``checkpoints.load`` as it is."""
    path = Path(source)
    if RunFolder.is_run(path) and not (path / "config.json").exists():
        return str(resolve_checkpoint(path))
    return source


def load_start_model(spec: JobSpec) -> LoadedModel | None:
    """The model the job starts from (``spec.model_source``), or None for a fresh preset."""
    source = spec.model_source
    return None if source is None else load(model_source(source))


def pretraining_model(spec: JobSpec, config: TrainingConfig, tokenizer: WordPieceTokenizer,
                      loaded: LoadedModel | None) -> BertWithHeads:
    """A fresh ``preset`` BERT with MLM (+ NSP) heads, or ``loaded``'s weights (the encoder and every head
    it has, QA and classification included; MLM/NSP heads it lacks are freshly initialised). Objective rtd: an
    ELECTRA discriminator with its generator (``engine.training.tasks.replaced_tokens.discriminator_model``)."""
    if getattr(spec.settings, "objective", None) == "rtd":
        return discriminator_model(spec, config, tokenizer, loaded)
    heads = ("mlm", "nsp") if config.nsp else ("mlm",)
    dropout = dropout_overrides(spec)
    torch.manual_seed(config.seed)
    if loaded is None:
        model_config = fresh_model_config(spec, config, tokenizer)
        config.check_model(model_config)
        return BertWithHeads(model_config, heads=heads)
    if tokenizer.vocab_size > loaded.config.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but {spec.init_from} only "
                         f"{loaded.config.vocab_size} embeddings; use its own tokenizer")
    config.check_model(loaded.config)
    model = BertWithHeads(loaded.config.replace(**dropout),
                          heads=tuple(h for h in head_specs_for(loaded.config) if h in heads or h in loaded.heads))
    return _copy_weights(loaded, model)


def finetuning_model(loaded: LoadedModel, task: str, id2label: dict[int, str] | None = None, seed: int = 0,
                     log: Log = lambda message: None, runs: Sequence[str] | None = None) -> BertWithHeads:
    """``loaded``'s encoder and heads plus the task's head: freshly initialised when it lacks it, or when
    its classifier has other labels than ``id2label``. A classifier head of another kind (classifier,
    token_classifier, multiple_choice) is dropped, as one model carries only one. The pooler stays
    when a remaining head reads it (BERT's NSP, classification, multiple choice; not RoBERTa's first-token
    classifier): the heads are the family's own (``heads.head_specs_for``). ``runs``: the heads the task runs
    for its settings (``TrainingTask.heads``: ``qa_mlm`` without NSP adds no NSP head); default all it names."""
    defined = task_definition(task).heads      # the first is the one it trains (added fresh or replaced)
    head = defined[0]
    needed = tuple(h for h in defined if runs is None or h in runs or h == head)
    specs = head_specs_for(loaded.config)      # the model family's heads: BERT's, or its variants of them
    # a head transformers stores under the same keys as the task's (classifier.*) cannot stay beside it
    dropped = [h for h in loaded.heads if h != head and specs[h].hf_prefix == specs[head].hf_prefix]
    heads = tuple(h for h in specs if (h in loaded.heads and h not in dropped) or h in needed)
    config = loaded.config
    fresh = head not in loaded.heads
    if specs[head].labelled and id2label is not None and config.id2label != id2label:
        if not fresh:
            log(f"replacing the {head} head of {loaded.source} (labels {list(config.id2label.values())}) "
                f"with a new one for {list(id2label.values())}")
        fresh, config = True, config.replace(id2label=dict(id2label))
    elif not specs[head].labelled and fresh and any(specs[h].labelled for h in dropped):   # e.g. multiple choice
        config = config.replace(id2label={0: "LABEL_0", 1: "LABEL_1"})   # transformers' default: no labels
    if dropped:
        log(f"dropping the {', '.join(dropped)} head of {loaded.source}: a model carries one classifier head, "
            f"and this job trains a {head} head")
    torch.manual_seed(seed)
    model = BertWithHeads(config, heads=heads, add_pooling_layer=any(specs[h].pooled for h in heads))
    _copy_weights(loaded, model, specs[head].prefix if fresh else None)
    if fresh:
        log(f"added a freshly initialised {head} head to {loaded.source} (heads: {', '.join(heads)})")
    return model


def _copy_weights(loaded: LoadedModel, model: BertWithHeads, skip: str | None = None) -> BertWithHeads:
    """Every weight of ``loaded`` that ``model`` has with the same shape (but those starting with ``skip``)."""
    ours = model.state_dict()
    theirs = {k: v for k, v in loaded.model.state_dict().items()
              if k in ours and ours[k].shape == v.shape and not (skip and k.startswith(skip))}
    model.load_state_dict(theirs, strict=False)
    return model
