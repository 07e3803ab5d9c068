"""Extractive QA (docs/design/qa.md): `answer` equals the transformers 4.x
pipeline, rule by rule. Windows equal ``transformers``' fast tokenizer's overflow windows (the
question is never cut; a question that leaves no room fails where the tokenizer fails, with a clear
message); answers equal tests/support/qa_reference.py run on our model's logits with tokenizers' own word
alignment: merged equal texts, ties, top-k limits, null answers, long contexts with many windows."""
from __future__ import annotations

import string
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import BertTokenizerFast

from engine.model.loaded_model import LoadedModel
from engine.model.config import BertConfig
from engine.model.heads import BertWithHeads
from engine.model.outputs import SpanOutput
from engine.probes.heads.qa import QAResult, answer, answer_details, answer_from_logits
from engine.probes.heads.qa_lengths import QuestionTooLong, question_limit
from engine.text.qa_windows import encode_qa_windows
from engine.text.tokenizer import WordPieceTokenizer
from support.qa_reference import reference_postprocess

ASSETS = Path(__file__).resolve().parents[3] / "assets" / "tokenizer"
QUESTION = "Who was Jim Henson?"
CONTEXT = "Jim Henson was a nice puppeteer"
WORDS = ("the cat sat on a mat while dogs ran around house garden river city music film school "
         "water light green blue small large old new people time year day world").split()


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(ASSETS)


@pytest.fixture(scope="module")
def hf_tokenizer() -> BertTokenizerFast:
    return BertTokenizerFast.from_pretrained(ASSETS)


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


def hf_windows(hf_tokenizer, question: str, context: str, max_seq_len: int, doc_stride: int) -> list:
    """The pipeline's preprocess: question first, only_second truncation, overflow windows, no padding."""
    return hf_tokenizer(question, context, truncation="only_second", max_length=max_seq_len, stride=doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding="do_not_pad").encodings


def pipeline_answer(hf_tokenizer, details: QAResult, **kwargs) -> list:
    """The reference pipeline on the windows transformers makes and the logits our model gave them
    (as a list, also for one answer)."""
    windows = hf_windows(hf_tokenizer, details.question, details.context, details.max_seq_len, details.doc_stride)
    assert [w.ids for w in windows] == [[hf_tokenizer.convert_tokens_to_ids(t) for t in w.tokens]
                                        for w in details.windows]
    answers = reference_postprocess(windows, [w.logits for w in details.windows], details.context,
                                    hf_tokenizer.cls_token_id, **kwargs)
    return [answers] if isinstance(answers, dict) else answers


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


# --- windows -------------------------------------------------------------------------------------

@pytest.mark.parametrize("question,context,max_seq_len,doc_stride", [
    (QUESTION, CONTEXT, 128, 64),
    (QUESTION, long_context(300, seed=3), 48, 16),
    ("why " * 30 + "cats?", long_context(200, seed=4), 64, 8),              # a long question is kept whole
    ("Who made naïve café-art?", "Ünïcode café, naïve art; co-operate. " * 20, 40, 0),
    ("q", long_context(120, seed=5), 16, 11),                                # the largest stride that fits
])
def test_windows_equal_the_fast_tokenizers_overflow(loaded, hf_tokenizer, question, context, max_seq_len,
                                                     doc_stride):
    details = answer_details(loaded, question, context, max_seq_len=max_seq_len, doc_stride=doc_stride)
    expected = hf_windows(hf_tokenizer, question, context, max_seq_len, doc_stride)
    assert len(details.windows) == len(expected)
    for ours, theirs in zip(details.windows, expected):
        assert ours.tokens == theirs.tokens and ours.sequence_ids == theirs.sequence_ids
        assert ours.offsets == [tuple(o) for o in theirs.offsets]
    assert details.question_tokens == hf_tokenizer.tokenize(question)       # never cut


