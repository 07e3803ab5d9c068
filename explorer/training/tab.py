"""Training tab: pretrain a small BERT in the background and watch it learn, live. Here the widgets are made and
wired to the endpoints; the form becomes a job in ``explorer.training.job``."""
from __future__ import annotations

import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import Any

import gradio as gr

from engine.model.loaded_model import LoadedModel
from engine.training.runs.export import export_zip
from explorer.glossary import gloss
from explorer.training.job import PRESETS, start_run
from explorer.training.live import CHECKPOINT_COLUMNS, MASKED_COLUMNS, listed_checkpoint, live_update, live_view
from explorer.training import objective
from explorer.training.runs import continue_run, run_choices, run_settings
from explorer.runs.status import status_markdown, version
from explorer.training.text_source import build_text_source
from explorer.runs.watch.section import build_watch
from explorer.serving import log_to as log_to
from explorer.serving.access import AccessPolicy
from explorer.endpoints import endpoint
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.runs.controls import RunControls, acknowledge, run_controls, steering_updates
from explorer.runs.fields import LEARNING_RATE, MASK_RATE, ranged_number
from explorer.runs.curves_view import curves_view, slow_while_unseen

EXPORT_DIR = Path(tempfile.gettempdir()) / "bert-explorer-exports"   # one zip per checkpoint, overwritten
TICK_SECONDS = 3.0          # the live view's tick while a run is active (each tick costs the run a little)
IDLE_CHECK_SECONDS = 5.0    # while the tick sleeps: only compare the worker's version (a run started elsewhere)

INTRO = f"""\
Pretrain a small BERT from scratch on a built-in corpus or on **your own text** (paste it or upload
a `.txt` / `.jsonl` file): a WordPiece vocabulary is learnt from the text (or the bundled model's is
kept), then the model trains on **masked language modelling** ({gloss('MLM')}) and, if on,
**next-sentence prediction** ({gloss('NSP')}), in the background while the app keeps serving.

**What to watch.** MLM {gloss('loss')} starts near ln(vocab size) (≈ 8.3 for 4,000 pieces: a uniform
guess) and falls as the model learns which pieces fit: that is the curve that moves in the default run.
NSP accuracy starts at 50% (a coin toss: half the B segments really follow A) and **stays near 50% in the
default 300 steps**: telling real continuations from random ones is much harder for the tiny model on
Shakespeare (measured: still about 50% of the held-out pairs after 20,000 steps, while a corpus whose
documents differ by topic takes ~900 steps; docs/design/training.md).
The original BERT trained for a million steps of 256 sequences. Of the ~15% of positions chosen for prediction, 80% are
replaced by `[MASK]`, 10% by a random token and 10% kept as they are — the batch view
below shows which, with the original token the model must recover.
"""


def _settings(services: Services) -> dict[str, Any]:
    """The run's settings: preset, text source, sizes, optimisation and masking; the vocabulary choice turns the
    vocab size on and off."""
    with gr.Row():
        preset = gr.Dropdown(PRESETS, value="tiny", label="Model preset", info="tiny is quick on a CPU")
        # No precision=0 on these: Gradio would round 2.5 to 2 (and fail with no message on text or
        # infinity) before make_spec can say "must be a whole number".
        max_documents = gr.Number(200, label="Max documents", info="the first N documents of the text")
        vocab_size = gr.Number(4000, label="Vocab size", info="of the vocabulary trained on the text")
    given = build_text_source()
    given["vocabulary"].change(lambda choice: gr.Number(interactive=choice == "train"), inputs=given["vocabulary"],
                               outputs=vocab_size, queue=False, api_visibility="private", show_progress="hidden")
    with gr.Row():
        seq_length = gr.Number(64, label="Sequence length")
        batch_size = gr.Number(16, label="Batch size")
        learning_rate = ranged_number(5e-4, "Learning rate", LEARNING_RATE, info="peak; arrows step 0.00001")
        steps = gr.Number(300, label="Steps")
    with gr.Row():
        mask_rate = ranged_number(0.15, "Masking rate", MASK_RATE, info="0.01 to 0.99")
        whole_word = gr.Checkbox(False, label="Whole-word masking")
        nsp = gr.Checkbox(True, label="Next-sentence prediction (NSP)")
        report_to = log_to.dropdown()
    return {"controls": [preset, given["corpus"], max_documents, vocab_size, seq_length, batch_size, learning_rate,
                         steps, mask_rate, whole_word, nsp, given["source"], given["text"], given["text_file"],
                         given["vocabulary"], report_to],
            "objective": objective.build_objective()}     # pretraining's own settings, from their dataclass


