"""ELECTRA's replaced-token detection (``--objective rtd``) as a user meets it: the labels are exactly the positions
whose token the generator changed, a tiny run's losses fall, the generator shares the discriminator's embeddings,
the checkpoint is an ELECTRA discriminator the Heads tab's replaced-token view reads, and a resume is exact."""
from __future__ import annotations

import json

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load_directory
from engine.data.masking import IGNORE_INDEX
from engine.model.electra_generator import GENERATOR_OPTION, ElectraGenerator, generator_config
from engine.model.heads import BertWithHeads
from engine.pretrain import build_parser, main, spec_from_args
from engine.probes.heads.replaced_tokens import replaced_tokens
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.job_spec import JobSpec
from engine.training.tasks.pretraining_settings import PretrainingSettings
from engine.training.tasks import replaced_tokens as replaced_tokens_task
from engine.training.tasks.replaced_tokens import ReplacedTokenTask, replaced_labels, sample_tokens
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")
RTD = {"objective": "rtd"}


@pytest.fixture
def tokenizer_dir(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    return tmp_path / "tokenizer"


def rtd_job(tmp_path, tokenizer_dir, settings=RTD, **training):
    return pretraining(tmp_path, tokenizer_dir, nsp=False, **training).replace(task_settings=settings)


def test_labels_are_exactly_the_changed_real_tokens():
    original = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 20, 21, 3, 0, 0]])
    corrupted = torch.tensor([[2, 10, 99, 12, 3, 7], [5, 20, 21, 8, 0, 0]])     # odd changes at specials/padding
    attention = (original != 0).long()
    special = torch.tensor([[1, 0, 0, 0, 1, 1], [1, 0, 0, 1, 1, 1]])
    assert replaced_labels(original, corrupted, attention, special).tolist() == [[0, 0, 1, 0, 0, 0], [0] * 6]


def test_a_task_step_labels_the_positions_whose_token_the_generator_changed(tmp_path, tokenizer_dir, monkeypatch):
    trainer = prepare_job(rtd_job(tmp_path, tokenizer_dir, batch_size=8)).trainer
    model, task = trainer.model, trainer.task
    assert isinstance(task, ReplacedTokenTask) and model.config.model_type == "electra"
    batch = trainer.train_data.batch(0, 0)
    masked = batch.labels != IGNORE_INDEX
    original = torch.where(masked, batch.labels, batch.input_ids)                     # (B, S)
    torch.manual_seed(0)
    with torch.no_grad():
        step = task.forward(model.train(), batch, trainer.config)
    changed = step.corrupted_ids != original
    assert torch.equal(step.replaced.bool(), changed) and changed.any()   # exactly where the token differs
    assert not changed[~masked].any(), "only masked positions are filled"
    assert not step.replaced[batch.special_tokens_mask.bool()].any()
    assert (step.corrupted_ids[masked] != trainer.train_data.vocab.mask_token_id).any()

    # a generator that samples the original token at every other masked position: those are labelled original
    targets = batch.labels[masked]                                                  # (N,)
    hits = torch.arange(len(targets)) % 2 == 0
    other = trainer.train_data.vocab.random_token_ids[0]
    guesses = torch.where(hits, targets, torch.where(targets == other, other + 1, other))
    monkeypatch.setattr(replaced_tokens_task, "sample_tokens", lambda logits, generator=None: guesses)
    with torch.no_grad():
        step = task.forward(model, batch, trainer.config)
    expected = torch.zeros_like(masked)
    expected[masked] = ~hits
    assert torch.equal(step.replaced.bool(), expected) and hits.any() and (~hits).any()
    assert torch.equal(step.corrupted_ids[masked], guesses)
    assert task.counts(batch) == (int(masked.sum()), batch.num_tokens)


def test_sampling_follows_the_softmax_and_a_seeded_generator_repeats():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1, 0.0]])).expand(20000, 4)
    draws = sample_tokens(logits, torch.Generator().manual_seed(1))
    shares = torch.bincount(draws, minlength=4).float() / len(draws)
    assert torch.allclose(shares, torch.tensor([0.7, 0.2, 0.1, 0.0]), atol=0.015)
    assert torch.equal(draws, sample_tokens(logits, torch.Generator().manual_seed(1)))


