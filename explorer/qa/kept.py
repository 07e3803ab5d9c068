"""QA's model run, once per input: *Top-k*, *Max answer length* and *Allow no answer* re-read the kept logits.

The model's input is the question, the context and the windows they are cut into (*max sequence length*,
*doc stride*); the other settings only choose spans from the windows' start and end logits. The first call for
an input is ``inference.answer_details``; the forward cache (``explorer/forward_cache.py``,
docs/design/forward-cache.md) then keeps each window's logits as float32 under
``("qa", question, context, max_seq_len, doc_stride)``, per visitor and model object, and a settings change
picks spans from them with the engine's own decoding (``engine.probes.heads.qa.answer_from_logits``), so its answers equal a
fresh run's. Plain numpy, no tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.model.loaded_model import LoadedModel
from engine.probes import inference
from engine.probes.heads.qa import QAResult, answer_from_logits
from engine.text.qa_windows import encode_qa_windows
from explorer.forward_cache import keep, lookup
from explorer.services import Services


@dataclass
class KeptWindows:
    """The model's output for one (question, context, max_seq_len, doc_stride): every window's logits."""

    start: list[np.ndarray]          # one (S_w,) float32 per window, specials included
    end: list[np.ndarray]            # (S_w,) float32
    question_pieces: int             # the question's tokens without specials (the windows never cut it)

    @classmethod
    def of(cls, result: QAResult) -> KeptWindows:
        """What ``result``'s windows hold of the model's output (float32, as the engine computed it)."""
        return cls(start=[np.asarray(w.logits[0], dtype=np.float32) for w in result.windows],
                   end=[np.asarray(w.logits[1], dtype=np.float32) for w in result.windows],
                   question_pieces=len(result.question_tokens))


def decode(loaded: LoadedModel, kept: KeptWindows, question: str, context: str, top_k: int, max_answer_len: int,
           max_seq_len: int, doc_stride: int, handle_impossible_answer: bool) -> QAResult:
    """The answers ``inference.answer_details`` gives for these settings, picked from ``kept`` (no model)."""
    encodings = encode_qa_windows(loaded.require_tokenizer(), question, context, max_seq_len, doc_stride,
                                  max_question_len=kept.question_pieces)
    if len(encodings) != len(kept.start):
        raise ValueError(f"{len(encodings)} windows but {len(kept.start)} kept")     # a changed tokenizer
    return answer_from_logits(loaded, question, context, encodings, kept.start, kept.end, top_k, max_answer_len,
                              max_seq_len, doc_stride, handle_impossible_answer)


def answer_details(services: Services, loaded: LoadedModel, question: str, context: str, top_k: int,
                   max_answer_len: int, max_seq_len: int, doc_stride: int, handle_impossible_answer: bool) -> QAResult:
    """``inference.answer_details`` with the model run once per (question, context, max_seq_len, doc_stride)."""
    key = ("qa", question, context, max_seq_len, doc_stride)
    kept = lookup(services.forward_cache, loaded.model, key)
    if isinstance(kept, KeptWindows):
        return decode(loaded, kept, question, context, top_k, max_answer_len, max_seq_len, doc_stride,
                      handle_impossible_answer)
    result = inference.answer_details(loaded, question, context, top_k, max_answer_len, max_seq_len, doc_stride,
                                      handle_impossible_answer=handle_impossible_answer)
    keep(services.forward_cache, loaded.model, key, KeptWindows.of(result))
    return result
