"""The pretraining trainer: learning, accumulation, exact resume, checkpoints, divergence, config."""
from __future__ import annotations

import copy
import json
import random
from dataclasses import fields

import pytest
import torch

from engine.checkpoints.hf_format import load_directory
from engine.model.heads import BertWithHeads
from engine.training.loop.optim import lr_factor
from engine.data.pretraining import Batch, collate
from engine.training.tasks import task_for
from engine.training.tasks.finetuning import ClassificationTask
from engine.training.loop.resume import resume
from engine.training.loop.divergence import TrainingDiverged
from engine.training.loop.trainer import Trainer
from engine.training.tasks.pretraining import build_datasets
from engine.training.loop.config import TrainingConfig
from engine.training.runs.state import STATE_FILE, read_metrics, read_training_state
from engine.training.runs.run_folder import is_complete, RunFolder, resolve_checkpoint
from tests.conftest import WORDS

STEP_KEYS = {"step", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed"}
EVAL_KEYS = {"step", "eval_mlm_loss", "eval_mlm_acc", "eval_nsp_loss", "eval_nsp_acc"}


pytestmark = pytest.mark.usefixtures("one_thread")


def documents(n_docs: int, seed: int = 0) -> list[list[str]]:
    """Each document walks one of four disjoint word cycles: local structure an MLM can learn."""
    rng = random.Random(seed)
    cycles = [list(WORDS)[i::4] for i in range(4)]
    docs = []
    for d in range(n_docs):
        cycle, pos, doc = cycles[d % 4], rng.randrange(100), []
        for _ in range(8):
            n = rng.randint(4, 8)
            doc.append(" ".join(cycle[(pos + j) % len(cycle)] for j in range(n)) + ".")
            pos += n
        docs.append(doc)
    return docs


def config(**overrides) -> TrainingConfig:
    values = dict(learning_rate=2e-3, warmup_steps=5, total_steps=60, batch_size=8, max_seq_length=32,
                  eval_every=0, eval_batches=4, checkpoint_every=0, seed=0)
    values.update(overrides)
    if "warmup_steps" not in overrides:
        values["warmup_steps"] = min(5, values["total_steps"])
    return TrainingConfig(**values)


def make_trainer(tmp_path, tiny_tokenizer, make_config, cfg: TrainingConfig, n_docs: int = 24,
                 model: BertWithHeads | None = None, **model_overrides) -> Trainer:
    torch.manual_seed(0)
    model = model or BertWithHeads(make_config(**model_overrides))
    docs = documents(n_docs)
    train, evaluation = build_datasets(docs[:-4], docs[-4:], tiny_tokenizer, cfg)
    return Trainer(model, tiny_tokenizer, train, evaluation, cfg, tmp_path / "run", task=task_for(cfg))


def test_loss_falls_and_metrics_are_logged(tmp_path, tiny_tokenizer, make_config):
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config, config(eval_every=20))
    before = trainer.evaluate()
    events: list[tuple[str, dict]] = []
    result = trainer.train(callback=lambda kind, record: events.append((kind, record)))
    assert result.status == "finished" and result.step == 60
    train = [r for kind, r in events if kind == "train"]
    evals = [r for kind, r in events if kind == "eval"]
    assert [r["step"] for r in train] == list(range(1, 61)) and [r["step"] for r in evals] == [20, 40, 60]
    assert all(set(r) == STEP_KEYS for r in train) and all(set(r) == EVAL_KEYS for r in evals)
    first = sum(r["mlm_loss"] for r in train[:5]) / 5
    last = sum(r["mlm_loss"] for r in train[-5:]) / 5
    assert last < first - 0.5, (first, last)
    assert evals[-1]["eval_mlm_loss"] < before["eval_mlm_loss"] - 0.4
    assert all(0 <= r["mlm_acc"] <= 1 and 0 <= r["nsp_acc"] <= 1 and r["tokens_per_s"] > 0 for r in train)
    assert train[0]["lr"] == 0.0 and train[5]["lr"] == pytest.approx(2e-3) and train[-1]["lr"] < 1e-4
    assert train[-1]["elapsed"] > train[0]["elapsed"] > 0
    logged = read_metrics(trainer.run_dir / "metrics.jsonl")
    assert [r["kind"] for r in logged].count("train") == 60 and [r["kind"] for r in logged].count("eval") == 3
    assert [c.step for c in RunFolder(trainer.run_dir).checkpoints()] == [60]        # the last step is always saved
    assert trainer.model.training
    assert trainer.evaluate() == trainer.evaluate()                           # fixed held-out masks, no dropout


