"""A saved checkpoint checked the way a user would use it: loaded by a ``transformers`` class with nothing
missing or mismatched, giving our model's logits on a held-out batch."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from engine.checkpoints.hf_format import load_directory


def assert_transformers_agrees(checkpoint: Path, hf_class: type, batch: Any, head: str) -> Any:
    """Load ``checkpoint`` with ``hf_class``, run it and our model on ``batch``, compare ``head``'s logits
    (atol 1e-5); returns the transformers model (for its config)."""
    hf, info = hf_class.from_pretrained(checkpoint, output_loading_info=True)
    assert not info["missing_keys"] and not info.get("mismatched_keys")
    inputs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids)
    with torch.no_grad():
        mine, theirs = load_directory(checkpoint).model.eval()(**inputs), hf.eval()(**inputs)
    torch.testing.assert_close(mine.result(head).logits, theirs.logits, rtol=0, atol=1e-5)
    return hf
