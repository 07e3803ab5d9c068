"""The small files a run writes, read back with types: each wrong value is named, nothing raises."""
from __future__ import annotations

import json

import pytest

from engine.training.runs.records import CheckpointRecord, Damaged, MetricsLine, RunRecord

GOOD_STATE = {"step": 30, "epoch": 2, "metrics": {"loss": 2.5}, "eval_metrics": {"mlm_acc": 0.25},
              "created": 1_700_000_000.5, "config": {"total_steps": 90, "learning_rate": 1e-3}}


def test_a_good_checkpoint_record_parses_with_its_types() -> None:
    record = CheckpointRecord.parse(json.dumps(GOOD_STATE))
    assert record == CheckpointRecord(30, 2, {"loss": 2.5}, {"mlm_acc": 0.25}, 1_700_000_000.5,
                                      GOOD_STATE["config"], 90)
    assert CheckpointRecord.parse(b"{}") == CheckpointRecord()              # every field may be missing
    assert CheckpointRecord.parse({"epoch": 3.0, "created": 5}).epoch == 3  # a whole float is a whole number


@pytest.mark.parametrize("change, reason", [
    ({"created": "yesterday"}, "created is 'yesterday', not a time"),
    ({"created": -1}, "created is -1, not a time"),
    ({"epoch": "x"}, "epoch is 'x', not a whole number of at least 0"),
    ({"epoch": 1e400}, "epoch is inf, not a whole number of at least 0"),
    ({"epoch": 1.5}, "epoch is 1.5, not a whole number of at least 0"),
    ({"epoch": True}, "epoch is True, not a whole number of at least 0"),
    ({"step": -3}, "step is -3, not a whole number of at least 0"),
    ({"metrics": [1, 2]}, "metrics is a list, not an object"),
    ({"eval_metrics": "good"}, "eval_metrics is str, not an object"),
    ({"config": 7}, "config is int, not an object"),
    ({"config": {"total_steps": "many"}}, "total_steps is 'many', not a whole number of at least 1"),
    ({"config": {"total_steps": 0}}, "total_steps is 0, not a whole number of at least 1"),
])
def test_each_wrong_field_of_a_checkpoint_record_is_named(change: dict, reason: str) -> None:
    assert CheckpointRecord.parse(json.dumps({**GOOD_STATE, **change})) == Damaged(reason)


@pytest.mark.parametrize("raw, reason", [
    (b"", "it is empty"),
    (b"  \n", "it is empty"),
    (b"\xff\xfe{}", "it is not UTF-8 text"),
    (b'{"step": 3', "it is not valid JSON"),
    (b"[1, 2]", "it holds a list, not a JSON object"),
    (b"12", "it holds int, not a JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "it is not valid JSON"),      # nested past the recursion limit
])
def test_a_file_that_is_not_a_json_object_is_damaged(raw: bytes, reason: str) -> None:
    for kind in (CheckpointRecord, MetricsLine, RunRecord):
        assert kind.parse(raw) == Damaged(reason)


def test_a_metrics_line_needs_a_whole_step_and_a_text_kind() -> None:
    line = MetricsLine.parse(b'{"kind": "train", "step": 4.0, "loss": NaN}')
    assert isinstance(line, MetricsLine) and line.step == 4 and line.record["step"] == 4
    assert type(line.record["step"]) is int and line.record["kind"] == "train"
    assert MetricsLine.parse('{"loss": 1}') == MetricsLine({"loss": 1}, 0)        # no step: step 0, unchanged
    assert MetricsLine.parse('{"step": "abc"}') == Damaged("step is 'abc', not a whole number of at least 0")
    assert MetricsLine.parse('{"step": 1, "kind": 5}') == Damaged("kind is 5, not text")


def test_a_run_record_keeps_the_record_and_checks_what_the_listing_reads() -> None:
    raw = {"task": "pretraining", "corpus": "given text", "corpus_label": "poems", "corpus_file": "corpus.txt",
           "preset": "tiny"}
    record = RunRecord.parse(json.dumps(raw))
    assert record == RunRecord(raw, "pretraining", "poems", "corpus.txt")
    assert RunRecord.parse('{"corpus": "shakespeare"}').corpus == "shakespeare"
    assert RunRecord.parse('{"task": ["qa"]}') == Damaged("task is ['qa'], not text")
    assert RunRecord.parse('{"corpus_file": 3}') == Damaged("corpus_file is 3, not text")
