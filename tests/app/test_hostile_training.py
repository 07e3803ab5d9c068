"""Hostile input to the Training endpoints (/train_*) of the served app.

Out-of-range settings are refused before a run starts (a human message; nothing written); a
corpus too small for next-sentence prediction fails inside the run and the Training tab says
why, without a traceback; pause/resume/stop/save on no run are harmless. Uploaded corpora,
SQuAD files and model shapes are checked at engine level in test_hostile_data.py.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from gradio_client import Client

from support.training_inputs import OBJECTIVE
from support.hostile_helpers import (Sandbox, assert_human, call, call_raw, expect_error, expect_ok,
                             served_default_app)

pytestmark = pytest.mark.usefixtures("one_thread")

NAMES = ["preset", "corpus", "max_documents", "vocab_size", "seq_length", "batch_size", "learning_rate", "steps",
         "mask_rate", "whole_word", "nsp", "source", "text", "text_file", "vocabulary", "report_to", *OBJECTIVE]
GOOD = dict(zip(NAMES, ["tiny", "shakespeare", 30, 300, 32, 8, 5e-4, 15, 0.15, False, True, "builtin", "", None,
                        "train", "none", *OBJECTIVE.values()]))   # a raw call sends every input
RUN_TIMEOUT_S = 90.0


def settings(**changes: Any) -> list[Any]:
    """/train_start's inputs: quick, valid settings with ``changes``."""
    assert set(changes) <= set(NAMES), changes
    return [{**GOOD, **changes}[n] for n in NAMES]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Sandbox]]:
    with served_default_app(tmp_path_factory.mktemp("hostile-training")) as served:
        yield served


def status_text(client: Client) -> str:
    status = expect_ok(call(client, api_name="/train_status"))[0]
    assert_human(status)
    return status


# (changes to the quick settings, regex the error must match)
REFUSED: list[tuple[dict[str, Any], str]] = [
    (dict(learning_rate=-1), "learning_rate must be a positive"),
    (dict(learning_rate=0), "learning_rate must be a positive"),
    (dict(batch_size=0), "Batch size must be a whole number from 1"),
    (dict(batch_size=-5), "Batch size must be a whole number from 1"),
    (dict(batch_size=10**6), "Batch size must be a whole number from 1 to 4,096"),
    (dict(batch_size=2.5), "Batch size must be a whole number"),
    (dict(seq_length=4), "Sequence length must be a whole number from 8"),
    (dict(seq_length=513), "Sequence length must be a whole number from 8 to 512"),   # longer than max positions
    (dict(seq_length=10**9), "Sequence length must be a whole number from"),
    (dict(steps=0), "Steps must be a whole number from 1"),
    (dict(steps=-1), "Steps must be a whole number from 1"),
    (dict(steps=10**12), "Steps must be a whole number from 1 to 1,000,000"),
    (dict(mask_rate=0), "mlm_probability must be a number in"),
    (dict(mask_rate=1.5), "mlm_probability must be a number in"),
    (dict(mask_rate=-0.1), "mlm_probability must be a number in"),
    (dict(vocab_size=0), "Vocab size must be a whole number from 50"),
    (dict(vocab_size=10**9), "Vocab size must be a whole number from 50 to 200,000"),
    (dict(max_documents=0), "Max documents must be a whole number from 1"),
    (dict(preset="../../etc/passwd"), "preset|choices"),
    (dict(preset="huge"), "preset|choices"),
    (dict(corpus="/etc/passwd"), "corpus|choices"),
    (dict(source="text", text=""), "Paste some text into the box first"),
    (dict(source="text", text="Only one document. Of two sentences."), "at least two documents"),
    (dict(source="file"), "Upload a .txt or .jsonl file first"),
    (dict(report_to="wandb"), r"not in the list of choices: \['none', 'tensorboard'\]"),
]


@pytest.mark.parametrize("changes,match", REFUSED, ids=[",".join(f"{k}={v!r}" for k, v in c.items())[:40]
                                                         for c, _ in REFUSED])
def test_bad_settings_are_refused_before_a_run(served: tuple[Client, Sandbox], changes: dict[str, Any],
                                               match: str) -> None:
    client, box = served
    with box.no_stray_writes():
        expect_error(call(client, *settings(**changes), api_name="/train_start"), match)
        assert status_text(client).startswith("**idle**")      # nothing started; the app still answers
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


