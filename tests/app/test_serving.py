"""Nothing leaks from a public app: the runs folder is never served (only the export zip the Training tab
offers is), no value sent to a client names a server path, and the private download event answers a
forged path the same whether or not something exists there.

The runs folder lies outside the working folder and the temp folder (under /var/tmp), as on a server, after a
real pretraining run on pasted text (``corpus.txt``) and a real fine-tune of an uploaded CSV (``uploads/``).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import httpx  # noqa: E402
import pytest  # noqa: E402
from gradio import helpers  # noqa: E402
from gradio_client import Client, handle_file  # noqa: E402

import app  # noqa: E402
from engine.training.worker.training_worker import TrainingWorker  # noqa: E402
from explorer.serving.access import AccessPolicy  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.app_helpers import launch  # noqa: E402
from support.finetune_helpers import classification_rows, save_tiny_model, word_tokenizer, write_csv  # noqa: E402
from support.training_inputs import OBJECTIVE_DEFAULTS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "correct horse battery staple"
TEXT = "\n\n".join(f"the cat sat on the mat number {i}. the dog ran to the tree {i}." for i in range(40))
#            preset  corpus  docs vocab seq batch lr    steps mask whole nsp  source pasted file vocab log
PRETRAIN = ["tiny", "shakespeare", 200, 200, 32, 4, 5e-4, 3, 0.15, False, False, "text", TEXT, None, "train", "none",
            *OBJECTIVE_DEFAULTS]
FINETUNE = dict(model_key="default", task="classification", data_source="upload", example="", labels="",
                steps=3, batch_size=4, learning_rate=1e-4, seq_length=32, eval_fraction=0.25, report_to="none")


def _wait_idle(worker: TrainingWorker, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while worker.status().active:
        assert time.monotonic() < deadline, worker.status()
        time.sleep(0.1)
    assert worker.status().state == "finished", (worker.status().state, worker.status().error)


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Any]]:
    """The whole app in public mode over runs in /var/tmp, after one real pretraining and one fine-tune run."""
    root = Path(tempfile.mkdtemp(prefix="bert-explorer-serving-", dir="/var/tmp"))
    rows = classification_rows(24)
    tokenizer = word_tokenizer([t for t, _ in rows] + TEXT.split())
    runs, models = root / "runs", root / "models"
    save_tiny_model(models / "saved", tokenizer)
    worker = TrainingWorker(runs)
    registry = ModelRegistry(runs_root=runs, worker=worker, allowed_dirs=(models,),
                             default_dir=save_tiny_model(root / "default", tokenizer))
    services = Services(tokenizer=tokenizer, max_length=128, worker=worker, models=registry,
                        access=AccessPolicy(public=True, admin_token=TOKEN))
    demo = app.create_app(services, {"EXPLORER_PUBLIC": "1"})
    try:
        launch(demo, **app.launch_options({"EXPLORER_RUNS_DIR": str(runs)}))
        client = Client(demo.local_url, verbose=False, download_files=str(root / "client"))
        answers = {"train_start": client.predict(*PRETRAIN, TOKEN, api_name="/train_start")}
        _wait_idle(worker)
        upload = handle_file(str(write_csv(root / "mine.csv", rows)))
        answers["finetune_start"] = client.predict(**FINETUNE, data_file=upload, token=TOKEN,
                                                   api_name="/finetune_start")
        _wait_idle(worker)
        answers["train_status"] = client.predict(api_name="/train_status")
        answers["finetune_status"] = client.predict(api_name="/finetune_status")
        answers["load_model"] = client.predict(str(models / "saved"), TOKEN, api_name="/load_model")
        yield dict(root=root, runs=runs, demo=demo, services=services, client=client, answers=answers)
    finally:
        demo.close()
        worker.close(timeout_s=30)
        shutil.rmtree(root, ignore_errors=True)


def _pick(served: dict[str, Any], shown: str) -> Any:
    """The private ``train_pick_checkpoint`` event, as a click on a (possibly forged) table row runs it."""
    fn = next(f.fn for f in served["demo"].fns.values() if f.api_name == "train_pick_checkpoint")
    evt = gr.SelectData(None, {"index": [0, 0], "value": "x", "selected": True, "row_value": ["x", 3, "r", shown]})
    return fn(*helpers.special_args(fn, [], None, evt)[0])


def test_the_runs_hold_what_a_stranger_must_not_read(served: dict[str, Any]) -> None:
    names = {p.name for p in served["runs"].rglob("*") if p.is_file()}
    assert {"corpus.txt", "run.json", "metrics.jsonl", "model.safetensors"} <= names
    assert [p.suffix for p in (served["runs"] / "uploads").iterdir()] == [".csv"]       # the kept upload
    assert app.launch_options({"EXPLORER_RUNS_DIR": str(served["runs"])})["blocked_paths"] == \
        [str(served["runs"].resolve())]


def test_no_file_of_the_runs_folder_is_served(served: dict[str, Any]) -> None:
    base = served["demo"].local_url
    files = [p for p in served["runs"].rglob("*") if p.is_file()]
    assert len(files) >= 10
    for path in files:
        for route in (f"gradio_api/file={path}", f"gradio_api/file/{path}", f"file={path}"):
            response = httpx.get(base + route, timeout=30)
            assert response.status_code in (403, 404), (route, response.status_code)
            assert TEXT[:30] not in response.text


def test_the_offered_export_zip_is_served(served: dict[str, Any]) -> None:
    checkpoint = next(c for c in served["services"].get_worker().checkpoints()
                      if c.run.name.startswith("classification-"))         # runs are named <task>-<time>
    shown = checkpoint.path.relative_to(served["runs"]).as_posix()
    exported = Path(_pick(served, shown))
    assert exported.suffix == ".zip" and served["runs"] not in exported.parents
    download = next(b for b in served["demo"].blocks.values() if isinstance(b, gr.File) and "chosen checkpoint"
                    in (b.label or ""))
    cached = download.move_resource_to_block_cache(str(exported))   # what Gradio does with the handler's answer
    response = httpx.get(f"{served['demo'].local_url}gradio_api/file={cached}", timeout=30)
    assert response.status_code == 200 and response.content == exported.read_bytes()


def test_the_private_download_event_answers_a_forged_path_the_same_either_way(served: dict[str, Any]) -> None:
    existing = served["root"] / "models" / "saved"                     # a real model folder, not a checkpoint
    answers = []
    for forged in (str(existing), str(served["root"] / "nothing-here"), "saved", "../models/saved"):
        with pytest.raises(gr.Error) as err:
            _pick(served, forged)
        answers.append(err.value.message)
    assert answers == ["Pick a checkpoint from the table."] * 4


def test_no_answer_and_no_config_names_a_server_path(served: dict[str, Any]) -> None:
    secrets = [str(served["root"]), str(served["root"].resolve()), str(ROOT)]
    config = httpx.get(f"{served['demo'].local_url}config", timeout=30).text
    for secret in secrets:
        assert secret not in config
        for name, answer in served["answers"].items():
            assert secret not in repr(answer), (name, answer)
    picker, info = served["answers"]["load_model"]
    key = picker["value"] if isinstance(picker, dict) else picker
    assert key == "local:models/saved" and "local models/saved" in info
    assert served["services"].registry().listed(str(served["root"] / "models" / "saved"))  # the same model
    assert "**finished**" in served["answers"]["finetune_status"][0]
