"""The run browser: runs that the real command line writes into the app's runs folder, one finished before, one
still training and one continued with more steps, are listed by the Training tab and followed there (status,
curves, checkpoints), compared, smoothed, on a log axis, the continue marked, in a public app that names no
server path."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Iterator

import gradio as gr
import pytest

import app
from engine.training.runs.state import read_metrics
from explorer.serving.access import AccessPolicy
from explorer.services import Services, default_services
from explorer.runs.watch.section import WATCH_SECONDS
from support.cli_helpers import ROOT, run_cli

TINY = ["--preset", "tiny", "--max-documents", "20", "--seq-len", "32", "--vocab-size", "300", "--threads", "1",
        "--no-progress"]
WAIT_S = 240.0           # a generous bound on a busy machine; the tests wait on states, not on time


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A public app over an empty runs folder (watching is open to all, like /train_status)."""
    runs = tmp_path_factory.mktemp("runs")
    services: Services = default_services(runs_root=runs)
    services.access = AccessPolicy(public=True)
    demo = app.create_app(services, {"EXPLORER_PUBLIC": "1"})
    yield {"runs": runs, "demo": demo, "services": services}
    services.get_worker().close(timeout_s=30)


def _handler(demo: Any, api_name: str) -> Callable[..., Any]:
    return next(f.fn for f in demo.fns.values() if f.api_name == api_name)


def _steps(figure: Any) -> list[list[int]]:
    return [list(trace.x) for trace in figure.data]


def test_a_finished_command_line_run_is_listed_and_its_curves_have_its_logged_steps(served: dict[str, Any]) -> None:
    runs, demo = served["runs"], served["demo"]
    result = run_cli([*TINY, "--steps", "4", "--run-dir", str(runs / "cli-run")])
    assert result.returncode == 0, result.stderr[-3000:]
    listed, compare_list = _handler(demo, "train_watch_runs")()
    assert [value for _, value in listed.choices] == [value for _, value in compare_list.choices] == ["cli-run"]
    assert listed.choices[0][0].startswith("cli-run · step 4 / 4 · 1 checkpoint")
    status, mlm, nsp, accuracy, lr, table, seen, timer = _handler(demo, "train_watch")("cli-run")
    assert timer.value == WATCH_SECONDS                                        # a picked run ticks quickly
    records = read_metrics(runs / "cli-run" / "metrics.jsonl")
    logged = [r["step"] for r in records if r["kind"] == "train"]
    assert logged == [1, 2, 3, 4]
    assert _steps(mlm) == [logged, [r["step"] for r in records if r["kind"] == "eval"]]     # train, then eval
    assert list(mlm.data[0].y) == [r["mlm_loss"] for r in records if r["kind"] == "train"]
    assert _steps(lr) == [logged]
    assert status.startswith("**finished** · step **4 / 4** · run `cli-run`")
    keys = {choice.label for choice in served["services"].registry().choices()}
    assert table["checkpoint"].tolist() == ["step-000004"] and table["in the model picker"].tolist()[0] in keys
    shown = repr((status, table.to_dict(), listed.choices, seen))
    assert str(runs) not in shown and str(ROOT) not in shown                   # names only, never server paths


def test_a_continued_run_is_marked_where_its_learning_rate_jumps_and_compared(served: dict[str, Any]) -> None:
    runs, demo = served["runs"], served["demo"]
    result = run_cli([*TINY, "--steps", "4", "--run-dir", str(runs / "continued")])
    assert result.returncode == 0, result.stderr[-3000:]
    shutil.copytree(runs / "continued", runs / "before-continue")     # the 4-step run as it was, to compare
    result = run_cli(["--resume", str(runs / "continued"), "--steps", "8", "--threads", "1", "--no-progress"])
    assert result.returncode == 0, result.stderr[-3000:]
    lrs = {r["step"]: r["lr"] for r in read_metrics(runs / "continued" / "metrics.jsonl") if r["kind"] == "train"}
    assert sorted(lrs) == list(range(1, 9)) and lrs[5] > lrs[4]          # a new total re-planned the schedule
    status, mlm, nsp, accuracy, lr, table, seen, timer = _handler(demo, "train_watch")(
        "continued", "before-continue", 0.6, True)
    assert [trace.name for trace in lr.data if trace.showlegend is not False] == ["continued", "before-continue"]
    assert [shape.x0 for shape in lr.layout.shapes] == [4]               # only the continued run jumps, at step 4
    [marker] = [trace for trace in lr.data if trace.hovertemplate and "continued at" in trace.hovertemplate]
    assert list(marker.x) == [4] and marker.hovertemplate.startswith("continued at step 4: lr ")
    assert lr.layout.yaxis.type == "log" and mlm.layout.yaxis.type == "log"
    assert {trace.name for trace in mlm.data} >= {"continued · train", "before-continue · train"}
    assert "Compared with `before-continue` (step 4 / 4)" in status and "step **8 / 8**" in status
    assert str(runs) not in repr((status, table.to_dict(), seen))
    *view, run_list, compare_list, _, _ = _handler(demo, "train_watch_tick")("continued", seen, "before-continue",
                                                                              0.6, True)
    assert all(output == gr.skip() for output in view)                  # the same view of runs that did not move
    assert [value for _, value in compare_list.choices] == [value for _, value in run_list.choices]
    assert {"continued", "before-continue"} <= {value for _, value in compare_list.choices}


def test_a_run_being_written_is_followed_while_it_trains(served: dict[str, Any]) -> None:
    runs, demo = served["runs"], served["demo"]
    tick = _handler(demo, "train_watch_tick")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "engine.pretrain", *TINY, "--steps", "100000", "--checkpoint-every", "0",
               "--checkpoint-every-s", "0", "--eval-every", "0", "--run-dir", str(runs / "live-run")]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        outputs = _tick_until(tick, process, lambda out: "**running**" in out[0] and len(_train_steps(out)) >= 3)
        first = _train_steps(outputs)
        assert "live-run" in [value for _, value in outputs[-1].choices]          # listed while it trains
        outputs = _tick_until(tick, process, lambda out: len(_train_steps(out)) > len(first))   # and it grows
        steps = _train_steps(outputs)
        assert steps[:len(first)] == first and steps == list(range(1, len(steps) + 1))   # every step, in order
        on_disk = [r["step"] for r in read_metrics(runs / "live-run" / "metrics.jsonl") if r["kind"] == "train"]
        assert on_disk[:len(steps)] == steps
    finally:
        process.kill()                                # the run this test started, by its own handle
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL


def _train_steps(outputs: tuple[Any, ...]) -> list[int]:
    """The steps of the MLM-loss figure's training curve in a tick's outputs ([] before the first)."""
    figure = outputs[1]
    return list(figure.data[0].x) if figure.data else []


def _tick_until(tick: Callable[..., Any], process: subprocess.Popen,
                done: Callable[[tuple[Any, ...]], bool]) -> tuple[Any, ...]:
    """Tick the watch view of ``live-run`` as a newly opened browser does (everything sent) until ``done`` holds;
    fails if the command line ends first, or after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the command line ended: {process.stderr.read().decode()[-3000:]}")
        *outputs, _, _, _ = tick("live-run", None)       # (... the run lists, versions, the timer)
        if done(tuple(outputs)):
            return tuple(outputs)
        time.sleep(0.5)                               # the browser's timer: a state is awaited, not a time
    raise AssertionError(f"the watch view never showed what was awaited within {WAIT_S:.0f} s")
