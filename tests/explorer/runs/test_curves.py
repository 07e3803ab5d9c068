"""The Training tab's live curves as points: a browser gets a run's points once, then only new ones; each
training series carries its running mean, and the status line's means are the values the curves end on."""
from __future__ import annotations

import json

from explorer.runs.curves import (LOOKBACK, PRETRAINING_CHARTS, WINDOW, curve_points, latest_means, lookback_start,
                                  running_means)


def records(steps: int, eval_every: int = 10) -> list[dict]:
    found = []
    for step in range(1, steps + 1):
        found.append({"kind": "train", "step": step, "mlm_loss": 10.0 - step * 0.01 + (step % 3) * 0.5,
                      "nsp_loss": 0.7, "mlm_acc": step / (steps + 1), "nsp_acc": (step % 2) * 1.0, "lr": 1e-4})
        if step % eval_every == 0:
            found.append({"kind": "eval", "step": step, "eval_mlm_loss": 9.0, "eval_nsp_acc": 0.5})
    return found


def test_running_means_are_the_mean_of_the_last_window_values():
    rows = running_means(records(50), "nsp_acc")
    values = [value for _, value, _ in rows]
    for i, (step, value, mean) in enumerate(rows):
        recent = values[max(0, i - WINDOW + 1):i + 1]
        assert step == i + 1 and mean == sum(recent) / len(recent)
    assert rows[-1][1] in (0.0, 1.0) and rows[-1][2] == 0.5        # one batch says 0 or 100%; the mean says 50%


def test_the_status_means_are_what_the_curves_end_on():
    recs = records(120)
    sent = curve_points(recs, 0, run=1, next_index=len(recs), reset=True)
    means = latest_means(recs)
    assert means["mlm_loss"] == sent["points"]["train:mlm_loss"][2][-1]
    assert means["nsp_acc"] == sent["points"]["train:nsp_acc"][2][-1] == 0.5
    tail = recs[lookback_start(len(recs)):]                  # what a tick reads: the last LOOKBACK records
    assert latest_means(tail) == means


def test_a_browser_gets_the_run_once_then_only_new_points():
    recs = records(60)
    first = curve_points(recs[:30], 0, run=7, next_index=30, reset=True)
    assert first["reset"] and [c["title"] for c in first["charts"]] == [c.title for c in PRETRAINING_CHARTS]
    assert first["points"]["train:mlm_loss"][0] == list(range(1, 29))      # 28 steps and 2 evaluations
    start = lookback_start(30)
    later = curve_points(recs[start:], 30 - start, run=7, next_index=len(recs), reset=False)
    assert not later["reset"] and "charts" not in later
    steps = later["points"]["train:mlm_loss"][0]
    assert steps == list(range(29, 61))                                    # only the new records' steps
    whole = curve_points(recs, 0, run=7, next_index=len(recs), reset=True)
    assert later["points"]["train:mlm_loss"][2] == whole["points"]["train:mlm_loss"][2][28:]   # same means
    assert later["points"]["eval:eval_mlm_loss"] == [[30, 40, 50, 60], [9.0] * 4]
    nothing = curve_points(recs[lookback_start(len(recs)):], len(recs) - lookback_start(len(recs)), run=7,
                           next_index=len(recs), reset=False)
    assert nothing["points"] == {}


def test_a_long_run_is_downsampled_once_and_appends_stay_small():
    recs = records(5000, eval_every=1000)
    whole = curve_points(recs, 0, run=1, next_index=len(recs), reset=True, max_points=400)
    steps, values, means = whole["points"]["train:mlm_loss"]
    assert len(steps) == len(values) == len(means) <= 400 and steps[0] == 1 and steps[-1] == 5000
    assert len(json.dumps(whole)) < 60_000
    start = lookback_start(len(recs) - 2)
    tick = curve_points(recs[start:], len(recs) - 2 - start, run=1, next_index=len(recs), reset=False)
    assert len(json.dumps(tick)) < 1_000 and LOOKBACK >= 2 * WINDOW


def test_records_from_a_file_may_hold_anything():
    odd = [{"kind": "train", "step": 1, "mlm_loss": "nan?"}, {"kind": "train", "step": None, "mlm_loss": 1.0},
           {"kind": "train", "step": 2, "mlm_loss": True}, {"kind": "train", "step": 3, "mlm_loss": 2.0}]
    assert running_means(odd, "mlm_loss") == [(3, 2.0, 2.0)]
