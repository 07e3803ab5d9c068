"""engine.training.runs.metrics_tail: following a growing metrics.jsonl a piece at a time gives what reading the
whole file once gives (``state.read_metrics_file``, the reference), in bounded memory."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from engine.training.runs.metrics_tail import MAX_JUMPS, LrJump, MetricsHistory, MetricsTail
from engine.training.loop.optim import lr_factor
from engine.training.runs.state import MetricsFile, append_metrics, read_metrics_file, truncate_metrics


def _line(step: int, kind: str = "train", **values: float) -> bytes:
    return (json.dumps({"kind": kind, "step": step, "loss": 1.0 / step, **values}) + "\n").encode()


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _read_bytes(data: bytes, scratch: Path) -> MetricsFile:
    """``read_metrics_file`` of ``data`` (written to ``scratch``)."""
    scratch.write_bytes(data)
    return read_metrics_file(scratch)


def _follow(path: Path, **options: int) -> tuple[MetricsTail, MetricsHistory]:
    return MetricsTail(path, **options), MetricsHistory()


def test_appended_lines_are_picked_up_and_only_the_new_bytes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail, history = _follow(path)
    assert tail.read(history).records == 0 and tail.modified is None          # no file yet: nothing, no error
    for step in (1, 2):
        append_metrics(path, {"kind": "train", "step": step, "loss": 1.0 / step})   # what the trainer writes
    assert tail.read(history).records == 2
    assert tail.offset == path.stat().st_size
    append_metrics(path, {"kind": "eval", "step": 2, "eval_mlm_loss": 0.4})
    read = tail.read(history)
    assert (read.records, read.skipped, read.restarted) == (1, 0, False)
    assert history.records == read_metrics_file(path).records
    assert tail.read(history).records == 0 and history.version == (0, 3)      # nothing new: nothing changes


def test_a_torn_last_line_waits_for_the_rest_of_it(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    whole = _line(1) + _line(2)
    _append(path, whole[:-10])                       # the writer is half way through line 2
    tail, history = _follow(path)
    assert tail.read(history).records == 1 and tail.pending_bytes == len(_line(2)) - 10
    assert tail.skipped == 0                         # not damaged: not finished yet
    _append(path, whole[-10:])
    assert tail.read(history).records == 1 and tail.pending_bytes == 0
    assert [r["step"] for r in history.records] == [1, 2]


def test_a_bad_line_is_skipped_and_counted_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _append(path, _line(1) + b"{not json\n" + b'{"kind": "train", "step": "x"}\n' + b"\xff\xfe\n" + _line(2))
    tail, history = _follow(path)
    read = tail.read(history)
    reference = read_metrics_file(path)
    assert (read.records, read.skipped) == (2, 3) == (len(reference.records), reference.skipped)
    assert history.records == reference.records
    assert tail.first_problem == reference.first_problem == "line 2: it is not valid JSON"


def test_a_line_longer_than_the_cap_is_dropped_and_counted_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    tail, history = _follow(path, chunk_bytes=64, max_line_bytes=100)
    _append(path, _line(1) + b'{"kind": "train", "step": 2, "x": "' + b"a" * 300)     # still being written
    tail.read(history)
    assert tail.pending_bytes == 0 and tail.skipped == 1                      # memory stays bounded meanwhile
    _append(path, b'"}\n' + _line(3))
    tail.read(history)
    assert [r["step"] for r in history.records] == [1, 3]
    assert (tail.skipped, tail.first_problem) == (1, "line 2: it is longer than 100 bytes")


def test_a_rewritten_file_is_read_again_from_the_top(tmp_path: Path) -> None:
    """A resumed run drops the records past its checkpoint (truncate_metrics: an atomic replace) and logs on."""
    path = tmp_path / "metrics.jsonl"
    _append(path, b"".join(_line(step) for step in range(1, 7)))
    tail, history = _follow(path)
    tail.read(history)
    truncate_metrics(path, 3)
    _append(path, _line(4, loss_again=1.0))
    read = tail.read(history)
    assert read.restarted and history.clears == 1
    assert history.records == read_metrics_file(path).records
    assert [r["step"] for r in history.records] == [1, 2, 3, 4] and "loss_again" in history.records[-1]
    path.write_bytes(_line(1))                       # shrunk in place (same file): read again too
    assert tail.read(history).restarted and [r["step"] for r in history.records] == [1]
    path.unlink()                                    # gone: what was read no longer describes the run
    assert tail.read(history).restarted and history.records == [] and tail.modified is None


def test_a_file_that_cannot_be_read_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.mkdir()                                     # (the tests run as root: a directory stands for no access)
    read = MetricsTail(path).read(MetricsHistory())
    assert read.records == 0 and read.problem is not None and read.problem.startswith("metrics.jsonl cannot be read")
    assert str(tmp_path) not in read.problem


def test_the_history_is_bounded_and_stays_evenly_sampled_per_kind() -> None:
    history = MetricsHistory(max_records=100)
    for step in range(1, 1001):
        history.add({"kind": "train", "step": step})
        if step % 50 == 0:
            history.add({"kind": "eval", "step": step})
    assert len(history.records) <= 100
    train = [r["step"] for r in history.records if r["kind"] == "train"]
    stride = history.stride("train")
    assert stride > 1 and train == list(range(1, 1001, stride))               # every stride-th, from the first
    assert [r["step"] for r in history.records if r["kind"] == "eval"] == list(range(50, 1001, 50))  # all 20 kept
    shown = history.shown()                                                    # the newest point is always drawn
    assert shown[-1] == {"kind": "train", "step": 1000} and shown[:-1] == history.records
    assert history.seen("train") == 1000 and history.version == (0, 1020)


def _schedule(steps: range, total: int, warmup: int, schedule: str = "linear") -> list[dict]:
    """Train records whose lr is the trainer's: the update of step s (1-based) uses factor(s - 1)."""
    return [{"kind": "train", "step": s, "lr": 1e-3 * lr_factor(s - 1, schedule, warmup, total)} for s in steps]