def test_nsp_off_trains_mlm_only(tmp_path, tiny_tokenizer, make_config):
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config, config(nsp=False, total_steps=3))
    metrics = trainer.step()
    assert metrics["nsp_loss"] is None and metrics["nsp_acc"] is None
    assert metrics["loss"] == pytest.approx(metrics["mlm_loss"], rel=1e-6)
    assert trainer.evaluate()["eval_nsp_acc"] is None


def _rows(batch: Batch, rows: slice) -> Batch:
    return Batch(**{f.name: getattr(batch, f.name)[rows] for f in fields(batch)})


def test_gradient_accumulation_equals_one_big_batch(tmp_path, tiny_tokenizer, make_config):
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    big = make_trainer(tmp_path / "a", tiny_tokenizer, make_config, config(warmup_steps=0, learning_rate=1e-3),
                       **no_dropout)
    small = make_trainer(tmp_path / "b", tiny_tokenizer, make_config,
                         config(warmup_steps=0, learning_rate=1e-3, batch_size=4, gradient_accumulation_steps=2),
                         model=copy.deepcopy(big.model))
    instances = big.train_data.instances(0)[:8]
    batch = collate(instances, big.train_data.vocab, 0.15, torch.Generator().manual_seed(3))
    one = big.step([batch])
    two = small.step([_rows(batch, slice(0, 4)), _rows(batch, slice(4, 8))])
    for key in ("mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "loss", "grad_norm"):
        assert two[key] == pytest.approx(one[key], abs=1e-6), key
    theirs = dict(small.model.named_parameters())
    for name, param in big.model.named_parameters():
        torch.testing.assert_close(theirs[name], param, rtol=0, atol=1e-6, msg=name)


def test_resume_continues_exactly(tmp_path, tiny_tokenizer, make_config):
    cfg = config(gradient_accumulation_steps=2, checkpoint_every=3, eval_every=3, total_steps=20)
    first = make_trainer(tmp_path, tiny_tokenizer, make_config, cfg, n_docs=12)     # dropout on: RNG matters
    assert first.train(num_steps=3).status == "num_steps"                          # writes step-000003
    run_dir = first.run_dir
    assert read_training_state(run_dir / "checkpoints" / "step-000003")["epoch"] >= 1, \
        "the checkpoint should sit past an epoch boundary"
    expected = first.step()                                                          # the uninterrupted step 4
    after = {n: p.detach().clone() for n, p in first.model.named_parameters()}
    position = (first.epoch, first.batch_index)
    first.train(num_steps=1)                                                         # logs step 5

    torch.manual_seed(1234)                      # whatever happened to the global RNG since
    random.seed(99)
    docs = documents(12)
    train, evaluation = build_datasets(docs[:-4], docs[-4:], tiny_tokenizer, cfg)
    resumed = resume(run_dir / "checkpoints" / "step-000003", task_for(cfg), train, evaluation)
    assert resumed.global_step == 3 and resumed.run_dir == run_dir
    assert max(int(r["step"]) for r in read_metrics(run_dir / "metrics.jsonl")) == 3   # step 5 dropped
    got = resumed.step()
    for key in ("loss", "mlm_loss", "nsp_loss", "mlm_acc", "nsp_acc", "lr", "grad_norm"):
        assert got[key] == pytest.approx(expected[key], abs=1e-6), key
    assert got["loss"] == expected["loss"]
    for name, param in resumed.model.named_parameters():
        torch.testing.assert_close(param, after[name], rtol=0, atol=1e-6, msg=name)
    assert (resumed.epoch, resumed.batch_index) == position
    # A run directory resumes from its newest complete checkpoint; a longer run may be asked for.
    again = resume(run_dir, task_for(cfg), train, evaluation, total_steps=40)
    assert again.global_step == 3 and again.config.total_steps == 40
    assert again.optimizer.param_groups[0]["lr"] == pytest.approx(2e-3 * lr_factor(3, "linear", 5, 40), rel=1e-12)
    with pytest.raises(ValueError, match="cannot change learning_rate"):
        resume(run_dir, task_for(cfg), train, evaluation, learning_rate=1.0)
    other_train, _ = build_datasets(documents(12, seed=5)[:-4], None, tiny_tokenizer, cfg)
    with pytest.raises(ValueError, match="training data differs"):
        resume(run_dir, task_for(cfg), other_train, evaluation)
    with pytest.raises(ValueError, match="the task to train is 'classification' but the settings are for 'pretr"):
        resume(run_dir, ClassificationTask(), train, evaluation)          # the task object must be the run's


def test_checkpoint_is_hf_and_training_state_is_weights_only(tmp_path, tiny_tokenizer, make_config):
    transformers = pytest.importorskip("transformers")
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config, config(total_steps=10))
    trainer.step()
    trainer.step()
    path = trainer.save_checkpoint()
    assert path.name == "step-000002" and is_complete(path)
    hf, info = transformers.BertForPreTraining.from_pretrained(path, output_loading_info=True)
    for name in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(name), f"transformers reports {name}: {info.get(name)}"
    ids = torch.tensor([[2, 30, 40, 50, 3, 60, 70, 3]])
    trainer.model.eval()
    with torch.no_grad():
        ours = trainer.model(ids)
        theirs = hf.eval()(input_ids=ids)
    torch.testing.assert_close(ours.mlm.logits, theirs.prediction_logits, rtol=0, atol=1e-5)
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    assert state["step"] == 2 and state["optimizer"]["state"] and state["scheduler"]["last_epoch"] == 2
    assert isinstance(state["rng"]["torch"], torch.Tensor) and state["config"]["batch_size"] == 8
    assert read_training_state(path)["step"] == 2
    info_json = json.loads((path / "explorer_state.json").read_text())
    assert not (path / "trainer_state.json").exists()      # the HF Trainer's file name, whose schema ours is not
    assert info_json["step"] == 2 and info_json["metrics"]["step"] == 2
    loaded = load_directory(path)
    assert loaded.heads == ("mlm", "nsp") and loaded.tokenizer.vocab_size == tiny_tokenizer.vocab_size


