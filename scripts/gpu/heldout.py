"""The fixed held-out sample the training stage scores a model on, through the functions the UI calls.

Masked-token top-1 and top-5 (``bench.model_quality.masked_token_accuracy``: 15% of a paragraph's tokens
masked with a fixed seed, ``fill_mask`` must put the original first) on the pack's held-out Wikipedia
paragraphs, and SQuAD v1.1 exact match and F1 (``bench.model_quality.squad_scores``: ``answer``) on its
held-out questions. The same paragraphs, seed and questions at every call, so scores compare across steps.
These are the model card's measures on a smaller sample of the same held-out articles;
``scripts/gpu_assemble.py`` measures the full sample here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.model_quality import masked_token_accuracy, squad_scores
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer


@dataclass
class Sample:
    """What is scored: paragraphs and the number of masked tokens to score in them, questions, the seed."""

    paragraphs: list[str]
    questions: list[dict[str, Any]]
    mlm_tokens: int = 2000
    seed: int = 0
    max_answer_len: int = 30


def score(model: BertWithHeads, tokenizer: WordPieceTokenizer, sample: Sample) -> dict[str, Any]:
    """``{"top1", "top5", "masked_tokens", "exact_match", "f1", "questions", "seconds"}`` of ``model`` (on its
    own device) in eval mode; its train/eval mode is restored. Scores a head the model lacks as absent."""
    started = time.perf_counter()
    loaded = LoadedModel(model, tokenizer, model.config, "the model in training")
    was_training = model.training
    model.eval()
    result: dict[str, Any] = {}
    try:
        if "mlm" in model.heads and sample.paragraphs:
            mlm = masked_token_accuracy(loaded, sample.paragraphs, sample.mlm_tokens, sample.seed)
            result.update(top1=mlm["top1"], top5=mlm["top5"], masked_tokens=mlm["masked_tokens"])
        if "qa" in model.heads and sample.questions:
            qa = squad_scores(loaded, sample.questions, sample.max_answer_len)
            result.update(exact_match=qa["exact_match"], f1=qa["f1"], questions=qa["questions"])
    finally:
        model.train(was_training)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def describe(scores: dict[str, Any]) -> str:
    """``top-1 31.2% (2000 tokens), SQuAD F1 71.3 / EM 60.0 (200 questions)``."""
    parts = []
    if "top1" in scores:
        parts.append(f"top-1 {scores['top1']:.1%} ({scores['masked_tokens']} tokens)")
    if "f1" in scores:
        parts.append(f"SQuAD F1 {scores['f1']:.1f} / EM {scores['exact_match']:.1f} ({scores['questions']} questions)")
    return ", ".join(parts) or "nothing to score"
