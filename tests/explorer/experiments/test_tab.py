"""The Experiments tab as its handlers see it: a tiny two-arm experiment started from the form runs in the
background while the tick sends its status, the arms' curves (everything once, then only new points) and, once
measured, ours beside the paper's with a verdict and three downloads; Stop stops it between steps and Start again
continues it; bad input, a second start, a training run and public mode without the token are refused with a
sentence and start nothing; while it trains the Training and Fine-tune tabs' Start refuse."""
from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest

from engine.experiments.runner import seed_dir
from explorer.experiments import tab as experiments_tab
from explorer.experiments.background import ExperimentBusy, ExperimentJob, ExperimentRunner, runner_for
from explorer.experiments.form import make_job
from explorer.experiments.live import LIVE_OUTPUTS, live_update
from explorer.experiments.progress import CurveReaders
from explorer.serving.access import AccessPolicy
from explorer.services import Services, default_services
from explorer.finetune.actions import start as finetune_start
from explorer.training.job import start_run
from engine.training.runs.run_folder import RunFolder
from support.tiny_experiment import TINY, offered

pytestmark = pytest.mark.usefixtures("one_thread")
SKIP = gr.skip()


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    svc = default_services(runs_root=tmp_path_factory.mktemp("runs"))
    yield svc
    if svc.experiments is not None:
        svc.experiments.stop()
        svc.experiments.wait(120)
    svc.get_worker().close(timeout_s=30)


@pytest.fixture(scope="module")
def fns(services: Services) -> Iterator[dict[str, Any]]:
    with offered():
        with gr.Blocks(analytics_enabled=False) as demo:
            experiments_tab.build(services)
        yield {fn.api_name: fn.fn for fn in demo.fns.values() if fn.api_name}


def _tick(fns: dict[str, Any], seen: dict | None) -> tuple[tuple[Any, ...], dict]:
    out = fns["experiment_tick"](seen)
    return out[:LIVE_OUTPUTS], out[LIVE_OUTPUTS + 2]


def _take(fns: dict[str, Any], seen: dict | None, points: dict[str, list[int]], statuses: list[str]) -> dict:
    """One tick, as the page takes it: the status kept, the curves' new points appended (a reset starts over)."""
    outputs, seen = _tick(fns, seen)
    if outputs[0] != SKIP:
        statuses.append(outputs[0])
    if outputs[1] != SKIP:
        if outputs[1]["reset"]:
            points.clear()
        for sid, columns in outputs[1]["points"].items():
            assert not points.get(sid) or columns[0][0] > points[sid][-1]   # only new points come
            points.setdefault(sid, []).extend(columns[0])
    return seen


