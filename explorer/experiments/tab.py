"""Experiments tab: re-run one of the papers' ablations small (``engine.experiments``), arm after arm in the
background, watch the arms' curves overlaid live, and read ours beside the paper's table with a verdict per claim.
Here the widgets are made and wired; the form becomes a job in ``explorer.experiments.form``, the background
thread is ``explorer.experiments.background``, and what a tick sends is ``explorer.experiments.live``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from explorer.endpoints import endpoint
from explorer.experiments.background import ExperimentBusy, ExperimentRunner, runner_for
from explorer.experiments.form import SCALES, describe, experiment_choices, make_job
from explorer.experiments.live import NO_TABLE, live_update
from explorer.experiments.progress import CurveReaders
from explorer.models.picker import ModelPicker
from explorer.runs.curves_view import curves_view, slow_while_unseen
from explorer.serving.access import AccessPolicy
from explorer.services import Services

TICK_SECONDS = 2.0          # the live view's tick while an experiment runs
IDLE_CHECK_SECONDS = 5.0    # while the tick sleeps: only compare the runner's version (a start from another page)

INTRO = """\
Re-run one of the BERT and RoBERTa papers' ablations **small**: each arm (what the paper varied: the masking mix,
the pre-training tasks, the model size, static or dynamic masking) is an ordinary pretraining run on Shakespeare,
then measured the same way as every other arm (held-out masked-token accuracy; part-of-speech tagging and
sentiment after a short fixed fine-tuning). Some measure each arm at several checkpoints too (Figure 5: a series
over the steps), and some share one pretrained model between arms that use it differently (Table 7: fine-tuned or
frozen features; its one curve per seed stands for every arm). The arms run one after another in the background;
**Stop** stops after the current step and **Start** again continues where it stopped. The table puts ours beside
the paper's numbers, states our scale, and gives a verdict per claim in plain words: with one seed there is no
spread to judge by, so use 2 or more. The runs live under `<runs folder>/experiments/<experiment>/<arm>/seed-<k>/`.
"""


def _form() -> dict[str, Any]:
    """The experiment, its description, the scale, seeds and steps."""
    choices = experiment_choices()
    first = choices[0][1] if choices else None
    with gr.Row():
        experiment = gr.Dropdown(choices, value=first, label="Experiment", scale=3)
        scale = gr.Radio(list(SCALES), value="quick", label="Scale",
                         info="quick: each built-in one within ~20 min on 2 CPU cores", scale=2)
        seeds = gr.Number(0, label="Seeds", info="per arm, 1 to 10; 0: the scale's", scale=1)
        steps = gr.Number(0, label="Steps", info="pretraining steps per arm; 0: the scale's", scale=1)
    about = gr.Markdown(describe(first), elem_classes=["experiment-about"])
    return {"experiment": experiment, "scale": scale, "seeds": seeds, "steps": steps, "about": about}


def _buttons(access: AccessPolicy, running: bool) -> dict[str, Any]:
    """The public-mode notice, the admin token box (where the policy asks for one), Start and Stop."""
    if access.public:
        gr.Markdown(access.notice(), elem_classes=["access-notice"])
    enabled = access.training_enabled
    with gr.Row():
        admin = ([gr.Textbox(label="Admin token", type="password", max_lines=1, scale=2)]
                 if access.asks_for_token else [])
        start = gr.Button("Start", variant="primary", interactive=enabled and not running, scale=1)
        stop = gr.Button("Stop", interactive=enabled and running, scale=1)
    return {"admin": admin, "start": start, "stop": stop}


def _live_widgets() -> dict[str, Any]:
    """The status, the curves, the table and the downloads."""
    status = gr.Markdown("", elem_classes=["experiment-status"])
    curves = curves_view("The arms' MLM loss, overlaid (thin: each step's batch; bold: the mean of the last steps)",
                         "experiment-curves")
    table = gr.Markdown(NO_TABLE, elem_classes=["experiment-table"])
    files = gr.File(label="Download: the table (CSV, JSON) and the curves (CSV)", file_count="multiple",
                    interactive=False)
    return {"status": status, "curves": curves, "table": table, "files": files}


# --- the handlers -------------------------------------------------------------------------

def _control_handlers(services: Services, runner: ExperimentRunner) -> dict[str, Callable[..., str]]:
    """Start and Stop, by API name."""
    access = services.access
    first = next((name for _, name in experiment_choices()), "")

    def experiment_start(experiment: str = first, scale: str = "quick", seeds: float = 0, steps: float = 0,
                         token: str = "") -> str:
        """Start (or continue) an experiment in the background; a sentence saying what started.

        Args:
            experiment: the experiment's name (python -m engine.experiment --list).
            scale: "quick" or "default".
            seeds: seeds per arm, 1 to 10 (0: the scale's).
            steps: pretraining steps per arm, 1 to 100,000 (0: the scale's).
            token: the admin token (public mode only).
        """
        access.require_admin(token, "start an experiment")
        job = make_job(experiment, scale, seeds, steps)
        try:
            runner.start(job)                  # refused while a training run or another experiment goes
        except ExperimentBusy as exc:
            gr.Warning(str(exc))
            return f"⚠️ {exc}"
        s = job.scale
        return (f"Started **{job.experiment.name}**: {len(job.experiment.arms)} arms × {s.seeds} seed(s), "
                f"{s.steps:,} steps each (what is done already is read, not redone).")

    def experiment_stop(token: str = "") -> str:
        """Stop the running experiment after its current step (Start continues it)."""
        access.require_admin(token, "stop an experiment")
        st = runner.stop()
        return "⏹ stopping after this step…" if st.active else "No experiment is running."

    return {"experiment_start": experiment_start, "experiment_stop": experiment_stop}


def _poll_handlers(runner: ExperimentRunner, readers: CurveReaders, enabled: bool) -> dict[str, Callable[..., Any]]:
    """The tick, the idle check."""
    def experiment_tick(seen: dict | None) -> tuple[Any, ...]:
        outputs, now, active = live_update(runner, readers, seen)
        running = runner.running
        now["busy"] = running
        buttons = ((gr.Button(interactive=enabled and not running), gr.Button(interactive=enabled and running))
                   if (seen or {}).get("busy") != running else (gr.skip(), gr.skip()))
        sleep = (gr.skip(), gr.skip()) if active else (gr.Timer(active=False), gr.Timer(active=True))
        return (*outputs, *buttons, now, *sleep)

    def experiment_idle_check(last: int | None) -> tuple[Any, Any, Any]:
        now = runner.status().version
        if now == last:
            return gr.skip(), gr.skip(), gr.skip()
        return gr.Timer(active=True), now, gr.Timer(active=False)

    return {"experiment_tick": experiment_tick, "experiment_idle_check": experiment_idle_check}


# --- the tab ------------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker | None = None) -> dict[str, Any]:
    """Create the Experiments tab's widgets inside the current ``gr.Tab`` and wire them (its arms train models of
    their own, so it takes no ``picker``)."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    runner = runner_for(services)
    form = _form()
    buttons = _buttons(services.access, runner.running)
    live = _live_widgets()
    timer = gr.Timer(TICK_SECONDS, active=True)           # fills the view on load, then sleeps while idle
    idle_timer = gr.Timer(IDLE_CHECK_SECONDS)
    seen, last_version = gr.State(None), gr.State(None)
    quiet: dict[str, Any] = dict(gpu=False, clear=False, show_progress="hidden", concurrency_limit=None,
                                 api_visibility="private")
    endpoint(form["experiment"].change, describe, form["experiment"], form["about"], api_name="experiment_about",
             queue=False, **quiet)
    controls = _control_handlers(services, runner)
    inputs = [form["experiment"], form["scale"], form["seeds"], form["steps"], *buttons["admin"]]
    wake = dict(fn=lambda: (gr.Timer(active=True), None), outputs=[timer, seen], api_visibility="private",
                queue=False, show_progress="hidden")
    for button, inputs_of, name in ((buttons["start"], inputs, "experiment_start"),
                                    (buttons["stop"], buttons["admin"], "experiment_stop")):
        event = endpoint(button.click, controls[name], inputs_of, live["status"], api_name=name, gpu=False,
                         clear=False, api_visibility="private")
        event.then(**wake)
    polls = _poll_handlers(runner, CurveReaders(), services.access.training_enabled)
    outputs = [live["status"], live["curves"], live["table"], live["files"], buttons["start"], buttons["stop"]]
    endpoint(timer.tick, polls["experiment_tick"], seen, outputs + [seen, timer, idle_timer],
             api_name="experiment_tick", **quiet)
    endpoint(idle_timer.tick, polls["experiment_idle_check"], last_version, [timer, last_version, idle_timer],
             api_name="experiment_idle_check", queue=False, **quiet)
    slow_while_unseen(live["curves"], timer, TICK_SECONDS, "experiment")
    return {**form, **buttons, **live, "timer": timer, "idle_timer": idle_timer, "seen": seen}


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """An experiment trains models of its own, in the background: no examples to warm up."""
    return []
