"""The run browser (``explorer/runs/watch/watcher.py``) lists an experiment's arms beside the direct runs, titled
``experiment · arm · seed k``, and follows one as it follows any run."""
from __future__ import annotations

import itertools
from pathlib import Path

from engine.training.runs.state import append_metrics
from explorer.runs.watch.watcher import RunWatcher, watch_update
from support.probing_helpers import write_run
from support.watch_records import TRAIN

SCALE = "tiny-600-steps-1a2b3c4d"
NAME = f"experiments:bert-table8:{SCALE}:mix-100-0-0:seed-1:pretrain"


def test_the_browser_lists_and_follows_an_arm(tmp_path: Path, tiny_tokenizer) -> None:
    runs = tmp_path / "runs"
    write_run(runs, tiny_tokenizer, steps=(2,), run="direct")
    arm = f"experiments/bert-table8/{SCALE}/mix-100-0-0/seed-1/pretrain"
    write_run(runs, tiny_tokenizer, steps=(2,), run=arm)
    for record in TRAIN[:2]:
        append_metrics(runs / arm / "metrics.jsonl", record)
    watcher = RunWatcher(runs, clock=itertools.count(0, 10).__next__)
    labels = dict((name, label) for label, name in watcher.choices())
    assert set(labels) == {"direct", NAME}
    assert labels[NAME].startswith("bert-table8 · mix-100-0-0 · seed 1 · tiny 600 steps · step 2")
    outputs, _ = watch_update(watcher, NAME, None)
    status = outputs[0]
    assert "bert-table8 · mix-100-0-0 · seed 1" in status and str(tmp_path) not in status   # a name, no server path
    assert watcher.watch(NAME).history.seen("train")
