"""Hostile input to the Heads tab's endpoints (/next_sentence, /classify, /tag_words, /choose) of the served app.

Every case: a human message or a validated result, no stack trace or exception class name, nothing written
outside the runs and temp folders, and the same endpoint still answers a normal call afterwards.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest
from gradio_client import Client

from support.hostile_helpers import (BEYOND_POSITIONS, BLANK, CJK, CONTROL, CONTROL_ONLY, EMOJI, EMPTY, LITERAL_SPECIALS,
                             ONLY_SPECIALS, RTL, TOO_HUGE, ZERO_WIDTH, Sandbox, case_id, run_case, sandbox, serve_app)
from support.heads_helpers import head_services

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat sat on the mat."
DEFAULTS: dict[str, dict[str, Any]] = {
    "/next_sentence": dict(model="default", sentence_a=TEXT, sentence_b="then it ran."),
    "/classify": dict(model="classifier", text=TEXT, text_pair=""),
    "/tag_words": dict(model="tagger", text=TEXT),
    "/choose": dict(model="chooser", context=TEXT, choices="it ran.\nit sang."),
}
OK = None


def words(count: int):
    def check(value: Any) -> None:
        assert len(value[2]["data"]) == count, value[2]
    return check


CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("/next_sentence", dict(sentence_a=EMPTY), "Type sentence A"),
    ("/next_sentence", dict(sentence_b=BLANK), "Type sentence B"),
    ("/next_sentence", dict(sentence_b=TOO_HUGE), "sentence B is too long.*100,000"),
    ("/next_sentence", dict(sentence_a=BEYOND_POSITIONS), "tokens long but this model reads at most 64"),
    ("/next_sentence", dict(sentence_a=ONLY_SPECIALS, sentence_b=LITERAL_SPECIALS), OK),
    ("/next_sentence", dict(sentence_a=EMOJI, sentence_b=RTL), OK),
    ("/next_sentence", dict(sentence_a=CONTROL_ONLY, sentence_b=CONTROL_ONLY), OK),
    ("/next_sentence", dict(model="tagger"), "has no next sentence \\(NSP\\) head"),
    ("/next_sentence", dict(model="no such model"), "Models available now"),
    ("/classify", dict(text=BLANK), "Type a text to classify"),
    ("/classify", dict(text=TOO_HUGE), "text is too long"),
    ("/classify", dict(text_pair=TOO_HUGE), "second text is too long"),
    ("/classify", dict(text=CJK, text_pair=ZERO_WIDTH), OK),
    ("/classify", dict(text=BEYOND_POSITIONS), "tokens long but this model reads at most 64"),
    ("/classify", dict(model="encoder"), "has no sequence classification head"),
    ("/tag_words", dict(text=EMPTY), "Type a sentence to tag"),
    ("/tag_words", dict(text=ONLY_SPECIALS), words(5)),                  # typed specials are words, as in the pipeline
    ("/tag_words", dict(text=CONTROL_ONLY), words(0)),
    ("/tag_words", dict(text=EMOJI), words(4)),                          # each emoji word is one [UNK]
    ("/tag_words", dict(text=CONTROL), words(5)),                        # dropped controls join "the\0cat\asat"
    ("/tag_words", dict(text=BEYOND_POSITIONS), "tokens long but this model reads at most 64"),
    ("/tag_words", dict(model="default"), "has no token classification head"),
    ("/choose", dict(context=BLANK), "Type a context"),
    ("/choose", dict(choices=EMPTY), "Type 2 to 5 choices"),
    ("/choose", dict(choices="one\n\n \n"), "Give 2 to 5 choices, one per line; got 1"),
    ("/choose", dict(choices="a\nb\nc\nd\ne\nf"), "got 6"),
    ("/choose", dict(choices=TOO_HUGE), "choices text is too long"),
    ("/choose", dict(choices=f"{EMOJI}\n{CONTROL_ONLY}\n{CJK}"), OK),
    ("/choose", dict(choices=f"a\n{BEYOND_POSITIONS}"), "the context with choice 2 is .* tokens long"),
    ("/choose", dict(model="classifier"), "has no multiple choice head"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Iterator[tuple[Client, Sandbox]]:
    import app

    with sandbox(tmp_path_factory.mktemp("hostile-heads")) as box:
        with serve_app(app.create_app(head_services(tiny_tokenizer, box.runs)), box) as client:
            yield client, box


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_hostile_input(served: tuple[Client, Sandbox], case: tuple[str, dict[str, Any], Any]) -> None:
    client, box = served
    run_case(client, box, DEFAULTS, case)
