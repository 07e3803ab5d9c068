"""Fine-tune tab: fine-tune the picked model for a task in the background and watch it learn, live.

The base model is the model picker's choice; the task is a row of ``explorer.finetune.tasks``; the data
is a bundled example or an upload (``explorer.finetune.data``); ``make_job`` turns the form into the same
``JobSpec`` the command line makes, and the app's one ``TrainingWorker`` runs it (the Training tab shows
the same run, and a pretraining run started there is shown here as what it is). The run's checkpoints are
written under the runs folder, so they join the model picker like pretraining checkpoints.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Mapping

import gradio as gr

from engine.model.loaded_model import LoadedModel
from explorer.serving import log_to as log_to
from explorer.serving.access import AccessPolicy
from explorer.endpoints import endpoint
from explorer.finetune.actions import start_handler, steer_handlers
from explorer.finetune.data import MAX_UPLOAD_MB, SOURCES
from explorer.finetune.live import fine_tuning_version, live_update, live_view
from explorer.finetune.mistakes import CAPTION, COLUMN_WIDTHS, NOTE_FIRST, PICK_HINT, WRONG_COLUMNS, example_html
from explorer.finetune.status import LOOKING, steering_state
from explorer.finetune import settings_form
from explorer.finetune.settings_form import SettingField, setting_fields
from explorer.finetune.tasks import FinetuneTask, finetune_rows, task_choices, task_row
from explorer.glossary import gloss
from explorer.models.picker import ModelPicker
from explorer.services import Services
from explorer.runs.controls import RunControls, acknowledge, run_controls, steering_updates
from explorer.runs.curves_view import curves_view, slow_while_unseen

TICK_SECONDS = 2.0          # the live view's tick while a run is active and its curves are seen
IDLE_CHECK_SECONDS = 5.0    # while the tick sleeps: only compare the worker's version (a run started elsewhere)
PRIVATE: dict[str, Any] = dict(api_visibility="private", queue=False, show_progress="hidden")


def all_extensions() -> list[str]:
    """Every offered task's endings: Gradio checks an upload against the File's *initial* types for an API client
    (a new session), so a QA client's .json must pass; make_job then checks the ending against the task asked for."""
    return list(dict.fromkeys(ext for row in finetune_rows().values() for ext in row.extensions))

INTRO = f"""\
{gloss("fine-tune", "Fine-tune")} the model **picked at the top of the page** (the bundled default, a checkpoint of a
pretraining run, a folder you loaded) for a task: BERT's second half. The task's head (a small layer
on top of the encoder) is added freshly initialised when the model lacks it, and the whole model
trains on your examples in the background while the app keeps serving. The app trains one run at a
time: a pretraining run from the Training tab and a fine-tuning run from here share one worker.

**What to watch.** The loss falls as the head learns; the held-out curves (examples the model never
trains on) say whether it generalises: accuracy, or for question answering {gloss("F1")} and
{gloss("exact match")} (entity F1 for entity tags). The table lists held-out examples the model gets wrong *right
now*, refreshed at every evaluation. When the run ends its checkpoint is in the model picker.
"""


HYPER_PARAMETERS = {"steps": "Steps", "batch_size": "Batch size", "learning_rate": "Learning rate",
                    "seq_length": "Sequence length", "eval_fraction": "Held-out fraction (not trained on)"}


def example_choices(task: str) -> list[tuple[str, str]]:
    """(name, value) of the task's bundled examples; the first one's value is "" (the task's first)."""
    return [(e.name, "" if i == 0 else e.name) for i, e in enumerate(task_row(task).examples)]


def formats_text(task: str) -> str:
    """Markdown under the form: the data the task accepts, and what its bundled examples are (and their licence)."""
    row = task_row(task)
    notes = [f"- {e.note}" for e in row.examples if e.note]
    return f"**Accepted data:** {row.formats}" + ("\n\n**Bundled examples:**\n" + "\n".join(notes) if notes else "")


def placeholder(task: str, key: str) -> str:
    """What an empty hyper-parameter box shows: the task's default (just the number: "5e-05 (the task's default)"
    did not fit the box at 1,366 px; the line above the boxes says what an empty box means)."""
    return f"{task_row(task).defaults[key]:g}"


