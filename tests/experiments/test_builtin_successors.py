"""RoBERTa's Table 2 and ELECTRA's equal-compute comparison as experiments: every arm is a pretraining job the
engine accepts (its settings and NSP agree), the claims name the arms and metrics there are, the source's columns
are filled for every arm, and the rtd arm's steps spend what the masked-LM arm's spend."""
from __future__ import annotations

import pytest

from engine.experiments.builtin_successors import ELECTRA_COMPUTE, ROBERTA_TABLE2, rtd_steps
from engine.experiments.compute import arm_config, train_flops_per_step
from engine.experiments.definitions import METRICS
from engine.experiments.runner import pretraining_spec

SUCCESSORS = (ROBERTA_TABLE2, ELECTRA_COMPUTE)


@pytest.mark.parametrize("experiment", SUCCESSORS, ids=lambda e: e.name)
def test_every_arm_is_a_job_the_engine_accepts_and_every_claim_names_its_arms(experiment, tmp_path):
    names = {arm.name for arm in experiment.arms}
    for claim in experiment.claims:
        assert {claim.first, claim.second} <= names and claim.metric in METRICS
    for arm in experiment.arms:
        assert set(arm.paper) == set(experiment.paper_columns)
        for quick in (True, False):
            spec = pretraining_spec(arm, experiment.scale(quick), 0, tmp_path / "tokenizer", tmp_path / "run")
            spec.settings.check_job(spec, spec.training_config())      # NSP and packing / objective agree


def test_roberta_arms_differ_in_the_input_format_and_the_nsp_loss():
    scale = ROBERTA_TABLE2.scale(True)
    layout = {}
    for arm in ROBERTA_TABLE2.arms:
        spec = pretraining_spec(arm, scale, 0, "tok", "run")
        layout[arm.name] = (spec.settings.packing, spec.training_config().nsp)
    assert layout == {"segment-pair": ("segment-pair", True), "sentence-pair": ("sentence-pair", True),
                      "full-sentences": ("full-sentences", False), "doc-sentences": ("doc-sentences", False)}


@pytest.mark.parametrize("quick", [True, False])
def test_the_rtd_arm_runs_fewer_steps_for_the_same_training_flops(quick):
    scale = ELECTRA_COMPUTE.scale(quick)
    mlm, rtd = ELECTRA_COMPUTE.arm("mlm"), ELECTRA_COMPUTE.arm("rtd")
    steps = {arm.name: pretraining_spec(arm, scale, 0, "tok", "run").training_config().total_steps
             for arm in (mlm, rtd)}
    assert steps["mlm"] == scale.steps and steps["rtd"] == rtd_steps(scale) == rtd.steps(scale) < scale.steps
    config = arm_config(scale.preset, scale.vocab_size)
    per_step = {o: train_flops_per_step(config, o, scale.batch_size, scale.seq_length) for o in ("mlm", "rtd")}
    assert abs(steps["rtd"] * per_step["rtd"] - steps["mlm"] * per_step["mlm"]) <= per_step["rtd"]
    assert 0.85 < steps["rtd"] / steps["mlm"] < 0.95                   # "about 9 in 10", as the note says


def test_flags_that_change_the_scale_change_the_rtd_arm_s_steps_with_it():
    scale = ELECTRA_COMPUTE.scale(True, steps=100, preset="mini")
    assert ELECTRA_COMPUTE.arm("rtd").steps(scale) == rtd_steps(scale) < 100
    assert ELECTRA_COMPUTE.arm("mlm").steps(scale) == 100
