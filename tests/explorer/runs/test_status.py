"""The status line says the run's state in words: stopped is not finished, no ETA unless running."""
from __future__ import annotations

from pathlib import Path

from engine.training.worker.shared_state import WorkerStatus
from explorer.runs.status import duration, shown_clock, status_markdown


def status(state: str, **fields) -> WorkerStatus:
    base = dict(step=40, total_steps=100, run_dir=Path("/srv/runs/run-1"), elapsed=65.0, eta_s=90.0,
                tokens_per_s=1234.5, metrics={"mlm_loss": 5.123456, "nsp_acc": 0.61234})
    base.update(fields)
    return WorkerStatus(state, fields.pop("message", f"step 40 / 100"), **base)


def test_running_shows_speed_eta_and_rounded_metrics():
    text = status_markdown(status("running"))
    assert text.startswith("**running** · step **40 / 100** · run `run-1`")
    assert "1,234 tokens/s" in text and "ETA 1m 30s" in text and "elapsed 1m 05s" in text
    assert "MLM loss 5.12" in text and "NSP acc 61.2%" in text and "/srv" not in text


def test_no_eta_while_paused_or_stopping():
    for state in ("paused", "stopping"):
        text = status_markdown(status(state))
        assert text.startswith(f"**{state}**") and "ETA" not in text


def test_stopped_and_finished_are_different_words():
    stopped = status_markdown(status("stopped", eta_s=None, outcome="stopped"))
    finished = status_markdown(status("finished", step=100, eta_s=None, outcome="finished"))
    assert stopped.startswith("**stopped**") and "Continue" in stopped and "tokens/s" not in stopped
    assert finished.startswith("**finished**") and "reached its total steps" in finished


def test_failed_says_why_without_a_traceback():
    text = status_markdown(status("failed", error="RuntimeError: out of memory at /srv/runs/x",
                                  traceback="Traceback ...", eta_s=None))
    assert "**failed**" in text and "❌ out of memory at …/x" in text
    assert "Traceback" not in text and "RuntimeError" not in text and "ETA" not in text


def test_duration_reads_like_a_clock():
    assert [duration(s) for s in (None, 5, 65, 3723)] == ["—", "5s", "1m 05s", "1h 02m 03s"]


def test_a_fine_tuning_run_says_where_its_curves_are():
    text = status_markdown(status("running", task="classification", metrics={"loss": 0.5}))
    assert "This is a **classification** fine-tuning run" in text and "**Fine-tune** tab" in text
    assert "Fine-tune** tab" not in status_markdown(status("running", task="classification"), in_finetune_tab=True)
    assert "fine-tuning" not in status_markdown(status("running"))


def test_a_continued_run_says_which_damaged_checkpoint_it_passed_over():
    note = ("Continuing from step-000003, the newest good checkpoint, because step-000006 is damaged "
            "(model.safetensors cannot be read).")
    text = status_markdown(status("running", notice=note))
    assert f"⚠️ {note}" in text.split("\n\n")
    assert "⚠️" not in status_markdown(status("running"))


def test_a_quiet_stage_still_redraws_the_line_as_its_clock_moves():
    """The tab sends the line again only when its version moves: while a run is active the shown clock is part of
    it, so "elapsed" never sits stale behind a stage that says nothing new (the issue: "elapsed 25s" at 76 s)."""
    message = "tokenising shakespeare: 0.6 of 1.4 MB · ETA 2s"
    early, late = (WorkerStatus("preparing", message, 0, 300, elapsed=e) for e in (25.0, 76.0))
    assert shown_clock(early) != shown_clock(late) and "elapsed 1m 16s" in status_markdown(late)
    assert message in status_markdown(late)
    ended = [status("finished", eta_s=None, outcome="finished", elapsed=e) for e in (25.0, 76.0)]
    assert shown_clock(ended[0]) is shown_clock(ended[1]) is None, "an ended run's line stays quiet"
