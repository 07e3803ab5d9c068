"""engine.training.runs.run_folder: the one place that knows a run's layout and its checkpoints."""
from __future__ import annotations

import json
import os

import pytest

from engine.training.runs.run_folder import RunFolder, checkpoint_name, is_complete, resolve_checkpoint
from engine.training.runs.spec_file import read_spec, write_spec
from engine.training.runs.run_catalog import checkpoints_newest_first


def fake_checkpoint(run: RunFolder, step: int, complete: bool = True, epoch: int = 0) -> None:
    folder = run.checkpoint_dir(step)
    folder.mkdir(parents=True)
    names = ("config.json", "model.safetensors") + (("training_state.pt",) if complete else ())
    for name in names:
        (folder / name).write_text("x")
    (folder / "explorer_state.json").write_text(json.dumps({"epoch": epoch, "metrics": {"loss": 1.0 / step}}))


def test_paths_are_named_by_the_folder(tmp_path):
    run = RunFolder(tmp_path / "run-1")
    assert run.name == "run-1" and run.spec_path.name == "run.json" and run.metrics_path.name == "metrics.jsonl"
    assert run.checkpoint_dir(42) == tmp_path / "run-1" / "checkpoints" / "step-000042"
    assert checkpoint_name(7) == "step-000007"
    assert RunFolder.of_checkpoint(run.checkpoint_dir(42)) == run


def test_checkpoints_are_listed_newest_first_and_only_when_complete(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert run.checkpoints() == [] and run.latest() is None and not RunFolder.is_run(run.root)
    fake_checkpoint(run, 3, epoch=1)
    fake_checkpoint(run, 12)
    fake_checkpoint(run, 20, complete=False)                    # a writer still at work: never listed
    (run.checkpoints_dir / "notes").mkdir()
    found = run.checkpoints()
    assert [c.step for c in found] == [12, 3] and found[1].epoch == 1 and found[0].metrics == {"loss": 1 / 12}
    assert found[0].run == run and RunFolder.is_run(run.root)
    assert run.latest().step == 12 and RunFolder(run.root).checkpoints() == found
    assert is_complete(found[0].path) and not is_complete(run.checkpoint_dir(20))


def test_resolve_and_locate_take_a_run_or_one_of_its_checkpoints(tmp_path):
    run = RunFolder(tmp_path / "run")
    fake_checkpoint(run, 3)
    fake_checkpoint(run, 6)
    assert resolve_checkpoint(run.root) == run.checkpoint_dir(6)
    assert RunFolder.locate(run.checkpoint_dir(3)) == (run, run.checkpoint_dir(3))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="it is a model, not a complete training checkpoint"):
        resolve_checkpoint(tmp_path / "model")
    with pytest.raises(FileNotFoundError, match="no run or checkpoint directory"):
        resolve_checkpoint(tmp_path / "absent")
    empty = RunFolder(tmp_path / "empty")
    empty.checkpoints_dir.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="has no complete checkpoint"):
        resolve_checkpoint(empty.root)


def written_at(run: RunFolder, step: int, created: float | None) -> None:
    """A complete checkpoint at ``step`` that says when it was written (``created``), or, like checkpoints
    from before ``created`` existed, does not (its folder's mtime is then 2 500 s past the epoch)."""
    fake_checkpoint(run, step)
    folder = run.checkpoint_dir(step)
    if created is None:
        os.utime(folder, (2500.0, 2500.0))
    else:
        (folder / "explorer_state.json").write_text(json.dumps({"epoch": 0, "created": created}))


def test_checkpoints_of_every_run_newest_first_by_when_written_then_step(tmp_path):
    root = tmp_path / "runs"
    a, b, elsewhere = RunFolder(root / "run-a"), RunFolder(root / "run-b"), RunFolder(tmp_path / "own-dir")
    written_at(a, 3, 1000.0)
    written_at(a, 12, 3000.0)
    written_at(b, 5, 2000.0)
    written_at(b, 7, None)                                      # no ``created``: its folder's mtime, 2500
    written_at(b, 9, 2000.0)                                    # same time as b/5: the higher step first
    written_at(elsewhere, 1, 4000.0)                            # a run outside the root: only when named
    listed = [(c.run.name, c.step, c.written) for c in checkpoints_newest_first(root)]
    assert listed == [("run-a", 12, 3000.0), ("run-b", 7, 2500.0), ("run-b", 9, 2000.0), ("run-b", 5, 2000.0),
                      ("run-a", 3, 1000.0)]
    also = checkpoints_newest_first(root, also=[elsewhere.root, a.root])    # a run named twice is listed once
    assert [(c.run.name, c.step) for c in also][:2] == [("own-dir", 1), ("run-a", 12)] and len(also) == 6
    assert checkpoints_newest_first(tmp_path / "missing") == []


def test_prune_keeps_the_newest(tmp_path):
    run = RunFolder(tmp_path / "run")
    for step in (1, 2, 3, 4):
        fake_checkpoint(run, step)
    assert run.prune(None) == []
    removed = run.prune(2)
    assert sorted(p.name for p in removed) == ["step-000001", "step-000002"]
    assert [c.step for c in run.checkpoints()] == [4, 3]
    assert sorted(os.listdir(run.checkpoints_dir)) == ["step-000003", "step-000004"]


def test_create_unique_claims_a_new_folder_each_time(tmp_path):
    first = RunFolder.create_unique(tmp_path / "runs", "run")
    second = RunFolder.create_unique(tmp_path / "runs", "run")
    assert (first.name, second.name) == ("run", "run-2") and first.root.is_dir() and second.root.is_dir()
    fake_checkpoint(first, 1)
    assert RunFolder.runs_under(tmp_path / "runs") == [first]          # only folders with checkpoints are runs


def test_the_spec_file_round_trips_and_the_older_name_is_read(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert read_spec(run) == {}
    write_spec(run, {"preset": "tiny", "documents": 3})
    assert read_spec(run) == {"preset": "tiny", "documents": 3}
    older = RunFolder(tmp_path / "older")
    older.root.mkdir()
    (older.root / "run_spec.json").write_text(json.dumps({"preset": "mini"}))
    assert read_spec(older) == {"preset": "mini"}
    (older.root / "run.json").write_text("{not json")
    assert read_spec(older) == {"preset": "mini"}                      # a damaged file is skipped
