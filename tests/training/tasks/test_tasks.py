"""engine.training.tasks: the task objects the Trainer runs, freezing rules, and data/model checks."""
from __future__ import annotations

import copy

import pytest
import torch

from engine.data.features import FinetuneBatch
from engine.model.heads import BertWithHeads
from engine.model.outputs import EncoderOutput, HeadsOutput, SpanOutput
from engine.data.qa_features import build_qa_dataset, read_squad
from engine.training.tasks.pretraining import PretrainingTask
from engine.training.loop.freezing import freeze_encoder, freeze_unused
from engine.training.tasks import task_for
from engine.training.tasks.finetuning import ClassificationTask, QATask
from engine.training.loop.trainer import Trainer
from engine.training.loop.config import TrainingConfig
from support.finetune_helpers import write_squad

pytestmark = pytest.mark.usefixtures("one_thread")


def qa_config(**overrides) -> TrainingConfig:
    values = dict(task="qa", learning_rate=1e-3, warmup_steps=0, total_steps=10, batch_size=8, max_seq_length=64,
                  eval_every=0, checkpoint_every=0, nsp=False)
    values.update(overrides)
    return TrainingConfig(**values)


@pytest.fixture
def qa_data(tiny_tokenizer, tmp_path):
    def make(batch_size: int = 8):
        examples = read_squad(write_squad(tmp_path / "squad.json", num_contexts=8)).examples
        return build_qa_dataset(examples, tiny_tokenizer, 64, batch_size, doc_stride=16, max_question_len=16)
    return make


def test_task_for_each_config():
    assert isinstance(task_for(TrainingConfig()), PretrainingTask)
    assert isinstance(task_for(qa_config()), QATask)
    assert isinstance(task_for(qa_config(task="classification")), ClassificationTask)
    with pytest.raises(ValueError, match="unknown task 'ner'"):
        task_for(qa_config(task="ner"))
    with pytest.raises(ValueError, match="task must be a task's name, got None"):
        qa_config(task=None)
    with pytest.raises(ValueError, match="freeze_encoder must be true or false"):
        qa_config(freeze_encoder="yes")


def test_freezing_keeps_the_tied_decoder_with_the_embeddings(make_config):
    model = BertWithHeads(make_config(), heads=("mlm", "nsp", "qa"))
    freeze_unused(model, ("qa",), uses_pooler=False)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert "bert.embeddings.word_embeddings.weight" in trainable          # = cls.predictions.decoder.weight
    assert "qa_outputs.weight" in trainable and "bert.encoder.layer.1.output.dense.weight" in trainable
    assert not any(name.startswith(("cls.", "bert.pooler.")) for name in trainable)
    model = BertWithHeads(make_config(), heads=("mlm", "nsp"))
    frozen = freeze_encoder(model)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert frozen == sum(p.numel() for p in [*model.bert.embeddings.parameters(), *model.bert.encoder.parameters()])
    assert not model.cls.predictions.decoder.weight.requires_grad
    assert trainable == {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
                         "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                         "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
                         "cls.seq_relationship.weight", "cls.seq_relationship.bias"}


def test_qa_accumulation_equals_one_big_batch(qa_data, make_config, tmp_path):
    torch.manual_seed(0)
    model = BertWithHeads(make_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), heads=("mlm", "qa"))
    big = Trainer(model, None, qa_data(8), None, qa_config(), tmp_path / "a", task=task_for(qa_config()))
    accumulated = qa_config(batch_size=4, gradient_accumulation_steps=2)
    small = Trainer(copy.deepcopy(model), None, qa_data(4), None, accumulated, tmp_path / "b",
                    task=task_for(accumulated))
    # uneven halves (weights are per feature), each padded to the big batch's width (23 tokens): padded
    # positions take part in the start/end softmax, as in transformers
    rows = list(range(7))
    one = big.step([big.train_data.collate(rows)])
    two = small.step([small.train_data.collate(rows[:3]), small.train_data.collate(rows[3:])])
    for key in ("qa_loss", "start_acc", "end_acc", "span_acc", "loss", "grad_norm"):
        assert two[key] == pytest.approx(one[key], abs=1e-6), key
    assert max(len(big.train_data.rows[i]) for i in rows[:3]) == max(len(big.train_data.rows[i]) for i in rows[3:])
    theirs = dict(small.model.named_parameters())
    for name, param in big.model.named_parameters():
        if name == "qa_outputs.bias":   # shifts a whole row of logits: its gradient is 0 up to rounding, which
            continue                    # Adam's normalisation turns into lr-sized steps of either sign
        torch.testing.assert_close(theirs[name], param, rtol=0, atol=1e-6, msg=name)


