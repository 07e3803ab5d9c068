"""SQuAD answers for a QA fine-tuning run's held-out questions, scored as the official scripts do.

The token metrics of a QA run (``start_acc``, ``span_acc``) say whether a window's arg-max positions
hit the label; users of SQuAD compare exact match and F1 of answer *texts*. After every evaluation
the trainer asks the QA task for these (``TrainingTask.answer_metrics``), and this module answers:

1. The held-out questions are those owning the evaluated features (the first ``eval_batches``
   batches of the unshuffled held-out windows), each answered whole by ``engine.probes.heads.qa``
   (the pipeline's rules: every window, spans aligned to words, at most ``MAX_ANSWER_LEN`` tokens),
   with the question cut to the run's ``max_question_len`` and the run's ``doc_stride``, so the
   model reads the windows it was trained on.
2. The prediction is the best non-null span; its *null odds* are ln(null score / best span score),
   with the pipeline's scores (p_start · p_end, the null one the minimum over windows of
   p_start[CLS] · p_end[CLS]). Within one window this equals the reference scripts'
   ``score_null - (start_logit + end_logit)`` (the softmax normalisers cancel; the pipeline's merging
   of equal answer texts can add a second span's score to the best one).
3. SQuAD v1.1 data (no ``is_impossible`` question among them): ``exact_match`` and ``f1`` of the
   predictions (``squad_metric.evaluate``). SQuAD v2.0 data: the threshold on the null odds is
   picked on these questions as ``evaluate-v2.0.py`` does with a null-odds file (the one that
   maximises F1, ``null_threshold``); a question whose odds exceed it is answered "" (no answer), and
   ``exact_match``, ``f1``, ``has_ans_exact``, ``has_ans_f1``, ``no_ans_exact``, ``no_ans_f1`` are
   reported at that threshold (``squad_metric.evaluate_v2``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from engine.model.loaded_model import LoadedModel
from engine.data.qa_features import QAExample
from engine.probes.heads import squad_metric
from engine.probes.heads.qa import answer_details
from engine.text.qa_windows import cut_question
from engine.text.tokenizer import WordPieceTokenizer

MAX_ANSWER_LEN = 30          # tokens, run_qa.py's max_answer_length


@dataclass(frozen=True)
class HeldOutAnswer:
    """The best non-null answer to one held-out question and how much the model prefers no answer."""

    id: str
    text: str
    null_odds: float         # ln(null score / best span score); +inf when no span can be formed


def answer_held_out(model: torch.nn.Module, tokenizer: WordPieceTokenizer, examples: Sequence[QAExample],
                    max_seq_len: int, doc_stride: int, max_question_len: int,
                    max_answer_len: int = MAX_ANSWER_LEN) -> list[HeldOutAnswer]:
    """Answer every question of ``examples`` with ``model`` (used as it is: the caller sets eval mode)."""
    loaded = LoadedModel(model, tokenizer, model.config, source="the model in training")
    answers = []
    for example in examples:
        found = answer_details(loaded, cut_question(tokenizer, example.question, max_question_len), example.context,
                               top_k=1, max_answer_len=max_answer_len, max_seq_len=max_seq_len,
                               doc_stride=doc_stride, handle_impossible_answer=False)
        text = found.answers[0]["answer"] if found.answers else ""
        if found.best_span_score > 0.0:
            odds = math.log(max(found.null_score, 1e-300) / found.best_span_score)
        else:
            odds = math.inf
        answers.append(HeldOutAnswer(example.id, text, odds))
    return answers


def squad_scores(examples: Sequence[QAExample], answers: Sequence[HeldOutAnswer]) -> dict[str, float]:
    """The metrics above of ``answers`` to ``examples``, v2.0's when any question is impossible; as every
    metric of a run's records, fractions in [0, 1] (SQuAD's tables show them x 100)."""
    golds = [(e.id, [text for text, _ in e.answers] if not e.is_impossible else []) for e in examples]
    predictions = {a.id: a.text for a in answers}
    if not any(e.is_impossible for e in examples):
        scores = squad_metric.evaluate(predictions, golds)
        return {"exact_match": scores["exact_match"] / 100, "f1": scores["f1"] / 100, "questions": len(examples)}
    odds = {a.id: a.null_odds for a in answers}
    picked = squad_metric.evaluate_v2(predictions, golds, odds)["best_f1_thresh"]
    at = squad_metric.evaluate_v2(predictions, golds, odds, threshold=picked)
    result = {"exact_match": at["exact"] / 100, "f1": at["f1"] / 100, "questions": len(examples),
              "null_threshold": picked}
    for prefix, name in (("HasAns", "has_ans"), ("NoAns", "no_ans")):
        if f"{prefix}_total" in at:
            result.update({f"{name}_exact": at[f"{prefix}_exact"] / 100, f"{name}_f1": at[f"{prefix}_f1"] / 100,
                           f"{name}_questions": at[f"{prefix}_total"]})
    return result


def evaluate_answers(model: torch.nn.Module, tokenizer: WordPieceTokenizer, examples: Sequence[QAExample],
                     max_seq_len: int, doc_stride: int, max_question_len: int) -> dict[str, float]:
    """Answer ``examples`` and score them (an empty dict when there are none)."""
    if not examples:
        return {}
    return squad_scores(examples, answer_held_out(model, tokenizer, examples, max_seq_len, doc_stride,
                                                  max_question_len))
