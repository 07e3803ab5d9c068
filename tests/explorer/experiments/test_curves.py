"""The arms' curves as a browser gets them: every arm-seed's MLM loss once (with the chart, a series per arm-seed),
then only the steps logged since, nothing when nothing moved, and everything again when a run's metrics file was
rewritten (a resumed run drops the records past its checkpoint)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from explorer.experiments.background import ExperimentJob
from explorer.experiments.curves import curves_update
from explorer.experiments.progress import CurveReaders, arm_seeds
from support.tiny_experiment import TINY

JOB = ExperimentJob(TINY, TINY.quick.with_changes(seeds=2))


def log(run: Path, steps: range, rewrite: bool = False) -> None:
    run.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"kind": "train", "step": s, "mlm_loss": 7.0 - s / 10}) + "\n" for s in steps)
    path = run / "metrics.jsonl"
    if rewrite:                                   # as a resume does: a new file put in place
        path.with_suffix(".tmp").write_text(lines, encoding="utf-8")
        os.replace(path.with_suffix(".tmp"), path)
    else:
        with path.open("a", encoding="utf-8") as out:
            out.write(lines)


def test_points_come_once_then_only_new_ones_and_again_after_a_rewrite(tmp_path: Path) -> None:
    readers, runs = CurveReaders(), [one.pretrain_dir for one in arm_seeds(tmp_path, JOB)]
    log(runs[0], range(1, 4))
    value, seen = curves_update(readers, tmp_path, JOB, None)
    series = value["charts"][0]["series"]
    assert value["reset"] and [s["name"] for s in series] == [
        "80/10/10 (BERT's) · seed 0", "100% [MASK] · seed 0", "80/10/10 (BERT's) · seed 1", "100% [MASK] · seed 1"]
    assert [s["dash"] for s in series] == ["solid", "solid", "dot", "dot"] and series[0]["color"] == series[2]["color"]
    assert value["points"] == {"train:arm0_seed0": [[1, 2, 3], [6.9, 6.8, 6.7], [6.9, 6.85, 6.8]]}
    assert curves_update(readers, tmp_path, JOB, seen)[0] is None            # nothing new: nothing sent

    log(runs[0], range(4, 6))
    log(runs[1], range(1, 2))
    for run in readers._runs.values():
        run.read_at = None                                                    # the once-a-second read is due
    value, seen = curves_update(readers, tmp_path, JOB, seen)
    assert not value["reset"] and "charts" not in value
    assert value["points"]["train:arm0_seed0"][0] == [4, 5] and value["points"]["train:arm1_seed0"][0] == [1]

    log(runs[0], range(1, 3), rewrite=True)                                   # resumed from step 2
    for run in readers._runs.values():
        run.read_at = None
    value, seen = curves_update(readers, tmp_path, JOB, seen)
    assert value["reset"] and value["points"]["train:arm0_seed0"][0] == [1, 2]
    assert value["points"]["train:arm1_seed0"][0] == [1]                      # the others' points come again too
