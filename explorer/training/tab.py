"""Training tab: pretrain a small BERT in the background and watch it learn, live."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from engine.training.run_folder import RunFolder
from engine.training.job import JobSpec
from explorer.training import plots as tp
from explorer.training.status import status_markdown
from explorer.gpu import training_device
from explorer.services import Services
from explorer.ui_errors import friendly_errors, shown

PRESETS = ["tiny", "mini", "small"]
CORPORA = ["shakespeare"]
CHECKPOINT_COLUMNS = ["name", "step", "run", "path"]
MASKED_COLUMNS = ["position", "input token", "original token", "kind"]
TICK_SECONDS = 1.0

INTRO = """\
Pretrain a small BERT from scratch on a built-in corpus: a WordPiece vocabulary is learnt
from the corpus, then the model trains on **masked language modelling** (MLM) and, if on,
**next-sentence prediction** (NSP), in the background while the app keeps serving.

**What to watch.** MLM loss starts near ln(vocab size) (≈ 8.3 for 4,000 pieces: a uniform
guess) and falls as the model learns which pieces fit; NSP accuracy starts at 50% (a coin
toss: half the B segments really follow A) and rises above it once the model tells real
continuations from random ones. Of the ~15% of positions chosen for prediction, 80% are
replaced by `[MASK]`, 10% by a random token and 10% kept as they are — the batch view
below shows which, with the original token the model must recover.
"""


def _int(value: Any, name: str, minimum: int, maximum: int | None = None) -> int:
    """``value`` as a whole number in ``[minimum, maximum]``, else ValueError naming ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    number = int(number)
    if number < minimum or (maximum is not None and number > maximum):
        upper = f" and {maximum:,}" if maximum is not None else ""
        raise ValueError(f"{name} must be {'between ' + str(minimum) + upper if upper else f'at least {minimum}'}"
                         f"; got {number}")
    return number


def _float(value: Any, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def make_spec(services: Services, preset: str, corpus: str, max_documents: Any, vocab_size: Any,
              seq_length: Any, batch_size: Any, learning_rate: Any, steps: Any, mask_rate: Any,
              whole_word: bool, nsp: bool) -> JobSpec:
    """Check the controls and turn them into a validated ``JobSpec`` (ValueError says what is wrong)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    if corpus not in CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; choose one of: {', '.join(CORPORA)}")
    total_steps = _int(steps, "Steps", 1, 1_000_000)
    training = dict(
        learning_rate=_float(learning_rate, "Learning rate"),
        total_steps=total_steps,
        batch_size=_int(batch_size, "Batch size", 1, 4096),
        max_seq_length=_int(seq_length, "Sequence length", 8, min(512, services.max_length)),
        mlm_probability=_float(mask_rate, "Masking rate"),
        whole_word_masking=bool(whole_word),
        nsp=bool(nsp),
        eval_every=max(1, total_steps // 10),
        eval_batches=5,
        checkpoint_every=max(50, total_steps // 4),  # the last step is always checkpointed too
        device=training_device(),  # CPU on a Space: a background thread cannot hold a ZeroGPU
    )
    spec = JobSpec(training, preset=preset, corpus=corpus,
                   max_documents=_int(max_documents, "Max documents", 1, 1_000_000),
                   vocab_size=_int(vocab_size, "Vocab size", 50, 200_000))
    spec.validate()
    return spec


def shown_path(path: Path, runs_root: Path) -> str:
    """A checkpoint's folder as the table shows it: relative to the runs folder, so a public app does not
    print its server's directory layout (a run elsewhere shows ``<run>/checkpoints/<step>``)."""
    try:
        return path.relative_to(runs_root).as_posix()
    except ValueError:
        run = RunFolder.of_checkpoint(path)
        return path.relative_to(run.root.parent).as_posix()


def checkpoints_table(services: Services) -> pd.DataFrame:
    worker = services.get_worker()
    rows = [[c.name, c.step, c.run.name, shown_path(c.path, worker.runs_root)]
            for c in worker.checkpoints()]
    return pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS)


