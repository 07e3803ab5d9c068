"""QA tab: handler outputs equal engine.probes.inference, validation as the pipeline's, and the served app."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import re  # noqa: E402

import gradio as gr  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from engine.model.outputs import SpanOutput  # noqa: E402
from engine.probes import inference  # noqa: E402
from engine.probes.forward_cache import ForwardCache  # noqa: E402
from explorer.qa import examples as qa_examples  # noqa: E402
from explorer.formatting import percent, rounded, sig  # noqa: E402
from explorer.qa import tab  # noqa: E402
from explorer.services import Services  # noqa: E402
from explorer.ui_errors import friendly_errors  # noqa: E402
from support.app_helpers import serve  # noqa: E402
from support.probing_helpers import make_services, small_app  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

QUESTION = "who sat on the mat?"
CONTEXT = "the cat sat on the mat. the dog ran in the house. a bird sang in the tree."
LONG = " ".join([CONTEXT] * 8)                 # ~170 tokens: several windows of 48
SETTINGS = dict(top_k=3, max_answer_len=15, max_seq_len=64, doc_stride=16)


@pytest.fixture(scope="module")
def services(tiny_tokenizer) -> Services:
    return make_services(tiny_tokenizer)


@pytest.fixture(scope="module")
def client(services) -> Iterator[Client]:
    with serve(small_app(services, tab.build)) as running:
        yield running


def run(services: Services, question: str = QUESTION, context: str = CONTEXT, top_k=3, max_answer_len=15,
        max_seq_len=64, doc_stride=16, impossible=False, key: str = "default"):
    return tab.answer_question(services, key, question, context, top_k, max_answer_len, max_seq_len, doc_stride,
                               impossible)


PIPELINE_KEYS = ("score", "start", "end", "answer")
ADDED_KEYS = ("probability", "places", "summed_candidates")


def pipeline_part(answers):
    """The JSON output without the fields the tab adds: what the transformers pipeline returns."""
    if isinstance(answers, dict):
        assert set(answers) == {*PIPELINE_KEYS, *ADDED_KEYS}, answers
        return {key: answers[key] for key in PIPELINE_KEYS}
    return [pipeline_part(a) for a in answers]


def shown_percentages(*outputs) -> list[float]:
    """Every "12.3%" a person can read in the outputs (labels, cells, Markdown, figure text and hover)."""
    texts = []
    for output in outputs:
        if isinstance(output, go.Figure):
            texts.append(output.to_json())
        elif isinstance(output, pd.DataFrame):
            texts += [str(cell) for cell in output.to_numpy().ravel()]
        elif isinstance(output, list):                                   # the highlights: (text, label) pairs
            texts += [str(label) for _, label in output]
        else:
            texts.append(str(output))
    return [float(number) for text in texts for number in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def engine_answer(services: Services, question=QUESTION, context=CONTEXT, top_k=3, max_answer_len=15,
                  max_seq_len=64, doc_stride=16, impossible=False):
    """The engine's pipeline-shaped answers with scores to 3 significant digits, as the UI shows them."""
    answers = inference.answer(services.model("default"), question, context, top_k, max_answer_len, max_seq_len,
                               doc_stride, handle_impossible_answer=impossible)
    if isinstance(answers, dict):
        return {**answers, "score": rounded(answers["score"])}
    return [{**a, "score": rounded(a["score"])} for a in answers]


# --- handlers -------------------------------------------------------------------------------

