"""RoBERTa's equal tokens per batch (engine.experiments.token_budget): an arm of shorter inputs (single-sentence
pairs, whole sentences that leave an input part empty) pretrains with a bigger batch, so each step sees about as
many tokens as the arm it names; the job really reads batches that size; the chain is checked; older numbers of
the experiment are not read back as the new ones."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.experiments.builtin_successors import ROBERTA_TABLE2
from engine.experiments.definitions import Arm, Experiment
from engine.experiments.results import scale_line
from engine.experiments.runner import ArmResult, arm_spec, experiment_dir, scale_key, shared_tokenizer
from engine.experiments.token_budget import MAX_GROWTH, arm_batch_size, grown_batch_size, mean_input_tokens
from engine.text.builtin_corpus import builtin_corpus
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.jobs.setup import prepare_job

SCALE = ROBERTA_TABLE2.scale(True, max_documents=40, steps=4, seeds=1)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_tokenizer(tmp_path_factory.mktemp("roberta"), ROBERTA_TABLE2, SCALE, lambda _: None)


def test_the_batch_grows_by_the_ratio_of_tokens_and_stays_bounded() -> None:
    assert grown_batch_size(16, 40.0, 16 * 60.0) == 24                 # 960 tokens in inputs of 40: 24 of them
    assert grown_batch_size(16, 60.0, 16 * 60.0) == 16                 # as long: the same batch
    assert grown_batch_size(16, 1.0, 16 * 60.0) == MAX_GROWTH * 16     # memory bounded whatever the text
    assert grown_batch_size(16, 500.0, 10.0) == 1                      # never an empty batch
    with pytest.raises(ValueError, match="positive"):
        grown_batch_size(16, 0.0, 100.0)


def test_single_sentence_pairs_and_whole_sentences_make_shorter_inputs_than_segment_pairs(tokenizer: Path) -> None:
    documents = builtin_corpus("shakespeare", SCALE.max_documents)
    loaded = WordPieceTokenizer.from_file(tokenizer)
    mean = {arm.name: mean_input_tokens(documents, loaded, SCALE, arm.training, arm.settings)
            for arm in ROBERTA_TABLE2.arms}
    assert mean["sentence-pair"] < mean["full-sentences"] < mean["segment-pair"] <= SCALE.seq_length
    assert mean["doc-sentences"] <= mean["full-sentences"]             # a document's end cuts an input short


def test_each_grown_arm_sees_about_as_many_tokens_per_step_as_the_arm_it_names(tokenizer: Path) -> None:
    documents = builtin_corpus("shakespeare", SCALE.max_documents)
    loaded = WordPieceTokenizer.from_file(tokenizer)
    per_step = {}
    for arm in ROBERTA_TABLE2.arms:
        batch = arm_batch_size(ROBERTA_TABLE2, arm, SCALE, tokenizer, "shakespeare")
        per_step[arm.name] = (batch, batch * mean_input_tokens(documents, loaded, SCALE, arm.training, arm.settings))
    assert per_step["segment-pair"][0] == SCALE.batch_size                # the reference keeps the scale's batch
    assert per_step["sentence-pair"][0] > per_step["full-sentences"][0] > SCALE.batch_size
    reference = per_step["segment-pair"][1]
    for name, (batch, tokens) in per_step.items():
        assert abs(tokens - reference) <= tokens / batch, name            # within one input of the reference


def test_the_job_of_a_grown_arm_reads_batches_of_its_size(tokenizer: Path, tmp_path: Path) -> None:
    arm = ROBERTA_TABLE2.arm("sentence-pair")
    spec = arm_spec(ROBERTA_TABLE2, arm, SCALE, 0, tokenizer, tmp_path / "run")
    batch = spec.training_config().batch_size
    assert batch == arm_batch_size(ROBERTA_TABLE2, arm, SCALE, tokenizer, "shakespeare") > SCALE.batch_size
    job = prepare_job(spec)
    assert job is not None
    first = job.trainer.train_data.batch(0, 0)
    assert first.input_ids.shape[0] == batch                           # (B, S): B is the grown batch
    reference = arm_spec(ROBERTA_TABLE2, ROBERTA_TABLE2.arm("segment-pair"), SCALE, 0, tokenizer, tmp_path / "ref")
    assert reference.training_config().batch_size == SCALE.batch_size


def test_a_tokens_like_that_names_no_arm_or_goes_round_is_refused() -> None:
    a, b = Arm("a", "A"), Arm("b", "B", tokens_like="a")
    Experiment("ok", "t", "s", "f", (a, b), (), ())
    with pytest.raises(ValueError, match="tokens_like"):
        Experiment("missing", "t", "s", "f", (a, Arm("c", "C", tokens_like="nobody")), (), ())
    with pytest.raises(ValueError, match="circle"):
        Experiment("round", "t", "s", "f", (Arm("a", "A", tokens_like="b"), Arm("b", "B", tokens_like="a")), (), ())
    with pytest.raises(ValueError, match="tokens_like"):
        Experiment("itself", "t", "s", "f", (Arm("a", "A", tokens_like="a"),), (), ())


def test_a_revised_experiment_keeps_its_numbers_in_another_folder(tmp_path: Path) -> None:
    old = dataclasses.replace(ROBERTA_TABLE2, revision=0)
    assert ROBERTA_TABLE2.revision >= 1
    assert experiment_dir(tmp_path, old, SCALE) != experiment_dir(tmp_path, ROBERTA_TABLE2, SCALE)
    assert scale_key(SCALE) == scale_key(SCALE, 0) != scale_key(SCALE, 1)
    assert scale_key(SCALE, 1).startswith(f"{SCALE.preset}-{SCALE.steps}-steps-")


def test_the_tables_scale_line_names_the_grown_batches() -> None:
    batches = {"segment-pair": 16, "sentence-pair": 24, "full-sentences": 20, "doc-sentences": 20}
    results = [ArmResult(name, 0, {}, SCALE.steps, SCALE.steps * batch * SCALE.seq_length, 1000)
               for name, batch in batches.items()]
    line = scale_line(ROBERTA_TABLE2, SCALE, results)
    assert "grown batches: sentence-pair 24, full-sentences 20, doc-sentences 20" in line
    assert f"{SCALE.steps * 24 * SCALE.seq_length / 1e6:.2f}M tokens seen per arm at most" in line
    assert "grown" not in scale_line(ROBERTA_TABLE2, SCALE, results[:1])   # the reference alone grew nothing