def test_question_longer_than_a_window_allows_is_a_clear_error_where_the_tokenizer_fails(loaded, hf_tokenizer):
    context = long_context(100)
    limit = question_limit(48, 16)                                          # 48 - 3 specials - 16 - 1 = 28
    assert limit == 28
    fits, too_long = "why " * limit, "why " * (limit + 1)
    assert len(answer_details(loaded, fits, context, max_seq_len=48, doc_stride=16).windows) > 1
    assert len(hf_windows(hf_tokenizer, fits, context, 48, 16)) > 1
    with pytest.raises(BaseException):                                      # the fast tokenizer panics here
        hf_windows(hf_tokenizer, too_long, context, 48, 16)
    with pytest.raises(QuestionTooLong, match="29 tokens long.*at most 28 tokens") as error:
        answer(loaded, too_long, context, max_seq_len=48, doc_stride=16)
    assert (error.value.tokens, error.value.limit) == (29, 28)
    with pytest.raises(BaseException):                                      # no room at all: the tokenizer's error
        hf_windows(hf_tokenizer, "why " * 45, context, 48, 0)
    with pytest.raises(QuestionTooLong, match="at most 44 tokens"):
        answer(loaded, "why " * 45, context, max_seq_len=48, doc_stride=0)
    # when question and context fit in one window nothing is truncated: any question length works
    short = "a short context."
    assert len(answer_details(loaded, "why " * 40, short, max_seq_len=48, doc_stride=16).windows) == 1
    assert len(hf_windows(hf_tokenizer, "why " * 40, short, 48, 16)) == 1


def test_batched_windows_give_the_logits_of_each_window_alone(loaded):
    details = answer_details(loaded, QUESTION, long_context(150, seed=3), max_seq_len=48, doc_stride=16)
    for w in details.windows:
        vocab = loaded.tokenizer.get_vocab()
        ids = torch.tensor([[vocab[t] for t in w.tokens]])
        types = torch.tensor([[0 if seq != 1 else 1 for seq in w.sequence_ids]])
        types[0, -1] = 1                                                    # the last [SEP] belongs to the context
        with torch.no_grad():
            alone = loaded.model(ids, token_type_ids=types, compute=("qa",)).qa
        assert w.logits[0] == pytest.approx(alone.start_logits[0].tolist(), abs=1e-5)
        assert w.logits[1] == pytest.approx(alone.end_logits[0].tolist(), abs=1e-5)


# --- answers equal the pipeline --------------------------------------------------------------------

@pytest.mark.parametrize("top_k", [1, 3, 7, 20])
@pytest.mark.parametrize("align_to_words", [True, False])
@pytest.mark.parametrize("impossible", [False, True])
def test_answers_equal_the_pipeline_on_a_long_context(loaded, hf_tokenizer, top_k, align_to_words, impossible):
    context = long_context(260, seed=7)
    details = answer_details(loaded, "where did the cat sit?", context, top_k=top_k, max_seq_len=48, doc_stride=16,
                             handle_impossible_answer=impossible, align_to_words=align_to_words)
    assert len(details.windows) > 5
    expected = pipeline_answer(hf_tokenizer, details, top_k=top_k, handle_impossible_answer=impossible,
                               align_to_words=align_to_words)
    got = answer(loaded, "where did the cat sit?", context, top_k=top_k, max_seq_len=48, doc_stride=16,
                 handle_impossible_answer=impossible, align_to_words=align_to_words)
    assert details.answers == expected and got == (expected[0] if len(expected) == 1 else expected)


@pytest.mark.parametrize(("top_k", "max_answer_len", "impossible"), [(1, 15, False), (5, 3, True), (20, 30, False)])
def test_answers_from_kept_logits_equal_a_fresh_run_with_those_settings(loaded, top_k, max_answer_len, impossible):
    """The explorer answers a settings change from a first call's logits: the same answers, spans and windows."""
    context = long_context(260, seed=7)
    first = answer_details(loaded, QUESTION, context, max_seq_len=48, doc_stride=16)
    encodings = encode_qa_windows(loaded.tokenizer, QUESTION, context, 48, 16,
                                  max_question_len=len(first.question_tokens))
    starts = [np.asarray(w.logits[0], np.float32) for w in first.windows]
    ends = [np.asarray(w.logits[1], np.float32) for w in first.windows]
    kept = answer_from_logits(loaded, QUESTION, context, encodings, starts, ends, top_k, max_answer_len, 48, 16,
                              handle_impossible_answer=impossible)
    fresh = answer_details(loaded, QUESTION, context, top_k=top_k, max_answer_len=max_answer_len, max_seq_len=48,
                           doc_stride=16, handle_impossible_answer=impossible)
    assert kept.answers == fresh.answers and kept.null_score == fresh.null_score
    assert [w.candidates for w in kept.windows] == [w.candidates for w in fresh.windows]
    with pytest.raises(ValueError, match="windows"):
        answer_from_logits(loaded, QUESTION, context, encodings, starts[:-1], ends, 1, 15, 48, 16)