def _form(first: FinetuneTask, fields: Mapping[str, SettingField]) -> dict[str, Any]:
    """The run's form: task, data (a bundled example or a file), labels, hyper-parameters, logging and the task's
    own settings."""
    with gr.Row():
        task = gr.Dropdown(task_choices(), value=first.name, label="Task", scale=2)
        data_source = gr.Radio(SOURCES, value="example", label="Data", scale=1)
        # The task's first example has the value "" (the handler's "the task's first"), so the API default
        # fits every task; allow_custom_value: an API client may name any task's example (checked).
        example = gr.Dropdown(example_choices(first.name), value="", label="Bundled example", scale=1,
                              allow_custom_value=True)
        data_file = gr.File(label=f"Your file (UTF-8, at most {MAX_UPLOAD_MB} MB)", type="filepath",
                            file_types=all_extensions(), visible=False, scale=2)
    formats = gr.Markdown(formats_text(first.name))
    labels = gr.Textbox("", label="Labels (optional, comma-separated): every label or tag in the data must be one "
                        "of them", placeholder=first.labels_hint, max_lines=1, visible=first.takes_labels)
    gr.Markdown("An empty box takes the task's default, shown in grey.", elem_classes=["finetune-defaults-note"])
    with gr.Row():
        # Text boxes, empty by default: an empty box takes the task's default (its placeholder), so the API's
        # defaults ("") are right for every task. A gr.Number cannot be empty: it shows and sends 0.
        numbers = {name: gr.Textbox("", label=label, placeholder=placeholder(first.name, name), max_lines=1)
                   for name, label in HYPER_PARAMETERS.items()}
        report_to = log_to.dropdown(info=None)          # a note would make the row of text boxes uneven
    settings = settings_form.boxes(fields, first)
    return {"task": task, "data_source": data_source, "example": example, "data_file": data_file,
            "formats": formats, "labels": labels, "numbers": list(numbers.values()), "report_to": report_to,
            "settings": list(settings.values())}


def _live_widgets(services: Services) -> dict[str, Any]:
    """The live view: the status, the loss and metric curves, the held-out mistakes (fixed column widths that
    wrap, so the table fits its box), what "confidence" means, and the whole input of a clicked row."""
    # The page's first values are neutral: a value computed here would be the app's start-up state, shown on every
    # fresh page until the first tick (an "idle" page after a finished run); the tick fills them when the tab opens.
    status = gr.Markdown(LOOKING, elem_classes=["train-status"])
    curves = curves_view("Loss and task metrics (thin: each step's batch; bold: the mean of the last steps; "
                         "dots: held-out)", "finetune-curves")
    note = gr.Markdown(NOTE_FIRST)
    wrong = gr.Dataframe(headers=WRONG_COLUMNS, label="Held-out mistakes the model makes now", interactive=False,
                         wrap=True, column_widths=COLUMN_WIDTHS, max_height=420, elem_classes=["finetune-wrong"])
    gr.Markdown(CAPTION, elem_classes=["finetune-wrong-caption"])
    example = gr.HTML(f"<p>{PICK_HINT}</p>", elem_classes=["finetune-wrong-example"])
    return {"status": status, "curves": curves, "note": note, "wrong": wrong,
            "example": example}


# --- the handlers (the endpoints' API: parameter names, defaults and docstrings) ---------

def _poll_handlers(services: Services) -> tuple[Callable[..., Any], ...]:
    """The live view's handlers: the status endpoint, the tick, the idle check and a click on a table row."""
    def finetune_status_all() -> tuple[Any, ...]:
        """Status, loss curve, metric curves, the note and the table of held-out examples the model gets wrong."""
        return live_view(services)

    def live_tick(seen: dict | None) -> tuple[Any, ...]:
        outputs, now, active = live_update(services, seen)
        # Pause, Resume, Stop and Save: greyed where they cannot act, sent when the state they act on moved.
        now["steer"] = steering_state(services.get_worker().status())
        steering = (steering_updates(now["steer"], services.access.training_enabled)
                    if (seen or {}).get("steer") != now["steer"] else (gr.skip(),) * 4)
        # Going to sleep hands the watch to the idle check, which hands it back (as the Training tab's).
        sleep = (gr.skip(), gr.skip()) if active else (gr.Timer(active=False), gr.Timer(active=True))
        return (*outputs, *steering, now, *sleep)

    def idle_check(last: tuple | None) -> tuple[Any, Any, Any]:
        now = fine_tuning_version(services)
        return (gr.skip(),) * 3 if now == last else (gr.Timer(active=True), now, gr.Timer(active=False))

    def pick_example(evt: gr.SelectData) -> str:
        row = evt.row_value or []
        return example_html(services.get_worker().eval_examples(), row[0] if row else None)

    return finetune_status_all, live_tick, idle_check, pick_example


def _form_handlers(first: FinetuneTask, fields: Mapping[str, SettingField]) -> tuple[Callable[..., Any], ...]:
    """What the form does when the task changes and when the data source changes."""
    def task_changed(name: str) -> tuple[Any, ...]:
        row = finetune_rows().get(name) or first
        return (gr.Dropdown(choices=example_choices(row.name), value="" if row.examples else None),
                gr.File(file_types=list(row.extensions)),
                formats_text(row.name), gr.Textbox(visible=row.takes_labels, placeholder=row.labels_hint),
                *(gr.Textbox(value="", placeholder=placeholder(row.name, key)) for key in HYPER_PARAMETERS),
                *settings_form.box_updates(fields, row))

    def source_changed(choice: str) -> tuple[Any, Any]:
        return gr.Dropdown(visible=choice == "example"), gr.File(visible=choice == "upload")

    return task_changed, source_changed


