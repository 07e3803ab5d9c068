"""A model card (``README.md`` with Hugging Face's YAML metadata) for a checkpoint, from plain facts.

``CardFacts`` holds what is known about the model (its data, tokenizer, training settings, losses
and held-out figures); ``model_card(facts)`` writes the card: YAML front matter (``library_name``,
``pipeline_tag``, ``tags``, ``language``, ``base_model`` when it started from one) and text sections
(model, data, training, results, how to load). Gathering the facts from a run folder is the
training layer's job (``engine.training.runs.export``); nothing here reads files.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from engine.model.families.registry import FAMILIES
from engine.text.special_roles import BERT_TOKENS

# Held-out figures in the card's table: record key -> column title (probabilities print as percentages).
EVAL_COLUMNS = (("eval_mlm_loss", "MLM loss"), ("eval_mlm_acc", "MLM accuracy"),
                ("eval_nsp_loss", "NSP loss"), ("eval_nsp_acc", "NSP accuracy"))
MAX_EVAL_ROWS = 12


@dataclass
class CardFacts:
    """What the card says about one checkpoint (plain values)."""

    name: str                                              # e.g. "run-20250101-120000 step-000300"
    architectures: list[str]                               # config.json's, the first is the class to load
    model_config: dict[str, Any]                           # config.json
    data: str                                              # one sentence: what it was trained on
    documents: int | None = None
    tokenizer: str = ""                                    # one sentence: where its vocabulary comes from
    step: int = 0
    total_steps: int | None = None
    training: dict[str, Any] = field(default_factory=dict)   # TrainingConfig fields
    metrics: dict[str, Any] = field(default_factory=dict)    # the last train record before the checkpoint
    evaluations: list[dict[str, Any]] = field(default_factory=list)   # eval records up to the checkpoint
    base_model: str | None = None                          # a hub id or "bundled default model"
    language: str = "en"
    mask_token: str = BERT_TOKENS["mask"]                  # its tokenizer's (RoBERTa's "<mask>"), for the example


def _family(facts: CardFacts) -> tuple[str, str]:
    """The model's ``model_type`` (a tag) and its family's name for people, from config.json (BERT's when absent)."""
    model_type = facts.model_config.get("model_type")
    model_type = model_type if isinstance(model_type, str) and model_type in FAMILIES else "bert"
    return model_type, FAMILIES[model_type].name


def _num(value: Any, probability: bool = False) -> str:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "–"
    return f"{value * 100:.3g}%" if probability else f"{value:.3g}"


def _yaml(facts: CardFacts) -> str:
    meta: dict[str, Any] = {"library_name": "transformers", "pipeline_tag": "fill-mask", "language": [facts.language],
                            "tags": [_family(facts)[0], "fill-mask", "masked-language-modeling", "bert-explorer"]}
    if facts.training.get("nsp"):
        meta["tags"].append("next-sentence-prediction")
    if facts.base_model and "/" in facts.base_model:        # only a hub id is a valid base_model
        meta["base_model"] = facts.base_model
    lines = ["---"]
    for key, value in meta.items():       # JSON scalars and lists are valid YAML flow values
        lines.append(f"{key}: {json.dumps(value)}")
    lines.append("---")
    return "\n".join(lines)


def model_card(facts: CardFacts) -> str:
    """The ``README.md`` text for ``facts``: YAML metadata, then model, data, training, results, usage."""
    c, t, m = facts.model_config, facts.training, facts.metrics
    size = (f"{c.get('num_hidden_layers', '?')} layers, hidden size {c.get('hidden_size', '?')}, "
            f"{c.get('num_attention_heads', '?')} attention heads, a vocabulary of {c.get('vocab_size', '?'):,} pieces"
            if isinstance(c.get("vocab_size"), int) else "")
    klass = facts.architectures[0] if facts.architectures else "BertForPreTraining"
    objectives = "masked language modelling" + (" and next-sentence prediction" if t.get("nsp") else "")
    progress = f"{facts.step:,} of {facts.total_steps:,} steps" if facts.total_steps else f"{facts.step:,} steps"
    if facts.total_steps and facts.step < facts.total_steps:
        progress += " (a checkpoint taken before the run's last step)"
    start = f"It continued training from `{facts.base_model}`." if facts.base_model else "It was trained from scratch."
    out = [_yaml(facts), "", f"# {facts.name}", "",
           f"A small {_family(facts)[1]} ({size}) pretrained with BERT Explorer on {objectives}. {start} "
           f"This is a teaching model: expect it to know little beyond its training text.", "",
           "## Data", "", facts.data + (f" {facts.documents:,} documents." if facts.documents else ""), "",
           facts.tokenizer, "", "## Training", "",
           f"- steps: {progress}"]
    for key, title in (("batch_size", "batch size"), ("max_seq_length", "sequence length"),
                       ("learning_rate", "peak learning rate"), ("schedule", "schedule"),
                       ("mlm_probability", "masking rate"), ("whole_word_masking", "whole-word masking"),
                       ("nsp", "next-sentence prediction"), ("seed", "seed")):
        if key in t:
            out.append(f"- {title}: {t[key]}")
    out += ["", "## Results", ""]
    if m:
        parts = [f"MLM loss {_num(m.get('mlm_loss'))}", f"MLM accuracy {_num(m.get('mlm_acc'), True)}"]
        if m.get("nsp_loss") is not None:
            parts += [f"NSP loss {_num(m.get('nsp_loss'))}", f"NSP accuracy {_num(m.get('nsp_acc'), True)}"]
        out += [f"Last training step ({m.get('step', facts.step)}): " + ", ".join(parts) + ".", ""]
    evaluations = facts.evaluations[-MAX_EVAL_ROWS:]
    if evaluations:
        columns = [(k, title) for k, title in EVAL_COLUMNS if any(e.get(k) is not None for e in evaluations)]
        out += ["Held-out evaluation (documents never trained on), by step:", "",
                "| step | " + " | ".join(title for _, title in columns) + " |",
                "|---:|" + "---:|" * len(columns)]
        for e in evaluations:
            out.append(f"| {e.get('step', '')} | " + " | ".join(_num(e.get(k), k.endswith("_acc")) for k, _ in columns)
                       + " |")
        out.append("")
    else:
        out += ["No held-out evaluation was run before this checkpoint.", ""]
    out += ["## How to use", "", "```python",
            f"from transformers import AutoTokenizer, {klass}, pipeline",
            "",
            'tokenizer = AutoTokenizer.from_pretrained("path/to/unzipped/folder")',
            f'model = {klass}.from_pretrained("path/to/unzipped/folder")',
            'fill = pipeline("fill-mask", model="path/to/unzipped/folder")',
            f'print(fill("the king is {facts.mask_token} ."))',
            "```", ""]
    return "\n".join(out)