@pytest.mark.parametrize("context,max_seq_len,doc_stride", [(CONTEXT, None, None), (CONTEXT, 16, 4),
                                                            (long_context(150, seed=3), 48, 16)])
def test_answers_equal_the_pipeline_with_defaults(loaded, hf_tokenizer, context, max_seq_len, doc_stride):
    details = answer_details(loaded, QUESTION, context, top_k=5, max_seq_len=max_seq_len, doc_stride=doc_stride)
    expected_lengths = (128, 64) if max_seq_len is None else (max_seq_len, doc_stride)    # the pipeline's defaults
    assert (details.max_seq_len, details.doc_stride) == expected_lengths
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=5)


def test_equal_texts_merge_ignoring_case_and_add_their_scores(loaded, hf_tokenizer, monkeypatch):
    context = "Paris is nice. paris is big. PARIS!"
    table_logits(monkeypatch, loaded, start={"paris": 6.0}, end={"paris": 6.0})
    details = answer_details(loaded, "Which city?", context, top_k=3)
    best = details.spans[0]
    assert (best.answer, best.start, best.end) == ("Paris", 0, 5)           # the first one found keeps its text
    assert best.merged == 3
    single = details.windows[0].candidates
    assert best.score == sum(c.score for c in single if c.answer.lower() == "paris")
    assert [a["answer"].lower() for a in details.answers].count("paris") == 1
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=3)


def test_an_answer_in_overlapping_windows_is_one_answer_with_the_scores_added(loaded, hf_tokenizer, monkeypatch):
    words = long_context(90, seed=1).split()
    words[55:57] = ["zebra", "elephant"]
    context = " ".join(words)
    table_logits(monkeypatch, loaded, start={"zebra": 30.0}, end={"elephant": 30.0})
    single = answer_details(loaded, "which animals?", context, top_k=2, max_seq_len=128)
    several = answer_details(loaded, "which animals?", context, top_k=2, max_seq_len=40, doc_stride=20)
    holding = [w for w in several.windows if "zebra" in w.context_tokens and "elephant" in w.context_tokens]
    assert len(single.windows) == 1 and len(holding) >= 2                   # the answer lies where windows overlap
    best = several.answers[0]
    assert (best["start"], best["end"], best["answer"]) == (single.answers[0]["start"], single.answers[0]["end"],
                                                            "zebra elephant")
    assert best["score"] == pytest.approx(len(holding) * single.answers[0]["score"], rel=1e-6)
    assert best["score"] > 1.0 and several.spans[0].merged == len(holding)  # a sum, not a probability
    assert several.answers[1]["answer"] != "zebra elephant"
    assert several.answers == pipeline_answer(hf_tokenizer, several, top_k=2)


def test_each_answer_keeps_its_own_probability_and_every_place_it_was_found(loaded, hf_tokenizer, monkeypatch):
    """What the pipeline's sum forgets: an answer's own probability (its best candidate's p_start * p_end,
    at most 1), its best window and tokens, the distinct places in the text and each candidate's window."""
    words = long_context(90, seed=1).split()
    words[55:57] = ["zebra", "elephant"]
    context = " ".join(words)
    table_logits(monkeypatch, loaded, start={"zebra": 30.0}, end={"elephant": 30.0})
    details = answer_details(loaded, "which animals?", context, top_k=2, max_seq_len=40, doc_stride=20)
    holding = [w for w in details.windows if "zebra" in w.context_tokens and "elephant" in w.context_tokens]
    best = details.spans[0]
    candidates = [c for w in holding for c in w.candidates if c.answer == "zebra elephant"]
    assert best.score > 1 >= best.probability                               # a sum, and a probability
    assert best.probability == max(c.score for c in candidates)
    chosen = max(candidates, key=lambda c: c.score)
    assert (best.best_window, best.best_start_token, best.best_end_token) == (chosen.window, chosen.start_token,
                                                                              chosen.end_token)
    start = context.index("zebra elephant")
    assert best.places == [(start, start + len("zebra elephant"))]          # one place, read by several windows
    assert best.windows == [w.index for w in holding] and len(best.windows) == best.merged
    assert details.best_span_probability == best.probability and details.best_span_score == best.score
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=2)   # the pipeline's output unchanged
    assert set(details.answers[0]) == {"score", "start", "end", "answer"}


