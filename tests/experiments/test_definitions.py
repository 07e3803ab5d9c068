"""The built-in experiments are well formed: every arm's changes are settings the engine takes, the mixes say what
their labels say, and every claim names arms and a metric the evaluation measures."""
from __future__ import annotations

import dataclasses

import pytest

from engine.experiments.builtin import EXPERIMENTS, experiment
from engine.experiments.definitions import METRICS, OPTIONAL_METRICS, Arm, Claim, Experiment
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.pretraining_settings import PretrainingSettings, parse_mix


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_arm_is_a_run_the_engine_takes(name: str) -> None:
    chosen = experiment(name)
    fields = {f.name for f in dataclasses.fields(TrainingConfig)}
    for arm in chosen.arms:
        assert set(arm.training) <= fields, arm.name
        settings = PretrainingSettings(**arm.settings)               # checks the objective and the mix
        config = TrainingConfig(task="pretraining").replace(**dict(arm.training))
        settings.check_job(None, config)                             # e.g. clm needs NSP off
        assert set(arm.paper) == set(chosen.paper_columns), arm.name  # every paper column filled for every arm
    for claim in chosen.claims:
        assert claim.metric in METRICS and {claim.first, claim.second} <= {a.name for a in chosen.arms}


def test_table8_arms_hold_the_papers_mixes_in_our_order() -> None:
    """The paper writes MASK / SAME / RND; our mask_mix is mask, random, keep: 80/0/20 (no kept, 20% random) is
    0.8,0.2,0."""
    table8 = experiment("bert-table8")
    for arm in table8.arms:
        mask, same, random = (int(n) / 100 for n in arm.name.removeprefix("mix-").split("-"))
        assert parse_mix(arm.settings["mask_mix"]) == pytest.approx((mask, random, same))
    assert table8.arm("mix-80-10-10").paper["MNLI dev (fine-tune)"] == 84.2
    assert table8.arm("mix-100-0-0").paper["NER dev F1 (feature-based)"] == 94.0


def test_table5_compares_the_three_objectives() -> None:
    table5 = experiment("bert-table5")
    assert [a.training.get("nsp", True) for a in table5.arms] == [True, False, False]
    assert table5.arm("ltr").settings == {"objective": "clm"}
    assert table5.arm("mlm-nsp").paper["SST-2"] == 92.7 and table5.arm("ltr").paper["SQuAD F1"] == 77.8


def test_table6_grows_the_model_and_roberta_table1_changes_only_the_masking() -> None:
    from engine.model.config import preset

    table6 = experiment("bert-table6")
    sizes = []
    for arm in table6.arms:
        config = preset("tiny", **arm.job["model_overrides"])             # a config the engine builds
        sizes.append(config.num_hidden_layers * config.hidden_size ** 2)
    assert sizes == sorted(sizes) and len(set(sizes)) == 3                  # in the paper's order: small to large
    roberta = experiment("roberta-table1")
    assert [a.settings for a in roberta.arms] == [{"static_masking": True}, {}]
    assert all(not a.training and not a.job for a in roberta.arms)


def test_bad_definitions_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        Claim("x", "a", "b", "pos_acc", kind="worse")
    with pytest.raises(ValueError, match="metric"):
        Claim("x", "a", "b", "bleu")
    arms = (Arm("a", "A"), Arm("a", "A again"))
    with pytest.raises(ValueError, match="share a name"):
        Experiment("e", "E", "src", "f", arms, (), ())
    with pytest.raises(ValueError, match="does not have"):
        Experiment("e", "E", "src", "f", (Arm("a", "A"),), (), (Claim("x", "a", "b", "pos_acc"),))
    with pytest.raises(KeyError, match="bert-table8"):
        experiment("bert-table99")
    with pytest.raises(ValueError, match="pos_features_acc, which it does not measure"):
        Experiment("e", "E", "src", "f", (Arm("a", "A"), Arm("b", "B")), (),
                   (Claim("x", "a", "b", "pos_features_acc"),))
    with pytest.raises(ValueError, match="extra_metrics are of pos_features_acc"):
        Experiment("e", "E", "src", "f", (Arm("a", "A"),), (), (), extra_metrics=("pos_acc",))


ALWAYS = tuple(m for m in METRICS if m not in OPTIONAL_METRICS)


def test_tables_7_and_8_measure_named_entities_and_table8_frozen_features_too() -> None:
    """The paper's Tables 7 and 8 are about NER, and Table 8 has a feature-based column; the other experiments
    measure what they always did."""
    assert experiment("bert-table8").metrics == tuple(METRICS)
    assert experiment("bert-table7").metrics == tuple(m for m in METRICS if m in ALWAYS or m == "ner_f1")
    for name, found in EXPERIMENTS.items():
        if name not in ("bert-table8", "bert-table7"):
            assert found.metrics == ALWAYS, name


def test_a_scale_takes_the_flags_given_only() -> None:
    table8 = experiment("bert-table8")
    assert table8.scale(True, steps=None, seeds=3).seeds == 3
    assert table8.scale(True).steps == table8.quick.steps and table8.scale(False).steps == table8.full.steps
