"""The Training tab's run browser: reopen any run in the runs folder (pretraining or fine-tuning, finished or
being written by another process), compare it with a second one on the same figures, smooth the curves and
put them on a log axis, see where a run was continued; its status and checkpoints follow the run while it
trains. Read only (none of the tab's controls act on it), on its own ``gr.Timer``, beside the app's own run
(``explorer.runs.watch.watcher`` does the work)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from explorer.endpoints import endpoint
from explorer.services import Services
from explorer.runs.watch.plots import FIGURES, MAX_SMOOTHING, CurveView
from explorer.runs.watch.watcher import CHECKPOINT_COLUMNS, NO_RUN, RunWatcher, Seen, watch_update

WATCH_SECONDS = 2.0      # the watch view's tick while a run is picked
IDLE_SECONDS = 10.0      # ... and while none is (only the list of runs can change)

TITLE = "Run browser: reopen any run's curves, compare two runs (also command-line and cluster jobs; read only)"
INTRO = """\
Reopen **any run in the runs folder**: an earlier pretraining run after a fine-tune, a fine-tuning run, or one
that `python -m engine.pretrain`, `python -m engine.finetune` or `torchrun` is writing right now (give it
`--run-dir <runs folder>/<name>`; a cluster job can write to a shared folder); its curves grow as its
`metrics.jsonl` does. **Compare with** draws a second run over the first one's figures, each run in its own
colour. **Smoothing** is TensorBoard's moving average (the raw curve stays faint behind it; the learning rate is
never smoothed); **log scale** puts the y axes on a log scale. A dashed line marks where a run was **continued**
with a new number of steps, which re-plans its learning rate (hover it for the jump). Checkpoints can be probed
from the model picker. This view only reads the runs' files.
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
    """The section's handlers by API name: pick a run (or the run to compare, or the view), the timer's tick
    and the list's refresh."""
    def train_watch(run: str | None = None, compare: str | None = None, smoothing: float = 0.0,
                    log_y: bool = False) -> tuple[Any, ...]:
        """Status, curves and checkpoints of the run ``run`` (its name in the runs folder), with the run
        ``compare`` drawn over its curves, smoothed by ``smoothing`` (0 to 0.99), on a log y axis if ``log_y``."""
        outputs, now = watch_update(watcher, run, None, _own_run(services), with_list=False, compare=compare,
                                    view=CurveView.of(smoothing, log_y))
        return (*outputs[:-1], now, _timer(run, None, now))   # the list is not redrawn under the hand that picks

    def train_watch_tick(run: str | None, seen: Seen | None, compare: str | None = None, smoothing: float = 0.0,
                         log_y: bool = False) -> tuple[Any, ...]:
        """What moved in the watched runs (and in the list of runs) since this browser's last tick."""
        outputs, now = watch_update(watcher, run, seen, _own_run(services), compare=compare,
                                    view=CurveView.of(smoothing, log_y))
        return (*outputs, gr.Dropdown(choices=outputs[-1].choices) if isinstance(outputs[-1], gr.Dropdown)
                else gr.skip(), now, _timer(run, seen, now))

    def train_watch_runs() -> tuple[Any, Any]:
        """The list of runs, drawn again (both pickers)."""
        return gr.Dropdown(choices=watcher.choices()), gr.Dropdown(choices=watcher.choices())

    return {"train_watch": train_watch, "train_watch_tick": train_watch_tick, "train_watch_runs": train_watch_runs}


def build_watch(services: Services) -> dict[str, Any]:
    """Create the section's widgets inside the current layout and wire them; the widgets by name."""
    watcher = RunWatcher(services.get_worker().runs_root)
    with gr.Accordion(TITLE, open=False):
        gr.Markdown(INTRO, elem_classes=["tab-intro"])
        with gr.Row():
            run = gr.Dropdown(watcher.choices(), value=None, label="Run", scale=4,
                              info="run · step / total · checkpoints · text; newest first; a damaged run says what "
                                   "is wrong", allow_custom_value=True)   # a run that appears later is typed or listed
            compare = gr.Dropdown(watcher.choices(), value=None, label="Compare with (optional)", scale=3,
                                  info="a second run, drawn over the first one's figures", allow_custom_value=True)
            refresh = gr.Button("Refresh list", size="sm", scale=1)
        with gr.Row():
            smoothing = gr.Slider(0.0, MAX_SMOOTHING, value=0.0, step=0.01, label="Smoothing", scale=3,
                                  info="moving average, as TensorBoard's; 0 = the values as logged")
            log_y = gr.Checkbox(False, label="Log scale (y axes)", scale=1)
        status = gr.Markdown(NO_RUN, elem_classes=["train-status", "watch-status"])
        plots = []
        for _ in range(FIGURES // 2):
            with gr.Row():
                plots += [gr.Plot(show_label=False), gr.Plot(show_label=False)]
        checkpoints = gr.Dataframe(headers=CHECKPOINT_COLUMNS, interactive=False, max_height=240,
                                   label="Its checkpoints, newest first (probe one: pick it in the model picker)")
    timer = gr.Timer(IDLE_SECONDS)          # WATCH_SECONDS once a run is picked
    seen = gr.State(None)                   # versions this browser was last sent (explorer.runs.watch.watcher)
    _wire(_handlers(services, watcher), dict(run=run, compare=compare, smoothing=smoothing, log_y=log_y,
                                              refresh=refresh, timer=timer, seen=seen),
          [status, *plots, checkpoints])
    return {"watcher": watcher, "run": run, "compare": compare, "smoothing": smoothing, "log_y": log_y,
            "status": status, "plots": plots, "checkpoints": checkpoints, "timer": timer, "seen": seen,
            "refresh": refresh}


def _wire(fns: dict[str, Callable[..., Any]], w: dict[str, Any], view: list[Any]) -> None:
    """Wire the section's events: a pick or a view change redraws everything; the tick sends what moved."""
    poll: dict[str, Any] = dict(gpu=False, show_progress="hidden", api_visibility="private")
    picked = [w["run"], w["compare"], w["smoothing"], w["log_y"]]
    endpoint([w["run"].change, w["compare"].change, w["smoothing"].release, w["log_y"].change], fns["train_watch"],
             picked, view + [w["seen"], w["timer"]], api_name="train_watch", clear=view, **poll)
    endpoint(w["timer"].tick, fns["train_watch_tick"], [w["run"], w["seen"], w["compare"], w["smoothing"],
                                                        w["log_y"]],
             view + [w["run"], w["compare"], w["seen"], w["timer"]], api_name="train_watch_tick", clear=False,
             concurrency_limit=None, **poll)
    endpoint(w["refresh"].click, fns["train_watch_runs"], None, [w["run"], w["compare"]],
             api_name="train_watch_runs", clear=False, **poll)