def lr_jumps(records: list[dict]) -> list[LrJump]:
    """The jumps a ``MetricsHistory`` finds in ``records`` offered in file order."""
    history = MetricsHistory()
    for record in records:
        history.add(record)
    return list(history.jumps)


@pytest.mark.parametrize("schedule", ["linear", "inverse_sqrt"])
def test_a_schedule_that_warms_up_and_decays_has_no_jump(schedule: str) -> None:
    assert lr_jumps(_schedule(range(1, 101), 100, 10, schedule)) == []
    assert lr_jumps(_schedule(range(1, 101, 7), 100, 10, schedule)) == []       # logged every 7th step


def test_a_continue_with_more_steps_is_a_jump_at_the_last_step_before_it() -> None:
    records = _schedule(range(1, 5), 4, 0) + _schedule(range(5, 9), 8, 0)        # 4 steps, continued to 8
    assert lr_jumps(records) == [LrJump(4, 5, 1e-3 * 0.25, 1e-3 * 0.5)]
    warmup_grows = _schedule(range(1, 11), 10, 1) + _schedule(range(11, 201), 1000, 60)   # a ratio's warmup grows:
    assert [jump.step for jump in lr_jumps(warmup_grows)] == [10]              # steps 11-61 rise: one jump
    records = [{"kind": "eval", "step": 1, "lr": 9.0}, {"kind": "train", "step": 2, "lr": True},
               {"kind": "train", "step": 3, "lr": "x"}, {"kind": "train", "step": 4, "lr": float("nan")}]
    assert lr_jumps(records) == []                                              # only train records' numbers


def test_the_history_finds_jumps_before_thinning_keeps_the_newest_and_forgets_them_on_a_rewrite(
        tmp_path: Path) -> None:
    history = MetricsHistory(max_records=10)
    for step in range(1, 101):                       # down, then up at every 10th step
        history.add({"kind": "train", "step": step, "lr": 1.0 if step % 10 == 1 else 0.5})
    assert len(history.records) <= 10 and [j.step for j in history.jumps] == list(range(10, 100, 10))
    for step in range(101, 101 + 2 * MAX_JUMPS):
        history.add({"kind": "train", "step": step, "lr": 1.0 if step % 2 else 0.5})
    assert len(history.jumps) == MAX_JUMPS and history.jumps[-1].next_step == 100 + 2 * MAX_JUMPS - 1
    path = tmp_path / "metrics.jsonl"
    for record in _schedule(range(1, 5), 4, 0) + _schedule(range(5, 9), 8, 0):
        append_metrics(path, record)
    tail, history = _follow(path)
    tail.read(history)
    assert [j.step for j in history.jumps] == [4]
    truncate_metrics(path, 4)                        # continued again from step 4: the old jump is redone
    tail.read(history)
    assert list(history.jumps) == []


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
       bad=st.lists(st.sampled_from([b"{oops\n", b"[1]\n", b'{"step": -1}\n', b"\n", b"\xc3\x28\n"]), max_size=4))
def test_any_split_of_the_writes_gives_what_reading_the_whole_file_gives(
        cuts: list[int], bad: list[bytes], tmp_path_factory: pytest.TempPathFactory) -> None:
    """The writer's bytes arrive cut anywhere (mid-line, mid-character); after each piece the tail has read
    exactly the complete lines so far, and at the end it equals ``read_metrics_file`` of the whole file."""
    data = b"".join(_line(step, mlm_loss=step * 0.5) for step in range(1, 30)) + b"".join(bad) + _line(30)
    path = tmp_path_factory.mktemp("tail") / "metrics.jsonl"
    path.write_bytes(b"")
    tail, history = _follow(path, chunk_bytes=97)
    done = 0
    for cut in sorted({min(c, len(data)) for c in cuts}) + [len(data)]:
        _append(path, data[done:cut])
        done = cut
        tail.read(history)
        complete = data[:cut][:data[:cut].rfind(b"\n") + 1]
        assert history.records == _read_bytes(complete, path.with_name("whole.jsonl")).records
    reference = read_metrics_file(path)
    assert (history.records, tail.skipped) == (reference.records, reference.skipped)