# --- the tab -----------------------------------------------------------------------------

def build(services: Services, picker: ModelPicker) -> dict[str, Any]:
    """Create the Fine-tune tab's widgets inside the current ``gr.Tab`` and wire them."""
    first = next(iter(finetune_rows().values()))
    fields = setting_fields(finetune_rows())            # every offered task's own settings: one box each
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    f = _form(first, fields)
    access = services.access      # public mode: the controls need the admin token (explorer.serving.access)
    # Pause, Resume, Stop and Save only where they can act on this tab's run (explorer.runs.controls.allowed)
    controls = run_controls(access, steering_state(services.get_worker().status()))
    live = _live_widgets(services)
    acknowledge(controls, live["status"])               # "pausing after this step…" the moment Pause is pressed
    timer = gr.Timer(TICK_SECONDS, active=True)          # fills the view on load, then sleeps while idle
    idle_timer = gr.Timer(IDLE_CHECK_SECONDS)
    seen = gr.State(None)
    last_version = gr.State(None)
    _wire_form(first, fields, f)
    form = [picker.dropdown, f["task"], f["data_source"], f["example"], f["data_file"], f["labels"], *f["numbers"],
            f["report_to"], *f["settings"]]
    _wire_controls(services, access, controls, form, live["status"], timer, seen,
                   start_handler(services, access, first.name, fields))
    live_outputs = [live[name] for name in ("status", "curves", "note", "wrong")]
    finetune_status_all, live_tick, idle_check, pick_example = _poll_handlers(services)
    poll: dict[str, Any] = dict(gpu=False, clear=False, show_progress="hidden", concurrency_limit=None)
    endpoint(timer.tick, live_tick, seen, live_outputs + [*controls.steering, seen, timer, idle_timer],
             api_name="finetune_tick", api_visibility="private", **poll)
    endpoint(idle_timer.tick, idle_check, last_version, [timer, last_version, idle_timer],
             api_name="finetune_idle_check", api_visibility="private", queue=False, **poll)
    endpoint(controls.refresh.click, finetune_status_all, None, live_outputs, api_name="finetune_status", **poll)
    slow_while_unseen(live["curves"], timer, TICK_SECONDS, "finetune")   # a page nobody looks at ticks slower
    endpoint(live["wrong"].select, pick_example, None, live["example"], api_name="finetune_pick_example", gpu=False,
             **PRIVATE)
    return {"status": live["status"], "timer": timer, "seen": seen, "form": form, "controls": controls,
            "curves": live["curves"], "wrong": live["wrong"], "note": live["note"],
            "example": live["example"]}


def _wire_form(first: FinetuneTask, fields: Mapping[str, SettingField], f: dict[str, Any]) -> None:
    """The form follows the task (examples, file types, formats, labels, defaults, settings) and the data source."""
    task_changed, source_changed = _form_handlers(first, fields)
    form_event: dict[str, Any] = dict(gpu=False, clear=False, **PRIVATE)
    endpoint(f["task"].change, task_changed, f["task"],
             [f["example"], f["data_file"], f["formats"], f["labels"], *f["numbers"], *f["settings"]],
             api_name="finetune_task_changed", **form_event)
    endpoint(f["data_source"].change, source_changed, f["data_source"], [f["example"], f["data_file"]],
             api_name="finetune_source_changed", **form_event)


def _wire_controls(services: Services, access: AccessPolicy, controls: RunControls, form: list[Any], status: Any,
                   timer: Any, seen: Any, start_handler: Callable[..., str]) -> None:
    """Wire the run's buttons: every control writes the status (a refused one leaves it as it was: its message is
    the error toast), then wakes the live view and forgets what this browser was sent, so the next tick redraws
    everything (a tick that raced the control cannot leave "stopping…" standing); none runs a model."""
    admin = controls.admin
    steer = zip((controls.pause, controls.resume, controls.stop, controls.save), steer_handlers(services, access))
    clicks = [(controls.start, start_handler, form + admin, "finetune_start", "public"),
              *((button, fn, admin, f"finetune_{fn.__name__}", "private") for button, fn in steer)]
    for button, handler, inputs, api_name, visibility in clicks:
        event = endpoint(button.click, handler, inputs, status, api_name=api_name, gpu=False, clear=False,
                         api_visibility=visibility)
        event.then(lambda: (gr.Timer(active=True), None), outputs=[timer, seen], **PRIVATE)
        event.failure(lambda: None, outputs=seen, **PRIVATE)


def example_calls(loaded: LoadedModel) -> list[tuple[str, Callable[[], object]]]:
    """Fine-tuning runs in the background: no examples to warm up."""
    return []
