"""engine.training.runs.run_names: a new run folder is ``<task>-<yyyymmdd-hhmmss>``; older names still list."""
from __future__ import annotations

import re
import time

from engine.training.runs.run_folder import RunFolder
from engine.training.runs.run_names import run_name


def test_a_run_is_named_by_its_task_and_its_local_time():
    when = time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1))
    assert run_name("classification", when) == "classification-20260102-030405"
    assert re.fullmatch(r"pretraining-\d{8}-\d{6}", run_name("pretraining"))


def test_older_names_are_only_folder_names(tmp_path):
    for name in ("20250101-120000", "run-20250101-120000", "finetune-qa-20250101-120000",
                 run_name("qa", time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1)))):
        RunFolder(tmp_path / name).checkpoints_dir.mkdir(parents=True)
    assert sorted(run.name for run in RunFolder.runs_under(tmp_path)) == [
        "20250101-120000", "finetune-qa-20250101-120000", "qa-20260102-030405", "run-20250101-120000"]
