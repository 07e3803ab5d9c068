"""An experiment measured over its pretraining (BERT, Figure 5): the measured steps and the checkpoints kept for
them; each arm's series read from exactly those checkpoints; a run stopped in its pretraining and again between
its measurements continues to the numbers of an uninterrupted one, reading what was measured, not redoing it; the
claims about a checkpoint or a gain get computed verdicts, and the table, CSV and JSON carry the series."""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from engine.experiments.builtin_figure5 import BERT_FIGURE5
from engine.experiments.definitions import Arm, Claim, Experiment, Scale
from engine.experiments.results import as_csv, as_json, table, verdict
from engine.experiments.runner import ArmResult, ExperimentStopped, experiment_dir, run_experiment, seed_dir
from engine.experiments.series import MAX_CHECKPOINTS, checkpoint_interval, measured_steps
from engine.training.runs.run_folder import RunFolder

pytestmark = pytest.mark.usefixtures("one_thread")
SCALE = BERT_FIGURE5.scale(True, steps=12, seeds=1, max_documents=30, eval_documents=5, downstream_steps=4)


def test_the_measured_steps_are_the_kept_checkpoints_steps() -> None:
    assert measured_steps((0.25, 0.5, 0.75), 600) == {0.25: 150, 0.5: 300, 0.75: 450, 1.0: 600}
    assert checkpoint_interval((0.25, 0.5, 0.75), 600) == 150 and checkpoint_interval((), 600) is None
    odd = measured_steps((0.25, 0.5, 0.75), 3001)              # no common divisor: snapped, not 3001 checkpoints
    interval = checkpoint_interval((0.25, 0.5, 0.75), 3001)
    assert 3001 // interval <= MAX_CHECKPOINTS and all(step % interval == 0 for step in list(odd.values())[:-1])
    assert odd[1.0] == 3001 and abs(odd[0.5] - 1500) <= interval


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ArmResult]]:
    """Figure 5 at a tiny scale, both arms, uninterrupted."""
    root = tmp_path_factory.mktemp("whole")
    return root, run_experiment(root, BERT_FIGURE5, SCALE, lambda message: None)


def test_each_arm_is_measured_at_each_kept_checkpoint(whole: tuple[Path, list[ArmResult]]) -> None:
    root, found = whole
    for result in found:
        assert sorted(result.series["pos_acc"]) == [3, 6, 9, 12]
        assert result.series["pos_acc"][12] == result.metrics["pos_acc"]            # the final model, not re-run
        folder = seed_dir(root, BERT_FIGURE5, BERT_FIGURE5.arm(result.arm), 0, SCALE)
        kept = sorted(c.step for c in RunFolder(folder / "pretrain").checkpoints())
        assert kept == [3, 6, 9, 12]
        for step in (3, 6, 9):
            spec = json.loads(RunFolder(folder / f"pos_acc-step-{step}").spec_path.read_text(encoding="utf-8"))
            assert spec["init_from"] == str(folder / "pretrain" / "checkpoints" / f"step-{step:06d}")
            latest = RunFolder(folder / f"pos_acc-step-{step}").latest()
            assert latest.eval_metrics["eval_accuracy"] == result.series["pos_acc"][step]
        assert not (folder / "pos_acc-step-12").exists()
    text = table(BERT_FIGURE5, SCALE, found)
    assert "| arm | step 3 | step 6 | step 9 | step 12 |" in text
    assert "part-of-speech word accuracy gained from step 3 to 12" in text


def test_a_stopped_run_continues_to_the_same_numbers_reading_what_was_measured(
        whole: tuple[Path, list[ArmResult]], tmp_path: Path) -> None:
    whole_root, found = whole
    shutil.copytree(experiment_dir(whole_root, BERT_FIGURE5, SCALE) / "tokenizer",
                    experiment_dir(tmp_path, BERT_FIGURE5, SCALE) / "tokenizer")      # the same vocabulary
    folder = seed_dir(tmp_path, BERT_FIGURE5, BERT_FIGURE5.arm("mlm"), 0, SCALE)
    asked = []

    def in_pretraining() -> bool:
        asked.append(1)
        return len(asked) == 5                                   # the 5th question: between pretraining steps

    with pytest.raises(ExperimentStopped):
        run_experiment(tmp_path, BERT_FIGURE5, SCALE, lambda m: None, arms=["mlm"], should_stop=in_pretraining)
    assert RunFolder(folder / "pretrain").latest().step < 12 and not (folder / "pos_acc").exists()
    with pytest.raises(ExperimentStopped):                      # then between two measured checkpoints
        run_experiment(tmp_path, BERT_FIGURE5, SCALE, lambda m: None, arms=["mlm"],
                       should_stop=lambda: (folder / "pos_acc-step-6").exists())
    assert not (folder / "pos_acc-step-9").exists() and not (folder / "results.json").exists()
    measured = RunFolder(folder / "pos_acc-step-3").latest().path / "model.safetensors"
    before = measured.stat().st_mtime_ns
    again = run_experiment(tmp_path, BERT_FIGURE5, SCALE, lambda m: None, arms=["mlm"])
    assert again == found[:1]                                    # the uninterrupted run's numbers, series included
    assert measured.stat().st_mtime_ns == before                 # read, not redone


TOY = Experiment(
    "toy-series", "A toy series", "Someone 2020, Figure 1", "the factor",
    (Arm("a", "arm A"), Arm("b", "arm B")), (),
    (Claim("A ahead early", "a", "b", "pos_acc", at=(0.5,)), Claim("A gains more", "a", "b", "pos_acc", at=(0.5, 1.0))),
    measure_at=(0.5,))


def toy_results() -> list[ArmResult]:
    made = []
    for arm, early, late in (("a", (0.50, 0.52), (0.80, 0.82)), ("b", (0.60, 0.62), (0.70, 0.71))):
        made += [ArmResult(arm, seed, {"masked_acc": None, "pos_acc": late[seed], "sentiment_acc": 0.5}, 10, 100, 1000,
                           {"pos_acc": {5: early[seed], 10: late[seed]}}) for seed in range(2)]
    return made


def test_claims_about_a_checkpoint_or_a_gain_get_computed_verdicts() -> None:
    found = toy_results()
    assert verdict(found, TOY, 0).startswith("not reproduced (part-of-speech word accuracy at step 5: 51.0 ± 1.4 vs "
                                             "61.0 ± 1.4)")
    assert verdict(found, TOY, 1).startswith("reproduced at this scale (part-of-speech word accuracy gained from "
                                             "step 5 to 10: +30.0 ± 0.0 vs +9.5")
    with pytest.raises(ValueError, match="a claim is about a checkpoint or metric not measured"):
        Experiment("bad", "", "", "", TOY.arms, (), (Claim("x", "a", "b", "pos_acc", at=(0.25,)),), measure_at=(0.5,))


def test_the_table_csv_and_json_carry_the_series() -> None:
    found = toy_results()
    text = table(TOY, Scale(steps=10, seeds=2), found)
    assert "| arm A | 51.0 ± 1.4 | 81.0 ± 1.4 |" in text
    rows = list(csv.DictReader(io.StringIO(as_csv(TOY, found))))
    assert float(rows[1]["pos_acc@step-5"]) == 0.52 and float(rows[1]["pos_acc@step-10"]) == 0.82
    whole = json.loads(as_json(TOY, Scale(steps=10, seeds=2), found))
    assert whole["arms"][0]["series"]["pos_acc"]["5"]["mean"] == pytest.approx(0.51)
    assert whole["arms"][1]["seed_series"][0] == {"pos_acc": {"5": 0.6, "10": 0.7}}