def test_incomplete_checkpoints_are_skipped_and_pruning(tmp_path, tiny_tokenizer, make_config):
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config,
                           config(total_steps=5, checkpoint_every=1, keep_last_checkpoints=2))
    trainer.train()
    assert [c.step for c in RunFolder(trainer.run_dir).checkpoints()] == [5, 4]
    folder = trainer.run_dir / "checkpoints"
    broken = folder / "step-000009"
    broken.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        (broken / name).write_bytes((folder / "step-000005" / name).read_bytes())
    (folder / ".step-000010.partial-1").mkdir()
    (folder / "notes").mkdir()
    assert [c.step for c in RunFolder(trainer.run_dir).checkpoints()] == [5, 4]
    assert resolve_checkpoint(trainer.run_dir) == folder / "step-000005"
    with pytest.raises(ValueError, match="not a complete training checkpoint"):
        resolve_checkpoint(broken)
    empty_run = tmp_path / "empty-run"
    (empty_run / "checkpoints").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        resolve_checkpoint(empty_run)
    (folder / "step-000004" / "explorer_state.json").write_text("{torn")
    assert [c.step for c in RunFolder(trainer.run_dir).checkpoints()] == [5, 4]        # listed without metrics


@pytest.mark.parametrize("poison", ["nan weight", "inf loss"])
def test_divergence_stops_without_updating(tmp_path, tiny_tokenizer, make_config, poison):
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config, config(total_steps=10, checkpoint_every=2))
    trainer.train(num_steps=2)
    saved = trainer.run_dir / "checkpoints" / "step-000002"
    saved_files = {p.name: p.read_bytes() for p in saved.iterdir()}
    if poison == "nan weight":
        with torch.no_grad():
            trainer.model.bert.encoder.layer[0].output.LayerNorm.weight[0] = float("nan")
    else:
        forward = trainer.model.forward

        def infinite(*args, **kwargs):
            out = forward(*args, **kwargs)
            out.mlm.loss = out.mlm.loss * float("inf")
            return out
        trainer.model.forward = infinite
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    adam_steps = [s["step"].item() for s in trainer.optimizer.state.values()]
    events = []
    with pytest.raises(TrainingDiverged, match=r"(nan|inf) at step 3.*step-000002") as caught:
        trainer.train(callback=lambda kind, record: events.append(kind))
    assert caught.value.step == 3 and caught.value.last_checkpoint.name == "step-000002"
    for name, param in trainer.model.named_parameters():
        torch.testing.assert_close(param, before[name], rtol=0, atol=0, equal_nan=True, msg=name)
        assert param.grad is None
    assert [s["step"].item() for s in trainer.optimizer.state.values()] == adam_steps
    assert trainer.global_step == 2 and events[-1] == "diverged"
    assert read_metrics(trainer.run_dir / "metrics.jsonl")[-1]["kind"] == "diverged"
    assert [c.step for c in RunFolder(trainer.run_dir).checkpoints()] == [2]
    good = load_directory(saved)
    assert all(torch.isfinite(p).all() for p in good.model.parameters())
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == saved_files      # byte for byte as it was