def _continue_section(services: Services, access: AccessPolicy) -> dict[str, Any]:
    """The *Continue a run* accordion: the run, a new total and the button."""
    with gr.Accordion("Continue a run (resume a stopped run exactly where it stopped)", open=False):
        with gr.Row():
            run_choice = gr.Dropdown(run_choices(services), value=None, label="Run to continue",
                                     info="run · step / total · checkpoints · text; empty: the newest stopped run",
                                     allow_custom_value=True, scale=3)   # API callers name any run; checked
            new_total = gr.Number(0, label="New total steps (0 keeps the run's)", scale=1)
            continue_btn = gr.Button("Continue run", interactive=access.training_enabled, scale=1)
        settings = gr.Markdown("")                        # the picked run's own objective, read-only
    return {"run_choice": run_choice, "new_total": new_total, "continue_btn": continue_btn, "settings": settings}


def _wire_run_settings(services: Services, again: dict[str, Any]) -> None:
    """Picking a run to continue shows its own objective settings (a Continue keeps them)."""
    endpoint(again["run_choice"].change, lambda run: run_settings(services, run), again["run_choice"],
             again["settings"], api_name="train_run_settings", api_visibility="private", gpu=False, clear=False,
             show_progress="hidden")


def _live_widgets(services: Services) -> dict[str, Any]:
    """The live view: the status, the curves, the masked batch and its table, the checkpoints and a download."""
    status = gr.Markdown(status_markdown(services.get_worker().status()), elem_classes=["train-status"])
    curves = curves_view("Curves (thin: each step's batch; bold: the mean of the last steps; dots: held-out)",
                         "train-curves")
    batch_plot = gr.Plot(label="Current batch: masked positions (80% [MASK] / 10% random / 10% kept)")
    masked_table = gr.Dataframe(headers=MASKED_COLUMNS, label="Masked positions of that sequence",
                                interactive=False, max_height=240)
    checkpoints = gr.Dataframe(headers=CHECKPOINT_COLUMNS, label="Checkpoints (click a row to download it as a model)",
                               interactive=False, max_height=240)
    download = gr.File(label="The chosen checkpoint as a model (.zip: config, weights, tokenizer, model card; "
                             "transformers loads the unzipped folder)", interactive=False)
    return {"status": status, "plots": [curves, batch_plot], "curves": curves,
            "masked_table": masked_table, "checkpoints": checkpoints, "download": download}


# --- the handlers (the endpoints' API: parameter names, defaults and docstrings) ---------

def _start_handler(services: Services, access: AccessPolicy,
                   groups: list[objective.SettingWidgets]) -> Callable[..., str]:
    """The *Start* button's handler (its parameters: the form's, the *Objective* section's, the token)."""
    layout = objective.widget_count(groups)

    def train_start(preset: str = "tiny", corpus: str = "shakespeare", max_documents: float = 200,
                    vocab_size: float = 4000, seq_length: float = 64, batch_size: float = 16,
                    learning_rate: float = 5e-4, steps: float = 300, mask_rate: float = 0.15,
                    whole_word: bool = False, nsp: bool = True, source: str = "builtin", text: str = "",
                    text_file: Any = None, vocabulary: str = "train", report_to: str = "none", token: str = "",
                    objective_values: Any = ()) -> str:
        """Start a pretraining run with the given settings in the background; the status as Markdown.

        Args:
            preset: model size (tiny, mini, small, medium, base, large).
            corpus: the built-in corpus (with source "builtin").
            max_documents: use only the first N documents.
            vocab_size: size of the WordPiece vocabulary trained on the text (with vocabulary "train").
            seq_length: longest sequence in tokens.
            batch_size: sequences per step.
            learning_rate: peak learning rate.
            steps: optimizer steps.
            mask_rate: fraction of tokens masked.
            whole_word: mask whole words.
            nsp: train next-sentence prediction too.
            source: "builtin" (the corpus above), "text" (the text argument) or "file" (text_file).
            text: your text, documents separated by blank lines (with source "text"; at most 20 MB).
            text_file: a .txt (documents separated by blank lines) or .jsonl (one {"text": ...} object per line)
                file, UTF-8, at most 20 MB (with source "file"; gradio_client: handle_file(path)).
            vocabulary: "train" (a WordPiece vocabulary learnt on the text) or "keep" (the bundled
                bert-base-uncased vocabulary).
            report_to: "none", or "tensorboard" to also write TensorBoard event files to <run>/logs (needs the
                tensorboard package).
            token: the admin token (public mode only).
        """
        access.require_admin(token, "start training")
        settings = objective.task_settings(layout, list(objective_values)) if objective_values else None
        return start_run(services, preset, corpus, max_documents, vocab_size, seq_length, batch_size,
                         learning_rate, steps, mask_rate, whole_word, nsp, source, text, text_file, vocabulary,
                         report_to, task_settings=settings)

    return objective.endpoint_handler(train_start, groups)


