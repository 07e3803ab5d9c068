"""The Training tab end to end: launch in-process, drive /train_* with gradio_client."""
from __future__ import annotations

import shutil
import zipfile

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import explorer.page  # noqa: E402
from explorer.training import job as training_job  # noqa: E402
from explorer.training import tab as training_tab  # noqa: E402
from explorer.runs.status import status_markdown  # noqa: E402
from explorer.services import Services  # noqa: E402
from support.app_helpers import serve  # noqa: E402

TIMEOUT = 90.0
# preset, corpus, max documents, vocab, seq length, batch, lr, steps, mask rate, whole word, nsp
FAST = ["tiny", "shakespeare", 30, 300, 32, 8, 5e-4, 15, 0.15, False, True]


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[Client]:
    import app

    with serve(app.create_app(services)) as running:
        yield running


def _settings(**changes: Any) -> list[Any]:
    names = ["preset", "corpus", "max_documents", "vocab_size", "seq_length", "batch_size", "learning_rate",
             "steps", "mask_rate", "whole_word", "nsp"]
    values = dict(zip(names, FAST))
    values.update(changes)
    return [values[n] for n in names]


def _status(client: Client) -> tuple[Any, ...]:
    return tuple(client.predict(api_name="/train_status"))


def test_api_lists_training_endpoints(client: Client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for name in ("train_start", "train_pause", "train_resume", "train_stop", "train_save", "train_status"):
        assert f"/{name}" in endpoints
    assert "/train_refresh" not in endpoints


@pytest.mark.parametrize("change, message", [
    (dict(learning_rate=-1), "learning_rate"),
    (dict(batch_size=0), "Batch size"),
    (dict(steps=0), "Steps must be a whole number from 1"),
    (dict(seq_length=4), "Sequence length"),
    (dict(mask_rate=1.5), "mlm_probability"),
])
def test_bad_input_is_a_clear_error_and_app_keeps_serving(client: Client, change: dict, message: str) -> None:
    with pytest.raises(AppError, match=message):
        client.predict(*_settings(**change), api_name="/train_start")
    assert _status(client)[0].startswith("**idle**")  # nothing started; the app still answers


def test_save_without_a_run_is_a_clear_error(client: Client, services: Services) -> None:
    assert not services.get_worker().status().active  # runs before the end-to-end test starts one
    with pytest.raises(AppError, match="no run is training"):
        client.predict(api_name="/train_save")


@pytest.mark.slow
def test_train_end_to_end(client: Client, services: Services) -> None:
    first = client.predict(*_settings(), api_name="/train_start")
    assert "step" in first
    # Starting again while the first run is active warns, does not fail, and keeps the run.
    second = client.predict(*_settings(), api_name="/train_start")
    state = services.get_worker().status().state
    if state in ("preparing", "running", "paused", "stopping"):
        assert "already" in second
    deadline = time.monotonic() + TIMEOUT
    while True:
        outputs = _status(client)
        if outputs[0].startswith("**finished**") or outputs[0].startswith("**failed**"):
            break
        assert time.monotonic() < deadline, f"run did not finish: {outputs[0]}"
        time.sleep(0.5)
    status, curves, batch, masked, checkpoints = outputs
    assert status.startswith("**finished**"), status
    assert "step **15 / 15**" in status and "Traceback" not in status
    assert batch["type"] == "plotly" and curves["kind"] == "curves" and curves["reset"]   # /train_status: the whole run
    assert len(curves["points"]["train:mlm_loss"][0]) == 15 and curves["points"]["eval:eval_mlm_loss"][0]
    assert [c["title"] for c in curves["charts"]] == ["MLM loss", "NSP loss", "Accuracy", "Learning rate"]
    batch_fig = json.loads(batch["plot"])
    assert any(t["name"] == "→ [MASK] (80%)" for t in batch_fig["data"])
    assert masked["headers"] == training_tab.MASKED_COLUMNS and masked["data"]
    assert checkpoints["headers"] == training_tab.CHECKPOINT_COLUMNS
    names = [row[0] for row in checkpoints["data"]]
    assert "checkpoint-15" in names or any(n.endswith("15") for n in names), names
    shown = checkpoints["data"][0][3]
    assert not Path(shown).is_absolute() and shown.startswith(checkpoints["data"][0][2] + "/checkpoints/")
    assert (services.get_worker().runs_root / shown / "model.safetensors").is_file()  # no server path shown
    # Controls on an ended run are harmless no-ops.
    for api in ("/train_pause", "/train_resume", "/train_stop"):
        assert client.predict(api_name=api).startswith("**finished**")


def test_status_markdown_shows_error_without_traceback() -> None:
    from engine.training.worker.shared_state import WorkerStatus

    st = WorkerStatus("failed", "the run failed at step 3: RuntimeError: boom", step=2, total_steps=10,
                      error="RuntimeError: boom", traceback="Traceback (most recent call last): ...")
    text = status_markdown(st)
    assert "**failed**" in text and "❌ boom" in text and "Traceback" not in text and "RuntimeError" not in text


def test_make_spec_direct(services: Services) -> None:
    spec = training_job.make_spec(services, *_settings(whole_word=True, nsp=False))
    config = spec.training_config()
    assert (config.batch_size, config.max_seq_length, config.total_steps) == (8, 32, 15)
    assert (config.checkpoint_every, config.checkpoint_every_s) == (50, 300.0)     # by steps and by time
    assert config.whole_word_masking and not config.nsp and spec.vocab_size == 300
    with pytest.raises(ValueError, match="unknown preset"):
        training_job.make_spec(services, *_settings(preset="huge"))
    with pytest.raises(gr.Error):
        explorer.ui_errors.friendly_errors(training_job.make_spec)(services, *_settings(vocab_size=0))



def test_log_to_reaches_the_spec_and_the_run(client: Client, services: Services) -> None:
    """The form's "Log to" becomes the spec's report_to; through /train_start a TensorBoard run writes its logs."""
    assert training_job.make_spec(services, *_settings()).report_to == "none"
    given = ["builtin", "", None, "train"]                   # source, text, text_file, vocabulary: the defaults
    assert training_job.make_spec(services, *_settings(), *given, "tensorboard").report_to == "tensorboard"
    with pytest.raises(ValueError, match="Log to must be one of: none, TensorBoard; got 'wandb'"):
        training_job.make_spec(services, *_settings(), *given, "wandb")
    worker = services.get_worker()
    assert worker.join(TIMEOUT)
    names = ["preset", "corpus", "max_documents", "vocab_size", "seq_length", "batch_size", "learning_rate",
             "steps", "mask_rate", "whole_word", "nsp"]
    client.predict(**dict(zip(names, _settings(steps=4))), report_to="tensorboard", api_name="/train_start")
    assert worker.join(TIMEOUT) and worker.status().state == "finished", worker.status().message
    run = worker.status().run_dir
    assert json.loads((run / "run.json").read_text())["report_to"] == "tensorboard"
    assert [p.name.startswith("events.out.tfevents.") for p in (run / "logs").iterdir()] == [True]

def test_clicking_a_checkpoint_row_offers_it_as_a_model_zip(services: Services, tmp_path: Path) -> None:
    from gradio import helpers

    listed = services.get_worker().runs_root / "picked-run" / "checkpoints" / "step-000001"
    listed.mkdir(parents=True)
    for name in ("config.json", "training_state.pt"):  # with the weights, what makes it complete
        (listed / name).write_bytes(b"{}")
    save_file({"w": torch.zeros(2)}, str(listed / "model.safetensors"))    # weights whose header checks out
    weights = (listed / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    time.sleep(1.1)  # the worker caches its checkpoint listing for a second
    demo = explorer.page.build_app(services)
    fn = next(bf.fn for bf in demo.fns.values() if bf.api_name == "train_pick_checkpoint")

    def pick(path: Path) -> str | None:
        evt = gr.SelectData(None, {"index": [0, 0], "value": "checkpoint-1", "selected": True,
                                   "row_value": ["checkpoint-1", 1, "run", str(path)]})
        return fn(*helpers.special_args(fn, [], None, evt)[0])

    try:
        zipped = Path(pick(listed))
        assert zipped.name == "picked-run-step-000001.zip"
        with zipfile.ZipFile(zipped) as archive:                     # the model's files and its card
            assert {"config.json", "model.safetensors", "README.md"} <= set(archive.namelist())
            assert archive.read("model.safetensors") == weights and "training_state.pt" not in archive.namelist()
        assert pick(Path("picked-run/checkpoints/step-000001")) == str(zipped)  # as shown
        with pytest.raises(gr.Error, match="Pick a checkpoint from the table"):
            pick(Path("picked-run/checkpoints/step-000001/../step-000001"))  # only the exact listed text
        with pytest.raises(gr.Error, match="Pick a checkpoint from the table"):
            pick(tmp_path)  # a forged row naming weights outside the runs is refused
    finally:
        shutil.rmtree(listed.parent.parent)
    gone = gr.SelectData(None, {"index": [0, 0], "value": "x", "selected": True,
                                "row_value": ["x", 1, "run", str(tmp_path / "missing")]})
    with pytest.raises(gr.Error, match="Pick a checkpoint from the table"):  # as a forged row: no disk oracle
        fn(*helpers.special_args(fn, [], None, gone)[0])


def test_continue_a_run_through_the_api(client: Client, services: Services) -> None:
    worker = services.get_worker()
    client.predict(*_settings(steps=6), api_name="/train_start")
    assert worker.join(TIMEOUT)
    name = worker.status().run_dir.name
    with pytest.raises(AppError, match="already reached its total of 6 steps; give a larger total"):
        client.predict(run=name, api_name="/train_continue")
    with pytest.raises(AppError, match="is gone"):
        client.predict(run="run-that-never-was", api_name="/train_continue")
    with pytest.raises(AppError, match="New total steps must be a whole number"):
        client.predict(run=name, total_steps=2.5, api_name="/train_continue")
    started = client.predict(run=name, total_steps=9, api_name="/train_continue")
    assert name in started
    assert worker.join(TIMEOUT)
    status = _status(client)[0]
    assert status.startswith("**finished** · step **9 / 9**") and name in status, status
    assert any(label.startswith(f"{name} · step 9 / 9") for label, _ in training_tab.run_choices(services))


def test_after_a_control_the_next_tick_sends_the_status_again(services: Services) -> None:
    """A control writes the status itself ("stopping"); a tick racing it may already have sent "stopped" and
    marked it seen. So once the control's answer is drawn, the browser forgets what it was sent and ticks:
    the status can never stay on the control's word (seen in the e2e walk on a loaded machine)."""
    widgets: dict = {}
    with gr.Blocks() as demo:
        widgets.update(training_tab.build(services))
    dependencies = demo.get_config_file()["dependencies"]
    by_name = {d["api_name"]: d for d in dependencies}
    seen, timer = widgets["seen"]._id, widgets["timer"]._id
    for name in ("train_start", "train_pause", "train_resume", "train_stop", "train_save", "train_continue"):
        follow = [d for d in dependencies if d["trigger_after"] == by_name[name]["id"]
                  and not d["trigger_only_on_failure"]]
        assert any({seen, timer} <= set(d["outputs"]) for d in follow), name


def test_starting_or_continuing_while_a_run_is_active_warns_in_the_workers_words(services: Services,
                                                                                 monkeypatch) -> None:
    """The tab tells "a run is already active" by the worker's ``RunActiveError`` (not by its wording) and shows
    the worker's sentence as a warning, keeping the run; Continue says the same in its own words."""
    import re

    from engine.training.worker.errors import RunActiveError
    from explorer.training.runs import continue_run

    worker = services.get_worker()
    assert worker.join(TIMEOUT)
    worker.start(training_job.make_spec(services, *_settings(steps=3)))
    assert worker.join(TIMEOUT) and worker.status().state == "finished"
    short = worker.status().run_dir.name
    info = worker.start(training_job.make_spec(services, *_settings(steps=50_000)))
    warnings: list[str] = []
    monkeypatch.setattr(gr, "Warning", warnings.append)
    try:
        answer = training_job.start_run(services, *_settings())
        sentence = (rf"a training run is already (preparing|running) \({info.run_dir.name}\); "
                    "stop it before starting another")
        assert len(warnings) == 1 and re.fullmatch(sentence, warnings[0]), warnings
        assert answer.startswith(f"⚠️ {warnings[0]}\n\n**") and worker.status().run_id == info.run_id
        with pytest.raises(RunActiveError) as refused:
            worker.start(training_job.make_spec(services, *_settings()))
        assert refused.value.run_name == info.run_dir.name and refused.value.state.is_active
        with pytest.raises(ValueError, match=rf"^A training run is already (preparing|running); stop it before "
                                             rf"continuing {short}\.$"):
            continue_run(services, short, 60)
    finally:
        worker.stop(wait_s=30)
    assert worker.status().state == "stopped" and worker.status().run_id == info.run_id


def test_the_intro_says_what_the_default_run_shows_and_links_its_words() -> None:
    """The default run's NSP stays near 50% (measured, docs/design/training.md): the intro says so, and how many
    steps it takes, instead of promising a rise; MLM, NSP and loss open their glossary entries."""
    from explorer.glossary import gloss
    from explorer.training.tab import INTRO

    assert "stays near 50% in the\ndefault 300 steps" in INTRO and "~900 steps" in INTRO
    for term in ("MLM", "NSP", "loss"):
        assert gloss(term) in INTRO
