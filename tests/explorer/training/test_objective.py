"""The Training tab's *Objective* section (``explorer/training/objective.py``): a widget per pretraining setting, read
back into the job's task settings as the command line's flags are, bad combinations refused with one sentence in the
form's words, and a run's own settings shown read-only."""
from __future__ import annotations

import dataclasses
import inspect

import gradio as gr
import pytest

from engine.training.tasks.pretraining_settings import PretrainingSettings
from explorer.services import Services
from explorer.training import job as training_job
from explorer.training import objective

FORM = ["tiny", "shakespeare", 20, 200, 32, 4, 5e-4, 6, 0.15, False]     # the form's fields up to NSP


def _section() -> list[objective.SettingWidgets]:
    with gr.Blocks():
        return objective.build_objective()


def _values(groups, **changes) -> list:
    """The section's values at their defaults, with ``changes`` by API parameter name."""
    names = [name for name, _, _ in objective.api_parameters(groups)]
    defaults = {name: widget.value for name, widget in zip(names, objective.inputs(groups))}
    return [{**defaults, **changes}[name] for name in names]


def test_every_setting_has_a_widget_and_the_rtd_ones_show_only_for_rtd() -> None:
    groups = _section()
    assert [g.name for g in groups] == [f.name for f in dataclasses.fields(PretrainingSettings)]  # a new field: a widget
    shown = {g.name: all(w.visible for w in g.widgets) for g in groups}
    assert not shown["generator_size"] and not shown["rtd_weight"] and shown["objective"] and shown["mask_mix"]
    assert [w.value for w in dict((g.name, g) for g in groups)["mask_mix"].widgets] == [0.8, 0.1, 0.1]


def test_the_form_builds_the_task_settings_the_cli_would() -> None:
    groups = _section()
    layout = objective.widget_count(groups)
    table8 = objective.task_settings(layout, _values(groups, mask_share=1.0, random_share=0.0, keep_share=0.0,
                                                     static_masking=True))
    assert table8 == dataclasses.asdict(PretrainingSettings(mask_mix="1,0,0", static_masking=True))
    clm = objective.task_settings(layout, _values(groups, objective="clm"))
    assert clm == dataclasses.asdict(PretrainingSettings(objective="clm"))
    with pytest.raises(ValueError, match="^Static masking is for the masked LM; Objective clm"):   # the engine's rule
        objective.task_settings(layout, _values(groups, objective="clm", static_masking=True))
    rtd = objective.task_settings(layout, _values(groups, objective="rtd", generator_size=0.5, rtd_weight=20))
    assert (rtd["generator_size"], rtd["rtd_weight"]) == (0.5, 20.0)
    # A hidden RTD box keeps what was typed, but another objective sends the defaults.
    mlm = objective.task_settings(layout, _values(groups, generator_size=0.5))
    assert mlm == dataclasses.asdict(PretrainingSettings())


def test_a_bad_mix_and_a_bad_combination_are_refused_with_a_sentence(services: Services) -> None:
    groups = _section()
    layout = objective.widget_count(groups)
    with pytest.raises(ValueError, match=r"^Masking mix .*add up to 1"):
        objective.task_settings(layout, _values(groups, mask_share=0.5))
    with pytest.raises(ValueError, match="Masking mix: give all three shares"):
        objective.task_settings(layout, _values(groups, keep_share=None))
    settings = objective.task_settings(layout, _values(groups, objective="clm"))
    with pytest.raises(ValueError, match=r"Objective clm .*turn next-sentence prediction off \(untick “Next-sentence "
                                         r"prediction \(NSP\)”\)"):
        training_job.make_spec(services, *FORM, True, task_settings=settings)
    sop = objective.task_settings(layout, _values(groups, pair_task="sop"))
    with pytest.raises(ValueError, match=r"Pair task sop .*\(tick “Next-sentence prediction \(NSP\)”\)"):
        training_job.make_spec(services, *FORM, False, task_settings=sop)
    spec = training_job.make_spec(services, *FORM, False, task_settings=settings)
    assert spec.settings == PretrainingSettings(objective="clm")        # what run.json will keep


def test_the_endpoint_takes_each_setting_by_name_before_the_token() -> None:
    groups = _section()
    seen = {}

    def handler(preset: str = "tiny", token: str = "", objective_values=()) -> str:
        """Start.

        Args:
            preset: the preset.
            token: the admin token.
        """
        seen.update(preset=preset, token=token, values=list(objective_values))
        return "started"

    endpoint = objective.endpoint_handler(handler, groups)
    names = list(inspect.signature(endpoint).parameters)
    assert names[0] == "preset" and names[-1] == "token"
    assert {"objective", "mask_share", "random_share", "keep_share", "static_masking", "pair_task", "generator_size",
            "rtd_weight"} <= set(names)
    assert "mask_share:" in endpoint.__doc__ and endpoint.__doc__.index("rtd_weight:") < endpoint.__doc__.index("token:")
    assert endpoint("mini", objective="clm", token="t") == "started"
    assert seen["preset"] == "mini" and seen["token"] == "t" and seen["values"][0] == "clm"


def test_a_runs_own_settings_are_described() -> None:
    text = objective.describe({"task_settings": dataclasses.asdict(PretrainingSettings(objective="rtd"))})
    assert "Replaced-token detection" in text and "generator size 0.25" in text and "fixed once a run exists" in text
    assert "masked LM" in objective.describe({})