def _run_handlers(services: Services, access: AccessPolicy) -> dict[str, Callable[..., str]]:
    """The handlers of the buttons that steer a run (continue, pause, resume, stop, save), by API name."""
    def train_continue(run: str | None = None, total_steps: float = 0, token: str = "") -> str:
        """Continue a stopped run from its last checkpoint, taking exactly the steps it would have taken.

        Args:
            run: the run's name (as listed under the runs folder); empty: the newest run with steps left.
            total_steps: a new total step count (more than the steps done); 0 keeps the run's total.
            token: the admin token (public mode only).
        """
        access.require_admin(token, "continue training")
        return continue_run(services, run, total_steps)

    def train_pause(token: str = "") -> str:
        """Pause the active run after its current step."""
        access.require_admin(token, "pause training")
        return status_markdown(services.get_worker().pause())

    def train_resume(token: str = "") -> str:
        """Resume a paused run."""
        access.require_admin(token, "resume training")
        return status_markdown(services.get_worker().resume())

    def train_stop(token: str = "") -> str:
        """Stop the active run after its current step (it saves a final checkpoint)."""
        access.require_admin(token, "stop training")
        return status_markdown(services.get_worker().stop())

    def train_save(token: str = "") -> str:
        """Save a checkpoint of the active run now; the status as Markdown."""
        access.require_admin(token, "save checkpoints")
        worker = services.get_worker()
        path = worker.save_checkpoint_now(timeout_s=60.0)
        note = f"Saved `{path.name}`." if path is not None else "The checkpoint is being written…"
        return note + "\n\n" + status_markdown(worker.status())

    return {"train_continue": train_continue, "train_pause": train_pause, "train_resume": train_resume,
            "train_stop": train_stop, "train_save": train_save}


def _poll_handlers(services: Services) -> dict[str, Callable[..., Any]]:
    """The live view's handlers: the status endpoint, the timers' ticks and a checkpoint's download."""
    def train_status() -> tuple[Any, ...]:
        """Status, curves (MLM loss, NSP loss, accuracy, lr), masked batch, its table and checkpoints."""
        return live_view(services)

    def live_tick(seen: dict | None) -> tuple[Any, ...]:
        outputs, now, active = live_update(services, seen)
        runs = (now["checkpoints"], now["status"][:2])
        choices = gr.Dropdown(choices=run_choices(services)) if (seen or {}).get("runs") != runs else gr.skip()
        now["runs"] = runs
        steering = (steering_updates(now["state"], services.access.training_enabled)
                    if (seen or {}).get("state") != now["state"] else (gr.skip(),) * 4)
        # Going to sleep hands the watch to the idle check (and it hands it back when it wakes the tick): a page
        # with a run going pays for one timer's events, not two.
        sleep = (gr.skip(), gr.skip()) if active else (gr.Timer(active=False), gr.Timer(active=True))
        return (*outputs, choices, *steering, now, *sleep)

    def idle_check(last: tuple | None) -> tuple[Any, Any, Any]:
        now = version(services.get_worker().status())
        if now == last:
            return gr.skip(), gr.skip(), gr.skip()
        return gr.Timer(active=True), now, gr.Timer(active=False)

    def pick_checkpoint(evt: gr.SelectData) -> str | None:
        row = evt.row_value or []
        if len(row) < len(CHECKPOINT_COLUMNS):
            return None
        folder = listed_checkpoint(services, str(row[CHECKPOINT_COLUMNS.index("path")]))
        return str(export_zip(folder, EXPORT_DIR))

    return {"train_status": train_status, "live_tick": live_tick, "idle_check": idle_check,
            "pick_checkpoint": pick_checkpoint}


