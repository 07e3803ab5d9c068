"""Token classification through the shared Trainer: one step's loss equals BertForTokenClassification's,
accumulation equals one big batch, entity scores equal seqeval's, and a job learns, exports to
transformers with its labels, replaces a sequence classifier, resumes exactly and runs from the CLI."""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
import torch
import transformers
from seqeval.metrics import f1_score, precision_score, recall_score

from engine.checkpoints.hf_format import load_directory
from engine.data.features import IGNORE_INDEX, FinetuneBatch
from engine.data.tagged_text import read_tagged_file
from engine.data.token_features import build_token_dataset
from engine.finetune import main
from engine.model.heads import BertWithHeads
from engine.model.outputs import EncoderOutput, HeadsOutput, TokenClassificationOutput
from engine.training.loop.config import TrainingConfig
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job
from engine.training.runs.run_folder import RunFolder
from engine.training.runs.state import read_metrics
from engine.training.tasks import task_for
from engine.training.tasks.token_classification import TokenClassificationTask, is_bio
from support.cli_helpers import torchrun
from engine.training.loop.trainer import Trainer
from support.reference import hf_copy
from support.finetune_helpers import FILLER, classification_rows, save_tiny_model, write_csv
from support.hf_checkpoints import assert_transformers_agrees

pytestmark = pytest.mark.usefixtures("one_thread")
TAGS = {"cat": "ANI", "dog": "ANI", "bird": "ANI", "car": "OBJ", "tree": "OBJ", "house": "OBJ"}


