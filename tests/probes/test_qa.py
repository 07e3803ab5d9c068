"""Extractive QA (docs/ARCHITECTURE.md, "Extractive QA rules"): span selection on hand-made
logits equals the `transformers` QA pipeline's rules (the issue's example, a brute-force
reference and a transcription of the pipeline's own numpy steps); `answer` on a tiny random model maps
spans to context characters, windows long contexts, merges windows, handles the null
answer and validates its inputs as the pipeline does."""
from __future__ import annotations

import string
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from engine.checkpoints.hf_format import LoadedModel
from engine.model.config import BertConfig
from engine.model.heads import BertWithHeads
from engine.model.outputs import SpanOutput
from engine.probes.qa import QAResult, answer, answer_details, select_spans
from engine.text.tokenizer import WordPieceTokenizer

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "tokenizer"
P_MASK = [0, 1, 1, 1, 0, 0, 0, 1]
START = [0, 9, 0, 0, 1, 3, 2, 9]
END = [0, 9, 0, 0, 4, 1, 2.5, 9]
QUESTION = "Who was Jim Henson?"
CONTEXT = "Jim Henson was a nice puppeteer"
WORDS = ("the cat sat on a mat while dogs ran around house garden river city music film school "
         "water light green blue small large old new people time year day world").split()


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(ASSETS)


@pytest.fixture(scope="module")
def loaded(tokenizer) -> LoadedModel:
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=128)
    torch.manual_seed(0)
    model = BertWithHeads(config, heads=("qa",)).eval()
    with torch.no_grad():   # make the QA head's logits spread out so spans are well separated
        model.qa_outputs.weight.normal_(0.0, 1.0)
    return LoadedModel(model, tokenizer, config, "tiny-test")


