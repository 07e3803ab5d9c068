"""The Training tab's *Watch a run* section: pick any run in the runs folder and follow its status, curves and
checkpoints while another process trains it; read only (none of the tab's controls act on it), on its own
``gr.Timer``, beside the app's own run (``explorer.training.watch`` does the work)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from explorer.endpoints import endpoint
from explorer.services import Services
from explorer.training.watch import (CHECKPOINT_COLUMNS, IDLE_SECONDS, NO_RUN, WATCH_SECONDS, RunWatcher, Seen,
                                     watch_update)
from explorer.training.watch_plots import FIGURES

TITLE = "Watch a run in the runs folder (command-line and cluster jobs; read only)"
INTRO = """\
Follow **any run in the runs folder**, also one that `python -m engine.pretrain`, `python -m engine.finetune` or
`torchrun` is writing right now (give it `--run-dir <runs folder>/<name>`; a cluster job can write to a shared
folder). Its curves grow as its `metrics.jsonl` does; its checkpoints can be probed from the model picker. This
view only reads its files: the run is steered by its own command line.
"""


def _own_run(services: Services) -> str | None:
    """The name of the app's own worker run, when it lies in the runs folder."""
    worker = services.get_worker()
    run_dir = worker.status().run_dir
    return run_dir.name if run_dir is not None and run_dir.parent == worker.runs_root else None


def _timer(run: str | None, seen: Seen | None, now: Seen) -> Any:
    """The tick's interval for ``run`` (``WATCH_SECONDS`` with a run, ``IDLE_SECONDS`` without), sent when it
    changes; noted in ``now``."""
    interval = WATCH_SECONDS if run else IDLE_SECONDS
    now["interval"] = interval
    return gr.Timer(interval) if (seen or {}).get("interval") != interval else gr.skip()


def _handlers(services: Services, watcher: RunWatcher) -> dict[str, Callable[..., Any]]:
    """The section's handlers by API name: pick a run, the timer's tick and the list's refresh."""
    def train_watch(run: str | None = None) -> tuple[Any, ...]:
        """Status, curves and checkpoints of the run ``run`` (its name in the runs folder), read from its files."""
        outputs, now = watch_update(watcher, run, None, _own_run(services), with_list=False)
        return (*outputs[:-1], now, _timer(run, None, now))   # the list is not redrawn under the hand that picks

    def train_watch_tick(run: str | None, seen: Seen | None) -> tuple[Any, ...]:
        """What moved in the watched run (and in the list of runs) since this browser's last tick."""
        outputs, now = watch_update(watcher, run, seen, _own_run(services))
        return (*outputs, now, _timer(run, seen, now))

    def train_watch_runs() -> Any:
        """The list of runs, drawn again."""
        return gr.Dropdown(choices=watcher.choices())

    return {"train_watch": train_watch, "train_watch_tick": train_watch_tick, "train_watch_runs": train_watch_runs}


def build_watch(services: Services) -> dict[str, Any]:
    """Create the section's widgets inside the current layout and wire them; the widgets by name."""
    watcher = RunWatcher(services.get_worker().runs_root)
    with gr.Accordion(TITLE, open=False):
        gr.Markdown(INTRO, elem_classes=["tab-intro"])
        with gr.Row():
            run = gr.Dropdown(watcher.choices(), value=None, label="Run to watch", scale=4,
                              info="run · step / total · checkpoints · text; newest first; a damaged run says what "
                                   "is wrong", allow_custom_value=True)   # a run that appears later is typed or listed
            refresh = gr.Button("Refresh list", size="sm", scale=1)
        status = gr.Markdown(NO_RUN, elem_classes=["train-status", "watch-status"])
        plots = []
        for _ in range(FIGURES // 2):
            with gr.Row():
                plots += [gr.Plot(show_label=False), gr.Plot(show_label=False)]
        checkpoints = gr.Dataframe(headers=CHECKPOINT_COLUMNS, interactive=False, max_height=240,
                                   label="Its checkpoints, newest first (probe one: pick it in the model picker)")
    timer = gr.Timer(IDLE_SECONDS)          # WATCH_SECONDS once a run is picked
    seen = gr.State(None)                   # versions this browser was last sent (explorer.training.watch)
    fns = _handlers(services, watcher)
    view = [status, *plots, checkpoints]
    poll: dict[str, Any] = dict(gpu=False, show_progress="hidden", api_visibility="private")
    endpoint(run.change, fns["train_watch"], run, view + [seen, timer], api_name="train_watch", clear=view, **poll)
    endpoint(timer.tick, fns["train_watch_tick"], [run, seen], view + [run, seen, timer], api_name="train_watch_tick",
             clear=False, concurrency_limit=None, **poll)
    endpoint(refresh.click, fns["train_watch_runs"], None, run, api_name="train_watch_runs", clear=False, **poll)
    return {"watcher": watcher, "run": run, "status": status, "plots": plots, "checkpoints": checkpoints,
            "timer": timer, "seen": seen, "refresh": refresh}
