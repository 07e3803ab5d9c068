"""``bench/experiment_budget.py`` on the tests' tiny experiment: it times the reference step, runs the experiment as a
user does (a fresh process, the table written), and prints the wall time against the budget with its ratio; an
experiment that fails is reported with its exit code and makes the script fail."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import experiment_budget

TESTS = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_it_times_the_tiny_experiment_against_the_quick_budget(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))               # support.tiny_experiment_cli offers tiny-mix
    code = experiment_budget.main(["tiny-mix", "--quick", "--module", "support.tiny_experiment_cli", "--out",
                                   str(tmp_path / "out"), "--root", str(tmp_path / "runs"), "--threads", "1"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    step_ms = float(re.search(r"reference: one tiny pretraining step of 16 x 64 tokens: ([0-9.]+) ms", printed)[1])
    line = re.search(r"tiny-mix \(quick\): (\d+) min (\d\d) s, budget 20 min 00 s, ratio ([0-9.]+), ([0-9,]+) "
                     r"reference steps, exit 0, load ", printed)
    wall = int(line[1]) * 60 + int(line[2])
    assert float(line[3]) == pytest.approx(wall / 1200, abs=0.01) and step_ms > 0
    table = (tmp_path / "out" / "tiny-mix.md").read_text(encoding="utf-8")
    assert "| 80/10/10 (BERT's) | 84.2 |" in table                      # the experiment's own table, as printed


def test_a_failing_experiment_is_reported_and_fails_the_script(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experiment_budget, "step_seconds", lambda preset="tiny": 0.01)
    code = experiment_budget.main(["bert-table99", "--quick", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 1 and "bert-table99 (quick): 0 min" in printed and ", exit 2, load " in printed
    assert "no experiment 'bert-table99'" in (tmp_path / "out" / "bert-table99.log").read_text()
