"""Private events answer anyone, so each private handler gives nothing away (issue 27).

Gradio 6 hides an event declared ``api_visibility="private"`` from the API page and from ``gradio_client``,
but its server runs it for whoever asks: ``POST /gradio_api/queue/join`` with the event's ``fn_index`` (what
the page itself sends) or ``POST /gradio_api/call/<api_name>``, from a session that never loaded the page.
Nothing tells the page's requests from a script's. So, in a public app whose runs lie under /var/tmp (outside
the working and temp folders, as on a server):

* every private handler answers a forged path or key the same whether something exists there or not
  (a model folder outside the allowed ones, a file, a folder inside the runs folder, ``local:`` and
  ``checkpoint:`` keys that climb out with ``..``), in its model and run pickers, the "Load another model"
  box and the checkpoint table's row;
* no private handler's answer to the page's own values names a server folder;
* queued events are served through the queue only (``api_open=False``): ``/gradio_api/run/<name>``, which
  Gradio otherwise opens off a Space to skip the queue and its limits, refuses them.

Elsewhere: a one-slash name outside the allowed folders reads as a hub id (tests/explorer/test_model_registry.py),
and a listed checkpoint's row given as its server path is refused in public mode (tests/app/test_public_mode.py).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import httpx  # noqa: E402
import pytest  # noqa: E402
from gradio_client import Client  # noqa: E402

import app  # noqa: E402
from engine.training.worker.training_worker import TrainingWorker  # noqa: E402
from explorer.serving.access import AccessPolicy  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.app_helpers import launch  # noqa: E402
from support.finetune_helpers import save_tiny_model, word_tokenizer  # noqa: E402
from support.probing_helpers import write_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"q7x-(real|none)")             # the one part in which a forged pair differs
DURATIONS = re.compile(r'"(average_)?duration": [-0-9.e]+,? ?')


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Any]]:
    """The whole app in public mode over runs in /var/tmp, a model outside the allowed folders beside them."""
    root = Path(tempfile.mkdtemp(prefix="bert-explorer-private-", dir="/var/tmp"))
    tokenizer = word_tokenizer(["the cat sat on the mat"])
    runs, models = root / "runs", root / "models"
    save_tiny_model(models / "saved", tokenizer)
    save_tiny_model(root / "elsewhere" / "q7x-real", tokenizer)
    write_run(runs, tokenizer)
    (runs / "run-a" / "q7x-real").mkdir()
    worker = TrainingWorker(runs)
    registry = ModelRegistry(runs_root=runs, worker=worker, allowed_dirs=(models,),
                             default_dir=save_tiny_model(root / "default", tokenizer))
    services = Services(tokenizer=tokenizer, max_length=128, worker=worker, models=registry,
                        access=AccessPolicy(public=True, admin_token="correct horse"))
    demo = app.create_app(services, {"EXPLORER_PUBLIC": "1"})
    # One HTTP client for the module's ~600 calls: a new one per call (httpx.post) builds an SSL context each
    # time, ~45 ms of CPU, which made the forged-path test take 260 s on a loaded machine.
    http = httpx.Client(timeout=120)
    try:
        launch(demo, **app.launch_options({"EXPLORER_RUNS_DIR": str(runs)}))
        config = http.get(f"{demo.local_url}config").json()
        values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
        yield dict(root=root, runs=runs, demo=demo, base=f"{demo.local_url}gradio_api", values=values, http=http)
    finally:
        http.close()
        demo.close()
        worker.close(timeout_s=30)
        shutil.rmtree(root, ignore_errors=True)


def call(served: dict[str, Any], fn_index: int, data: list[Any], event_data: Any = None,
         session: str | None = None) -> tuple[str, Any]:
    """Run event ``fn_index`` as the page would, in ``session`` (a session that never loaded the page; a new
    one when not given): ("ok", outputs) or ("error", message)."""
    session, base, http = session or uuid.uuid4().hex, served["base"], served["http"]
    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": event_data}
    if not served["demo"].fns[fn_index].queue:                       # the page runs these without the queue
        response = http.post(f"{base}/run/predict", json=body)
        answer = response.json()
        return ("ok", answer["data"]) if response.status_code == 200 else ("error", answer.get("error"))
    joined = http.post(f"{base}/queue/join", json={**body, "trigger_id": None})
    assert joined.status_code == 200, joined.text
    with http.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
        for line in stream.iter_lines():
            message = json.loads(line[5:]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                output = message.get("output") or {}
                return ("ok", output.get("data")) if message.get("success") else ("error", output.get("error"))
    raise AssertionError(f"event {fn_index} never completed")


def private_handlers(demo: gr.Blocks) -> dict[int, Any]:
    """One private event (its fn_index) per handler the app serves privately."""
    first: dict[int, int] = {}
    for index, fn in demo.fns.items():
        if fn.api_visibility == "private" and fn.fn is not None:
            first.setdefault(id(fn.fn), index)
    return {index: demo.fns[index] for index in first.values()}


def page_values(served: dict[str, Any], fn: Any) -> list[Any]:
    """What the page sends for ``fn``'s inputs before anyone types: each component's value in the config."""
    return [served["values"].get(block._id) for block in fn.inputs]


def forged_pairs(served: dict[str, Any]) -> list[tuple[str, str]]:
    """(something that exists, the same shape that does not): paths and keys a stranger may try."""
    real, none = served["root"] / "elsewhere" / "q7x-real", served["root"] / "elsewhere" / "q7x-none"
    return [(str(real), str(none)),
            (str(served["runs"] / "run-a" / "q7x-real"), str(served["runs"] / "run-a" / "q7x-none")),
            ("local:models/../elsewhere/q7x-real", "local:models/../elsewhere/q7x-none"),
            ("checkpoint:../elsewhere/q7x-real", "checkpoint:../elsewhere/q7x-none"),
            (os.path.relpath(real), os.path.relpath(none))]


def forgeable(fn: Any) -> list[int]:
    """The inputs a stranger can put a path or key in: free-text pickers and the "Load another model" box."""
    return [j for j, block in enumerate(fn.inputs)
            if (isinstance(block, gr.Dropdown) and block.allow_custom_value)
            or (isinstance(block, gr.Textbox) and block.label == "Load another model")]


def seen(answer: tuple[str, Any]) -> str:
    """The answer as text, the forged name's differing part masked and timings dropped."""
    return DURATIONS.sub("", MARK.sub("q7x-*", json.dumps(answer, sort_keys=True, default=str)))


