"""The run browser's figures (``explorer/runs/watch/plots.py``): one run is drawn by the Training and Fine-tune
tabs' own builders; two runs are overlaid by name and colour; TensorBoard's smoothing, the log axis, continue
markers."""
from __future__ import annotations

import math

import pytest

from engine.training.runs.metrics_tail import LrJump
from explorer.finetune import plots as fp
from explorer.finetune.tasks import finetune_rows
from explorer.runs import plots as tp
from explorer.runs.watch.plots import (FIGURES, LR, PRETRAINING, RAW_OPACITY, RUN_COLORS, CurveView, RunCurves,
                                       browser_figures, ema, figure_specs, lr_text, overlay_figure)
from support.watch_records import EVAL, LOSSES, TRAIN, records as _records


def _json(figures: list) -> list[dict]:
    return [f.to_plotly_json() for f in figures]


def _curves(view: CurveView = CurveView()) -> list:
    return browser_figures([RunCurves("run-a", _records()), RunCurves("run-b", _records(0.5))], "pretraining", view)


def _reference_ema(values: list[float], weight: float) -> list[float]:
    """TensorBoard's smoothing, written out: a running average from 0, divided by the weight it has gathered."""
    smoothed, total = [], 0.0
    for n, value in enumerate(values, start=1):
        total = weight * total + (1 - weight) * value
        smoothed.append(total / (1 - weight ** n))
    return smoothed


# --- one run: the tabs' own figures ----------------------------------------------------------

def run_figures(records: list[dict], task: str | None) -> list:
    """The run browser's figures of one run, unsmoothed."""
    return browser_figures([RunCurves("run", records)], task)


def test_a_pretraining_run_is_drawn_by_the_training_tabs_own_builders() -> None:
    records = [*TRAIN, EVAL]
    expected = [tp.mlm_loss_figure(records), tp.nsp_loss_figure(records), tp.accuracy_figure(records),
                tp.lr_figure(records)]
    assert _json(run_figures(records, "pretraining")) == _json(expected)
    assert _json(run_figures(records, None)) == _json(expected)              # an old run without a task
    assert len(expected) == FIGURES


def test_a_fine_tuning_run_is_drawn_by_the_fine_tune_tabs_builders() -> None:
    row = finetune_rows()["classification"]
    records = [{"kind": "train", "step": s, "loss": 1.0 / s, "classification_loss": 1.0 / s, "accuracy": 0.5,
                "lr": 1e-4, "grad_norm": 1.5} for s in (1, 2)] + [
        {"kind": "eval", "step": 2, "eval_classification_loss": 0.6, "eval_accuracy": 0.7}]
    loss, metrics, lr, grad = run_figures(records, "classification")
    assert _json([loss, metrics, lr]) == _json([fp.loss_figure(records, row.eval_loss),
                                                fp.metric_figure(records, row.metrics), tp.lr_figure(records)])
    assert list(grad.data[0].x) == [1, 2] and list(grad.data[0].y) == [1.5, 1.5]


def test_values_that_are_not_numbers_are_left_out_of_a_curve() -> None:
    records = [{"kind": "train", "step": 1, "mlm_loss": "abc"}, {"kind": "train", "step": 2, "mlm_loss": [1]},
               {"kind": "train", "step": 3, "mlm_loss": True}, {"kind": "train", "step": 4, "mlm_loss": 2.5}]
    [trace] = tp.mlm_loss_figure(records).data
    assert (list(trace.x), list(trace.y)) == ([4], [2.5])


# --- overlay ---------------------------------------------------------------------------------

def test_two_runs_are_overlaid_one_trace_per_run_and_series_named_by_run() -> None:
    mlm, nsp, accuracy, lr = _curves()
    assert [t.name for t in lr.data] == ["run-a", "run-b"]                     # one series: the run's name
    assert [list(t.y) for t in lr.data] == [[1e-3] * 6] * 2
    assert [t.name for t in mlm.data] == ["run-a · train", "run-a · eval", "run-b · train", "run-b · eval"]
    assert list(mlm.data[2].y) == [0.5 * loss for loss in LOSSES]
    colours = [t.line.color for t in mlm.data]
    assert colours == [RUN_COLORS[0]] * 2 + [RUN_COLORS[1]] * 2 and RUN_COLORS[0] != RUN_COLORS[1]
    assert [t.line.dash for t in mlm.data] == ["solid", "dot"] * 2            # series told apart by dash
    assert len(accuracy.data) == 8 and len(nsp.data) == 4


