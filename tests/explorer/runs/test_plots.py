"""The curves every run view draws (``explorer.runs.plots``): metric records in, plotly figures out, downsampled."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402

from explorer.runs import plots as tp  # noqa: E402

RECORDS = [
    {"kind": "train", "step": 1, "mlm_loss": 6.0, "mlm_acc": 0.0, "nsp_loss": 0.7, "nsp_acc": 0.5, "lr": 1e-4},
    {"kind": "train", "step": 2, "mlm_loss": 5.5, "mlm_acc": 0.1, "nsp_loss": 0.69, "nsp_acc": 0.55, "lr": 2e-4},
    {"kind": "eval", "step": 2, "eval_mlm_loss": 5.6, "eval_mlm_acc": 0.08, "eval_nsp_loss": 0.7, "eval_nsp_acc": 0.5},
    {"kind": "checkpoint", "step": 2, "path": "/x/checkpoint-2"},
    {"kind": "train", "step": 3, "mlm_loss": 5.0, "mlm_acc": 0.2, "nsp_loss": None, "nsp_acc": None, "lr": 3e-4},
]


def _is_empty(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and len(fig.layout.annotations) == 1


@pytest.mark.parametrize("builder", [tp.mlm_loss_figure, tp.nsp_loss_figure, tp.accuracy_figure, tp.lr_figure])
def test_empty_records_give_valid_empty_figure(builder) -> None:
    fig = builder([])
    assert isinstance(fig, go.Figure) and _is_empty(fig)
    fig.to_json()  # serialisable


def test_train_and_eval_traces() -> None:
    fig = tp.mlm_loss_figure(RECORDS)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["train"].x) == [1, 2, 3] and list(by_name["train"].y) == [6.0, 5.5, 5.0]
    assert list(by_name["eval"].x) == [2] and list(by_name["eval"].y) == [5.6]


def test_none_values_are_skipped() -> None:
    nsp = {t.name: t for t in tp.nsp_loss_figure(RECORDS).data}
    assert list(nsp["train"].x) == [1, 2]  # step 3 had NSP off
    acc = {t.name: len(t.x) for t in tp.accuracy_figure(RECORDS).data}
    assert acc == {"MLM train": 3, "MLM eval": 1, "NSP train": 2, "NSP eval": 1}
    assert list(tp.lr_figure(RECORDS).data[0].y) == [1e-4, 2e-4, 3e-4]


def test_downsample_keeps_a_short_curve_as_it_is():
    xs, ys = list(range(1, 11)), [float(i) for i in range(10)]
    assert tp.downsample(xs, ys, 1000) == (xs, ys)


def test_downsample_keeps_first_last_and_every_spike_within_the_limit():
    n = 50_000
    xs = list(range(1, n + 1))
    ys = [5.0 - i / n for i in range(n)]
    ys[12_345], ys[33_333] = 40.0, -3.0             # a loss spike and a dip, one step each
    sx, sy = tp.downsample(xs, ys, 1000)
    assert len(sx) <= 1000 and sx[0] == 1 and sx[-1] == n and sy[-1] == ys[-1]
    assert sx == sorted(sx) and all(ys[x - 1] == y for x, y in zip(sx, sy))     # real points, in step order
    assert (12_346, 40.0) in zip(sx, sy) and (33_334, -3.0) in zip(sx, sy)
    assert max(sy) == max(ys) and min(sy) == min(ys)


def test_a_long_run_sends_at_most_max_points_per_curve():
    records = [{"kind": "train", "step": s, "mlm_loss": 1.0 / s, "lr": 1e-4} for s in range(1, 20_001)]
    records += [{"kind": "eval", "step": s, "eval_mlm_loss": 0.5} for s in range(100, 20_001, 100)]
    fig = tp.mlm_loss_figure(records)
    sizes = {t.name: len(t.x) for t in fig.data}
    assert sizes["train"] <= tp.MAX_POINTS and sizes["eval"] == 200
    assert fig.data[0].x[0] == 1 and fig.data[0].x[-1] == 20_000


def test_rates_read_as_plain_numbers_and_accuracy_as_percentages():
    """A learning rate of 0.0004 must not read "400μ" (issue 28): no SI prefixes, no e-notation."""
    from explorer.runs.plots import accuracy_figure, lr_figure

    records = [{"kind": "train", "step": s, "lr": 4e-4 * s / 3, "mlm_acc": 0.1 * s} for s in (1, 2, 3)]
    assert lr_figure(records).layout.yaxis.exponentformat == "none"
    accuracy = accuracy_figure(records).layout.yaxis
    assert accuracy.tickformat == ".0%" and tuple(accuracy.range) == (0.0, 1.0)