def test_equal_texts_at_several_places_list_every_place_in_text_order(loaded, monkeypatch):
    context = "Paris is nice. paris is big. PARIS!"
    table_logits(monkeypatch, loaded, start={"paris": 6.0}, end={"paris": 6.0})
    details = answer_details(loaded, "Which city?", context, top_k=3)
    best = details.spans[0]
    assert best.places == [(0, 5), (15, 20), (29, 34)] and best.windows == [0, 0, 0]
    assert best.probability == max(c.score for c in details.windows[0].candidates if c.answer.lower() == "paris")
    assert details.spans[0].probability <= 1 and all(s.probability <= 1 for s in details.spans)


def test_the_null_answer_has_its_score_as_its_probability_and_no_place(loaded, monkeypatch):
    table_logits(monkeypatch, loaded, start={"[CLS]": 9.0}, end={"[CLS]": 9.0})
    details = answer_details(loaded, "what?", "a cat and a dog", top_k=1, handle_impossible_answer=True)
    null = details.spans[0]
    assert null.is_null and null.probability == null.score == details.null_score and null.places == []


def test_ties_spans_before_the_null_answer_and_earlier_answers_first(loaded, hf_tokenizer, monkeypatch):
    # [CLS] and "cat" get equal logits: the null score equals the score of the span "cat" exactly
    table_logits(monkeypatch, loaded, start={"[CLS]": 5.0, "cat": 5.0}, end={"[CLS]": 5.0, "cat": 5.0})
    details = answer_details(loaded, "what?", "a cat and a dog", top_k=2, handle_impossible_answer=True)
    assert details.spans[0].answer == "cat" and details.spans[1].is_null
    assert details.answers[0]["score"] == details.answers[1]["score"] == details.null_score
    assert not details.impossible and not details.prefers_null
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=2, handle_impossible_answer=True)
    # all context logits equal: many tied spans, ranked as the pipeline's numpy selection ranks them
    table_logits(monkeypatch, loaded, start={}, end={})
    for top_k in (1, 4, 9):
        tied = answer_details(loaded, "what?", "one two three four five", top_k=top_k)
        assert tied.answers == pipeline_answer(hf_tokenizer, tied, top_k=top_k)


def test_top_k_beyond_the_candidates(loaded, hf_tokenizer):
    # "Paris." has 3 spans; the pipeline fills its 2 * 20 + 10 candidates with zero-score cells too
    details = answer_details(loaded, QUESTION, "Paris.", top_k=20)
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=20)
    assert len(details.answers) < 20
    real = [a for a in details.answers if a["score"] > 0]
    assert sorted(a["answer"] for a in real) == [".", "Paris", "Paris."]
    assert all(a["answer"] == "" for a in details.answers if a["score"] == 0)   # zero cells: no text
    with_null = answer_details(loaded, QUESTION, "Paris.", top_k=20, handle_impossible_answer=True)
    assert with_null.answers == pipeline_answer(hf_tokenizer, with_null, top_k=20, handle_impossible_answer=True)


def test_impossible_answer_with_null_score_min_over_windows(loaded, hf_tokenizer, monkeypatch):
    context = long_context(120, seed=2)
    table_logits(monkeypatch, loaded, start={"[CLS]": 9.0, "cat": 2.0}, end={"[CLS]": 9.0, "mat": 2.0})
    details = answer_details(loaded, QUESTION, context, top_k=3, max_seq_len=48, doc_stride=16,
                             handle_impossible_answer=True)
    assert len(details.windows) > 1 and len({w.null_score for w in details.windows}) > 1
    assert details.null_score == min(w.null_score for w in details.windows)
    assert details.impossible and details.answers[0] == {"score": details.null_score, "start": 0, "end": 0,
                                                         "answer": ""}
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=3, handle_impossible_answer=True)
    plain = answer_details(loaded, QUESTION, context, top_k=1, max_seq_len=48, doc_stride=16)
    assert plain.prefers_null and not plain.impossible                      # the null score is there to show
    assert plain.answers[0]["answer"] != "" and plain.answers[0]["score"] == plain.best_span_score
    table_logits(monkeypatch, loaded, start={"[CLS]": -5.0, "cat": 4.0}, end={"[CLS]": -5.0, "mat": 4.0})
    spans_win = answer_details(loaded, QUESTION, context, max_seq_len=48, doc_stride=16, handle_impossible_answer=True)
    assert not spans_win.impossible and not spans_win.prefers_null and spans_win.answers[0]["answer"] != ""


