"""Arms that share one pretraining per seed (BERT's Table 7) draw it once per seed, named after what shares it,
and the curves CSV lists its losses once, not once per arm."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from engine.experiments.builtin_table7 import BERT_TABLE7
from explorer.experiments.background import ExperimentJob
from explorer.experiments.curves import curves_update
from explorer.experiments.live import curves_csv
from explorer.experiments.progress import CurveReaders, arm_seeds, pretraining_runs

JOB = ExperimentJob(BERT_TABLE7, BERT_TABLE7.quick.with_changes(seeds=2))


def test_a_shared_pretraining_is_one_curve_per_seed(tmp_path: Path) -> None:
    runs = pretraining_runs(tmp_path, JOB)
    assert [(one.arm.name, one.seed, sharing) for one, sharing in runs] == [("fine-tune", 0, 7), ("fine-tune", 1, 7)]
    assert {one.pretrain_dir for one in arm_seeds(tmp_path, JOB)} == {one.pretrain_dir for one, _ in runs}
    for one, _ in runs:
        one.pretrain_dir.mkdir(parents=True)
        (one.pretrain_dir / "metrics.jsonl").write_text(
            "".join(json.dumps({"kind": "train", "step": s, "mlm_loss": 7.0 - s / 10}) + "\n" for s in (1, 2)),
            encoding="utf-8")
    readers = CurveReaders()
    value, _ = curves_update(readers, tmp_path, JOB, None)
    names = [s["name"] for s in value["charts"][0]["series"]]
    assert names == ["one pretraining shared by all 7 arms · seed 0", "one pretraining shared by all 7 arms · seed 1"]
    assert sorted(value["points"]) == ["train:arm0_seed0", "train:arm0_seed1"]
    rows = list(csv.DictReader(io.StringIO(curves_csv(readers, tmp_path, JOB))))
    assert [(r["arm"], r["seed"], r["step"]) for r in rows] == [("fine-tune", "0", "1"), ("fine-tune", "0", "2"),
                                                                ("fine-tune", "1", "1"), ("fine-tune", "1", "2")]