def tagged_lines(count: int, seed: int = 0) -> str:
    """word<TAB>tag sentences: "the red cat" -> O B-ANI I-ANI style entities (a colour starts one) among filler."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words = [(w, "O") for w in rng.sample(FILLER, rng.randint(2, 5))]
        name = rng.choice(sorted(TAGS))
        entity = [("red", f"B-{TAGS[name]}"), (name, f"I-{TAGS[name]}")] if rng.random() < 0.5 else [
            (name, f"B-{TAGS[name]}")]
        at = rng.randrange(len(words) + 1)
        sentences.append(words[:at] + entity + words[at:])
    return "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tokens")
    (root / "tags.tsv").write_text(tagged_lines(48), encoding="utf-8")
    return {"model": save_tiny_model(root / "model", tiny_tokenizer),
            "classifier_model": save_tiny_model(root / "classifier", tiny_tokenizer, heads=("mlm", "nsp", "classifier")),
            "tags": root / "tags.tsv", "root": root}


def config(**overrides) -> TrainingConfig:
    values = dict(task="token_classification", learning_rate=3e-3, warmup_steps=3, total_steps=40, batch_size=8,
                  max_seq_length=32, eval_every=20, eval_batches=0, checkpoint_every=0)
    values.update(overrides)
    return TrainingConfig(**values)


def dataset(tiny_tokenizer, files, batch_size: int = 8):
    sentences = read_tagged_file(files["tags"])
    labels = sorted({t for s in sentences for t in s.tags})
    return build_token_dataset(sentences, tiny_tokenizer, {n: i for i, n in enumerate(labels)}, 32, batch_size), labels


# ---------------------------------------------------------------------------- the task against references
def test_one_step_loss_equals_transformers_and_accumulation_equals_one_batch(files, tiny_tokenizer, make_config,
                                                                             tmp_path):
    data, labels = dataset(tiny_tokenizer, files)
    torch.manual_seed(0)
    model_config = make_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                               id2label=dict(enumerate(labels)))
    model = BertWithHeads(model_config, heads=("token_classifier",))
    rows = list(range(7))
    batch = data.collate(rows)
    theirs = hf_copy(model, transformers.BertForTokenClassification)
    with torch.no_grad():
        reference = theirs(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                           token_type_ids=batch.token_type_ids, labels=batch.token_labels).loss.item()
    big = Trainer(copy.deepcopy(model), None, data, None, config(warmup_steps=0), tmp_path / "a",
                  task=task_for(config(warmup_steps=0)))
    one = big.step([batch])
    assert one["token_classification_loss"] == pytest.approx(reference, abs=1e-5)
    assert one["loss"] == pytest.approx(reference, abs=1e-5)
    small_data, _ = dataset(tiny_tokenizer, files, batch_size=4)
    small = Trainer(copy.deepcopy(model), None, small_data, None,
                    config(warmup_steps=0, batch_size=4, gradient_accumulation_steps=2), tmp_path / "b",
                    task=task_for(config(warmup_steps=0, batch_size=4, gradient_accumulation_steps=2)))
    # uneven halves with different numbers of labelled words: the step weighs each by its words
    first, second = small_data.collate(rows[:2]), small_data.collate(rows[2:])
    assert (first.token_labels != IGNORE_INDEX).sum() != (second.token_labels != IGNORE_INDEX).sum()
    two = small.step([first, second])
    for key in ("token_classification_loss", "accuracy", "loss"):
        assert two[key] == pytest.approx(one[key], abs=1e-6), key
    ours = dict(small.model.named_parameters())
    for name, param in big.model.named_parameters():
        if name != "token_classifier.bias":      # its gradient sums to ~0 per row; Adam magnifies the rounding
            torch.testing.assert_close(ours[name], param, rtol=0, atol=1e-6, msg=name)


def test_entity_scores_equal_seqeval_and_accuracy_counts_labelled_words():
    names = {0: "B-ANI", 1: "I-ANI", 2: "O", 3: "B-OBJ"}
    task = TokenClassificationTask()
    task.id2label, task.bio = names, is_bio(list(names.values()))
    gold = torch.tensor([[-100, 0, 1, 2, 3, -100], [-100, 2, 0, -100, 2, -100]])
    guess = torch.tensor([[9, 0, 2, 2, 3, 9], [9, 2, 0, 1, 0, 9]])       # -100 positions are ignored
    logits = torch.nn.functional.one_hot(guess.clamp(max=3), 4).float()  # (B, S, L)
    out = HeadsOutput(encoder=EncoderOutput(torch.zeros(2, 6, 8)),
                      token_classifier=TokenClassificationOutput(logits=logits, loss=torch.tensor(0.5)))
    batch = FinetuneBatch(torch.zeros(2, 6, dtype=torch.long), torch.zeros(2, 6, dtype=torch.long),
                          torch.ones(2, 6, dtype=torch.long), token_labels=gold)
    counts = task.counts(batch)
    assert counts == (7,)
    with torch.no_grad():                       # evaluation counts entities; a training step does not
        metrics = task.metrics(task.tally(out, batch, counts).tolist(), list(counts))
    y_true = [["B-ANI", "I-ANI", "O", "B-OBJ"], ["O", "B-ANI", "O"]]
    y_pred = [["B-ANI", "O", "O", "B-OBJ"], ["O", "B-ANI", "B-ANI"]]
    assert metrics == pytest.approx({"token_classification_loss": 0.5, "accuracy": 5 / 7,
                                     "entity_precision": precision_score(y_true, y_pred),
                                     "entity_recall": recall_score(y_true, y_pred),
                                     "entity_f1": f1_score(y_true, y_pred)})
    training = task.metrics(task.tally(out, batch, counts).tolist(), list(counts))
    assert set(training) == {"token_classification_loss", "accuracy"}
    assert not is_bio(["NOUN", "VERB", "X"]) and not is_bio(["O"]) and is_bio(["O", "S-LOC", "E-LOC"])


def test_task_refuses_a_model_without_the_head_or_with_too_few_labels(files, tiny_tokenizer, make_config, tmp_path):
    data, labels = dataset(tiny_tokenizer, files)
    assert isinstance(task_for(config()), TokenClassificationTask)
    with pytest.raises(ValueError, match="needs a model with a token-classification head"):
        Trainer(BertWithHeads(make_config(), heads=("mlm",)), None, data, None, config(), tmp_path,
                task=task_for(config()))
    with pytest.raises(ValueError, match="label ids up to 4 but the model's token classifier has 2 labels"):
        Trainer(BertWithHeads(make_config(), heads=("token_classifier",)), None, data, None, config(), tmp_path,
                task=task_for(config()))


# ---------------------------------------------------------------------------- jobs
@pytest.fixture(scope="module")
def run(files):
    spec = JobSpec(config(total_steps=80, eval_every=40), data=str(files["tags"]), eval_fraction=0.25, init_from=str(files["classifier_model"]),
                   run_dir=str(files["root"] / "run"))
    messages: list[str] = []
    trainer = prepare_job(spec, messages.append).trainer
    records: list[tuple[str, dict]] = []
    assert trainer.train(callback=lambda kind, record: records.append((kind, record))).status == "finished"
    return trainer, records, messages


def test_a_job_learns_the_tags_reports_entity_f1_and_replaces_the_sequence_classifier(run):
    trainer, records, messages = run
    evals = [r for kind, r in records if kind == "eval"]
    train = [r for kind, r in records if kind == "train"]
    assert set(evals[-1]) == {"step", "eval_token_classification_loss", "eval_accuracy", "eval_entity_precision",
                              "eval_entity_recall", "eval_entity_f1"}
    targets = trainer.eval_data.targets[trainer.eval_data.targets != IGNORE_INDEX]
    majority = max((targets == k).mean() for k in range(5))               # always "O"
    assert "entity_f1" not in train[-1] and sum(r["accuracy"] for r in train[-5:]) / 5 >= 0.85, train[-5:]
    assert evals[-1]["eval_accuracy"] >= majority + 0.2 and evals[-1]["eval_entity_f1"] >= 0.5, (majority, evals)
    assert trainer.model.config.id2label == {0: "B-ANI", 1: "B-OBJ", 2: "I-ANI", 3: "I-OBJ", 4: "O"}
    assert trainer.model.heads == ("mlm", "nsp", "token_classifier") and trainer.model.has_pooler   # NSP reads it
    assert any("dropping the classifier head" in m for m in messages)


def test_the_checkpoint_loads_in_transformers_with_its_labels_and_logits(run):
    trainer = run[0]
    checkpoint = RunFolder(trainer.run_dir).checkpoints()[0].path
    assert json.loads((checkpoint / "config.json").read_text())["architectures"][-1] == "BertForTokenClassification"
    hf = assert_transformers_agrees(checkpoint, transformers.BertForTokenClassification,
                                    trainer.eval_data.batch(0, 0), "token_classifier")
    assert hf.config.id2label == trainer.model.config.id2label and hf.config.label2id["O"] == 4


def test_resume_gives_the_same_next_step(files, tmp_path):
    spec = JobSpec(config(total_steps=6, batch_size=4, gradient_accumulation_steps=2, checkpoint_every=2,
                          eval_every=0), data=str(files["tags"]), init_from=str(files["model"]),
                   run_dir=str(tmp_path / "run"))
    first = prepare_job(spec).trainer
    first.train(num_steps=2)
    expected = first.step()
    resumed = prepare_job(JobSpec({}, resume_from=str(tmp_path / "run"))).trainer
    got = resumed.step()
    assert got["loss"] == expected["loss"] and got["accuracy"] == expected["accuracy"]
    assert resumed.model.config.id2label == first.model.config.id2label


def test_labels_given_as_ids_of_the_models_names(files, tmp_path):
    """Sequence classification: a file may give a model's labels by id; an id out of range says which exist."""
    rows = classification_rows(12)
    named = write_csv(tmp_path / "named.csv", rows)
    first = prepare_job(JobSpec(config(task="classification", total_steps=2, warmup_steps=0, eval_every=0), data=str(named),
                                init_from=str(files["model"]), run_dir=str(tmp_path / "a"))).trainer
    first.train()
    assert first.model.config.id2label == {0: "animal", 1: "thing"}
    ids = write_csv(tmp_path / "ids.csv", [(text, str(["animal", "thing"].index(label))) for text, label in rows])
    spec = JobSpec(config(task="classification", total_steps=2, warmup_steps=0, eval_every=0), data=str(ids),
                   init_from=str(first.run_dir), run_dir=str(tmp_path / "b"))
    messages: list[str] = []
    second = prepare_job(spec, messages.append).trainer
    assert second.model.config.id2label == {0: "animal", 1: "thing"}
    assert not any("freshly initialised" in m or "replacing" in m for m in messages)      # the trained head stays
    assert torch.equal(second.model.classifier.weight, first.model.classifier.weight.cpu())
    bad = write_csv(tmp_path / "bad.csv", rows[:3] + [("the cat", "2")])
    with pytest.raises(ValueError, match="bad.csv, line 5: label id 2 is out of range: the model's head has 2 labels "
                                         "\\(ids 0..1: 0 animal, 1 thing\\)"):
        prepare_job(spec.replace(data=str(bad), run_dir=str(tmp_path / "c")))


