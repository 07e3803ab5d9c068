"""Shared pieces of the hostile-input suite (tests/test_hostile_*.py).

A *sandbox* per module: a fresh working directory, runs folder, temp folders and an "outside"
folder, with ``EXPLORER_RUNS_DIR``, ``GRADIO_TEMP_DIR``, ``TMPDIR`` and the cwd pointing into it,
so a case can check that nothing was written anywhere but the app's data (runs) and temp folders.
``call`` drives one api_name through ``gradio_client`` with a time limit and collects the
error message and any ``gr.Warning``; ``assert_human`` says a message is fit for a person.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import explorer.page  # noqa: E402
from support.app_helpers import CLIENT_TIMEOUT_S, launch  # noqa: E402

CALL_TIMEOUT_S = 30.0
MAX_CHARS = 100_000
# Text a stranger may type.
EMPTY = ""
BLANK = "  \n\t \u00a0 "
HUGE = ("the cat sat on the mat. " * 5000)[:MAX_CHARS]      # exactly the limit: accepted, truncated
TOO_HUGE = "a" * (MAX_CHARS + 1)
BEYOND_POSITIONS = "the cat sat on the mat and the dog ran in the house. " * 40   # ~500 tokens vs 64 positions
ONLY_SPECIALS = "[CLS] [SEP] [PAD] [UNK] [SEP]"
LITERAL_SPECIALS = "the [CLS] cat [SEP] sat [PAD] on [PAD] the mat"
EMOJI = "\U0001F600 \U0001F389 \U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467"
CJK = "\u6771\u4eac\u90fd\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\ud55c\uad6d\uc5b4"
RTL = "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u202eevil\u202c"
COMBINING = "e\u0301 n\u0303 a\u0308 " + "z" + "\u0336\u0334\u0335" * 30
CONTROL = "the\x00cat\x07sat\x1b[31m on\x7f the\x0bmat\r\n"
ZERO_WIDTH = "the\u200bcat\u200c sat\u200d on\ufeff the\u2060mat"
LONE_SURROGATE = "the cat \ud800 sat"
CONTROL_ONLY = "\x00\x01\x02\u200b\ufeff"

_CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")
_LEAKS = ("Traceback", 'File "', "Something went wrong", " object at 0x", "site-packages")


def assert_human(message: str | None) -> None:
    """A message a person can act on: present, not generic, no stack trace or exception class names."""
    assert message and message.strip(), "empty message"
    assert message.strip() not in ("Error", "error"), "generic 'Error' message"
    assert len(message.strip()) >= 15, f"too terse: {message!r}"
    for leak in _LEAKS:
        assert leak not in message, f"leaks {leak!r}: {message[:300]!r}"
    assert not _CLASS_NAME.search(message), f"leaks an exception class name: {message[:300]!r}"


@dataclass
class Outcome:
    """What a call did: its value, or the error message shown; plus warnings."""

    value: Any = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def call(client: Client, *args: Any, api_name: str, timeout: float = CALL_TIMEOUT_S) -> Outcome:
    """Call ``api_name``; never hangs longer than ``timeout`` (a hang fails the test)."""
    job = client.submit(*args, api_name=api_name)
    outcome = Outcome()
    try:
        outcome.value = job.result(timeout=timeout)
    except AppError as exc:
        outcome.error = str(exc)
    updates = job.communicator.updates if job.communicator is not None else queue.Queue()
    while True:
        try:
            update = updates.get_nowait()
        except (queue.Empty, asyncio.QueueEmpty):
            break
        log = getattr(update, "log", None)
        if log and str(log[1]).lower() == "warning":
            outcome.warnings.append(str(log[0]))
    for warning in outcome.warnings:
        assert_human(warning)
    return outcome


def call_raw(client: Client, api_name: str, body: str, timeout: float = CALL_TIMEOUT_S) -> Outcome:
    """POST a hand-written JSON body (``{"data": [...]}``) to ``api_name`` as any HTTP client could,
    e.g. with ``\\ud800`` escapes that no well-behaved client sends; read the event stream's answer."""
    import httpx

    base = f"{client.src.rstrip('/')}/gradio_api/call/{api_name.lstrip('/')}"
    with httpx.Client(timeout=timeout) as http:
        posted = http.post(base, content=body.encode("ascii"), headers={"Content-Type": "application/json"})
        assert posted.status_code == 200, posted.text
        stream = http.get(f"{base}/{posted.json()['event_id']}").text
    events = re.findall(r"^event: (\w+)\ndata: (.*)$", stream, re.MULTILINE)
    final = [(kind, data) for kind, data in events if kind in ("complete", "error")]
    assert final, f"no answer in the event stream: {stream[:300]!r}"
    kind, data = final[-1]
    value = json.loads(data) if data and data != "null" else None
    if kind == "complete":
        return Outcome(value=value)
    message = value.get("error") if isinstance(value, dict) else value
    return Outcome(error=message if isinstance(message, str) else "Error")     # no message: Gradio's generic one