# A hand-written request can carry what no widget sends: text, infinity, NaN (JSON's 1e999 / NaN). The app's
# number check (ui_errors.check_number_inputs) refuses them before Gradio's own preprocessing, naming the field.
RAW: list[tuple[str, str, str]] = [
    ("batch_size", '"eight"', "Batch size must be a number, got 'eight'."),
    ("steps", "1e999", "Steps must be a number, got inf."),
    ("learning_rate", "NaN", "Learning rate must be a number, got nan."),
    ("mask_rate", '"0.15; rm -rf /"', "Masking rate must be a number"),
]


@pytest.mark.parametrize("name,literal,match", RAW, ids=[r[0] + "=" + r[1] for r in RAW])
def test_hand_written_numbers_are_refused(served: tuple[Client, Sandbox], name: str, literal: str,
                                          match: str) -> None:
    client, box = served
    values = json.dumps(settings(**{name: "PLACEHOLDER"})).replace('"PLACEHOLDER"', literal)
    with box.no_stray_writes():
        expect_error(call_raw(client, "/train_start", '{"data": ' + values + '}'), match)
        assert status_text(client).startswith("**idle**")
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


# (file name, its bytes, the message): uploads through the API, as gradio_client sends them
UPLOADS: list[tuple[str, bytes, str]] = [
    ("corpus.exe", b"MZ\x90\x00", "corpus.exe: a .exe file cannot be read; upload a .txt"),
    ("passwd", b"root:x:0:0", "passwd: a file without an extension cannot be read"),
    ("latin1.txt", b"caf\xe9. Il pleut.\n\nOui. Non.", "not valid UTF-8 text"),
    ("lines.jsonl", b'{"text": "A. B."}\n{"text": "C. D."', "lines.jsonl line 2 is not valid JSON"),
    ("lines.jsonl", b'{"txt": "A. B."}', 'lines.jsonl line 1 has no text: it has no "text" field'),
]


@pytest.mark.parametrize("name,data,match", UPLOADS, ids=[u[0] + ":" + u[2][:20] for u in UPLOADS])
def test_bad_uploads_are_refused_before_a_run(served: tuple[Client, Sandbox], name: str, data: bytes,
                                              match: str) -> None:
    from gradio_client import handle_file

    client, box = served
    path = box.outside / "upload" / Path(name).name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    with box.no_stray_writes():
        expect_error(call(client, *settings(source="file", text_file=handle_file(str(path))), api_name="/train_start"),
                     match)
        assert status_text(client).startswith("**idle**")
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


def test_text_with_a_lone_surrogate_is_refused(served: tuple[Client, Sandbox]) -> None:
    client, box = served
    values = json.dumps(settings(source="text", text="PLACEHOLDER"))
    values = values.replace('"PLACEHOLDER"', '"Fine text. Then \\ud800 a broken one.\\n\\nMore. Text."')
    with box.no_stray_writes():
        expect_error(call_raw(client, "/train_start", '{"data": ' + values + '}'), "not valid Unicode at position 16")
        assert status_text(client).startswith("**idle**")
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


@pytest.mark.parametrize("api", ["/train_pause", "/train_resume", "/train_stop"])
def test_controls_without_a_run_are_harmless(served: tuple[Client, Sandbox], api: str) -> None:
    client, box = served
    with box.no_stray_writes():
        text = expect_ok(call(client, api_name=api))
        assert_human(text)
        assert text.startswith("**idle**") or "**failed**" in text
        status_text(client)


def test_save_without_a_run_is_a_clear_error(served: tuple[Client, Sandbox]) -> None:
    client, box = served
    with box.no_stray_writes():
        expect_error(call(client, api_name="/train_save"), "no run is training")
        status_text(client)


def test_one_document_corpus_fails_with_a_message(served: tuple[Client, Sandbox]) -> None:
    """max_documents=1: next-sentence prediction needs NotNext segments from another document."""
    client, box = served
    with box.no_stray_writes():
        started = expect_ok(call(client, *settings(max_documents=1), api_name="/train_start"))
        assert_human(started)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not (status := status_text(client)).startswith(("**failed**", "**finished**")):
            assert time.monotonic() < deadline, f"the run neither failed nor finished: {status}"
            time.sleep(0.3)
        assert status.startswith("**failed**") and "two documents" in status, status
        for api in ("/train_pause", "/train_resume", "/train_stop"):      # harmless on an ended run
            assert expect_ok(call(client, api_name=api)).startswith("**failed**")
        expect_error(call(client, api_name="/train_save"), "no run is training")
    # the run wrote only inside the runs folder (checked above); a good start is refused no more
    assert list(box.runs.iterdir())