def test_answer_shape_offsets_and_word_alignment(loaded, monkeypatch):
    one = answer(loaded, QUESTION, CONTEXT)
    assert isinstance(one, dict) and set(one) == {"score", "start", "end", "answer"}
    many = answer(loaded, QUESTION, CONTEXT, top_k=4)
    assert isinstance(many, list) and len(many) == 4 and many[0]["answer"] == one["answer"]
    assert many[0]["score"] >= one["score"]     # 2 * 4 + 10 candidates: more of them merge into the best text
    assert [a["score"] for a in many] == sorted((a["score"] for a in many), reverse=True)
    for a in many:   # whole words: never starts or ends inside a word
        assert a["answer"] == CONTEXT[a["start"]:a["end"]] and a["answer"] == a["answer"].strip()
        assert a["start"] == 0 or CONTEXT[a["start"] - 1] == " "
        assert a["end"] == len(CONTEXT) or CONTEXT[a["end"]] in " " + string.punctuation
    table_logits(monkeypatch, loaded, start={"henson": 30.0}, end={"puppet": 30.0})
    assert answer(loaded, QUESTION, CONTEXT) == {
        "score": pytest.approx(1.0, abs=1e-6), "start": 4, "end": 31, "answer": "Henson was a nice puppeteer"}
    assert answer(loaded, QUESTION, CONTEXT, align_to_words=False)["answer"] == "Henson was a nice puppet"
    table_logits(monkeypatch, loaded, start={"##eer": 30.0}, end={"##eer": 30.0})
    assert answer(loaded, QUESTION, CONTEXT)["answer"] == "puppeteer"
    assert answer(loaded, QUESTION, CONTEXT, align_to_words=False)["answer"] == "eer"
    table_logits(monkeypatch, loaded, start={"who": 50.0, "jim": 5.0}, end={"who": 50.0, "jim": 5.0})
    assert answer(loaded, QUESTION, CONTEXT)["answer"] == "Jim"             # the question's tokens never answer


def test_long_context_windows_cover_every_token(loaded, monkeypatch):
    context = long_context(600)
    calls = table_logits(monkeypatch, loaded, start={}, end={})
    details = answer_details(loaded, "where did the cat sit?", context, max_seq_len=64, doc_stride=32)
    assert len(details.windows) > 10 and calls == [(len(details.windows), 64)]      # every window in one batch
    every = [tuple(o) for o in loaded.tokenizer.backend.encode(context, add_special_tokens=False).offsets]
    assert {o for w in details.windows for o in w.context_offsets} == set(every)
    for before, after in zip(details.windows, details.windows[1:]):
        assert before.context_offsets[-32:] == after.context_offsets[:32]     # doc_stride tokens shared
        assert before.context_start < after.context_start < before.context_end < after.context_end


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
    (dict(question="why " * 40, context=long_context(100), max_seq_len=32), "at most 12 tokens"),
    (dict(context=long_context(100), max_seq_len=32, doc_stride=30), "at most 0 tokens"),
])
def test_validation(loaded, kwargs, match):
    args = dict(question=QUESTION, context=CONTEXT) | kwargs
    with pytest.raises(ValueError, match=match):
        answer(loaded, **args)


def test_model_without_qa_head(loaded):
    no_qa = LoadedModel(BertWithHeads(loaded.config, heads=("nsp",)).eval(), loaded.tokenizer, loaded.config, "nsp")
    with pytest.raises(ValueError, match="no question-answering"):
        answer(no_qa, QUESTION, CONTEXT)


def test_spans_inside_one_split_word_come_back_once(loaded, hf_tokenizer, monkeypatch):
    """Issue 13's top-k bug: with the best spans starting and ending inside one multi-piece word
    ("un ##bel ##ie ##va ##bly"), each span is widened to the same word; the pipeline merges them into
    one answer (scores added) after pre-selecting 2*top_k+10, so top_k distinct answers come back."""
    context = "The result was unbelievably good for everyone."
    table_logits(monkeypatch, loaded, start={"un": 8.0, "##bel": 7.5, "##ie": 7.0, "good": 3.0},
                 end={"##bel": 8.0, "##va": 7.5, "##bly": 7.0, "good": 3.0})
    details = answer_details(loaded, "How was it?", context, top_k=2, max_answer_len=2)
    texts = [a["answer"] for a in details.answers]
    assert texts[0] == "unbelievably" and len(texts) == len(set(texts)) == 2
    assert details.spans[0].merged > 1                                 # several piece spans became one answer
    assert details.answers == pipeline_answer(hf_tokenizer, details, top_k=2, max_answer_len=2)