def test_qa_metrics_from_known_logits():
    task = QATask()
    batch = FinetuneBatch(torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, 4, dtype=torch.long),
                          torch.ones(3, 4, dtype=torch.long), torch.tensor([1, 2, 0]), torch.tensor([1, 3, 0]))
    out = HeadsOutput(encoder=EncoderOutput(torch.zeros(3, 4, 8)), qa=SpanOutput(
        start_logits=torch.tensor([[0, 5, 0, 0], [0, 0, 5, 0], [0, 5, 0, 0.]]),   # right, right, wrong
        end_logits=torch.tensor([[0, 5, 0, 0], [0, 0, 5, 0], [5, 0, 0, 0.]]),     # right, wrong, right
        loss=torch.tensor(2.0)))
    sums = task.tally(out, batch, (3,)).tolist()
    assert task.metrics(sums, [3]) == pytest.approx({"qa_loss": 2.0, "start_acc": 2 / 3, "end_acc": 2 / 3,
                                                     "span_acc": 1 / 3})


def test_data_and_heads_must_fit_the_task(qa_data, make_config, tiny_tokenizer, tmp_path):
    from engine.training.tasks.pretraining import build_datasets
    model = BertWithHeads(make_config(), heads=("mlm", "nsp"))
    with pytest.raises(ValueError, match="needs a model with a question-answering"):
        Trainer(model, None, qa_data(), None, qa_config(), tmp_path, task=task_for(qa_config()))
    with pytest.raises(ValueError, match="not pretraining data"):
        pretraining_config = TrainingConfig(batch_size=8, max_seq_length=64)
        Trainer(model, None, qa_data(), None, pretraining_config, tmp_path, task=task_for(pretraining_config))
    with pytest.raises(ValueError, match="not features with label targets, which classification trains on"):
        Trainer(BertWithHeads(make_config(), heads=("classifier",)), None, qa_data(), None,
                qa_config(task="classification"), tmp_path, task=task_for(qa_config(task="classification")))
    with pytest.raises(ValueError, match="batch_size=4 but the training config says 8"):
        Trainer(BertWithHeads(make_config(), heads=("qa",)), None, qa_data(4), None, qa_config(), tmp_path,
                task=task_for(qa_config()))
    with pytest.raises(ValueError, match="the task to train is 'classification' but the settings are for 'qa'"):
        Trainer(BertWithHeads(make_config(), heads=("qa",)), None, qa_data(), None, qa_config(), tmp_path,
                task=ClassificationTask())
    with pytest.raises(ValueError, match="max_seq_length=64 but the training config says 32"):
        Trainer(BertWithHeads(make_config(), heads=("qa",)), None, qa_data(), None,
                qa_config(max_seq_length=32), tmp_path, task=task_for(qa_config(max_seq_length=32)))
    documents = [["the cat sat .", "the dog ran ."], ["a red car .", "a blue tree ."]]
    pretraining, _ = build_datasets(documents, None, tiny_tokenizer, qa_config(batch_size=2))
    with pytest.raises(ValueError, match="not features with span targets"):
        Trainer(BertWithHeads(make_config(), heads=("qa",)), None, pretraining, None, qa_config(batch_size=2),
                tmp_path, task=task_for(qa_config(batch_size=2)))
