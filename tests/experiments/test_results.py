"""The verdicts are computed from the numbers: a difference beyond the seeds' spread reproduces (or contradicts) a
claim, one within it does not decide; one seed says it has no spread; the table, CSV and JSON hold every number."""
from __future__ import annotations

import csv
import io
import json

import pytest

from engine.experiments.definitions import Arm, Claim, Experiment, Scale
from engine.experiments.results import as_csv, as_json, summarize, table, verdict
from engine.experiments.runner import ArmResult

EXPERIMENT = Experiment(
    "toy", "A toy", "Someone 2020, Table 1", "the factor",
    (Arm("a", "arm A", paper={"X": 90.0}), Arm("b", "arm B", paper={"X": 80.0})), ("X",),
    (Claim("A beats B", "a", "b", "pos_acc"), Claim("A and B are alike", "a", "b", "pos_acc", "same")))


def results(a: list[float], b: list[float]) -> list[ArmResult]:
    made = []
    for arm, values in (("a", a), ("b", b)):
        made += [ArmResult(arm, seed, {"masked_acc": None, "pos_acc": v, "sentiment_acc": 0.5}, 10, 100, 1000)
                 for seed, v in enumerate(values)]
    return made


def test_a_difference_beyond_the_spread_decides_the_claim() -> None:
    found = results([0.80, 0.82], [0.60, 0.62])
    assert verdict(found, EXPERIMENT, 0).startswith("reproduced at this scale (part-of-speech word accuracy 81.0")
    assert verdict(found, EXPERIMENT, 1).startswith("not reproduced")
    other_way = results([0.60, 0.62], [0.80, 0.82])
    assert verdict(other_way, EXPERIMENT, 0).startswith("not reproduced")


def test_a_difference_within_the_spread_decides_nothing() -> None:
    found = results([0.70, 0.80], [0.72, 0.76])
    assert verdict(found, EXPERIMENT, 0).startswith("within the seeds' spread")
    assert verdict(found, EXPERIMENT, 1).startswith("reproduced at this scale")      # "alike": they are


def test_one_seed_has_no_spread_to_judge_by() -> None:
    found = results([0.8], [0.6])
    assert verdict(found, EXPERIMENT, 0).startswith("one seed, no spread to judge by") and "the same way" in \
        verdict(found, EXPERIMENT, 0)
    assert summarize(found, "a", "pos_acc").text() == "80.0"
    assert summarize(found, "a", "masked_acc") is None


def test_the_table_holds_the_papers_column_ours_and_the_verdicts() -> None:
    found = results([0.80, 0.82], [0.60, 0.62])
    text = table(EXPERIMENT, Scale(steps=10, seeds=2), found)
    assert "| arm A | 90.0 | — | 81.0 ± 1.4 | 50.0 ± 0.0 |" in text
    assert "- A beats B: **reproduced at this scale" in text and "2 seed(s)" in text
    rows = list(csv.DictReader(io.StringIO(as_csv(EXPERIMENT, found))))
    assert len(rows) == 4 and rows[0]["arm"] == "a" and float(rows[0]["pos_acc"]) == 0.8 and rows[0]["X"] == "90.0"
    whole = json.loads(as_json(EXPERIMENT, Scale(steps=10, seeds=2), found))
    assert whole["arms"][0]["ours"]["pos_acc"]["mean"] == 0.81 and whole["claims"][0]["verdict"].startswith("repro")


def test_a_papers_number_is_printed_as_the_paper_prints_it() -> None:
    """RoBERTa's MNLI-m 84.0 stays 84.0 (not 84), Table 6's perplexity 5.84 keeps its two decimals, a row's name its
    text."""
    from engine.experiments.results import _paper
    assert [_paper(v) for v in (84.0, 63.0, 5.84, 92.9, "90.4/78.7")] == ["84.0", "63.0", "5.84", "92.9", "90.4/78.7"]


def test_matches_or_improves_is_reproduced_by_a_match_or_a_gain_and_not_by_a_loss() -> None:
    """RoBERTa's "matches or improves" (kind not-worse): a gain beyond the spread reproduces it, where "about the
    same" would call the gain a failure; a match does too; only a loss beyond the spread does not."""
    experiment = Experiment("toy2", "A toy", "Someone 2020", "the factor", (Arm("a", "A"), Arm("b", "B")), (),
                            (Claim("A matches or improves on B", "a", "b", "pos_acc", "not-worse"),
                             Claim("A and B are alike", "a", "b", "pos_acc", "same")))
    gain = results([0.80, 0.82], [0.60, 0.62])
    assert verdict(gain, experiment, 0).startswith("reproduced at this scale")
    assert verdict(gain, experiment, 1).startswith("not reproduced")
    assert verdict(results([0.70, 0.80], [0.72, 0.76]), experiment, 0).startswith("reproduced at this scale")
    assert verdict(results([0.60, 0.62], [0.80, 0.82]), experiment, 0).startswith("not reproduced")
    assert "the same way as the paper" in verdict(results([0.8], [0.8]), experiment, 0)      # one seed: a tie
    assert "not as the paper" in verdict(results([0.7], [0.8]), experiment, 0)
    with pytest.raises(ValueError, match="not-worse"):
        Claim("?", "a", "b", "pos_acc", "worse")
