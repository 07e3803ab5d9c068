"""The GPU session's clock and stages (scripts/gpu/budget.py): a stage that fails is recorded and the next one
runs, a stage with no time left is skipped, and summary.json tells how far a session got after every stage."""
from __future__ import annotations

import json
import time

from scripts.gpu.budget import FAILED, PASSED, SKIPPED, Session, StageResult


def test_stages_run_in_order_and_survive_a_failure(tmp_path):
    session = Session(tmp_path, budget_s=30, started=time.monotonic(), settings={"pack": "p"})
    seen = []

    def broken(deadline: float) -> StageResult:
        seen.append("broken")
        raise RuntimeError("the GPU fell over")

    def fine(deadline: float) -> StageResult:
        seen.append(round(deadline - time.monotonic()))
        return StageResult(PASSED, "ok", {"n": 1})

    assert session.stage("first", broken, limit_s=5).status == FAILED
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["stages"]["first"]["detail"] == "RuntimeError: the GPU fell over"
    assert session.stage("second", fine, limit_s=5, reserve_s=0).status == PASSED
    assert seen == ["broken", 5]                    # the limit, not the whole budget
    assert session.stage("third", fine, limit_s=100, reserve_s=25).status == PASSED
    assert seen[-1] <= 5                            # the budget less what later stages keep
    session.close()
    log = (tmp_path / "session.log").read_text()
    assert "RuntimeError: the GPU fell over" in log and "Traceback" in log and "== third: passed" in log


def test_a_stage_without_time_is_skipped(tmp_path):
    session = Session(tmp_path, budget_s=1, started=time.monotonic() - 5)
    result = session.stage("late", lambda deadline: StageResult(PASSED), limit_s=10)
    assert (result.status, result.detail) == (SKIPPED, "out of time")
    session.close()
    assert json.loads((tmp_path / "summary.json").read_text())["stages"]["late"]["status"] == SKIPPED
