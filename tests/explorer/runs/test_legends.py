"""``explorer.runs.legends``: every fine-tuning task's metrics have a name, and the Fine-tune tab's rows and the run
browser name them from the same table."""
from __future__ import annotations

from engine.training.tasks.registry import TRAINING_TASKS, registered
from explorer.finetune.tasks import BUILT_IN_ROWS, finetune_rows
from explorer.runs.legends import LEGENDS, metric_legends
from explorer.runs.watch.plots import figure_specs
from support.toy_task import SMOOTHED


def test_every_fine_tuning_task_names_each_metric_it_plots() -> None:
    tuned = [d for d in TRAINING_TASKS.values() if d.finetuning]
    assert tuned and set(LEGENDS) <= set(TRAINING_TASKS)
    for definition in tuned:
        if definition.name in LEGENDS:
            assert set(LEGENDS[definition.name]) == set(definition.metrics), definition.name
            assert [key for key, _ in metric_legends(definition)] == list(definition.metrics)
    # Every built-in row of the Fine-tune tab names its metrics; a task the tab offers with no row of its own
    # (one registered later) shows its metrics by key (below), so adding one needs no line here.
    assert set(BUILT_IN_ROWS) <= set(LEGENDS)


def test_the_fine_tune_rows_and_the_run_browser_use_the_same_names() -> None:
    for name, row in finetune_rows().items():
        assert row.metrics == metric_legends(row.definition)
        metrics = figure_specs(name)[1]
        legends = [legend for kind, _, legend, _, _ in metrics.series if kind == "train"]
        assert legends == [f"{legend} (train)" for _, legend in row.metrics]
    qa = dict(metric_legends(finetune_rows()["qa"].definition))
    assert qa["f1"] == "answer F1"


def test_the_checks_hold_with_a_toy_task_registered() -> None:
    """A task added the recipe's way (its module + one ``register`` line) is offered by the Fine-tune tab, its
    metrics shown by key, and the checks above pass with it as without it."""
    with registered(SMOOTHED):
        assert SMOOTHED.name in finetune_rows() and SMOOTHED.name not in LEGENDS
        assert metric_legends(SMOOTHED) == tuple((key, key) for key in SMOOTHED.metrics)
        test_every_fine_tuning_task_names_each_metric_it_plots()
        test_the_fine_tune_rows_and_the_run_browser_use_the_same_names()
    assert SMOOTHED.name not in TRAINING_TASKS


def test_a_metric_with_no_name_is_shown_by_its_key() -> None:
    pretraining = TRAINING_TASKS["pretraining"]
    assert metric_legends(pretraining) == tuple((key, key) for key in pretraining.metrics)
