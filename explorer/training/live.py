"""The Training tab's live view: what every open browser polls, sent only when it changed.

A browser keeps the *versions* of what it was last sent (``Seen``, in a ``gr.State``): the status
(run, state, step, message, records, last checkpoint, and the clock it shows while a run is active, so "elapsed"
ticks even while a stage says nothing new), the curves (run, records, and the worker's record index it has
points up to), the batch view (run, step, and when it was last sent) and the checkpoint list (its paths).
``live_update`` sends only the outputs whose version moved and ``gr.skip()`` for the rest: the curves as points
(``explorer.runs.curves``: the run once, then only new records' points, appended by the page; no figure is
built per tick), the masked batch at most every ``BATCH_SECONDS`` while a run is training, and the status line
with the running means the curves end on. ``explorer.runs.status.version`` is the cheap key the slow idle check
compares.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from engine.training.runs.run_folder import RunFolder
from engine.training.worker.shared_state import WorkerStatus
from explorer.services import Services
from explorer.runs.status import shown_clock, status_markdown
from explorer.training import plots as tp
from explorer.runs.curves import WINDOW, curves_since
from explorer.views.plot_names import named_for

CHECKPOINT_COLUMNS = ["name", "step", "run", "path"]
MASKED_COLUMNS = ["position", "input token", "original token", "kind"]
LIVE_OUTPUTS = 5        # status, the curves, batch strip, masked table, checkpoints table
BATCH_SECONDS = 30.0    # the masked batch is redrawn at most this often while a run trains (each step has one)

Seen = dict[str, Any]   # output group -> the version last sent to this browser


def shown_path(path: Path, runs_root: Path) -> str:
    """A checkpoint's folder as the table shows it: relative to the runs folder, so a public app does not
    print its server's directory layout (a run elsewhere shows ``<run>/checkpoints/<step>``)."""
    try:
        return path.relative_to(runs_root).as_posix()
    except ValueError:
        run = RunFolder.of_checkpoint(path)
        return path.relative_to(run.root.parent).as_posix()


def checkpoints_table(services: Services) -> pd.DataFrame:
    """Every complete checkpoint under the runs folder, newest first; one whose weights fail their header check
    is marked (picking it says why instead of serving a broken zip)."""
    worker = services.get_worker()
    rows = [[c.name if c.loadable else f"{c.name} ⚠ weights damaged", c.step, c.run.title,
             shown_path(c.path, worker.runs_root)] for c in worker.checkpoints()]
    return pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS)


def listed_checkpoint(services: Services, text: str) -> Path:
    """The folder of the checkpoint a table row names (its shown path; in private mode its full path too);
    refuses anything the worker does not list, since the row comes from the browser and can be forged. A path
    that is not listed gets one answer whether or not something exists there (no probing the server's disk),
    and in public mode a listed checkpoint's full path is not listed (it would confirm a guessed server path)."""
    worker = services.get_worker()
    listed = {}
    for c in worker.checkpoints():
        listed[shown_path(c.path, worker.runs_root)] = c.path
        if not services.access.public:
            listed[str(c.path)] = c.path
    folder = listed.get(text)
    if folder is None:
        raise gr.Error("Pick a checkpoint from the table.", print_exception=False)
    if not (folder / "model.safetensors").is_file():
        raise gr.Error(f"`{text}` is gone (the checkpoint was deleted?).", print_exception=False)
    return folder


def _versions(services: Services, st: WorkerStatus) -> Seen:
    checkpoints = tuple(str(c.path) for c in services.get_worker().checkpoints())   # cached 1 s by the worker
    return {
        "status": (st.run_id, st.state, st.step, st.total_steps, st.message, st.records,
                   str(st.last_checkpoint), st.error, None if st.tokens_per_s is None else round(st.tokens_per_s, -1),
                   shown_clock(st)),        # elapsed moves every second: the line is honest while a stage is quiet
        "curves": (st.run_id, st.records),
        "batch": (st.run_id, st.step),
        "checkpoints": checkpoints,
        "state": st.state,           # what Pause / Resume / Stop / Save can act on (controls.steering_updates)
    }


def live_view(services: Services) -> tuple[Any, ...]:
    """Everything the live view shows, rebuilt from the worker's records (the public ``/train_status``)."""
    return live_update(services, None)[0]


def live_update(services: Services, seen: Seen | None) -> tuple[tuple[Any, ...], Seen, bool]:
    """The live view's outputs for a browser that was last sent ``seen`` (None: send everything), with
    ``gr.skip()`` where nothing changed; the new versions; and whether a run is active (keep ticking)."""
    worker = services.get_worker()
    st = worker.status()
    now = _versions(services, st)
    seen = seen or {}
    changed = {group: seen.get(group) != key for group, key in now.items()}
    skip = gr.skip()
    curves, now["curves_next"], means = curves_since(worker, st.run_id, seen)
    now["curves_run"] = st.run_id
    outputs: list[Any] = [status_markdown(st, means=means, window=WINDOW) if changed["status"] else skip,
                          curves if curves is not None else skip]
    clock = time.monotonic()
    due = not st.state.is_training or clock - seen.get("batch_at", -BATCH_SECONDS) >= BATCH_SECONDS
    if changed["batch"] and (due or seen.get("batch", (None,))[0] != st.run_id):
        batch = worker.current_batch()
        figure = named_for(tp.batch_figure(batch), st.run_dir and f"run {st.run_dir.name}", "current batch",
                           "Current batch")
        outputs += [figure, pd.DataFrame(tp.masked_rows(batch), columns=MASKED_COLUMNS)]
        now["batch_at"] = clock
    else:
        outputs += [skip] * 2
        now["batch"], now["batch_at"] = seen.get("batch"), seen.get("batch_at", -BATCH_SECONDS)
    outputs.append(checkpoints_table(services) if changed["checkpoints"] else skip)
    return tuple(outputs), now, st.active
