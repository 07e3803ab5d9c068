"""Training on your own text from the Training tab and /train_start: pasted text, an uploaded .txt/.jsonl,
or the built-in corpus, with a trained or the bundled vocabulary; bad text is refused before a run starts,
and a run on an upload continues after the upload is gone."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from gradio_client import Client, handle_file

from support.app_helpers import serve
from engine.text.tokenizer import WordPieceTokenizer
from explorer.services import Services
from explorer.training import job as training_job
from explorer.training import tab as training_tab
from explorer.training import text_source
from explorer.ui_errors import friendly_errors

pytestmark = pytest.mark.usefixtures("one_thread")

TIMEOUT = 90.0
NAMES = ["preset", "corpus", "max_documents", "vocab_size", "seq_length", "batch_size", "learning_rate", "steps",
         "mask_rate", "whole_word", "nsp", "source", "text", "text_file", "vocabulary"]
QUICK = dict(zip(NAMES, ["tiny", "shakespeare", 200, 300, 32, 4, 5e-4, 6, 0.15, False, True, "builtin", "", None,
                         "train"]))
PASTED = "\n\n".join(f"The {a} sat on the mat. Then the {a} ran to the {b}. It was red and big."
                     for a in ("cat", "dog", "bird", "fox", "hen", "cow") for b in ("tree", "house", "car"))


def settings(**changes: Any) -> dict[str, Any]:
    assert set(changes) <= set(NAMES), changes
    return {**QUICK, **changes}


def spec_of(services: Services, **changes: Any):
    return training_job.make_spec(services, *settings(**changes).values())


def test_pasted_text_and_the_vocabulary_choice_become_the_spec(services: Services) -> None:
    spec = spec_of(services, source="text", text=PASTED)
    assert (spec.corpus_text, spec.corpus_format, spec.corpus_label) == (PASTED, "txt", "pasted text")
    assert spec.vocab_size == 300 and spec.tokenizer is None                  # a WordPiece trained on the text
    kept = spec_of(services, source="text", text=PASTED, vocabulary="keep")
    assert WordPieceTokenizer.from_file(kept.tokenizer).vocab_size == 30522  # the bundled bert-base-uncased vocab
    builtin = spec_of(services, text=PASTED)                                   # the source decides, not the box
    assert builtin.corpus == "shakespeare" and builtin.corpus_text is None


def test_an_uploaded_jsonl_file_keeps_its_name_and_format(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(json.dumps({"text": block, "source": "me"}) for block in PASTED.split("\n\n")),
                    encoding="utf-8")
    spec = spec_of(services, source="file", text_file=str(path))
    assert (spec.corpus_format, spec.corpus_label) == ("jsonl", "notes.jsonl")
    assert spec.corpus_text == path.read_text(encoding="utf-8")


# (source, text, file name, file bytes, the message a person sees)
REFUSED: list[tuple[str, str, str | None, bytes, str]] = [
    ("text", "", None, b"", "Paste some text into the box first"),
    ("text", " \n\n \t", None, b"", "Paste some text into the box first"),
    ("text", "One document. With two sentences.", None, b"", "needs at least two documents .* blank line"),
    ("text", "The cat sat.\n\nThe dog ran.", None, b"", "each of the 2 documents has one sentence"),
    ("file", "", None, b"", "Upload a .txt or .jsonl file first"),
    ("file", "", "table.csv", b"a,b\n1,2\n", "table.csv: a .csv file cannot be read; upload a .txt"),
    ("file", "", "latin1.txt", b"caf\xe9 au lait. Il pleut.\n\nOui. Non.", "not valid UTF-8 text .*save it as UTF-8"),
    ("file", "", "broken.jsonl", b'{"text": "A. B."}\n{"text": "C. D."\n', "broken.jsonl line 2 is not valid JSON"),
    ("file", "", "fields.jsonl", b'{"text": "A. B."}\n{"body": "C. D.", "id": 2}\n',
     'line 2 has no text: it has no "text" field \\(its fields: "body", "id"\\)'),
    ("file", "", "number.jsonl", b'{"text": "A. B."}\n{"text": 7}\n', 'line 2 has no text: its "text" field is a number'),
    ("file", "", "empty.txt", b"", "empty.txt is empty"),
]


@pytest.mark.parametrize("source, text, name, data, message", REFUSED, ids=[f"{r[0]}-{r[2] or r[1][:12]}" for r in REFUSED])
def test_bad_text_is_refused_before_a_run_with_what_to_do(services: Services, tmp_path: Path, source: str, text: str,
                                                          name: str | None, data: bytes, message: str) -> None:
    path = None
    if name is not None:
        path = tmp_path / name
        path.write_bytes(data)
    with pytest.raises(gr.Error, match=message):
        friendly_errors(training_job.make_spec)(services, *settings(source=source, text=text,
                                                                    text_file=path and str(path)).values())
    assert not any(services.get_worker().runs_root.iterdir())


def test_a_file_over_the_limit_is_refused_without_reading_it(services: Services, tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    with open(path, "wb") as handle:
        handle.truncate(text_source.MAX_TEXT_BYTES + 1)                       # sparse: nothing to read
    with pytest.raises(ValueError, match="big.txt is 20.0 MiB; the limit is 20 MiB"):
        spec_of(services, source="file", text_file=str(path))
    with pytest.raises(ValueError, match="the limit is 20 MB"):
        spec_of(services, source="text", text="A b. C d.\n\n" * (text_source.MAX_TEXT_BYTES // 11 + 1))


@pytest.mark.slow
def test_upload_train_then_continue_after_the_upload_is_gone(services: Services, tmp_path: Path) -> None:
    """Through the API as a script would: upload a .txt, keep the bundled vocabulary, stop; the upload and
    gradio's copy of it are deleted; the run continues from its own copy of the text."""
    import app

    upload = tmp_path / "my notes.txt"
    upload.write_text(PASTED, encoding="utf-8")
    worker = services.get_worker()
    with serve(app.create_app(services)) as client:
        started = client.predict(**settings(source="file", text_file=handle_file(str(upload)), vocabulary="keep",
                                            steps=6), api_name="/train_start")
        assert "Traceback" not in started
        assert worker.join(TIMEOUT)
        status = worker.status()
        assert status.outcome == "finished" and status.step == 6, status
        run = status.run_dir
        assert (run / "corpus.txt").read_bytes() == upload.read_bytes()
        record = json.loads((run / "run.json").read_text(encoding="utf-8"))
        assert record["corpus_file"] == "corpus.txt" and record["corpus"] == "my notes.txt"
        upload.unlink()
        label = next(label for label, name in training_tab.run_choices(services) if name == run.name)
        assert label.endswith("my notes.txt")                               # the run list names the text
        client.predict(run=run.name, total_steps=9, api_name="/train_continue")
        assert worker.join(TIMEOUT)
        status = worker.status()
        assert status.outcome == "finished" and status.step == 9 and status.run_dir == run, status
        steps = [r["step"] for r in worker.metrics_since(0)[0] if r["kind"] == "train"]
        assert steps == list(range(1, 10))
        assert worker.trainer.model.config.vocab_size == 30522