def listed_weights(services: Services, text: str) -> Path:
    """The weights file of the checkpoint a table row names (its shown path, or its full path); refuses
    anything the worker does not list, since the row comes from the browser and can be forged."""
    worker = services.get_worker()
    listed = {}
    for c in worker.checkpoints():
        listed[shown_path(c.path, worker.runs_root)] = c.path
        listed[str(c.path)] = c.path
    folder = listed.get(text)
    if folder is None:
        candidate = Path(text) if Path(text).is_absolute() else worker.runs_root / text
        if not (candidate / "model.safetensors").is_file():
            raise gr.Error(f"`{text}` is gone (the checkpoint was deleted?).", print_exception=False)
        raise gr.Error("Pick a checkpoint from the table.", print_exception=False)
    if not (folder / "model.safetensors").is_file():
        raise gr.Error(f"`{text}` is gone (the checkpoint was deleted?).", print_exception=False)
    return folder / "model.safetensors"


def live_view(services: Services) -> tuple[str, go.Figure, go.Figure, go.Figure, go.Figure, go.Figure,
                                           pd.DataFrame, pd.DataFrame]:
    """Everything the live view shows, rebuilt from the worker's records."""
    worker = services.get_worker()
    st = worker.status()
    records, _ = worker.metrics_since(0)
    batch = worker.current_batch()
    return (status_markdown(st), tp.mlm_loss_figure(records), tp.nsp_loss_figure(records),
            tp.accuracy_figure(records), tp.lr_figure(records), tp.batch_figure(batch),
            pd.DataFrame(tp.masked_rows(batch), columns=MASKED_COLUMNS), checkpoints_table(services))


def start_run(services: Services, *controls: Any) -> str:
    """Start a run; a warning (not an error) when one is already active."""
    worker = services.get_worker()
    spec = make_spec(services, *controls)
    try:
        worker.start(spec)
    except ValueError as e:
        if worker.status().active and "already" in str(e):
            gr.Warning(str(e))
            return f"⚠️ {e}\n\n" + status_markdown(worker.status())
        raise
    return status_markdown(worker.status())