def expect_error(outcome: Outcome, match: str) -> None:
    """The call failed with a human message matching the regex ``match``."""
    assert outcome.error is not None, f"expected an error matching {match!r}, got a result"
    assert_human(outcome.error)
    assert re.search(match, outcome.error, re.IGNORECASE), f"{match!r} not in {outcome.error!r}"


def expect_ok(outcome: Outcome) -> Any:
    """The call succeeded (any warnings already checked); its value."""
    assert outcome.error is None, f"unexpected error: {outcome.error!r}"
    return outcome.value


@dataclass
class Sandbox:
    """The folders one module's app may (runs, tmp, gradio, client) and may not (cwd, outside) write."""

    root: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    def allowed(self) -> tuple[Path, ...]:
        return tuple(self.root / name for name in ("runs", "tmp", "gradio", "client"))

    def files(self) -> set[Path]:
        return {p for p in self.root.rglob("*") if not p.is_dir()}

    @contextlib.contextmanager
    def no_stray_writes(self) -> Iterator[None]:
        """Fail if the body creates a file outside the runs and temp folders."""
        before = self.files()
        yield
        stray = [p for p in self.files() - before if not any(a in p.parents for a in self.allowed())]
        assert not stray, f"files written outside the app's data folders: {stray}"


@contextlib.contextmanager
def sandbox(root: Path) -> Iterator[Sandbox]:
    """Point the runs folder, temp folders and cwd into ``root`` for the duration."""
    box = Sandbox(root)
    for name in ("runs", "models", "outside", "cwd", "tmp", "gradio", "client"):
        (root / name).mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("EXPLORER_PUBLIC", raising=False)          # the private (default) mode's endpoints
        mp.setenv("EXPLORER_RUNS_DIR", str(box.runs))
        mp.setenv("EXPLORER_MODEL_DIRS", str(box.models))
        mp.setenv("GRADIO_TEMP_DIR", str(root / "gradio"))
        mp.setenv("TMPDIR", str(root / "tmp"))
        mp.setattr(tempfile, "tempdir", str(root / "tmp"))
        mp.chdir(box.cwd)
        yield box


@contextlib.contextmanager
def serve_app(demo: gr.Blocks, box: Sandbox) -> Iterator[Client]:
    """Launch ``demo`` on loopback (queue as app.create_app sets it), yield a client, close afterwards."""
    launch(demo, theme=explorer.page.THEME, css=explorer.page.CSS)
    try:
        yield Client(demo.local_url, verbose=False, download_files=str(box.root / "client"),
                     httpx_kwargs={"timeout": CLIENT_TIMEOUT_S})
    finally:
        demo.close()


Case = tuple[str, dict[str, Any], Any]  # (api_name, changed inputs, error text | result check | None)


def inputs(defaults: dict[str, dict[str, Any]], api: str, **changes: Any) -> list[Any]:
    """The endpoint's positional inputs: its ``defaults`` with ``changes``."""
    values = {**defaults[api], **changes}
    assert set(values) == set(defaults[api]), f"unknown input in {changes}"
    return list(values.values())


def case_id(case: Case) -> str:
    """A readable pytest id: the endpoint and the start of each changed input."""
    api, changes, _ = case
    shown = ",".join(f"{k}={str(v)[:12]!r}" for k, v in changes.items()) or "normal"
    return f"{api[1:]}[{shown}]"


def run_case(client: Client, box: Sandbox, defaults: dict[str, dict[str, Any]], case: Case) -> None:
    """Call the endpoint with the case's inputs, check the message or result, nothing written
    outside the sandbox, and that a normal call to the same endpoint still works afterwards."""
    api, changes, expected = case
    with box.no_stray_writes():
        outcome = call(client, *inputs(defaults, api, **changes), api_name=api)
        if isinstance(expected, str):
            expect_error(outcome, expected)
        else:
            value = expect_ok(outcome)
            if expected is not None:
                expected(value)
        expect_ok(call(client, *inputs(defaults, api), api_name=api))  # the app still serves this endpoint


@contextlib.contextmanager
def served_default_app(root: Path) -> Iterator[tuple[Client, Sandbox]]:
    """The whole app on its default services (the bundled model, a training worker) inside a sandbox at
    ``root``: the training and fine-tuning controls' hostile tests. The worker is closed on exit."""
    import app
    from explorer.services import default_services

    with sandbox(root) as box:
        services = default_services(runs_root=box.runs)
        try:
            with serve_app(app.create_app(services), box) as client:
                yield client, box
        finally:
            services.get_worker().close(timeout_s=30)