@pytest.mark.slow
def test_too_little_text_for_one_batch_fails_the_run_with_the_numbers(services: Services) -> None:
    import app

    worker = services.get_worker()
    with serve(app.create_app(services)) as client:
        client.predict(**settings(source="text", text="The cat sat. It ran.\n\nThe dog ran. It sat.", batch_size=64),
                       api_name="/train_start")
        assert worker.join(TIMEOUT)
        status = client.predict(api_name="/train_status")[0]
    assert status.startswith("**failed**"), status
    assert "fewer than one batch of 64; add text, or lower the batch size" in status and "Traceback" not in status


def documented_training_example() -> str:
    """docs/API.md's /train_start example (the python block of its "Training" section)."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "API.md").read_text(encoding="utf-8")
    start = text.index("\n## Training\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end if end != -1 else len(text)], flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


@pytest.mark.slow
def test_the_documented_training_example_runs(services: Services, tmp_path: Path, monkeypatch, capsys) -> None:
    import app

    (tmp_path / "notes.jsonl").write_text("\n".join(json.dumps({"text": b}) for b in PASTED.split("\n\n")),
                                          encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    worker = services.get_worker()
    with serve(app.create_app(services)) as client:
        exec(compile(documented_training_example().replace("http://127.0.0.1:7860/", client.src), "docs/API.md",
                     "exec"), {})
        assert worker.status().active and worker.status().total_steps == 50
        worker.stop(wait_s=TIMEOUT)
    assert re.search(r"^\*\*(preparing|running)\*\* · step \*\*\d+ / 50\*\*", capsys.readouterr().out, re.M)
