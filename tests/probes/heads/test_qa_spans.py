"""Span scoring in one QA window (docs/design/qa.md, rules 2-4): `select_spans`
equals the 4.x pipeline's ``select_starts_ends`` + ``decode_spans`` (tests/support/qa_reference.py) to the
bit, ties and top-k limits included, and its positive-score spans are those of a brute force."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.probes.heads.qa_spans import candidate_count, select_spans
from support.qa_reference import brute_force, reference_select

P_MASK = [0, 1, 1, 1, 0, 0, 0, 1]
START = [0, 9, 0, 0, 1, 3, 2, 9]
END = [0, 9, 0, 0, 4, 1, 2.5, 9]


def test_hand_example_top3_spans_scores_and_null():
    found = select_spans(START, END, P_MASK, top_k=3)
    assert [(s, e) for s, e, _ in found.spans] == [(5, 6), (4, 4), (6, 6)]
    assert [score for _, _, score in found.spans] == pytest.approx([0.1113, 0.0675, 0.0409], abs=1e-4)
    # [CLS] (0) is in both softmax denominators but never a real span end; the null score is p_s[0] * p_e[0]
    p_start = np.exp([0, 1, 3, 2]) / np.exp([0, 1, 3, 2]).sum()
    p_end = np.exp([0, 4, 1, 2.5]) / np.exp([0, 4, 1, 2.5]).sum()
    assert found.null_score == pytest.approx(p_start[0] * p_end[0], rel=1e-6)
    assert found.start_probs[[0, 4, 5, 6]] == pytest.approx(p_start, rel=1e-6)
    assert found.end_probs[[0, 4, 5, 6]] == pytest.approx(p_end, rel=1e-6)
    assert list(found.start_probs[[1, 2, 3, 7]]) == [0.0] * 4      # masked: exp(-10000 - max) is 0 in float32
    assert found.start_probs.dtype == np.float32                       # the pipeline's arithmetic


def test_candidate_count_is_the_pipelines_pre_selection():
    assert [candidate_count(k) for k in (1, 3, 20)] == [12, 16, 50]
    assert [candidate_count(k, align_to_words=False) for k in (1, 3, 20)] == [1, 3, 20]


def test_more_candidates_than_real_spans_keeps_zero_score_cells_as_the_pipeline():
    # 6 legal spans among tokens 4..6; the pipeline's top 50 cells then include zero cells whose ends
    # are legal: an end before its start, or [CLS] (token 0). They score exactly 0.
    every = select_spans(START, END, P_MASK, top_k=50).spans
    real = [(s, e) for s, e, score in every if score > 0]
    assert sorted(real) == [(4, 4), (4, 5), (4, 6), (5, 5), (5, 6), (6, 6)]
    assert every[:6] == [span for span in every if span[2] > 0]                      # best first, zeros last
    zeros = [(s, e) for s, e, score in every if score == 0]
    assert zeros and all(e < s or 0 in (s, e) for s, e in zeros)
    assert every == reference_select(START, END, P_MASK, 50, 15)[0]
    # 64 cells and 50 asked: the partition path; 64 asked: sort all cells (the pipeline fails on exactly 64)
    assert len(select_spans(START, END, P_MASK, top_k=64).spans) == 4 * 4     # every cell with usable ends: 0, 4..6
    assert select_spans(START, END, P_MASK, top_k=65).spans == reference_select(START, END, P_MASK, 65, 15)[0]


def test_max_answer_len():
    one = select_spans(START, END, P_MASK, top_k=3, max_answer_len=1).spans
    assert [(s, e) for s, e, _ in one] == [(4, 4), (6, 6), (5, 5)]
    two = [(s, e) for s, e, score in select_spans(START, END, P_MASK, top_k=20, max_answer_len=2).spans if score > 0]
    assert (4, 6) not in two and len(two) == 5


def test_ties_top1_takes_the_first_cell_and_more_follow_numpy_as_the_pipeline():
    flat = [0, 2.0, 2.0, 2.0, 2.0]                     # every span of tokens 1..4 ties with its mirror
    p_mask = [0, 0, 0, 0, 0]
    assert select_spans(flat, flat, p_mask, top_k=1).spans[0][:2] == (1, 1)   # argmax: smallest start, then end
    for k in (2, 5, 9, 12, 30):
        assert select_spans(flat, flat, p_mask, top_k=k).spans == reference_select(flat, flat, p_mask, k, 15)[0]


def test_padding_is_never_an_answer():
    found = select_spans([0, 0, 1, 1, 50, 50], [0, 0, 1, 1, 50, 50], [0, 1, 0, 0, 0, 0], top_k=10,
                         attention_mask=[1, 1, 1, 1, 0, 0])
    assert {(s, e) for s, e, score in found.spans if score > 0} == {(2, 2), (2, 3), (3, 3)}
    assert found.spans == reference_select([0, 0, 1, 1, 50, 50], [0, 0, 1, 1, 50, 50], [0, 1, 0, 0, 0, 0], 10,
                                           15, attention_mask=[1, 1, 1, 1, 0, 0])[0]


@pytest.mark.parametrize("seed", range(60))
def test_equals_the_pipeline_reference_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    start, end = rng.normal(0, 3, n).astype(np.float32), rng.normal(0, 3, n).astype(np.float32)
    if seed % 5 == 0:                                        # coarse logits: many exact ties
        start, end = np.round(start), np.round(end)
    p_mask = (rng.random(n) < 0.3).astype(int)
    p_mask[0] = 0
    k, max_answer_len = int(rng.choice([1, 2, 5, 12, 16, 50, n * n + 3])), int(rng.integers(1, 20))
    found = select_spans(torch.tensor(start), end.tolist(), p_mask, top_k=k, max_answer_len=max_answer_len)
    expected, null = reference_select(start, end, p_mask, k, max_answer_len)
    assert found.spans == expected and found.null_score == null
    # the positive spans are the rules' spans: brute force in float64 ranks them alike
    legal, brute_null = brute_force(start, end, p_mask, max_answer_len)
    assert null == pytest.approx(brute_null, rel=1e-5)
    positive = [(s, e) for s, e, score in found.spans if score > 0]
    scores = {(s, e): score for s, e, score in legal}
    assert all(scores[span] > 0 for span in positive)
    assert [found_score for *_, found_score in found.spans if found_score > 0] == pytest.approx(
        [scores[span] for span in positive], rel=1e-5)
    if seed % 5 and len(legal) > k:                          # no ties: the same spans, in the same order
        assert positive == [(s, e) for s, e, _ in legal[:len(positive)]]


def test_validation():
    with pytest.raises(ValueError, match="top_k"):
        select_spans(START, END, P_MASK, top_k=0)
    with pytest.raises(ValueError, match="max_answer_len"):
        select_spans(START, END, P_MASK, max_answer_len=0)
    with pytest.raises(ValueError, match="differ in length"):
        select_spans(START, END[:-1], P_MASK)
    with pytest.raises(TypeError, match="top_k must be an int"):
        select_spans(START, END, P_MASK, top_k=1.5)