def test_should_stop_is_asked_between_steps(tmp_path, tiny_tokenizer, make_config):
    trainer = make_trainer(tmp_path, tiny_tokenizer, make_config, config(total_steps=10))
    asked = []

    def should_stop() -> bool:
        asked.append(trainer.global_step)
        return len(asked) > 3
    result = trainer.train(should_stop=should_stop)
    assert result.status == "stopped" and result.step == 3 and asked == [0, 1, 2, 3]
    assert trainer.train(num_steps=2).step == 5
    assert trainer.train().status == "finished" and trainer.global_step == 10
    assert trainer.train().status == "finished" and trainer.global_step == 10


@pytest.mark.parametrize("overrides,message", [
    (dict(learning_rate=0.0), "learning_rate"), (dict(learning_rate=float("nan")), "learning_rate"),
    (dict(learning_rate=-1e-4), "learning_rate"), (dict(batch_size=0), "batch_size"),
    (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"), (dict(total_steps=0), "total_steps"),
    (dict(warmup_steps=100, total_steps=10), "warmup_steps"), (dict(warmup_ratio=1.5), "warmup_ratio"),
    (dict(adam_betas=(0.9, 1.0)), "adam_betas"), (dict(adam_eps=0), "adam_eps"),
    (dict(weight_decay=-0.1), "weight_decay"), (dict(mlm_probability=0.0), "mlm_probability"),
    (dict(schedule="cosine"), "schedule"), (dict(precision="fp16"), "precision"),
    (dict(max_grad_norm=0.0), "max_grad_norm"), (dict(batch_size=True), "batch_size"),
    (dict(eval_every=-1), "eval_every"), (dict(keep_last_checkpoints=0), "keep_last_checkpoints"),
    (dict(max_seq_length=4), "max_seq_length"), (dict(device="tpu-ish"), "device"), (dict(nsp="yes"), "nsp"),
])
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        config(**overrides)


def test_config_against_model_and_data(tmp_path, tiny_tokenizer, make_config):
    assert config(learning_rate=5e-4).learning_rate == 5e-4
    assert config(warmup_steps=None, warmup_ratio=0.1, total_steps=50).resolved_warmup_steps == 5
    assert TrainingConfig.from_dict(config().to_dict()) == config()
    assert config(device="cpu").resolve_device() == torch.device("cpu")
    assert config(precision="auto").autocast_dtype(torch.device("cpu")) is None
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            config(device="cuda").resolve_device()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        make_trainer(tmp_path, tiny_tokenizer, make_config, config(max_seq_length=128))
    docs = documents(8)
    train, _ = build_datasets(docs, None, tiny_tokenizer, config(batch_size=4))
    with pytest.raises(ValueError, match="batch_size=4 but the training config says 8"):
        Trainer(BertWithHeads(make_config()), tiny_tokenizer, train, None, config(), tmp_path, task=task_for(config()))
    with pytest.raises(ValueError, match="no NSP head"):
        Trainer(BertWithHeads(make_config(), heads=("mlm",)), tiny_tokenizer, train, None,
                config(batch_size=4), tmp_path, task=task_for(config(batch_size=4)))
    trainer = Trainer(BertWithHeads(make_config()), tiny_tokenizer, train, None, config(batch_size=4), tmp_path,
                      task=task_for(config(batch_size=4)))
    with pytest.raises(ValueError, match="no held-out data"):
        trainer.evaluate()