def test_outputs_equal_the_engine(services) -> None:
    highlights, answers, table, probs, windows, summary = run(services)
    assert pipeline_part(answers) == engine_answer(services)
    assert isinstance(answers, list) and len(answers) == 3
    assert "".join(text for text, _ in highlights) == CONTEXT             # the whole context, in order
    best = answers[0]
    covered = [text for text, label in highlights if label and "#1 · " in label]
    assert covered == [CONTEXT[a:b] for a, b in best["places"]] and covered[0] == best["answer"]   # every place
    assert [best["start"], best["end"]] in best["places"]
    assert table["answer"].tolist() == [a["answer"] for a in answers]
    assert table["rank"].tolist() == [1, 2, 3]
    details = inference.answer_details(services.model("default"), QUESTION, CONTEXT, 3, 15, 64, 16)
    assert table["probability"].tolist() == [percent(s.probability) for s in details.spans]   # "12.3%", never 17 digits
    assert table["where in the text"].tolist() == [tab.places_text(s) for s in details.spans]
    assert [a["probability"] for a in answers] == [rounded(s.probability) for s in details.spans]
    assert [a["places"] for a in answers] == [[list(p) for p in s.places] for s in details.spans]
    assert all(CONTEXT[a:b].lower() == s.answer.lower() for s in details.spans for a, b in s.places)
    assert all(len(repr(a["score"])) <= 12 for a in answers)                              # JSON: 3 significant digits
    assert len(probs.data) == 2 and probs.data[0].name == "p(start)"      # one window: start and end
    assert list(probs.data[0].y) == details.windows[0].start_probs
    assert "%{y:.3p}" in probs.data[0].hovertemplate                                       # hover in percent
    assert list(probs.layout.xaxis.ticktext) == details.windows[0].context_tokens
    assert list(windows.data[0].base) == [0] and "**1 window**" in summary
    assert f"null {percent(details.null_score)}" in summary
    assert f"best span {percent(details.best_span_probability)}" in summary


def test_top_k_one_is_a_single_dict_like_the_pipeline(services) -> None:
    _, answers, table, _, _, _ = run(services, top_k=1)
    assert isinstance(answers, dict) and pipeline_part(answers) == engine_answer(services, top_k=1)
    assert len(table) == 1


def test_long_context_has_several_windows(services) -> None:
    _, answers, _, probs, windows, summary = run(services, context=LONG, max_seq_len=48, doc_stride=16)
    details = inference.answer_details(services.model("default"), QUESTION, LONG, 3, 15, 48, 16)
    assert pipeline_part(answers) == engine_answer(services, context=LONG, max_seq_len=48) and len(details.windows) > 3
    assert [(b, b + x) for b, x in zip(windows.data[0].base, windows.data[0].x)] == [
        (w.context_start, w.context_end) for w in details.windows]
    shown = tab.plot_windows(details)
    assert len(probs.data) == 2 * len(shown) and len(shown) <= tab.MAX_PLOT_WINDOWS
    assert {s.window for s in details.spans} <= set(shown)               # windows with answers are drawn
    assert f"**{len(details.windows)} windows**" in summary


def _table_logits(monkeypatch, services: Services, start: dict[str, float], end: dict[str, float]) -> None:
    """Start/end logits that depend on the token alone (0 unless listed). The model is changed in place, which
    the app never does (a reloaded model is a new object), so it gets a forward cache of its own."""
    loaded = services.model("default")
    monkeypatch.setattr(services, "forward_cache", ForwardCache())
    vocab = loaded.tokenizer.get_vocab()
    tables = [torch.zeros(loaded.config.vocab_size), torch.zeros(loaded.config.vocab_size)]
    for table, values in zip(tables, (start, end)):
        for token, value in values.items():
            table[vocab[token]] = value

    def forward(input_ids, **kwargs):
        return SimpleNamespace(qa=SpanOutput(tables[0][input_ids], tables[1][input_ids]))   # (B, S) each

    monkeypatch.setattr(loaded.model, "forward", forward)


def test_null_score_shown_and_whether_it_won(services, monkeypatch) -> None:
    loaded = services.model("default")
    _table_logits(monkeypatch, services, start={"[CLS]": 9.0, "cat": 2.0}, end={"[CLS]": 9.0, "mat": 2.0})
    highlights, answers, table, _, _, summary = run(services, top_k=2, impossible=True)
    assert pipeline_part(answers[0]) == {"score": answers[0]["score"], "start": 0, "end": 0, "answer": ""}
    assert answers[0]["probability"] == answers[0]["score"] and answers[0]["places"] == []     # the null answer
    assert pipeline_part(answers) == engine_answer(services, top_k=2, impossible=True)
    assert table["answer"].tolist()[0] == "(no answer)"
    details = inference.answer_details(loaded, QUESTION, CONTEXT, 2, 15, 64, 16, handle_impossible_answer=True)
    assert (f"**No answer wins**: null {percent(details.null_score)} vs best span "
            f"{percent(details.best_span_probability)}" in summary) and "Best answer: **no answer**" in summary
    assert [label for _, label in highlights if label] and all("#1" not in (label or "") for _, label in highlights)
    # unticked, the null answer cannot win, but the summary says in words that the model would rather answer nothing
    _, answers, _, _, _, summary = run(services, top_k=1, impossible=False)
    assert answers["answer"] != ""
    assert f"**The model prefers no answer**: null {percent(details.null_score)} vs best span " in summary
    assert "; tick 'Allow no answer' to accept it." in summary
    _table_logits(monkeypatch, services, start={"[CLS]": -5.0, "cat": 4.0}, end={"[CLS]": -5.0, "mat": 4.0})
    _, answers, _, _, _, summary = run(services, top_k=1, impossible=True)
    assert answers["answer"] == "cat sat on the mat" and "**A span wins**" in summary
    _, _, _, _, _, summary = run(services, top_k=1, impossible=False)
    assert "The model prefers a span" in summary and "prefers no answer" not in summary


