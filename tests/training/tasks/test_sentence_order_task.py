"""ALBERT's sentence-order prediction as a pretraining setting (``--pair-task sop``): a run trains the pair head on
swapped pairs and logs ``sop_*`` beside the ``nsp_*`` keys, the setting is kept in ``run.json``, an ALBERT's own
sentence-order head reads the labels under its name, and the combinations that make no sense are refused."""
from __future__ import annotations

import json

import pytest
import transformers

from engine.data.pretraining import PretrainingDataset
from engine.data.token_store import TokenStore
from engine.model.families.registry import config_from_dict
from engine.model.heads import BertWithHeads
from engine.pretrain import main
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.pretraining import PretrainingTask
from engine.training.tasks.pretraining_settings import PretrainingSettings
from support.job_helpers import documents, pretraining

pytestmark = pytest.mark.usefixtures("one_thread")
SOP = PretrainingSettings(pair_task="sop")


def test_a_sentence_order_run_trains_the_pair_head_and_logs_sop_metrics(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(tmp_path / "tokenizer")
    spec = pretraining(tmp_path, tmp_path / "tokenizer", total_steps=4, eval_every=4, checkpoint_every=0)
    trainer = prepare_job(spec.replace(task_settings={"pair_task": "sop"})).trainer
    assert trainer.model.heads == ("mlm", "nsp") and trainer.train_data.objective.sentence_order
    records = []
    trainer.train(callback=lambda kind, record: records.append((kind, record)))
    train = [r for kind, r in records if kind == "train"][-1]
    evaluation = [r for kind, r in records if kind == "eval"][-1]
    assert train["sop_loss"] == train["nsp_loss"] > 0 and train["sop_acc"] == train["nsp_acc"]
    assert evaluation["eval_sop_acc"] == evaluation["eval_nsp_acc"] is not None
    recorded = json.loads(RunFolder(tmp_path / "run").spec_path.read_text())["task_settings"]
    assert recorded["pair_task"] == "sop" and recorded["objective"] == "mlm"


def albert(tiny_tokenizer) -> BertWithHeads:
    config = config_from_dict({"model_type": "albert", **transformers.AlbertConfig(
        vocab_size=tiny_tokenizer.vocab_size, hidden_size=32, embedding_size=16, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=37, max_position_embeddings=64).to_dict()})
    return BertWithHeads(config, heads=("mlm", "nsp"))


def test_an_albert_s_own_sentence_order_head_reads_the_swapped_pairs(tiny_tokenizer):
    model = albert(tiny_tokenizer)
    store = TokenStore.from_texts(documents(), tiny_tokenizer, 29)
    data = PretrainingDataset(store, tiny_tokenizer, 32, batch_size=4, seed=1, objective=SOP.data_objective())
    config = TrainingConfig(batch_size=4, max_seq_length=32)
    task = PretrainingTask(config, SOP)
    task.check(model, data, None, config)
    batch = data.batch(0, 0)
    out = task.forward(model, batch, config)
    assert out.nsp.loss is not None and out.nsp.logits.shape == (4, 2)
    with pytest.raises(ValueError, match="predicts sentence order .* --pair-task sop"):
        PretrainingTask(config).check(model, PretrainingDataset(store, tiny_tokenizer, 32, batch_size=4), None,
                                      config)


def test_sentence_order_needs_pairs_and_the_masked_lm(capsys):
    for argv, words in ((["--pair-task", "sop", "--no-nsp"], "--pair-task sop (sentence order) is a task for "
                                                             "sentence pairs"),
                        (["--pair-task", "sop", "--objective", "clm", "--no-nsp"], "objective clm reads no pairs"),
                        (["--pair-task", "order"], "--pair-task must be one of nsp, sop")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and words in capsys.readouterr().err, argv