def build(services: Services) -> dict[str, Any]:
    """Create the Training tab's widgets inside the current ``gr.Tab`` and wire them."""
    gr.Markdown(INTRO, elem_classes=["tab-intro"])
    with gr.Row():
        preset = gr.Dropdown(PRESETS, value="tiny", label="Model preset", info="tiny is quick on a CPU")
        corpus = gr.Dropdown(CORPORA, value="shakespeare", label="Corpus (built in)")
        # No precision=0 on these: Gradio would round 2.5 to 2 (and fail with no message on text or
        # infinity) before make_spec can say "must be a whole number".
        max_documents = gr.Number(200, label="Max documents")
        vocab_size = gr.Number(4000, label="Vocab size")
    with gr.Row():
        seq_length = gr.Number(64, label="Sequence length")
        batch_size = gr.Number(16, label="Batch size")
        learning_rate = gr.Number(5e-4, label="Learning rate")
        steps = gr.Number(300, label="Steps")
    with gr.Row():
        mask_rate = gr.Number(0.15, label="Masking rate")
        whole_word = gr.Checkbox(False, label="Whole-word masking")
        nsp = gr.Checkbox(True, label="Next-sentence prediction (NSP)")
    access = services.access  # public mode: the controls need the admin token (explorer.access)
    if access.public:
        gr.Markdown(access.notice(), elem_classes=["access-notice"])
    enabled = access.training_enabled
    with gr.Row():
        admin = ([gr.Textbox(label="Admin token", type="password", max_lines=1, scale=2)]
                 if access.asks_for_token else [])
        start_btn = gr.Button("Start", variant="primary", interactive=enabled)
        pause_btn = gr.Button("Pause", interactive=enabled)
        resume_btn = gr.Button("Resume", interactive=enabled)
        stop_btn = gr.Button("Stop", interactive=enabled)
        save_btn = gr.Button("Save checkpoint now", interactive=enabled)
        refresh_btn = gr.Button("Refresh", size="sm")
    status = gr.Markdown(status_markdown(services.get_worker().status()), elem_classes=["train-status"])
    with gr.Row():
        mlm_plot = gr.Plot(label="MLM loss")
        nsp_plot = gr.Plot(label="NSP loss")
    with gr.Row():
        acc_plot = gr.Plot(label="Accuracy")
        lr_plot = gr.Plot(label="Learning rate")
    batch_plot = gr.Plot(label="Current batch: masked positions (80% [MASK] / 10% random / 10% kept)")
    masked_table = gr.Dataframe(headers=MASKED_COLUMNS, label="Masked positions of that sequence",
                                interactive=False, max_height=240)
    checkpoints = gr.Dataframe(headers=CHECKPOINT_COLUMNS, label="Checkpoints (click a row to download its weights)",
                               interactive=False, max_height=240)
    download = gr.File(label="model.safetensors of the chosen checkpoint", interactive=False)

    controls = [preset, corpus, max_documents, vocab_size, seq_length, batch_size, learning_rate, steps,
                mask_rate, whole_word, nsp]

    @friendly_errors
    def train_start(preset: str = "tiny", corpus: str = "shakespeare", max_documents: float = 200,
                    vocab_size: float = 4000, seq_length: float = 64, batch_size: float = 16,
                    learning_rate: float = 5e-4, steps: float = 300, mask_rate: float = 0.15,
                    whole_word: bool = False, nsp: bool = True, token: str = "") -> str:
        """Start a pretraining run with the given settings in the background; the status as Markdown.

        Args:
            preset: model size (tiny, mini, small, medium, base, large).
            corpus: the built-in corpus.
            max_documents: use only the first N documents.
            vocab_size: WordPiece vocabulary trained on the corpus.
            seq_length: longest sequence in tokens.
            batch_size: sequences per step.
            learning_rate: peak learning rate.
            steps: optimizer steps.
            mask_rate: fraction of tokens masked.
            whole_word: mask whole words.
            nsp: train next-sentence prediction too.
            token: the admin token (public mode only).
        """
        access.require_admin(token, "start training")
        return start_run(services, preset, corpus, max_documents, vocab_size, seq_length, batch_size,
                         learning_rate, steps, mask_rate, whole_word, nsp)

    @friendly_errors
    def train_pause(token: str = "") -> str:
        """Pause the active run after its current step."""
        access.require_admin(token, "pause training")
        return status_markdown(services.get_worker().pause())

    @friendly_errors
    def train_resume(token: str = "") -> str:
        """Resume a paused run."""
        access.require_admin(token, "resume training")
        return status_markdown(services.get_worker().resume())

    @friendly_errors
    def train_stop(token: str = "") -> str:
        """Stop the active run after its current step (it saves a final checkpoint)."""
        access.require_admin(token, "stop training")
        return status_markdown(services.get_worker().stop())

    @friendly_errors
    def train_save(token: str = "") -> str:
        """Save a checkpoint of the active run now; the status as Markdown."""
        access.require_admin(token, "save checkpoints")
        worker = services.get_worker()
        path = worker.save_checkpoint_now(timeout_s=60.0)
        note = f"Saved `{path.name}`." if path is not None else "The checkpoint is being written…"
        return note + "\n\n" + status_markdown(worker.status())

    @friendly_errors
    def train_status() -> tuple[Any, ...]:
        """Status, curves (MLM loss, NSP loss, accuracy, lr), masked batch, its table and checkpoints."""
        return live_view(services)

    def pick_checkpoint(evt: gr.SelectData) -> str | None:
        row = evt.row_value or []
        if len(row) < len(CHECKPOINT_COLUMNS):
            return None
        return str(listed_weights(services, str(row[CHECKPOINT_COLUMNS.index("path")])))

    start_btn.click(train_start, inputs=controls + admin, outputs=status, api_name="train_start")
    pause_btn.click(train_pause, inputs=admin, outputs=status, api_name="train_pause")
    resume_btn.click(train_resume, inputs=admin, outputs=status, api_name="train_resume")
    stop_btn.click(train_stop, inputs=admin, outputs=status, api_name="train_stop")
    save_btn.click(train_save, inputs=admin, outputs=status, api_name="train_save")
    live_outputs = [status, mlm_plot, nsp_plot, acc_plot, lr_plot, batch_plot, masked_table, checkpoints]
    timer = gr.Timer(TICK_SECONDS)
    timer.tick(train_status, outputs=live_outputs, show_progress="hidden", api_name="train_status",
               concurrency_limit=None)
    refresh_btn.click(train_status, outputs=live_outputs, show_progress="hidden",
                      api_name="train_refresh", api_visibility="private")
    checkpoints.select(pick_checkpoint, outputs=download, api_name="train_pick_checkpoint",
                       api_visibility="private")
    return {"status": status, "timer": timer, "controls": controls, "checkpoints": checkpoints,
            "plots": [mlm_plot, nsp_plot, acc_plot, lr_plot, batch_plot], "download": download}
