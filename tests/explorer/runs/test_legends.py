"""``explorer.runs.legends``: every fine-tuning task's metrics have a name, and the Fine-tune tab's rows and the run
browser name them from the same table."""
from __future__ import annotations

from engine.training.tasks.registry import TRAINING_TASKS
from explorer.finetune.tasks import FINETUNE_ROWS
from explorer.runs.legends import LEGENDS, metric_legends
from explorer.runs.watch_plots import figure_specs


def test_every_fine_tuning_task_names_each_metric_it_plots() -> None:
    tuned = [d for d in TRAINING_TASKS.values() if d.finetuning]
    assert tuned and set(LEGENDS) <= set(TRAINING_TASKS)
    for definition in tuned:
        if definition.name in LEGENDS:
            assert set(LEGENDS[definition.name]) == set(definition.metrics), definition.name
            assert [key for key, _ in metric_legends(definition)] == list(definition.metrics)
    assert set(FINETUNE_ROWS) <= set(LEGENDS)                   # every row the Fine-tune tab offers


def test_the_fine_tune_rows_and_the_run_browser_use_the_same_names() -> None:
    for name, row in FINETUNE_ROWS.items():
        assert row.metrics == metric_legends(row.definition)
        metrics = figure_specs(name)[1]
        legends = [legend for kind, _, legend, _, _ in metrics.series if kind == "train"]
        assert legends == [f"{legend} (train)" for _, legend in row.metrics]
    qa = dict(metric_legends(FINETUNE_ROWS["qa"].definition))
    assert qa["f1"] == "answer F1"


def test_a_metric_with_no_name_is_shown_by_its_key() -> None:
    pretraining = TRAINING_TASKS["pretraining"]
    assert metric_legends(pretraining) == tuple((key, key) for key in pretraining.metrics)
