"""What the model picker says about a model: where it comes from, its size, its heads (and where to try
the fine-tuned ones, with their labels) and the heads it lacks."""
from __future__ import annotations

from engine.checkpoints.hf_format import LoadedModel
from engine.model.config import BertConfig
from engine.model.head_specs import HEADS

MAX_NAMED_LABELS = 6


def _tried_in(head: str, config: BertConfig) -> str:
    """`` (Heads › Tag words; 17 labels: NOUN, VERB, …)`` for a fine-tuned head, "" for the others."""
    spec = HEADS[head]
    if spec.tried_in is None:
        return ""
    where = spec.tried_in
    labels = [str(config.id2label[i]) for i in sorted(config.id2label or {})] if spec.labelled else []
    if not labels:
        return f" ({where})"
    named = ", ".join(labels[:MAX_NAMED_LABELS]) + (", …" if len(labels) > MAX_NAMED_LABELS else "")
    return f" ({where}; {len(labels)} labels: {named})"


def describe(loaded: LoadedModel) -> str:
    """Markdown: where the model comes from, its size, and which heads it has (and lacks)."""
    c = loaded.config
    params = sum(p.numel() for p in loaded.model.parameters())
    have = ", ".join(HEADS[h].title + _tried_in(h, c) for h in HEADS if h in loaded.heads) or "none (encoder only)"
    lines = [f"**{loaded.source}** · {params / 1e6:.1f}M parameters · {c.num_hidden_layers} layers × "
             f"{c.num_attention_heads} heads · hidden {c.hidden_size} · vocabulary {c.vocab_size:,} · "
             f"{c.max_position_embeddings} positions", f"Heads: {have}."]
    # the heads with a tab of their own (no tried_in) are named when missing; the fine-tuned ones are not
    missing = [s.title for s in HEADS.values() if s.tried_in is None and s.name not in loaded.heads]
    if missing:
        lines.append(f"No {', no '.join(missing)} head: tabs that need one say so.")
    if not any(HEADS[h].tried_in for h in loaded.heads):
        lines.append("No classification, tagging or multiple-choice head: add one in the **Fine-tune** tab.")
    if loaded.tokenizer is None:
        lines.append("⚠️ No tokenizer files: this model cannot read text.")
    return "  \n".join(lines)
