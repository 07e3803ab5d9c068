"""Hostile input to the Fill-mask and QA endpoints of the served app.

Every case: a human message (error or warning) or a validated result, no stack trace or
exception class name, nothing written outside the runs and temp folders, and the same
endpoint still answers a normal call afterwards.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest
from gradio_client import Client

from support.hostile_helpers import (BEYOND_POSITIONS, BLANK, CJK, CONTROL, CONTROL_ONLY, EMOJI, EMPTY, HUGE,
                             LITERAL_SPECIALS, ONLY_SPECIALS, RTL, TOO_HUGE, ZERO_WIDTH, Sandbox,
                             call, call_raw, case_id, expect_error, expect_ok, inputs, run_case, sandbox,
                             serve_app)
from support.probing_helpers import make_services, write_run

pytestmark = pytest.mark.usefixtures("one_thread")

MASKED = "the cat [MASK] on the mat."
QUESTION = "who sat on the mat?"
CONTEXT = "the cat sat on the mat. the dog ran in the house."
DEFAULTS: dict[str, dict[str, Any]] = {
    "/fill_mask": dict(model="default", text=MASKED, top_k=3, targets=""),
    "/fill_mask_over_training": dict(model="default", text=MASKED, top_k=3, targets=""),
    "/answer": dict(model="default", question=QUESTION, context=CONTEXT, top_k=2, max_answer_len=15, max_seq_len=64,
                    doc_stride=16, impossible=False),
}


def args(api: str, **changes: Any) -> list[Any]:
    """The endpoint's positional inputs: the defaults with ``changes``."""
    return inputs(DEFAULTS, api, **changes)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Iterator[tuple[Client, Sandbox]]:
    import app

    with sandbox(tmp_path_factory.mktemp("hostile-tasks")) as box:
        write_run(box.runs, tiny_tokenizer)
        services = make_services(tiny_tokenizer, box.runs)
        with serve_app(app.create_app(services), box) as client:
            yield client, box


def masks(count: int, k: int = 3) -> Callable[[Any], None]:
    """The fill-mask result has ``count`` masks with ``k`` candidates each."""
    def check(value: Any) -> None:
        results = value[1]
        groups = [results] if count == 1 else results
        assert len(groups) == count and all(len(g) == k for g in groups), results
    return check


