"""The Training tab's masking view: the first rows of the latest batch, as tokens and masking kinds, with the run's
mask mix (BERT's 80/10/10 unless the run set another) and its tokenizer's mask token (RoBERTa's ``<mask>``)."""
from __future__ import annotations

from typing import Any, Sequence

from engine.model.heads import IGNORE_INDEX
from engine.data.masking import DEFAULT_MASK_MIX, KIND_NAMES
from engine.data.pretraining import Batch
from engine.text.tokenizer import WordPieceTokenizer


def capture_rows(batch: Batch, step: int, rows: int,
                 mask_mix: Sequence[float] = DEFAULT_MASK_MIX) -> dict[str, Any]:
    """Plain-list copy of the first ``rows`` sequences of ``batch`` (cheap; taken every step), with the mask mix
    it was drawn with."""
    keep = slice(0, rows)
    return {"step": step, "mask_mix": [float(share) for share in mask_mix],
            "input_ids": batch.input_ids[keep].tolist(), "labels": batch.labels[keep].tolist(),
            "mask_kind": batch.mask_kind[keep].tolist(), "attention_mask": batch.attention_mask[keep].tolist(),
            "token_type_ids": batch.token_type_ids[keep].tolist(),
            "next_sentence_label": batch.next_sentence_label[keep].tolist()}


def describe_batch(snap: dict[str, Any], tokenizer: WordPieceTokenizer | None) -> dict[str, Any]:
    """``{"step", "rows": [{"input_ids", "tokens", "labels", "label_tokens", "mask_kind",
    "mask_kind_names", "token_type_ids"}], "next_sentence_label", "mask_mix", "mask_token"}``; rows cut at their
    padding, ``labels`` -100 where ``mask_kind`` is 0 ("none"); ``mask_token`` None without a tokenizer."""
    rows = []
    for r in range(len(snap["input_ids"])):
        n = sum(snap["attention_mask"][r])
        ids, labels, kinds = snap["input_ids"][r][:n], snap["labels"][r][:n], snap["mask_kind"][r][:n]
        rows.append({
            "input_ids": ids, "labels": labels, "mask_kind": kinds,
            "mask_kind_names": [KIND_NAMES[k] for k in kinds],
            "token_type_ids": snap["token_type_ids"][r][:n],
            "tokens": [_token(tokenizer, i) for i in ids],
            "label_tokens": [None if lab == IGNORE_INDEX else _token(tokenizer, lab) for lab in labels],
        })
    return {"step": snap["step"], "rows": rows, "next_sentence_label": list(snap["next_sentence_label"]),
            "mask_mix": list(snap.get("mask_mix", DEFAULT_MASK_MIX)),
            "mask_token": tokenizer.mask_token if tokenizer is not None else None}


def _token(tokenizer: WordPieceTokenizer | None, token_id: int) -> str:
    if tokenizer is None:
        return str(token_id)
    try:
        return tokenizer.id_to_token(token_id)
    except IndexError:
        return f"<{token_id}>"
