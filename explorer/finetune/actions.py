"""What the Fine-tune tab's run buttons do: *Start* turns the form (and the task's settings boxes) into a job and
hands it to the app's one worker, a warning instead while a run is active; *Pause*, *Resume*, *Stop* and *Save*
steer the worker's fine-tuning run and refuse a pretraining run, which belongs to the Training tab. The handlers'
signatures and docstrings are the API of ``/finetune_start`` and the steering endpoints."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Mapping

import gradio as gr

from engine.training.tasks.registry import is_finetuning
from engine.training.worker.errors import RunActiveError
from explorer.finetune.job import make_job
from explorer.finetune.settings_form import SettingField
from explorer.finetune.status import current_status, finetune_status
from explorer.finetune.tasks import finetune_rows
from explorer.serving.access import AccessPolicy
from explorer.services import Services


def control(services: Services, action: str) -> Any:
    """Refuse to steer a pretraining run from this tab (it belongs to the Training tab)."""
    worker = services.get_worker()
    st = worker.status()
    if st.active and not is_finetuning(st.task):
        raise ValueError(f"The active run is a pretraining run: {action} it from the Training tab.")
    return worker


def busy(services: Services) -> str:
    """The warning (and the status) for a start while a run is active: whose run, and where to stop it."""
    st = services.get_worker().status()
    kind = f"{st.task} fine-tuning" if is_finetuning(st.task) else st.task
    where = "this tab" if is_finetuning(st.task) else "the Training tab"
    message = (f"A {kind} run is already {st.state}: the app trains one run at a time. Stop it in {where} "
               "before starting another.")
    gr.Warning(message)
    return f"⚠️ {message}\n\n" + finetune_status(st)


def start(services: Services, model_key: str | None, task: str, data_source: str, example: str | None,
          data_file: Any, labels: str | None, steps: Any, batch_size: Any, learning_rate: Any, seq_length: Any,
          eval_fraction: Any, report_to: str | None = "none", settings: Mapping[str, Any] | None = None) -> str:
    """Start a fine-tuning run; a warning (not an error) while another run is active. The status as Markdown.
    ``settings``: the task's own settings' box texts by name (``explorer.finetune.settings_form``)."""
    worker = services.get_worker()
    if worker.status().active:
        return busy(services)
    experiment = services.experiment_busy()          # an experiment trains (the Experiments tab): one at a time
    if experiment:
        gr.Warning(experiment)
        return f"⚠️ {experiment}\n\n" + finetune_status(worker.status())
    job = make_job(services, model_key, task, data_source, example, data_file, labels, steps, batch_size,
                   learning_rate, seq_length, eval_fraction, report_to, settings)
    try:
        worker.start(job.spec)
    except RunActiveError:          # another browser started one meanwhile
        return busy(services)
    return (f"Fine-tuning `{model_key or 'default'}` for **{job.spec.task}** on **{job.data_name}** "
            f"({job.data.summary}).\n\n" + finetune_status(worker.status()))


FORM_PARAMETERS = ("model_key", "task", "data_source", "example", "data_file", "labels", "steps", "batch_size",
                   "learning_rate", "seq_length", "eval_fraction", "report_to")


def start_handler(services: Services, access: AccessPolicy, first: str,
                   fields: Mapping[str, SettingField]) -> Callable[..., str]:
    """The *Start* button's handler, its parameters the form's fields in order: the fixed ones, one per task setting
    (``fields``: its name, empty by default, documented with the tasks that have it and its help), the token."""
    defaults: dict[str, Any] = dict(model_key="default", task=first, data_source="example", example="",
                                    data_file=None, labels="", steps="", batch_size="", learning_rate="",
                                    seq_length="", eval_fraction="", report_to="none")
    names = [*FORM_PARAMETERS, *fields, "token"]
    signature = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     default=defaults.get(name, ""), annotation=str)
                                   for name in names])

    def finetune_start(*args: Any, **kwargs: Any) -> str:
        """Fine-tune a model for a task in the background; the status as Markdown.

        Args:
            model_key: the base model: default, checkpoint:<run>/<step-dir>, local:<folder> or hub:<owner/name>.
            task: {tasks}.
            data_source: example (a bundled example) or upload (data_file).
            example: the bundled example's name; empty: the task's first. multiple_choice also has "next sentence,
                from Shakespeare (built in)" (no file: 4 choices made from the built-in corpus).
            data_file: with data_source upload: a CSV/TSV/JSONL (classification), SQuAD JSON (qa), CoNLL-U or
                word<TAB>tag .conllu/.tsv/.txt (token_classification) or context,choice0..,label CSV
                (multiple_choice) file.
            labels: classification / token_classification: the labels (tags) every row (word) must have,
                comma-separated; empty: any.
            steps: optimizer steps (empty: the task's default).
            batch_size: examples per step (empty: the task's default).
            learning_rate: peak learning rate (empty: the task's default).
            seq_length: longest input in tokens (empty: the task's default).
            eval_fraction: share of the examples held out to evaluate on (empty: the task's default).
            report_to: "none", or "tensorboard" to also write TensorBoard event files to <run>/logs (needs the
                tensorboard package).
{settings}            token: the admin token (public mode only).
        """
        given = signature.bind(*args, **kwargs)
        given.apply_defaults()
        v = given.arguments
        access.require_admin(v["token"], "fine-tune")
        return start(services, *(v[name] for name in FORM_PARAMETERS), {name: v[name] for name in fields})

    finetune_start.__signature__ = signature               # type: ignore[attr-defined]  # the API's parameters
    finetune_start.__annotations__ = {name: str for name in names} | {"return": str}
    setting_lines = "".join(f"            {name}: {', '.join(f.tasks)}: {f.help} (empty: the task's default).\n"
                            for name, f in fields.items())
    tasks = list(finetune_rows())
    listed = ", ".join(tasks[:-1]) + " or " + tasks[-1] if len(tasks) > 1 else tasks[0]
    finetune_start.__doc__ = (finetune_start.__doc__ or "").format(tasks=listed, settings=setting_lines)
    return finetune_start


def steer_handlers(services: Services, access: AccessPolicy) -> list[Callable[[str], str]]:
    """The handlers of the pause, resume, stop and save buttons, in that order (named as their endpoints end)."""
    def pause(token: str = "") -> str:
        access.require_admin(token, "pause training")
        worker = control(services, "pause")
        return current_status(worker, worker.pause())

    def resume(token: str = "") -> str:
        access.require_admin(token, "resume training")
        worker = control(services, "resume")
        return current_status(worker, worker.resume())

    def stop(token: str = "") -> str:
        access.require_admin(token, "stop training")
        worker = control(services, "stop")
        return current_status(worker, worker.stop())

    def save(token: str = "") -> str:
        access.require_admin(token, "save checkpoints")
        worker = control(services, "save")
        path = worker.save_checkpoint_now(timeout_s=120.0)
        saved = (f"Saved `{path.name}`; it is in the model picker." if path is not None
                 else "The checkpoint is being written…")
        return saved + "\n\n" + finetune_status(worker.status())

    return [pause, resume, stop, save]