def test_a_compared_run_without_the_figures_values_is_left_off_them() -> None:
    finetune = [{"kind": "train", "step": s, "loss": 0.9 / s, "accuracy": 0.6, "lr": 2e-5, "grad_norm": 1.0}
                for s in (1, 2)]
    mlm, _, _, lr = browser_figures([RunCurves("pre", _records()), RunCurves("tuned", finetune)], "pretraining")
    assert {t.name.split(" · ")[0] for t in mlm.data} == {"pre"}
    assert [t.name for t in lr.data] == ["pre", "tuned"]
    loss, _, _, grad = browser_figures([RunCurves("tuned", finetune), RunCurves("pre", _records())],
                                       "classification")
    assert [t.name for t in loss.data] == ["tuned · train", "pre · train"]    # a pretraining run's total loss
    assert [t.name for t in grad.data] == ["tuned", "pre"]
    assert len(figure_specs("classification")) == len(PRETRAINING) == FIGURES


# --- smoothing -------------------------------------------------------------------------------

@pytest.mark.parametrize("weight", [0.3, 0.6, 0.99])
def test_smoothing_is_tensorboards_moving_average_over_the_faint_raw_curve(weight: float) -> None:
    [raw, smoothed] = overlay_figure([RunCurves("run-a", _records())], PRETRAINING[0], CurveView(weight)).data[:2]
    assert list(raw.y) == LOSSES and raw.opacity == RAW_OPACITY and raw.hoverinfo == "skip"
    assert raw.showlegend is False and smoothed.opacity is None
    assert list(smoothed.y) == pytest.approx(_reference_ema(LOSSES, weight), rel=1e-12)
    assert smoothed.y[0] == pytest.approx(LOSSES[0])                           # debiased: not pulled toward 0
    assert "(smoothed)" in smoothed.hovertemplate


def test_no_smoothing_draws_the_values_as_logged_and_the_learning_rate_is_never_smoothed() -> None:
    assert ema(LOSSES, 0.0) == LOSSES
    [train, evaluation] = overlay_figure([RunCurves("a", _records())], PRETRAINING[0], CurveView(0.0)).data
    assert list(train.y) == LOSSES and train.opacity is None
    lrs = [1e-3, 9e-4, 8e-4, 7e-4, 6e-4, 5e-4]
    [lr] = overlay_figure([RunCurves("a", _records(lrs=lrs))], LR, CurveView(0.9)).data
    assert list(lr.y) == lrs


def test_the_view_from_widget_values_is_clamped() -> None:
    assert CurveView.of(1.5, 1) == CurveView(0.99, True)
    assert CurveView.of(-0.2, None) == CurveView.of(None, False) == CurveView.of(math.nan, False) == CurveView()


# --- log axis --------------------------------------------------------------------------------

def test_log_scale_sets_every_y_axis_to_log_and_drops_fixed_ranges() -> None:
    for fig in _curves(CurveView(log_y=True)):
        assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.range is None
    linear = _curves()
    assert linear[0].layout.yaxis.type is None and list(linear[2].layout.yaxis.range) == [0.0, 1.0]


# --- continue markers ------------------------------------------------------------------------

def test_a_continue_is_a_dashed_line_at_its_step_with_the_jump_in_its_hover() -> None:
    lrs = [1e-3, 7.5e-4, 5e-4, 2.5e-4, 5e-4, 3.75e-4]
    jump = LrJump(4, 5, 2.5e-4, 5e-4)
    runs = [RunCurves("continued", _records(lrs=lrs), (jump,)), RunCurves("other", _records())]
    for fig in browser_figures(runs, "pretraining"):
        [shape] = fig.layout.shapes
        assert (shape.x0, shape.x1, shape.yref, shape.line.dash) == (4, 4, "paper", "dash")
        assert shape.line.color == RUN_COLORS[0]
        [marker] = [t for t in fig.data if t.name == "continued: continued"]
        assert list(marker.x) == [4] and marker.showlegend is False
        assert marker.hovertemplate == "continued at step 4: lr 0.00025 → 0.0005<extra></extra>"
    lr = browser_figures(runs, "pretraining")[3]
    assert [list(t.y) for t in lr.data if t.name == "continued: continued"] == [[2.5e-4]]   # on its curve


def test_learning_rates_read_without_an_exponent() -> None:
    assert [lr_text(v) for v in (5e-5, 2.5e-4, 1e-3, 0.0123456, 0.0)] == ["0.00005", "0.00025", "0.001", "0.0123",
                                                                          "0"]