def test_the_generator_is_small_and_shares_the_embeddings(tiny_tokenizer):
    config = rtd_config(tiny_tokenizer, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    small = generator_config(config)
    assert (small.hidden_size, small.num_attention_heads, small.intermediate_size) == (64, 1, 256)
    model = BertWithHeads(config, heads=("replaced_tokens", "generator"))
    generator = model.head_module("generator")
    assert isinstance(generator, ElectraGenerator)
    assert generator.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert not any("embeddings." in name and "project" not in name for name, _ in generator.named_parameters()
                   if not name.startswith("predictions.decoder"))
    assert generator.embeddings_project.weight.shape == (64, 256)       # E = 256 -> H_g = 64
    assert all(p is not model.bert.embeddings.word_embeddings.weight for p in model.head_parameters("generator"))
    half = BertWithHeads(config.replace(family_options={GENERATOR_OPTION: 0.5}), heads=("generator",))
    assert half.head_module("generator").config.hidden_size == 128


def rtd_config(tiny_tokenizer, **sizes):
    from engine.model.config import preset
    return preset("tiny", vocab_size=tiny_tokenizer.vocab_size, num_hidden_layers=1, **sizes).replace(
        model_type="electra", family_options={GENERATOR_OPTION: 0.25})


def test_a_tiny_rtd_run_learns_and_its_checkpoint_is_an_electra_discriminator(tmp_path, tokenizer_dir):
    spec = rtd_job(tmp_path, tokenizer_dir, total_steps=30, eval_every=30, eval_batches=2, checkpoint_every=0,
                   learning_rate=2e-3, batch_size=8)
    trainer = prepare_job(spec).trainer
    assert trainer.model.heads == ("replaced_tokens", "generator") and not trainer.model.has_pooler
    before = trainer.evaluate()
    assert trainer.evaluate() == before, "a held-out evaluation samples the same tokens at every call"
    train = []
    trainer.train(callback=lambda kind, record: train.append(record) if kind == "train" else None)
    after = trainer.evaluate()
    first, last = (sum(r["loss"] for r in part) / 5 for part in (train[:5], train[-5:]))
    assert last < first, (first, last)
    assert after["eval_rtd_loss"] < before["eval_rtd_loss"] and after["eval_mlm_loss"] < before["eval_mlm_loss"]
    record = train[-1]
    assert record["generator_mlm_loss"] == record["mlm_loss"] and record["nsp_loss"] is None
    assert 0 <= record["rtd_acc"] <= 1 and record["rtd_loss"] > 0
    total = record["mlm_loss"] + 50 * record["rtd_loss"]              # one micro-batch: the logged loss is the sum
    assert record["loss"] == pytest.approx(total, rel=1e-5)

    checkpoint = RunFolder(tmp_path / "run").checkpoints()[0].path
    written = json.loads((checkpoint / "config.json").read_text())
    assert written["model_type"] == "electra" and written[GENERATOR_OPTION] == 0.25
    assert "ElectraForPreTraining" in written["architectures"]
    loaded = load_directory(checkpoint)
    assert loaded.heads == ("replaced_tokens", "generator")
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor.cpu()), name
    result = replaced_tokens(loaded, "the cat sat on the mat")           # the Heads tab's Replaced tokens view
    assert len(result.probabilities) == len(result.tokens) and result.roles[0] == "cls"
    theirs, report = transformers.ElectraForPreTraining.from_pretrained(checkpoint, output_loading_info=True)
    assert not report["missing_keys"] and all(k.startswith("generator.") for k in report["unexpected_keys"])
    ids = torch.tensor([loaded.tokenizer.encode("the cat sat on the mat").input_ids])
    theirs.eval()
    with torch.no_grad():
        ours = loaded.model(ids, compute=("replaced_tokens",)).result("replaced_tokens").logits
        assert torch.allclose(theirs(ids).logits, ours, atol=1e-5)


def test_a_resumed_rtd_run_is_bit_for_bit_the_straight_one(tmp_path, tokenizer_dir):
    spec = rtd_job(tmp_path, tokenizer_dir)
    straight = prepare_job(spec.replace(run_dir=str(tmp_path / "straight"))).trainer
    straight.train()
    prepare_job(spec).trainer.train(num_steps=3)
    resumed = prepare_job(JobSpec({"total_steps": 6}, documents=documents(),
                                  resume_from=str(tmp_path / "run"))).trainer
    assert resumed.global_step == 3 and isinstance(resumed.task, ReplacedTokenTask)
    resumed.train()
    for (name, mine), theirs in zip(resumed.model.state_dict().items(), straight.model.state_dict().values()):
        assert torch.equal(mine, theirs), name


def test_the_command_line_reads_the_rtd_settings_and_refuses_bad_ones(capsys):
    parser = build_parser()
    args = parser.parse_args(["--objective", "rtd", "--no-nsp", "--generator-size", "0.5", "--rtd-weight", "20"])
    assert spec_from_args(args, parser).settings == PretrainingSettings(objective="rtd", generator_size=0.5,
                                                                        rtd_weight=20.0)
    for argv, words in ((["--objective", "rtd"], "--objective rtd (ELECTRA's replaced-token detection) reads one"),
                        (["--generator-size", "0.5"], "--generator-size is for objective rtd"),
                        (["--objective", "rtd", "--no-nsp", "--generator-size", "2"],
                         "--generator-size must be a number above 0 and at most 1"),
                        (["--objective", "rtd", "--no-nsp", "--rtd-weight", "0"], "--rtd-weight must be a number")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and words in capsys.readouterr().err, argv


def test_rtd_needs_an_electra_discriminator_with_its_generator(tiny_tokenizer):
    spec = JobSpec({"nsp": False}, task_settings=RTD)
    task = spec.definition.make_task(spec.training_config(), spec.task_settings)
    config = rtd_config(tiny_tokenizer)
    with pytest.raises(ValueError, match="ELECTRA discriminator with its generator"):
        task.check(BertWithHeads(config, heads=("replaced_tokens",)), None, None, spec.training_config())
