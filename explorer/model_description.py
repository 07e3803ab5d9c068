"""What the model picker says about a model: where it comes from, its size, its heads (and where to try
the fine-tuned ones, with their labels) and the heads it lacks."""
from __future__ import annotations

from engine.checkpoints.hf_format import LABELLED_HEADS, LoadedModel
from engine.model.config import BertConfig
from engine.model.heads import HEADS

HEAD_TITLES = {"mlm": "masked LM (Fill-mask)", "nsp": "next sentence (NSP)", "qa": "question answering (QA)",
               "classifier": "sequence classification", "token_classifier": "token classification",
               "multiple_choice": "multiple choice"}
TASK_HEADS = {"classifier": "Heads › Classify", "token_classifier": "Heads › Tag words",
              "multiple_choice": "Heads › Choose"}        # fine-tuned heads and where to try them
MAX_NAMED_LABELS = 6


def _tried_in(head: str, config: BertConfig) -> str:
    """`` (Heads › Tag words; 17 labels: NOUN, VERB, …)`` for a fine-tuned head, "" for the others."""
    if head not in TASK_HEADS:
        return ""
    where = TASK_HEADS[head]
    labels = [str(config.id2label[i]) for i in sorted(config.id2label or {})] if head in LABELLED_HEADS else []
    if not labels:
        return f" ({where})"
    named = ", ".join(labels[:MAX_NAMED_LABELS]) + (", …" if len(labels) > MAX_NAMED_LABELS else "")
    return f" ({where}; {len(labels)} labels: {named})"


def describe(loaded: LoadedModel) -> str:
    """Markdown: where the model comes from, its size, and which heads it has (and lacks)."""
    c = loaded.config
    params = sum(p.numel() for p in loaded.model.parameters())
    have = ", ".join(HEAD_TITLES[h] + _tried_in(h, c) for h in HEADS if h in loaded.heads) or "none (encoder only)"
    lines = [f"**{loaded.source}** · {params / 1e6:.1f}M parameters · {c.num_hidden_layers} layers × "
             f"{c.num_attention_heads} heads · hidden {c.hidden_size} · vocabulary {c.vocab_size:,} · "
             f"{c.max_position_embeddings} positions", f"Heads: {have}."]
    missing = [HEAD_TITLES[h] for h in ("mlm", "nsp", "qa") if h not in loaded.heads]
    if missing:
        lines.append(f"No {', no '.join(missing)} head: tabs that need one say so.")
    if not any(h in loaded.heads for h in TASK_HEADS):
        lines.append("No classification, tagging or multiple-choice head: add one in the **Fine-tune** tab.")
    if loaded.tokenizer is None:
        lines.append("⚠️ No tokenizer files: this model cannot read text.")
    return "  \n".join(lines)
