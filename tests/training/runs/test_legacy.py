"""engine.training.runs.legacy: what older run layouts hold, told apart from today's and from a Hugging Face
Trainer's files (the whole old runs are read back in test_old_runs.py and test_run_folder.py)."""
from __future__ import annotations

import json

from engine.training.runs.legacy import (LEGACY_INFO_FILE, LEGACY_SPEC_FILE, is_hf_trainer_state, is_ours,
                                         upgrade_spec_values)
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.spec_file import read_spec
from engine.training.runs.state import INFO_FILE, read_checkpoint_info, read_checkpoint_record


def test_the_old_names_are_not_today_s():
    assert (LEGACY_SPEC_FILE, LEGACY_INFO_FILE) == ("run_spec.json", "trainer_state.json")
    assert LEGACY_INFO_FILE != INFO_FILE


def test_a_hugging_face_trainer_state_is_told_from_our_old_record():
    ours = {"epoch": 1, "metrics": {"loss": 2.0}, "created": 1.0}
    theirs = {"global_step": 10, "log_history": []}
    assert is_ours(ours) and not is_ours(theirs) and not is_ours([1, 2]) and not is_ours(None)
    assert is_hf_trainer_state(json.dumps(theirs).encode())
    assert not is_hf_trainer_state(json.dumps(ours).encode())
    assert not is_hf_trainer_state(b"{not json") and not is_hf_trainer_state(b"[" * 100_000)


def test_old_checkpoint_records_are_read_and_a_trainer_s_is_not(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / LEGACY_INFO_FILE).write_text(json.dumps({"epoch": 2, "metrics": {"loss": 1.5}}))
    assert read_checkpoint_info(old) == {"epoch": 2, "metrics": {"loss": 1.5}}
    assert read_checkpoint_record(old).epoch == 2
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / LEGACY_INFO_FILE).write_text(json.dumps({"global_step": 4}))
    assert read_checkpoint_info(hf) == {} and read_checkpoint_record(hf) is None


def test_the_older_spec_field_and_file_are_read(tmp_path):
    assert upgrade_spec_values({"tokenizer_dir": "/t"}, {"preset": "tiny"}) == {"preset": "tiny", "tokenizer": "/t"}
    assert upgrade_spec_values({"tokenizer_dir": "/t", "tokenizer": "/new"}, {"tokenizer": "/new"}) == {
        "tokenizer": "/new"}
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    (run.root / LEGACY_SPEC_FILE).write_text(json.dumps({"preset": "mini", "tokenizer_dir": "/t"}))
    assert read_spec(run) == {"preset": "mini", "tokenizer_dir": "/t"}
