"""Hostile model sources for /load_model: path traversal, URLs, folders outside the allowed ones,
broken model folders and a booby-trapped pickle. Every case: a human message or a loaded model,
nothing written outside the runs and temp folders, and a normal load still works afterwards."""
from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from gradio_client import Client

from engine.model.loaded_model import LoadedModel
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.hostile_helpers import (BLANK, EMOJI, EMPTY, TOO_HUGE, Sandbox, call, expect_error, expect_ok, sandbox,
                             serve_app)
from support.probing_helpers import tiny_model, write_run

pytestmark = pytest.mark.usefixtures("one_thread")

API = "/load_model"
MARKER = "pwned-by-pickle"


class _Booby:
    """Unpickling this would create ``MARKER`` in the cwd (weights-only loading must refuse it)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {MARKER}",))


def _write_model(folder: Path, tokenizer) -> None:
    """A small HF-format model folder (config, safetensors, vocab)."""
    from engine.training.runs.state import write_checkpoint

    write_checkpoint(tiny_model(7), tokenizer, folder, state={"step": 0}, info={"step": 0})


def _populate(box: Sandbox, tokenizer) -> None:
    """Good and bad model folders inside and outside the allowed folder."""
    _write_model(box.models / "tiny", tokenizer)
    _write_model(box.outside / "tiny", tokenizer)
    (box.models / "link").symlink_to(box.outside / "tiny", target_is_directory=True)
    (box.models / "empty").mkdir()
    (box.models / "garbage").mkdir()
    (box.models / "garbage" / "config.json").write_text("{not json", encoding="utf-8")
    for name in ("badweights", "pickle"):
        (box.models / name).mkdir()
        (box.models / name / "config.json").write_text(
            (box.models / "tiny" / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    (box.models / "badweights" / "model.safetensors").write_bytes(b"\x00\xff" * 64)
    for name, claim in (("huge", dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=16,
                                      intermediate_size=8192)), ("positions", dict(max_position_embeddings=10**7))):
        shutil.copytree(box.models / "tiny", box.models / name)        # small weights, a config claiming GBs
        config = json.loads((box.models / name / "config.json").read_text(encoding="utf-8"))
        (box.models / name / "config.json").write_text(json.dumps({**config, **claim}), encoding="utf-8")
    (box.models / "pickle" / "pytorch_model.bin").write_bytes(pickle.dumps({"x": _Booby()}, protocol=2))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Iterator[tuple[Client, Sandbox]]:
    import app

    with sandbox(tmp_path_factory.mktemp("hostile-models")) as box:
        _populate(box, tiny_tokenizer)
        write_run(box.runs, tiny_tokenizer, steps=(2,))
        registry = ModelRegistry(runs_root=box.runs, allowed_dirs=(box.models,), default_dir=None)
        full = tiny_model(0)
        registry.pin("default", LoadedModel(full, tiny_tokenizer, full.config, "tiny test model"))
        services = Services(tokenizer=tiny_tokenizer, models=registry)
        with serve_app(app.create_app(services), box) as client:
            yield client, box


def loaded_as(key: str) -> Callable[[Any, Sandbox], None]:
    """The picker is now on ``key`` and the info names the model's layers."""
    def check(value: Any, box: Sandbox) -> None:
        dropdown, info = value
        assert dropdown["value"] == key.format(models=box.models), dropdown
        assert "2 layers" in info, info
    return check


OK = None
# (what the user typed, expected): a regex the error must match, or a check of the result.
# "{models}"/"{outside}" are the sandbox's allowed model folder and a folder outside it.
CASES: list[tuple[str, Any]] = [
    (EMPTY, "Choose a model"),
    (BLANK, "Choose a model"),
    ("../../etc/passwd", "allowed model folders"),
    ("/etc", "allowed model folders"),
    ("~/.ssh", "allowed model folders"),
    ("local:/etc/passwd", "allowed model folders"),
    ("local:{outside}/tiny", "allowed model folders"),                 # a real model, but not allowed
    ("{models}/../outside/tiny", "allowed model folders"),             # .. out of the allowed folder
    ("{models}/link", "allowed model folders"),                        # a symlink pointing outside
    ("models/tiny", "switched off"),                                   # not a folder here: a hub id, offline
    ("C:\\Windows\\System32", "allowed model folders"),
    ("http://evil.example/bert", "not a URL"),
    ("https://huggingface.co/google-bert/bert-base-uncased", "not a URL"),
    ("file:///etc/passwd", "not a URL"),
    ("hub:../../etc/passwd", "not a hub model id"),
    ("hub:owner/name", "switched off|offline"),
    ("google-bert/bert-base-uncased", "switched off|offline"),
    ("checkpoint:../../etc", "not a checkpoint name"),
    ("checkpoint:run-a/step-999999", "does not exist"),
    ("{models}/\x00evil", "control characters"),
    ("{models}/" + "a" * 300, "There is no model folder"),            # a name too long for the file system
    (TOO_HUGE, "too long"),
    ("x/" * 3000, "too long|allowed model folders"),
    (EMOJI, "neither a model key, a model folder nor a hub id"),
    ("\uff4f\uff57\uff4e\uff45\uff52/\uff4e\uff41\uff4d\uff45", "neither a model key, a model folder nor a hub id"),
    ("{models}/empty", "no config.json|not a model folder"),
    ("{models}/missing", "There is no model folder"),
    ("{models}/garbage", "not valid JSON"),
    ("{models}/badweights", "corrupt or unreadable"),
    ("{models}/pickle", "refusing|more than plain tensors"),
    ("{models}/huge", r"incomplete for a 16-layer BERT.*config\.json implies 8\d\d\.\dM parameters"),
    ("{models}/positions", r"position_embeddings\.weight has shape"),
    ("live", "There is no training run"),
    ("  default  ", loaded_as("default")),
    ("{models}/tiny", loaded_as("local:models/tiny")),       # its key names no server path
]


@pytest.mark.parametrize("case", CASES, ids=[repr(c[0][:40]) for c in CASES])
def test_hostile_model_source(served: tuple[Client, Sandbox], case: tuple[str, Any]) -> None:
    client, box = served
    typed, expected = case
    source = typed.replace("{models}", str(box.models)).replace("{outside}", str(box.outside))
    with box.no_stray_writes():
        outcome = call(client, source, api_name=API)
        if isinstance(expected, str):
            expect_error(outcome, expected)
        else:
            expected(expect_ok(outcome), box)
        dropdown, _ = expect_ok(call(client, "default", api_name=API))      # the app still loads models
        assert dropdown["value"] == "default"
    assert not (box.cwd / MARKER).exists() and not Path(MARKER).exists()

