"""Hostile input to the Fine-tune endpoints (/finetune_start, /finetune_status) of the served app.

Bad settings, model keys, example names and uploads are refused before a run starts, with a message a
person can act on, nothing written to the runs folder and nothing outside the app's folders; hand-written
requests (text, infinity, NaN for numbers) too. The uploads' own checks (columns, labels, UTF-8, size) are in
tests/explorer/finetune/test_tab.py; here they arrive as a stranger sends them.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from gradio_client import Client, handle_file

from support.hostile_helpers import (Sandbox, assert_human, call, call_raw, expect_error, expect_ok,
                             served_default_app)

pytestmark = pytest.mark.usefixtures("one_thread")

NAMES = ["model_key", "task", "data_source", "example", "data_file", "labels", "steps", "batch_size",
         "learning_rate", "seq_length", "eval_fraction", "report_to", "doc_stride", "max_question_len", "num_choices"]
GOOD = dict(zip(NAMES, ["default", "classification", "example", "", None, "", 30, 16, 1e-4, 64, 0.2, "none",
                        "", "", ""]))       # the tasks' own settings (empty: their defaults)


def settings(**changes: Any) -> list[Any]:
    """/finetune_start's inputs: the form's values with ``changes``."""
    assert set(changes) <= set(NAMES), changes
    return [{**GOOD, **changes}[n] for n in NAMES]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Sandbox]]:
    with served_default_app(tmp_path_factory.mktemp("hostile-finetune")) as served:
        yield served


def idle(client: Client) -> None:
    status = expect_ok(call(client, api_name="/finetune_status"))[0]
    assert_human(status)
    assert status.startswith("**idle**"), status


TASK_CHOICES = r"not in the list of choices: \['classification', 'qa', 'token_classification', 'multiple_choice'\]"
REFUSED: list[tuple[dict[str, Any], str]] = [
    (dict(task="../../etc/passwd"), TASK_CHOICES),
    (dict(task="pretraining"), TASK_CHOICES),
    (dict(model_key="/etc"), "inside the allowed model folders"),
    (dict(model_key="live"), "no training run right now|pick one of its run's checkpoints"),
    (dict(model_key="checkpoint:../../etc/step-000001"), "not a checkpoint name"),
    (dict(model_key="https://example.com/model"), "not a URL"),
    (dict(example="../../../etc/passwd"), "no bundled example"),
    (dict(example="tiny_squad.json"), "no bundled example 'tiny_squad.json' for classification"),
    (dict(data_source="ftp"), r"not in the list of choices: \['example', 'upload'\]"),
    (dict(data_source="upload"), "Upload a .csv or .tsv or .jsonl file first"),
    (dict(steps=0), "Steps must be a whole number from 1"),
    (dict(steps=10**9), "Steps must be a whole number from 1 to 100,000"),
    (dict(batch_size=2.5), "Batch size must be a whole number"),
    (dict(learning_rate=-1), r"Learning rate must be in \(0, 1\]"),
    (dict(seq_length=4), "Sequence length must be a whole number from 16"),
    (dict(seq_length=10**6), "Sequence length must be a whole number from 16 to 512"),
    (dict(eval_fraction=1), r"Held-out fraction must be in \[0, 0.9\]"),
    (dict(eval_fraction=-0.1), r"Held-out fraction must be in \[0, 0.9\]"),
    (dict(report_to="wandb"), r"not in the list of choices: \['none', 'tensorboard'\]"),
]


@pytest.mark.parametrize("changes,match", REFUSED, ids=[f"{k}={v!r}"[:40] for c, _ in REFUSED
                                                         for k, v in c.items()])
def test_bad_settings_are_refused_before_a_run(served: tuple[Client, Sandbox], changes: dict[str, Any],
                                               match: str) -> None:
    client, box = served
    with box.no_stray_writes():
        expect_error(call(client, *settings(**changes), api_name="/finetune_start"), match)
        idle(client)
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


RAW: list[tuple[str, str, str]] = [
    ("steps", '"thirty"', "Steps must be a whole number, got 'thirty'"),
    ("steps", "1e999", "Steps must be a whole number"),
    ("learning_rate", "NaN", "Learning rate must be in"),
    ("eval_fraction", '"0.2; rm -rf /"', "Held-out fraction must be a number"),
]


@pytest.mark.parametrize("name,literal,match", RAW, ids=[r[0] + "=" + r[1] for r in RAW])
def test_hand_written_numbers_are_refused(served: tuple[Client, Sandbox], name: str, literal: str,
                                          match: str) -> None:
    client, box = served
    values = json.dumps(settings(**{name: "PLACEHOLDER"})).replace('"PLACEHOLDER"', literal)
    with box.no_stray_writes():
        expect_error(call_raw(client, "/finetune_start", '{"data": ' + values + '}'), match)
        idle(client)
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


SETTINGS: list[tuple[dict[str, Any], str]] = [
    (dict(task="qa", doc_stride="lots"), "Doc stride must be a whole number, got 'lots'"),
    (dict(task="qa", doc_stride="-3"), "Doc stride must be a whole number >= 0, got -3"),
    (dict(task="qa", max_question_len="1e999"), "Max question len must be a whole number"),
    (dict(task="multiple_choice", num_choices="9"), "Num choices must be 2 to 5, got 9"),
]


@pytest.mark.parametrize("changes,match", SETTINGS, ids=[str(c) for c, _ in SETTINGS])
def test_a_tasks_own_settings_are_checked(served: tuple[Client, Sandbox], changes: dict[str, Any],
                                          match: str) -> None:
    client, box = served
    with box.no_stray_writes():
        expect_error(call_raw(client, "/finetune_start", json.dumps({"data": settings(**changes)})), match)
        idle(client)
    assert not any(box.runs.iterdir()), "a refused run wrote to the runs folder"


UPLOADS: list[tuple[str, bytes, dict[str, Any], str]] = [
    ("columns.csv", b"sentence,sentiment\nnice,positive\n", {}, "columns.csv: the header must name the columns"),
    ("labels.csv", b"text,label\ngood,positive\nbad,negative\nmeh,neutral\n", dict(labels="positive,negative"),
     "labels.csv, line 4: the label 'neutral' is not one of the labels you listed"),
    ("empty.csv", b"", {}, "empty.csv is empty"),
    ("binary.csv", bytes(range(256)) * 4, {}, "binary.csv is not UTF-8 text"),
    ("script.py", b"text,label\n", {}, r"Invalid file type.*'\.csv', '\.tsv', '\.jsonl', '\.json', '\.conllu', "
     r"'\.txt'"),  # Gradio's check
    ("squad.json", b'{"data": []}', {}, r"squad.json is a \.json file; classification takes \.csv or \.tsv or \.jsonl"),
    ("notsquad.json", b'{"data": "nope"}', dict(task="qa"), "notsquad.json is not SQuAD JSON"),
    ("broken.json", b'{"data": [', dict(task="qa"), "broken.json is not valid JSON"),
    ("noanswers.json", json.dumps({"data": [{"paragraphs": [{"context": "a b c", "qas": [
        {"id": "1", "question": "q?", "answers": [{"text": "zzz", "answer_start": 0}]}]}]}]}).encode(),
     dict(task="qa"), "noanswers.json has no usable questions"),
    ("tabs.tsv", b"The\tDET\ncat\tNOUN\textra\n", dict(task="token_classification"),
     r"tabs.tsv, line 2: expected a word and its tag separated by a tab \(word<TAB>tag\), found 3 column"),
    ("tags.tsv", b"The\tDET\ncat\tNOUN\n\nA\tDET\ndog\tNOUN\nran\tVERB\n",
     dict(task="token_classification", labels="DET, NOUN"),
     r"tags.tsv, line 4 \(the sentence that starts there\): the word 'ran' has the tag 'VERB', which is not one of"),
    ("short.conllu", b"1\tThe\tthe\tDET\n", dict(task="token_classification"),
     "short.conllu, line 1: a CoNLL-U word line has 10 tab-separated columns"),
    ("columns.csv", b"question,answer,label\nwhy?,because,0\n", dict(task="multiple_choice"),
     "columns.csv, line 1: the header must name context, choice0 .. choiceN-1"),
    ("range.csv", b"context,choice0,choice1,label\nIt rained,we got wet,we got dry,0\nIt was hot,we froze,we ran,2\n",
     dict(task="multiple_choice"),
     "range.csv, line 3: label 2 is out of range: there are 2 choices, so it must be 0 to 1"),
    ("choices.json", b"{}", dict(task="multiple_choice"),
     r"choices.json is a \.json file; multiple_choice takes \.csv"),
]


@pytest.mark.parametrize("name,content,changes,match", UPLOADS, ids=[u[0] for u in UPLOADS])
def test_hostile_uploads_are_refused_by_name(served: tuple[Client, Sandbox], tmp_path: Path, name: str,
                                             content: bytes, changes: dict[str, Any], match: str) -> None:
    client, box = served
    upload = tmp_path / name
    upload.write_bytes(content)
    with box.no_stray_writes():
        outcome = call(client, *settings(data_source="upload", data_file=handle_file(str(upload)), **changes),
                       api_name="/finetune_start")
        expect_error(outcome, match)
        assert "/gradio/" not in outcome.error and str(box.root) not in outcome.error     # no server path
        idle(client)
    assert not any(box.runs.iterdir()), "a refused upload was kept"
