"""A run's status line, as the Training tab words it (the Fine-tune tab adds its task's numbers): the run's state
in words, its progress, speed, ETA and why it ended; and ``version``, the key the tabs' idle checks compare."""
from __future__ import annotations

from collections.abc import Mapping

from engine.training.tasks.registry import is_finetuning
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import WorkerStatus
from explorer.formatting import percent, sig
from explorer.ui_errors import shown

# What each state means to a user, shown under the state's name.
STATE_HELP = {
    RunState.PREPARING: "reading the text, building the vocabulary and the model",
    RunState.RUNNING: "training in the background; the app keeps serving",
    RunState.PAUSED: "waiting after its last step; press **Resume** to go on",
    RunState.STOPPING: "finishing the current step and saving a checkpoint",
    RunState.STOPPED: "stopped by **Stop** before its last step; its last checkpoint can be continued (**Continue a run**)",
    RunState.FINISHED: "reached its total steps; the last checkpoint is in the model picker (and the Training tab's checkpoint table)",
    RunState.FAILED: "ended by an error (below); checkpoints written before it are intact",
    RunState.DIVERGED: "the loss became NaN or infinite, so training stopped; checkpoints written before it are intact",
}


def duration(seconds: float | None) -> str:
    """``3723`` -> "1h 02m 03s", ``65`` -> "1m 05s", None -> "—"."""
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    minutes, s = divmod(seconds, 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h {m:02d}m {s:02d}s" if hours else (f"{m}m {s:02d}s" if m else f"{s}s")


def status_markdown(st: WorkerStatus, in_finetune_tab: bool = False, means: Mapping[str, float] | None = None,
                    window: int = 0) -> str:
    """State, progress, smoothed speed, ETA (only while running), message and, for a failed or diverged
    run, the reason (never a traceback); a fine-tuning run says where its curves are, unless this is
    the Fine-tune tab. The MLM loss and NSP accuracy are ``means`` over the last ``window`` logged steps when
    given (what the Training tab's curves end on), else the last step's batch, said so."""
    if st.state == RunState.IDLE:
        return "**idle** — no training run yet. Pick settings and press **Start**."
    lines = [f"**{st.state}** · step **{st.step} / {st.total_steps}**"
             + (f" · run `{st.run_dir.name}`" if st.run_dir is not None else "")]
    m = st.metrics or {}
    parts = []
    if st.tokens_per_s is not None and st.state.is_training:
        parts.append(f"{st.tokens_per_s:,.0f} tokens/s")
    parts.append(f"elapsed {duration(st.elapsed)}")
    if st.state == RunState.RUNNING and st.eta_s is not None:
        parts.append(f"ETA {duration(st.eta_s)}")
    if means:
        shown_means = [f"MLM loss {sig(means['mlm_loss'])}" if "mlm_loss" in means else "",
                       f"NSP acc {percent(means['nsp_acc'])}" if "nsp_acc" in means else ""]
        parts.append(" · ".join(p for p in shown_means if p) + f" (means of the last {window} steps, as the "
                     "curves' bold lines)")
    else:
        if m.get("mlm_loss") is not None:
            parts.append(f"MLM loss {sig(m['mlm_loss'])} (this batch)")
        if m.get("nsp_acc") is not None:
            parts.append(f"NSP acc {percent(m['nsp_acc'])} (this batch)")
    lines.append(" · ".join(parts))
    help_text = STATE_HELP.get(st.state)
    lines.append(f"_{shown(st.message)}_" + (f" — {help_text}" if help_text else ""))
    if st.notice:
        lines.append(f"⚠️ {shown(st.notice)}")
    if st.error and st.state.is_failure:
        lines.append(f"❌ {shown(st.error)}")
    if st.last_checkpoint is not None:
        lines.append(f"Last checkpoint: `{st.last_checkpoint.name}`")
    if is_finetuning(st.task) and not in_finetune_tab:      # the one worker also runs the Fine-tune tab's jobs
        lines.insert(1, f"This is a **{st.task}** fine-tuning run: its curves and the examples it gets wrong are "
                        "in the **Fine-tune** tab.")
    return "\n\n".join(lines)


def shown_clock(st: WorkerStatus) -> str | None:
    """The line's clock as shown (elapsed, and the ETA while running) while a run is active: part of the status's
    version, so the line is drawn again whenever its time changes (a stage that says nothing new still ticks)."""
    if not st.active:
        return None
    return duration(st.elapsed) + ("" if st.eta_s is None else f"/{duration(st.eta_s)}")


def version(st: WorkerStatus) -> tuple[int, str, int]:
    """What the idle check compares: (run id, state, records); any change means "look again"."""
    return (st.run_id, st.state, st.records)