def long_context(n_words: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    words = [str(w) for w in rng.choice(WORDS, n_words)]
    for k in range(12, n_words, 17):   # punctuation makes words of their own
        words[k] += "."
    return " ".join(words)


def table_logits(monkeypatch, loaded: LoadedModel, start: dict[str, float], end: dict[str, float]) -> list:
    """Make the model's start/end logits a function of the token alone (0 unless listed)."""
    vocab = loaded.tokenizer.get_vocab()
    start_table, end_table = torch.zeros(loaded.config.vocab_size), torch.zeros(loaded.config.vocab_size)
    for table, values in ((start_table, start), (end_table, end)):
        for token, value in values.items():
            table[vocab[token]] = value
    calls: list[tuple[int, ...]] = []

    def forward(input_ids, attention_mask=None, token_type_ids=None, compute=None, **kwargs):
        calls.append(tuple(input_ids.shape))
        assert compute == ("qa",) and torch.is_inference_mode_enabled()
        return SimpleNamespace(qa=SpanOutput(start_table[input_ids], end_table[input_ids]))  # (B, S) each

    monkeypatch.setattr(loaded.model, "forward", forward)
    return calls


# --- references ---
def brute_force(start, end, p_mask, top_k, max_answer_len, attention_mask=None):
    """Straight loops: mask, softmax each, every (i, j) with i <= j, length and endpoint rules."""
    n = len(start)
    blocked = [bool(p_mask[k]) or (attention_mask is not None and not attention_mask[k]) for k in range(n)]
    s = [-10000.0 if blocked[k] else float(start[k]) for k in range(n)]
    e = [-10000.0 if blocked[k] else float(end[k]) for k in range(n)]
    ps = [np.exp(x - max(s)) for x in s]
    pe = [np.exp(x - max(e)) for x in e]
    ps = [x / sum(ps) for x in ps]
    pe = [x / sum(pe) for x in pe]
    null = ps[0] * pe[0]
    spans = []
    for i in range(1, n):
        for j in range(i, min(n, i + max_answer_len)):
            if not blocked[i] and not blocked[j]:
                spans.append((i, j, ps[i] * pe[j]))
    spans.sort(key=lambda t: -t[2])
    return spans[:top_k], null


def pipeline_steps(start, end, p_mask, top_k, max_answer_len):
    """The v4 pipeline's numpy steps as written there: mask to -10000, exp-normalise, null score,
    zero [CLS], outer product banded by triu/tril, top-k over all cells, then drop undesired ends."""
    undesired = np.abs(np.array(p_mask) - 1)
    start = np.where(undesired == 0, -10000.0, np.asarray(start, float))[None]
    end = np.where(undesired == 0, -10000.0, np.asarray(end, float))[None]
    start = np.exp(start - start.max(axis=-1, keepdims=True))
    start = start / start.sum()
    end = np.exp(end - end.max(axis=-1, keepdims=True))
    end = end / end.sum()
    null = (start[0, 0] * end[0, 0]).item()
    start[0, 0] = end[0, 0] = 0.0
    outer = np.matmul(start[:, :, None], end[:, None, :])
    candidates = np.tril(np.triu(outer), max_answer_len - 1)
    flat = candidates.flatten()
    idx = np.argsort(-flat)[:top_k]
    starts, ends = np.unravel_index(idx, candidates.shape)[1:]
    keep = np.isin(starts, undesired.nonzero()) & np.isin(ends, undesired.nonzero())
    return [(int(s), int(e), float(candidates[0, s, e])) for s, e in zip(starts[keep], ends[keep])], null


# --- select_spans ---
def test_issue_example_top3_spans_and_scores():
    found = select_spans(START, END, P_MASK, top_k=3)
    assert [(s, e) for s, e, _ in found.spans] == [(5, 6), (4, 4), (6, 6)]
    assert [score for _, _, score in found.spans] == pytest.approx([0.1113, 0.0675, 0.0409], abs=1e-4)
    # [CLS] (0) is in both softmax denominators but never a span end; the null score is p_s[0] * p_e[0]
    p_start = np.exp([0, 1, 3, 2]) / np.exp([0, 1, 3, 2]).sum()
    p_end = np.exp([0, 4, 1, 2.5]) / np.exp([0, 4, 1, 2.5]).sum()
    assert found.null_score == pytest.approx(p_start[0] * p_end[0], rel=1e-9)
    assert found.start_probs[[0, 4, 5, 6]] == pytest.approx(p_start, rel=1e-9)
    assert found.end_probs[[0, 4, 5, 6]] == pytest.approx(p_end, rel=1e-9)
    assert found.start_probs[[1, 2, 3, 7]] == pytest.approx([0.0] * 4, abs=1e-300)


def test_top_k_default_and_more_than_there_are():
    assert select_spans(START, END, P_MASK).spans == select_spans(START, END, P_MASK, top_k=3).spans[:1]
    every = select_spans(START, END, P_MASK, top_k=50).spans      # only 6 legal spans among 4..6
    assert sorted((s, e) for s, e, _ in every) == [(4, 4), (4, 5), (4, 6), (5, 5), (5, 6), (6, 6)]
    scores = [score for *_, score in every]
    assert scores == sorted(scores, reverse=True)


def test_max_answer_len():
    one = select_spans(START, END, P_MASK, top_k=10, max_answer_len=1).spans
    assert [(s, e) for s, e, _ in one] == [(4, 4), (6, 6), (5, 5)]
    two = select_spans(START, END, P_MASK, top_k=10, max_answer_len=2).spans
    assert (4, 6) not in [(s, e) for s, e, _ in two] and len(two) == 5


def test_impossible_answer_joins_the_ranking():
    start, end = [8, 0, 0, 1, 2, 0], [8, 0, 0, 2, 1, 0]
    p_mask = [0, 1, 1, 0, 0, 1]
    plain = select_spans(start, end, p_mask, top_k=2)
    assert all(s != 0 and e != 0 for s, e, _ in plain.spans)
    null = select_spans(start, end, p_mask, top_k=2, handle_impossible_answer=True)
    assert null.spans[0] == (0, 0, pytest.approx(plain.null_score)) and null.spans[1] == plain.spans[0]
    assert null.null_score > 0.99
    # when spans beat the null it comes later, or not at all within top_k
    low = select_spans([-5, 0, 0, 3, 2, 0], [-5, 0, 0, 2, 3, 0], p_mask, top_k=1, handle_impossible_answer=True)
    assert low.spans[0][:2] == (3, 4)


def test_padding_is_never_an_answer():
    found = select_spans([0, 0, 1, 1, 50, 50], [0, 0, 1, 1, 50, 50], [0, 1, 0, 0, 0, 0], top_k=10,
                         attention_mask=[1, 1, 1, 1, 0, 0])
    assert {(s, e) for s, e, _ in found.spans} == {(2, 2), (2, 3), (3, 3)}


@pytest.mark.parametrize("seed", range(40))
def test_select_spans_equals_brute_force_and_pipeline_steps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    start, end = rng.normal(0, 3, n), rng.normal(0, 3, n)
    p_mask = (rng.random(n) < 0.3).astype(int)
    p_mask[0] = 0
    top_k, max_answer_len = int(rng.integers(1, 8)), int(rng.integers(1, 20))
    found = select_spans(torch.tensor(start), end.tolist(), p_mask, top_k=top_k, max_answer_len=max_answer_len)
    expected, null = brute_force(start, end, p_mask, top_k, max_answer_len)
    assert [(s, e) for s, e, _ in found.spans] == [(s, e) for s, e, _ in expected]
    assert [x for *_, x in found.spans] == pytest.approx([x for *_, x in expected], rel=1e-9)
    assert found.null_score == pytest.approx(null, rel=1e-9)
    piped, piped_null = pipeline_steps(start, end, p_mask, top_k, max_answer_len)
    assert piped_null == pytest.approx(null, rel=1e-9)
    if len(expected) == top_k:    # the pipeline keeps zero-score leftovers when fewer spans are legal
        assert [(s, e) for s, e, _ in piped] == [(s, e) for s, e, _ in expected]


def test_select_spans_validation():
    with pytest.raises(ValueError, match="top_k"):
        select_spans(START, END, P_MASK, top_k=0)
    with pytest.raises(ValueError, match="max_answer_len"):
        select_spans(START, END, P_MASK, max_answer_len=0)
    with pytest.raises(ValueError, match="differ in length"):
        select_spans(START, END[:-1], P_MASK)


# --- answer on a tiny model ---
def pipeline_replica(loaded, question, context, top_k, max_answer_len, max_seq_len, doc_stride):
    """Each window through the model alone; spans by brute force; words via tokenizers' Encoding."""
    backend = Tokenizer.from_str(loaded.tokenizer.backend.to_str())
    backend.enable_truncation(max_seq_len, stride=doc_stride, strategy="only_second")
    first = backend.encode(question, context)
    answers = []
    for enc in [first, *first.overflowing]:
        with torch.no_grad():
            out = loaded.model(torch.tensor([enc.ids]), token_type_ids=torch.tensor([enc.type_ids])).qa
        p_mask = [0 if seq == 1 or tid == loaded.tokenizer.cls_token_id else 1
                  for seq, tid in zip(enc.sequence_ids, enc.ids)]
        spans, _ = brute_force(out.start_logits[0].tolist(), out.end_logits[0].tolist(), p_mask, top_k, max_answer_len)
        for s, e, score in spans:
            start = enc.word_to_chars(enc.token_to_word(s), 1)[0]
            end = enc.word_to_chars(enc.token_to_word(e), 1)[1]
            answers.append({"score": score, "start": start, "end": end, "answer": context[start:end]})
    return sorted(answers, key=lambda a: a["score"], reverse=True)[:top_k]


@pytest.mark.parametrize("context,max_seq_len,doc_stride", [(CONTEXT, None, None),
                                                            (long_context(150, seed=3), 48, 16)])
def test_answer_equals_pipeline_replica(loaded, context, max_seq_len, doc_stride):
    got = answer(loaded, QUESTION, context, top_k=5, max_seq_len=max_seq_len, doc_stride=doc_stride)
    expected = pipeline_replica(loaded, QUESTION, context, 5, 15, max_seq_len or 128, doc_stride or 64)
    assert [(a["start"], a["end"], a["answer"]) for a in got] == [(a["start"], a["end"], a["answer"])
                                                                    for a in expected]
    assert [a["score"] for a in got] == pytest.approx([a["score"] for a in expected], rel=1e-4)


def test_answer_shape_offsets_and_order(loaded):
    one = answer(loaded, QUESTION, CONTEXT)
    assert isinstance(one, dict) and set(one) == {"score", "start", "end", "answer"}
    assert 0.0 < one["score"] <= 1.0 and CONTEXT[one["start"]:one["end"]] == one["answer"]
    many = answer(loaded, QUESTION, CONTEXT, top_k=4)
    assert isinstance(many, list) and len(many) == 4 and many[0] == one
    assert [a["score"] for a in many] == sorted((a["score"] for a in many), reverse=True)
    for a in many:   # whole words: never starts or ends inside a word
        assert a["answer"] == CONTEXT[a["start"]:a["end"]] and a["answer"] == a["answer"].strip()
        assert a["start"] == 0 or CONTEXT[a["start"] - 1] == " "
        assert a["end"] == len(CONTEXT) or CONTEXT[a["end"]] in " " + string.punctuation


def test_exact_span_and_word_alignment(loaded, monkeypatch):
    table_logits(monkeypatch, loaded, start={"henson": 30.0}, end={"puppet": 30.0})
    assert answer(loaded, QUESTION, CONTEXT) == {
        "score": pytest.approx(1.0, abs=1e-6), "start": 4, "end": 31, "answer": "Henson was a nice puppeteer"}
    assert answer(loaded, QUESTION, CONTEXT, align_to_words=False)["answer"] == "Henson was a nice puppet"
    table_logits(monkeypatch, loaded, start={"##eer": 30.0}, end={"##eer": 30.0})
    assert answer(loaded, QUESTION, CONTEXT)["answer"] == "puppeteer"
    assert answer(loaded, QUESTION, CONTEXT, align_to_words=False)["answer"] == "eer"
    # the question's own "henson" is never an answer even with the highest logit
    table_logits(monkeypatch, loaded, start={"who": 50.0, "jim": 5.0}, end={"who": 50.0, "jim": 5.0})
    assert answer(loaded, QUESTION, CONTEXT)["answer"] == "Jim"


def test_long_context_windows_cover_every_token(loaded, monkeypatch):
    context = long_context(600)
    calls = table_logits(monkeypatch, loaded, start={}, end={})
    details = answer_details(loaded, "where did the cat sit?", context, max_seq_len=64, doc_stride=32)
    assert isinstance(details, QAResult) and len(details.windows) > 10
    assert calls == [(len(details.windows), 64)]      # every window in one batch
    every = [tuple(o) for o in loaded.tokenizer.backend.encode(context, add_special_tokens=False).offsets]
    covered = [o for w in details.windows for o in w.context_offsets]
    assert set(covered) == set(every)
    for before, after in zip(details.windows, details.windows[1:]):
        assert before.context_offsets[-32:] == after.context_offsets[:32]     # doc_stride tokens shared
        assert before.context_start < after.context_start < before.context_end < after.context_end
    for w in details.windows:
        assert len(w.tokens) <= 64 and len(w.start_probs) == len(w.context_positions) == len(w.end_logits)
        assert context[w.context_start:w.context_end].split()[0] in context
        assert 0.0 < sum(w.start_probs) <= 1.0 + 1e-9 and 0.0 < sum(w.end_probs) <= 1.0 + 1e-9  # [CLS] has the rest


def test_overlap_answer_is_the_same_in_one_or_several_windows(loaded, monkeypatch):
    words = long_context(90, seed=1).split()
    words[55:57] = ["zebra", "elephant"]
    context = " ".join(words)
    table_logits(monkeypatch, loaded, start={"zebra": 30.0}, end={"elephant": 30.0})
    single = answer_details(loaded, "which animals?", context, top_k=2, max_seq_len=128)
    several = answer_details(loaded, "which animals?", context, top_k=2, max_seq_len=40, doc_stride=20)
    assert len(single.windows) == 1 and len(several.windows) > 3
    holding = [w.index for w in several.windows if "zebra" in w.context_tokens and "elephant" in w.context_tokens]
    assert len(holding) >= 2                          # the answer lies where windows overlap
    best = several.answers[0]
    assert (best["start"], best["end"], best["answer"]) == (single.answers[0]["start"], single.answers[0]["end"],
                                                            "zebra elephant")
    assert best["score"] == pytest.approx(single.answers[0]["score"], abs=1e-9)
    assert several.answers[1]["answer"] == "zebra elephant"     # as the pipeline: once per window
    deduplicated = answer(loaded, "which animals?", context, top_k=2, max_seq_len=40, doc_stride=20, deduplicate=True)
    assert [a["answer"] for a in deduplicated].count("zebra elephant") == 1


def test_impossible_answer_with_null_score_min_over_windows(loaded, monkeypatch):
    context = long_context(120, seed=2)
    table_logits(monkeypatch, loaded, start={"[CLS]": 9.0, "cat": 2.0}, end={"[CLS]": 9.0, "mat": 2.0})
    details = answer_details(loaded, QUESTION, context, top_k=3, max_seq_len=48, doc_stride=16,
                             handle_impossible_answer=True)
    assert len(details.windows) > 1
    assert details.null_score == min(w.null_score for w in details.windows)
    assert len({round(w.null_score, 12) for w in details.windows}) > 1
    assert details.impossible and details.answers[0] == {"score": details.null_score, "start": 0, "end": 0,
                                                         "answer": ""}
    assert details.null_score > details.best_span_score
    plain = answer(loaded, QUESTION, context, max_seq_len=48, doc_stride=16)
    assert plain["answer"] != "" and plain["score"] == pytest.approx(details.best_span_score)
    table_logits(monkeypatch, loaded, start={"[CLS]": -5.0, "cat": 4.0}, end={"[CLS]": -5.0, "mat": 4.0})
    spans_win = answer_details(loaded, QUESTION, context, max_seq_len=48, doc_stride=16, handle_impossible_answer=True)
    assert not spans_win.impossible and spans_win.answers[0]["answer"] != ""


def test_question_cut_to_max_question_len(loaded):
    question = " ".join(["why"] * 30 + ["cats"])
    details = answer_details(loaded, question, CONTEXT, max_question_len=10)
    assert details.question_tokens == ["why"] * 10 and details.question_truncated
    assert not answer_details(loaded, QUESTION, CONTEXT).question_truncated
    tricky = "Who was the puppeteer of unbelievablyweirdwords, naïve café?"   # cuts inside words
    pieces = loaded.tokenizer.backend.encode(tricky, add_special_tokens=False).tokens
    for n in range(1, len(pieces) + 1):
        assert answer_details(loaded, tricky, CONTEXT, max_question_len=n).question_tokens == pieces[:n]


def test_context_without_tokens(loaded):
    with pytest.raises(ValueError, match="no tokens"):
        answer(loaded, QUESTION, "\x00\x01")


@pytest.mark.parametrize("kwargs,match", [
    (dict(question=""), "question` cannot be empty"),
    (dict(question="   "), "question` cannot be empty"),
    (dict(context=""), "context` cannot be empty"),
    (dict(context="\n\t "), "context` cannot be empty"),
    (dict(top_k=0), "top_k parameter should be >= 1"),
    (dict(max_answer_len=0), "max_answer_len parameter should be >= 1"),
    (dict(max_seq_len=64, doc_stride=64), "doc_stride.*max_seq_len"),
    (dict(max_seq_len=64, doc_stride=100), "doc_stride.*max_seq_len"),
    (dict(max_seq_len=512), "max_position_embeddings"),
    (dict(question="why " * 40, max_seq_len=32), "no room for the context"),
    (dict(context=long_context(100), max_seq_len=32, doc_stride=30), "doc_stride \\(30\\) must be smaller"),
])
def test_validation(loaded, kwargs, match):
    args = dict(question=QUESTION, context=CONTEXT) | kwargs
    with pytest.raises(ValueError, match=match):
        answer(loaded, **args)


def test_model_without_qa_head(loaded):
    no_qa = LoadedModel(BertWithHeads(loaded.config, heads=("nsp",)).eval(), loaded.tokenizer, loaded.config, "nsp")
    with pytest.raises(ValueError, match="no question-answering"):
        answer(no_qa, QUESTION, CONTEXT)