def test_cli_takes_the_hyphenated_task_name_and_a_conllu_file(files, tmp_path, capsys):
    conllu = tmp_path / "tags.conllu"
    sentences = read_tagged_file(files["tags"])
    conllu.write_text("\n".join(f"# sent_id = {k}\n" + "".join(
        f"{i}\t{w}\t_\t{t}\t_\t_\t0\t_\t_\t_\n" for i, (w, t) in enumerate(zip(s.words, s.tags), start=1))
        for k, s in enumerate(sentences)), encoding="utf-8")
    run_dir = tmp_path / "cli"
    code = main(["--task", "token-classification", "--data", str(conllu), "--init-from", str(files["model"]),
                 "--seq-len", "32", "--batch-size", "8", "--steps", "3", "--eval-fraction", "0.25", "--run-dir",
                 str(run_dir), "--threads", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    assert "labels ['B-ANI', 'B-OBJ', 'I-ANI', 'I-OBJ', 'O']" in err and "48 sentences" in err
    assert "token_classification_loss=" in err and "eval: token_classification_loss=" in err
    assert json.loads((run_dir / "run.json").read_text())["task"] == "token_classification"
    assert [r["step"] for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"] == [1, 2, 3]


def test_torchrun_two_gloo_processes_equal_one_process_accumulating_their_batches(files, tiny_tokenizer, tmp_path):
    """``torchrun -m engine.finetune --task token-classification``: 2 processes x batch 4 end with the same
    weights on both ranks, and (a model without dropout) the weights of one process accumulating the same
    two batches: the loss is weighted by labelled words, which differ between the two micro-batches."""
    model = save_tiny_model(tmp_path / "model", tiny_tokenizer, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
    args = ["--task", "token-classification", "--data", str(files["tags"]), "--init-from", str(model),
            "--steps", "3", "--batch-size", "4", "--seq-len", "32", "--lr", "3e-3", "--warmup", "1",
            "--eval-fraction", "0.25", "--threads", "1", "--no-progress"]
    ddp_dir, single_dir = tmp_path / "ddp", tmp_path / "single"
    result = torchrun("engine.finetune", [*args, "--run-dir", str(ddp_dir), "--debug-dump-weights"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert main([*args, "--grad-accum", "2", "--run-dir", str(single_dir)]) == 0
    rank0 = torch.load(ddp_dir / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(ddp_dir / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys() and all(torch.equal(rank0[k], rank1[k]) for k in rank0)
    assert {"token_classifier.weight", "token_classifier.bias"} <= set(rank0)
    single = load_directory(RunFolder(single_dir).checkpoints()[-1].path).model.state_dict()
    for key in single:
        torch.testing.assert_close(rank0[key], single[key], rtol=1e-4, atol=1e-5, msg=key)
    losses = {name: [r["token_classification_loss"] for r in read_metrics(folder / "metrics.jsonl")
                     if r["kind"] == "train"] for name, folder in (("ddp", ddp_dir), ("single", single_dir))}
    assert len(losses["ddp"]) == 3 and losses["ddp"] == pytest.approx(losses["single"], rel=1e-5)