def _until(check, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.mark.parametrize(("form", "words"), [
    (("bert-table99", "quick", None, None), "There is no experiment 'bert-table99'; choose one of: tiny-mix"),
    (("tiny-mix", "huge", None, None), "Scale must be one of quick, default"),
    (("tiny-mix", "quick", -1, None), "Seeds must be a whole number from 1 to 10, got -1."),
    (("tiny-mix", "quick", 11, None), "Seeds must be a whole number from 1 to 10, got 11."),
    (("tiny-mix", "quick", None, -5), "Steps must be a whole number from 1 to 100,000, got -5."),
    (("tiny-mix", "quick", "many", None), "Seeds must be a whole number, got 'many'."),
    (("tiny-mix", "quick", None, 100_001), "Steps must be a whole number from 1 to 100,000"),
    (("tiny-mix", "quick", None, 2.5), "Steps must be a whole number from 1 to 100,000, got 2.5."),
])
def test_bad_input_is_refused_in_a_sentence_and_starts_nothing(services: Services, fns, form, words) -> None:
    with offered(), pytest.raises(gr.Error, match=words.replace("(", r"\(").replace(")", r"\)")):
        fns["experiment_start"](*form)
    assert not runner_for(services).running
    assert not (runner_for(services).root / "tiny-mix").exists()


def test_an_empty_or_zero_field_keeps_the_scales_value() -> None:
    with offered():
        assert make_job("tiny-mix", "quick").scale == TINY.quick
        assert make_job("tiny-mix", "quick", 2, 30).scale == TINY.quick.with_changes(seeds=2, steps=30)
        assert make_job("tiny-mix", "default", "", 0).scale == TINY.full           # an emptied box sends 0


def test_public_mode_without_the_admin_token_starts_nothing(tmp_path: Path) -> None:
    svc = default_services(runs_root=tmp_path)
    svc.access = AccessPolicy(public=True, admin_token="s3cret")
    try:
        with offered():
            with gr.Blocks(analytics_enabled=False) as demo:
                experiments_tab.build(svc)
            start = next(fn.fn for fn in demo.fns.values() if fn.api_name == "experiment_start")
            for token in ("", "wrong"):
                with pytest.raises(gr.Error, match="only the admin may start an experiment"):
                    start("tiny-mix", "quick", None, None, token)
        assert not runner_for(svc).running and not (tmp_path / "experiments").exists()
    finally:
        svc.get_worker().close(timeout_s=30)


def test_a_training_run_or_another_experiment_refuses_a_start(tmp_path: Path) -> None:
    runner = ExperimentRunner(tmp_path, busy=lambda: "A pretraining run is running: stop it first.")
    with offered(), pytest.raises(ExperimentBusy, match="A pretraining run is running"):
        runner.start(make_job("tiny-mix", "quick"))
    assert not runner.running and not (tmp_path / "tiny-mix").exists()


@pytest.mark.slow
def test_an_experiment_runs_live_stops_continues_and_ends_in_the_papers_table(services: Services, fns) -> None:
    runner = runner_for(services)
    first_arm = seed_dir(runner.root, TINY, TINY.arms[0], 0, TINY.quick) / "pretrain"
    outputs, seen = _tick(fns, None)
    assert "No experiment started yet" in outputs[0]
    with offered():
        said = fns["experiment_start"]("tiny-mix", "quick", None, None)
    assert "Started **tiny-mix**: 2 arms × 1 seed(s), 12 steps each" in said
    with offered():                                                   # one experiment at a time
        again = fns["experiment_start"]("tiny-mix", "quick", None, None)
    assert "The experiment tiny-mix is running" in again
    # while it trains, the Training and Fine-tune tabs' Start refuse (and start nothing)
    assert "The experiment tiny-mix is training" in start_run(services, "tiny")
    assert "The experiment tiny-mix is training" in finetune_start(services, "default", "classification", "example",
                                                                   None, None, None, 4, 8, 1e-4, 64, 0.2)
    assert not services.get_worker().status().active

    outputs, seen = _tick(fns, None)
    assert "Training" in outputs[0] and "tiny-mix" in outputs[0]
    curves = outputs[1]
    assert curves["reset"] and curves["charts"][0]["title"] == "MLM loss per arm"
    assert [s["name"] for s in curves["charts"][0]["series"]] == ["80/10/10 (BERT's)", "100% [MASK]"]

    # stop in the first arm's pretraining, after its first logged step
    _until(lambda: RunFolder(first_arm).metrics_path.is_file() and '"train"' in
           RunFolder(first_arm).metrics_path.read_text(encoding="utf-8"))
    assert "stopping" in fns["experiment_stop"]()
    assert runner.wait(300) and runner.status().state == "stopped"
    outputs, seen = _tick(fns, seen)
    assert "Stopped" in outputs[0] and "press Start to continue" in outputs[0]
    assert not (first_arm.parent / "results.json").exists()
    stopped_at = RunFolder(first_arm).latest()
    assert stopped_at is not None and stopped_at.step < 12            # a checkpoint where it stopped

    with offered():
        assert "Started" in fns["experiment_start"]("tiny-mix", "quick", None, None)
    points: dict[str, list[int]] = {}
    statuses = []
    while runner.running:
        seen = _take(fns, seen, points, statuses)
        time.sleep(0.3)
    assert runner.wait(60)
    time.sleep(1.1)                                                    # the runs' files are read once a second
    seen = _take(fns, seen, points, statuses)
    assert runner.status().state == "finished", runner.status()
    outputs, seen = _tick(fns, None)                                   # a new page gets everything
    table, files = outputs[2], outputs[3]
    assert any("Arm `mix-100-0-0`" in s for s in statuses) and "Finished" in outputs[0]
    assert set(points) == {"train:arm0_seed0", "train:arm1_seed0"} and max(points["train:arm1_seed0"]) == 12
    assert RunFolder(first_arm).latest().step == 12                    # continued to its end
    assert "| arm | paper: MNLI | ours: held-out masked-token accuracy |" in table
    assert "| 80/10/10 (BERT's) | 84.2 |" in table and "| 100% [MASK] | 84.3 |" in table
    assert "BERT's mix and 100% [MASK] fine-tune about equally: **one seed, no spread to judge by" in table
    assert "scale: tiny preset" in table and "Partial" not in table
    by_name = {Path(f).name: Path(f).read_text(encoding="utf-8") for f in files}
    rows = list(csv.DictReader(io.StringIO(by_name["tiny-mix-table.csv"])))
    assert [r["arm"] for r in rows] == ["mix-80-10-10", "mix-100-0-0"] and rows[0]["MNLI"] == "84.2"
    whole = json.loads(by_name["tiny-mix-table.json"])
    assert whole["experiment"] == "tiny-mix" and whole["claims"][0]["verdict"].startswith("one seed")
    curve_rows = list(csv.DictReader(io.StringIO(by_name["tiny-mix-curves.csv"])))
    assert {(r["arm"], r["kind"]) for r in curve_rows} >= {("mix-80-10-10", "train"), ("mix-100-0-0", "eval")}
    later, _ = _tick(fns, seen)                                         # nothing moved: nothing sent
    assert all(o == SKIP for o in later)


def test_a_failed_experiment_says_why_without_the_server_path(tmp_path: Path) -> None:
    runner = ExperimentRunner(tmp_path / "experiments")
    runner.start(ExperimentJob(TINY, TINY.quick.with_changes(preset="enormous")))
    assert runner.wait(120)
    st = runner.status()
    assert st.state == "failed" and "enormous" in st.error and str(tmp_path) not in st.error
    outputs, _, active = live_update(runner, CurveReaders(), None)
    assert "Failed" in outputs[0] and "Error:" in outputs[0] and "enormous" in outputs[0]
    assert outputs[2].startswith("The table appears here once the first arm is measured")
    assert runner.start(ExperimentJob(TINY, TINY.quick)).active          # a failed one can be started again
    runner.stop()
    assert runner.wait(300) and runner.status().state == "stopped"