def server_folders(served: dict[str, Any]) -> list[str]:
    return [str(served["root"]), str(served["root"].resolve()), str(ROOT)]


def test_gradio_runs_a_private_event_for_a_session_that_never_loaded_the_page(served) -> None:
    demo = served["demo"]
    index = next(i for i, fn in demo.fns.items() if fn.api_name == "model_info")
    assert demo.fns[index].api_visibility == "private"
    status, (info,) = call(served, index, ["default"])
    assert status == "ok" and "**default**" in info                  # answered, to a stranger
    by_name = served["http"].post(f"{served['base']}/call/model_info", json={"data": ["default"]})
    assert by_name.status_code == 200 and "event_id" in by_name.json()
    with pytest.raises(ValueError, match="model_info"):              # only gradio_client holds back
        Client(demo.local_url, verbose=False).predict("default", api_name="/model_info")


def test_queued_events_are_served_through_the_queue_only(served) -> None:
    demo, base = served["demo"], served["base"]
    queued = [i for i, fn in demo.fns.items() if fn.queue and fn.api_name in ("model_info", "tokenize", "attribute")]
    assert len(queued) == 3
    for index in queued:
        response = served["http"].post(f"{base}/run/predict", json={"data": [], "fn_index": index})
        assert response.status_code == 404 and "join the queue" in response.text
    direct = next(i for i, fn in demo.fns.items() if fn.api_name == "attribute_form")     # declared queue=False
    assert not demo.fns[direct].queue and call(served, direct, page_values(served, demo.fns[direct]))[0] == "ok"


def test_every_private_handler_answers_a_forged_path_the_same_whether_it_exists_or_not(served) -> None:
    handlers = private_handlers(served["demo"])
    sessions = (uuid.uuid4().hex, uuid.uuid4().hex)      # one asks about what exists, one about what does not
    forged_inputs = 0
    for index, fn in handlers.items():
        defaults = page_values(served, fn) if forgeable(fn) else []
        for j in forgeable(fn):
            forged_inputs += 1
            for pair in forged_pairs(served):
                answers = [call(served, index, defaults[:j] + [value] + defaults[j + 1:], session=session)
                           for value, session in zip(pair, sessions)]
                assert seen(answers[0]) == seen(answers[1]), (fn.api_name, j, pair, answers)
    assert forged_inputs >= 30                                         # model pickers, run pickers, the load box
    pick = next(i for i, fn in handlers.items() if fn.api_name == "train_pick_checkpoint")
    for pair in forged_pairs(served):
        answers = [call(served, pick, [], {"index": [0, 0], "value": "x", "selected": True,
                                           "row_value": ["x", 3, "run-a", value]}, session=session)
                   for value, session in zip(pair, sessions)]
        assert answers[0] == answers[1] == ("error", "Pick a checkpoint from the table."), (pair, answers)


def test_no_private_handler_names_a_server_folder(served) -> None:
    handlers = private_handlers(served["demo"])
    assert len(handlers) >= 100
    session = uuid.uuid4().hex
    for index, fn in handlers.items():
        answer = json.dumps(call(served, index, page_values(served, fn), session=session), default=str)
        for folder in server_folders(served):
            assert folder not in answer, (fn.api_name, answer[:500])