# --- the tab -----------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker | None = None) -> dict[str, Any]:
    """Create the Training tab's widgets inside the current ``gr.Tab`` and wire them (it trains a model of its
    own, so it takes no ``picker``: the argument is the one signature of every tab)."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    form = _settings(services)
    controls = form["controls"] + objective.inputs(form["objective"])
    access = services.access  # public mode: the controls need the admin token (explorer.serving.access)
    buttons = run_controls(access, services.get_worker().status().state)   # Pause... only where they can act
    again = _continue_section(services, access)
    live = _live_widgets(services)
    acknowledge(buttons, live["status"])                 # "pausing after this step…" the moment Pause is pressed
    watch = build_watch(services)                         # any run in the runs folder, read only
    timer = gr.Timer(TICK_SECONDS, active=True)          # fills the view on load, then sleeps while idle
    idle_timer = gr.Timer(IDLE_CHECK_SECONDS)
    seen = gr.State(None)                                 # versions this browser was last sent (explorer.training.live)
    last_version = gr.State(None)
    _wire_controls(services, access, buttons, again, controls, live["status"], timer, seen, form["objective"])
    _wire_run_settings(services, again)
    _wire_live(services, live, again["run_choice"], timer, idle_timer, seen, last_version, buttons)
    return {"status": live["status"], "timer": timer, "idle_timer": idle_timer, "seen": seen, "controls": controls,
            "checkpoints": live["checkpoints"], "plots": live["plots"], "download": live["download"], "watch": watch}


def _wire_controls(services: Services, access: AccessPolicy, buttons: RunControls, again: dict[str, Any],
                   controls: list[Any], status: Any, timer: Any, seen: Any,
                   groups: list[objective.SettingWidgets]) -> None:
    """Wire the run's buttons: each writes the status, then wakes the live view."""
    admin = buttons.admin
    steer = _run_handlers(services, access)
    # After a control's own answer has been drawn: tick again, and forget what this browser was sent.
    # The control wrote the status itself ("stopping"); a tick that raced it may have sent "stopped"
    # first and marked it seen, and every later tick would then skip the status, stuck on "stopping".
    wake = dict(fn=lambda: (gr.Timer(active=True), None), outputs=[timer, seen], api_visibility="private",
                queue=False, show_progress="hidden")
    # Every control writes the status; a refused one leaves it as it was (its message is the error toast) and the
    # next tick redraws it. None runs a model.
    clicks = [(buttons.start, _start_handler(services, access, groups), controls + admin, "train_start"),
              (buttons.pause, steer["train_pause"], admin, "train_pause"),
              (buttons.resume, steer["train_resume"], admin, "train_resume"),
              (buttons.stop, steer["train_stop"], admin, "train_stop"),
              (buttons.save, steer["train_save"], admin, "train_save"),
              (again["continue_btn"], steer["train_continue"], [again["run_choice"], again["new_total"]] + admin,
               "train_continue")]
    for button, handler, inputs, api_name in clicks:
        event = endpoint(button.click, handler, inputs, status, api_name=api_name, gpu=False, clear=False)
        event.then(**wake)
        event.failure(lambda: None, outputs=seen, api_visibility="private", queue=False)  # redraw all next tick


def _wire_live(services: Services, live: dict[str, Any], run_choice: Any, timer: Any, idle_timer: Any, seen: Any,
               last_version: Any, buttons: RunControls) -> None:
    """Wire the live view: the tick (which also greys out the controls that cannot act), the idle check, the
    status endpoint and a checkpoint's download."""
    poll_fns = _poll_handlers(services)
    live_outputs = [live["status"], *live["plots"], live["masked_table"], live["checkpoints"]]
    poll: dict[str, Any] = dict(gpu=False, clear=False, show_progress="hidden", concurrency_limit=None)
    endpoint(timer.tick, poll_fns["live_tick"], seen,
             live_outputs + [run_choice, *buttons.steering, seen, timer, idle_timer],
             api_name="train_tick", api_visibility="private", **poll)
    endpoint(idle_timer.tick, poll_fns["idle_check"], last_version, [timer, last_version, idle_timer],
             api_name="train_idle_check", api_visibility="private", queue=False, **poll)
    endpoint(buttons.refresh.click, poll_fns["train_status"], None, live_outputs, api_name="train_status", **poll)
    slow_while_unseen(live["curves"], timer, TICK_SECONDS, "train")   # a page nobody looks at ticks slower
    endpoint(live["checkpoints"].select, poll_fns["pick_checkpoint"], None, live["download"],
             api_name="train_pick_checkpoint", gpu=False, api_visibility="private")


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """Training runs in the background, on its own model: no examples to warm up."""
    return []