def test_merged_and_empty_answers_are_explained(services, monkeypatch) -> None:
    _table_logits(monkeypatch, services, start={"cat": 8.0}, end={"cat": 8.0})
    context = " ".join(["the cat sat on the mat."] * 6)                  # "cat" in every overlapping window
    highlights, answers, table, probs, windows, summary = run(services, context=context, top_k=2, max_seq_len=24,
                                                              doc_stride=8)
    assert answers[0]["answer"] == "cat" and answers[0]["score"] > 1 and answers[0]["summed_candidates"] > 6
    places = [[i, i + 3] for i in range(len(context)) if context.startswith("cat", i)]
    assert answers[0]["places"] == places                                # the 6 places, not the 6+ candidates
    ranges = ", ".join(f"{a}–{b}" for a, b in places)
    assert table["where in the text"].tolist()[0] == f"6 places: characters {ranges}"
    assert "can pass 1" in summary and "above 100%" not in summary
    assert max(shown_percentages(highlights, table, probs, windows, summary)) <= 100
    covered = [text for text, label in highlights if label and label.startswith("#1 · ")]
    assert covered == ["cat"] * 6                                        # highlighted at every place
    _, answers, table, _, _, summary = run(services, context="Paris.", top_k=20)
    assert "(empty)" in table["answer"].tolist() and "0%" in table["probability"].tolist()
    assert "not real spans" in summary


def test_an_answer_read_by_overlapping_windows_shows_its_own_probability(services, monkeypatch) -> None:
    """Issue 28: "score 196%, found 4 times" for one answer that overlapping windows read again."""
    loaded = services.model("default")
    _table_logits(monkeypatch, services, start={"cat": 8.0}, end={"cat": 8.0})
    filler = "the dog ran in the house. a bird sang in the tree."
    context = f"{filler} {filler} the cat sat on the mat. {filler} {filler}"        # one "cat", mid-text
    outputs = run(services, context=context, top_k=2, max_seq_len=24, doc_stride=8)
    highlights, answers, table, probs, windows, summary = outputs
    details = inference.answer_details(loaded, QUESTION, context, 2, 15, 24, 8)
    holding = [w for w in details.windows if "cat" in w.context_tokens]
    at = context.index("cat")
    best = answers[0]
    assert len(holding) >= 2 and best["answer"] == "cat"                 # windows overlap where the answer is
    own = [c.score for w in holding for c in w.candidates if c.answer == "cat"]
    assert best["score"] == rounded(sum(own)) and best["score"] > 1      # the pipeline's sum stays in the JSON
    assert best["summed_candidates"] == len(holding) and best["places"] == [[at, at + 3]]
    assert best["probability"] == rounded(max(own)) <= 1                 # its own: the best window's p_start * p_end
    assert max(shown_percentages(highlights, table, probs, windows, summary)) <= 100
    assert f"probability {percent(max(own))} in window" in summary and f"characters {at}–{at + 3})" in summary
    assert table["probability"].tolist()[0] == percent(max(own))
    assert table["where in the text"].tolist()[0] == f"characters {at}–{at + 3}"
    assert table["pipeline score"].tolist()[0] == f"{sig(sum(own))}: {len(holding)} candidates added"
    assert [text for text, label in highlights if label and label.startswith("#1 · ")] == ["cat"]   # one place
    assert len({annotation.text for annotation in probs.layout.annotations if annotation.text.startswith("#1")}) >= 1
    tops = {tuple(probs.layout[name].range) for name in probs.layout.to_plotly_json() if name.startswith("yaxis")}
    assert len(tops) == 1 and next(iter(tops))[1] <= 1                    # one probability scale for every window