def summary_says(text: str, index: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        assert text in value[index], value[index]
    return check


def answers_within_context(context: str, windows: int = 1) -> Callable[[Any], None]:
    """Every answer is a span of the context it came from; at least ``windows`` windows were read."""
    def check(value: Any) -> None:
        answers = value[1] if isinstance(value[1], list) else [value[1]]
        assert answers, value[1]
        for a in answers:
            assert context[a["start"]:a["end"]] == a["answer"]
        assert int(value[5].split("**")[1].split()[0]) >= windows, value[5]
    return check


OK = None
TWENTY = " ".join(["[MASK]"] * 20)
FIFTY = " ".join(["[MASK]"] * 50)
# (api, changes, expected): a regex the error must match, or OK / a check of the result.
CASES: list[tuple[str, dict[str, Any], Any]] = [
    # --- /fill_mask
    ("/fill_mask", dict(text=EMPTY), "Type a sentence with a \\[MASK\\]"),
    ("/fill_mask", dict(text=BLANK), "Type a sentence with a \\[MASK\\]"),
    ("/fill_mask", dict(text="no mask in this text"), "There is no \\[MASK\\]"),
    ("/fill_mask", dict(text=FIFTY), "50 \\[MASK\\] tokens; at most 20"),
    ("/fill_mask", dict(text=TWENTY), masks(20)),
    ("/fill_mask", dict(text="[MASK]"), masks(1)),
    ("/fill_mask", dict(text=HUGE[:-7] + " [MASK]"), "tokens long but this model takes at most 64"),
    ("/fill_mask", dict(text=BEYOND_POSITIONS + " [MASK]"), "tokens long but this model takes at most 64"),
    ("/fill_mask", dict(text="[MASK] " + BEYOND_POSITIONS), "tokens long but this model takes at most 64"),
    ("/fill_mask", dict(text=TOO_HUGE), "too long"),
    ("/fill_mask", dict(top_k=0), "Top-k|minimum"),
    ("/fill_mask", dict(top_k=10**6), "Top-k|maximum"),
    ("/fill_mask", dict(top_k=2.5), "Top-k must be a whole number"),
    ("/fill_mask", dict(targets=EMOJI), "tokenizes to \\[UNK\\]"),
    ("/fill_mask", dict(targets=TOO_HUGE), "targets is too long"),
    ("/fill_mask", dict(targets="[MASK], [PAD]"), masks(1, 2)),      # scored like any vocabulary entry
    ("/fill_mask", dict(targets=" , ,, "), masks(1)),
    ("/fill_mask", dict(text="the [mask] sat on the <mask>."), masks(2)),
    ("/fill_mask", dict(text=LITERAL_SPECIALS + " [MASK]"), masks(1)),
    ("/fill_mask", dict(text=ONLY_SPECIALS + " [MASK]"), masks(1)),
    ("/fill_mask", dict(text=CJK + " [MASK] " + RTL), masks(1)),
    ("/fill_mask", dict(text=EMOJI + " [MASK] " + ZERO_WIDTH), masks(1)),
    ("/fill_mask", dict(text=CONTROL + " [MASK]"), masks(1)),
    ("/fill_mask", dict(text="the [MA\u200bSK] sat"), "There is no \\[MASK\\]"),
    ("/fill_mask", dict(model="encoder"), "has no masked-LM head"),
    ("/fill_mask", dict(model="hub:google-bert/bert-base-uncased"), "switched off|offline"),
    ("/fill_mask", dict(model=None), masks(1)),                       # no model picked: the default
    ("/fill_mask_over_training", dict(text=FIFTY), "at most 20"),
    ("/fill_mask_over_training", dict(text="nothing to fill"), "There is no \\[MASK\\]"),
    ("/fill_mask_over_training", dict(top_k=0), "Top-k|minimum"),
    ("/fill_mask_over_training", dict(targets=EMOJI), "tokenizes to \\[UNK\\]"),
    ("/fill_mask_over_training", dict(text=BEYOND_POSITIONS + " [MASK]"), "at most 64"),
    # --- /answer
    ("/answer", dict(question=EMPTY), "Type a question"),
    ("/answer", dict(context=BLANK), "Paste a context"),
    ("/answer", dict(question=TOO_HUGE), "question is too long"),
    ("/answer", dict(context=TOO_HUGE), "context is too long"),
    ("/answer", dict(context=HUGE), answers_within_context(HUGE, windows=100)),
    ("/answer", dict(context=BEYOND_POSITIONS), answers_within_context(BEYOND_POSITIONS, windows=3)),
    ("/answer", dict(top_k=0), "Top-k|minimum"),
    ("/answer", dict(top_k=10**6), "Top-k|maximum"),
    ("/answer", dict(doc_stride=64), "Doc stride \\(64\\) must be smaller than max sequence length \\(64\\)"),
    ("/answer", dict(doc_stride=200), "Doc stride \\(200\\) must be smaller"),
    ("/answer", dict(max_seq_len=128), "more than this model's 64 positions"),
    ("/answer", dict(max_seq_len=10**6), "sequence length|maximum"),
    ("/answer", dict(max_answer_len=0), "Max answer length|minimum"),
    ("/answer", dict(question="who " * 70), "leaves no room for the context"),
    ("/answer", dict(question=ONLY_SPECIALS), answers_within_context(CONTEXT)),
    ("/answer", dict(context=LITERAL_SPECIALS), answers_within_context(LITERAL_SPECIALS)),
    ("/answer", dict(context=ONLY_SPECIALS), OK),
    ("/answer", dict(context=EMOJI + " " + RTL), answers_within_context(EMOJI + " " + RTL)),
    ("/answer", dict(question=CJK, context=ZERO_WIDTH), answers_within_context(ZERO_WIDTH)),
    ("/answer", dict(context=CONTROL), answers_within_context(CONTROL)),
    ("/answer", dict(context=CONTROL_ONLY), "no tokens|no words|no text"),
    ("/answer", dict(question=CONTROL_ONLY), "no tokens|no words|no text"),
    ("/answer", dict(model="encoder"), "has no question-answering"),
    ("/answer", dict(impossible=True, context=EMOJI), OK),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_hostile_input(served: tuple[Client, Sandbox], case: tuple[str, dict[str, Any], Any]) -> None:
    client, box = served
    run_case(client, box, DEFAULTS, case)


@pytest.mark.parametrize("api,field", [("/fill_mask", "text"), ("/fill_mask", "targets"), ("/answer", "question"),
                                       ("/answer", "context")])
def test_lone_surrogate_in_a_hand_written_request(served: tuple[Client, Sandbox], api: str, field: str) -> None:
    """JSON may escape a lone surrogate (\\ud800), which is not text; the tokenizer must never see it."""
    client, box = served
    values = json.dumps(args(api, **{field: "the cat SURROGATE [MASK]"})).replace("SURROGATE", "\\ud800")
    with box.no_stray_writes():
        expect_error(call_raw(client, api, '{"data": ' + values + '}'), "not valid Unicode")
        expect_ok(call(client, *args(api), api_name=api))