@pytest.mark.parametrize("kwargs,match", [
    (dict(question="  "), "Type a question"),
    (dict(context=""), "Paste a context"),
    (dict(top_k=0), "Top-k must be a whole number from 1 to 20"),
    (dict(top_k=21), "Top-k must be a whole number from 1 to 20"),
    (dict(max_answer_len=0), "Max answer length must be a whole number"),
    (dict(max_seq_len=128), "Max sequence length 128 is more than this model's 64 positions"),
    (dict(doc_stride=64), "Doc stride \\(64\\) must be smaller than max sequence length \\(64\\)"),
    (dict(doc_stride=40, question="who " * 20 + "sat?", context=LONG),
     "The question is 22 tokens long, which leaves no room for the context: with max sequence length 64 and doc "
     "stride 40 it may have at most 20 tokens, so shorten the question, lower the doc stride or raise the max "
     "sequence length\\.'$"),
    (dict(question="who " * 70, max_seq_len=48), "The question is 70 tokens long.*at most 28 tokens"),
    (dict(doc_stride=1.5), "Doc stride must be a whole number"),
])
def test_bad_input_is_a_clear_error(services, kwargs, match) -> None:
    with pytest.raises(gr.Error, match=match):
        friendly_errors(run)(services, **kwargs)


def test_model_without_qa_head(services) -> None:
    with pytest.raises(gr.Error, match="has no question-answering \\(span\\) head"):
        friendly_errors(run)(services, key="encoder")


def test_fit_lengths_follows_the_model(services) -> None:
    seq, stride = tab.fit_lengths(services, "default", 384, 128)
    assert seq["value"] == 64 and stride["value"] == 32
    assert tab.fit_lengths(services, "default", 48, 16) == (gr.skip(), gr.skip())


def test_examples_long_context_needs_several_windows() -> None:
    question, context = qa_examples.EXAMPLES[-1]
    assert len(context.split()) >= 600 and "1796" in context and question.startswith("When")
    assert any(q.startswith("Where") for q, _ in qa_examples.EXAMPLES)


# --- through the server ------------------------------------------------------------------

def test_api_answer(client, services) -> None:
    highlights, answers, table, probs, windows, summary = client.predict(
        "default", QUESTION, CONTEXT, 3, 15, 64, 16, True, api_name="/answer")
    assert pipeline_part(answers) == engine_answer(services, impossible=True)
    assert table["headers"] == tab.TABLE_COLUMNS and len(table["data"]) == 3
    assert "".join(h["token"] for h in highlights) == CONTEXT
    assert probs["type"] == "plotly" and windows["type"] == "plotly" and "null" in summary
    assert all(cell.endswith("%") for cell in [row[2] for row in table["data"]])      # API table: percentages
    assert all(0 <= a["probability"] <= 1 for a in answers)


def test_api_errors_and_app_keeps_serving(client, services) -> None:
    with pytest.raises(AppError, match="Type a question"):
        client.predict("default", "", CONTEXT, 1, 15, 64, 16, False, api_name="/answer")
    with pytest.raises(AppError, match="Doc stride \\(64\\) must be smaller"):
        client.predict("default", QUESTION, CONTEXT, 1, 15, 64, 64, False, api_name="/answer")
    with pytest.raises(AppError, match="has no question-answering"):
        client.predict("encoder", QUESTION, CONTEXT, 1, 15, 64, 16, False, api_name="/answer")
    _, answers, _, _, _, _ = client.predict("default", QUESTION, CONTEXT, 1, 15, 64, 16, False, api_name="/answer")
    assert pipeline_part(answers) == engine_answer(services, top_k=1)


def test_every_answer_event_clears_its_outputs_after_a_failure(services) -> None:
    demo = small_app(services, tab.build)
    config = demo.get_config_file()
    dependencies = config["dependencies"]
    outputs = next(d["outputs"] for d in dependencies if d["api_name"] == "answer")
    answering = [d["id"] for d in dependencies if str(d["api_name"]).startswith("answer") and d["outputs"] == outputs
                 and d["api_name"] != "answer_example"]
    assert len(answering) == 3                                            # button, Enter in the question, example
    clearing = [d for d in dependencies if d.get("trigger_only_on_failure") and d["outputs"] == outputs]
    assert sorted(d["trigger_after"] for d in clearing) == sorted(answering)
