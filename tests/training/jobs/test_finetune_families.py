"""Fine-tuning every family the engine reads, through ``prepare_job`` (the path of the Fine-tune tab's worker and of
``python -m engine.finetune``): a random base model of each family saved by ``transformers`` beside its own
tokenizer (``support.family_tokenizers``) learns token classification, extractive QA, sequence classification and
multiple choice (each family's own heads) on a tiny repeated dataset; the loss goes down; the checkpoint is the family's own layout, which
the family's transformers class loads with nothing missing or unexpected and reads to the same logits; a model is
fed segment ids only where transformers feeds them; a head the family lacks is refused with one sentence."""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load_directory
from engine.text.segment_ids import uses_segment_ids
from engine.training.jobs.setup import prepare_job
from engine.training.loop.config import TrainingConfig
from engine.training.runs.run_folder import RunFolder
from engine.training.tasks.eval_examples import predict_choice, predict_class, predict_span, predict_tags
from engine.training.tasks.job_spec import JobSpec
from support import saved_families
from support.family_tokenizers import CORPUS

pytestmark = pytest.mark.usefixtures("one_thread")
FAMILIES = list(saved_families.FAMILIES)     # every family, each beside its own kind of tokenizer
# task -> (transformers' class suffix, the head our model reports its logits under, learning rate, steps)
TASKS = {"token_classification": ("ForTokenClassification", "token_classifier", 1e-2, 12),
         "qa": ("ForQuestionAnswering", "qa", 1e-2, 20),
         "classification": ("ForSequenceClassification", "classifier", 3e-3, 45),
         "multiple_choice": ("ForMultipleChoice", "multiple_choice", 1e-2, 45)}
PAIRS = ("qa", "multiple_choice")     # tasks whose features are text pairs
LACKING = {("modernbert", "multiple_choice")}          # no such head in transformers: refused (tested below)
RUNS = [(family, task) for family in FAMILIES for task in TASKS if (family, task) not in LACKING]
INIT = 0.2             # the weights' std: at 0.02 a 2-layer model's first token barely depends on the text


def base_folder(family: str, folder: Path) -> Path:
    """``folder`` with ``family``'s tokenizer and a random base model (transformers' ``<Family>Model``, its own
    initialisation at std ``INIT``) saved by transformers."""
    return saved_families.save_family_model(family, folder, "Model", std=None, initializer_range=INIT)


def write_data(root: Path) -> dict[str, Path]:
    """Eight sentences of the tokenizers' own text, tagged (DET for "the", else X); a SQuAD file asking for the word
    after each sentence's second word; a classification CSV (whether a sentence says "the" after its first word);
    a multiple-choice CSV (which of four sentence ends follows a sentence's first four words)."""
    lines = [line.rstrip(".") for line in CORPUS[:8]]
    tags = root / "tags.tsv"
    tags.write_text("\n\n".join("\n".join(f"{w}\t{'DET' if w.lower() == 'the' else 'X'}" for w in line.split())
                                for line in lines) + "\n", encoding="utf-8")
    paragraphs = []
    for i, line in enumerate(lines):
        words = line.split()
        start = line.index(" " + words[2] + " ") + 1 if f" {words[2]} " in line else line.index(words[2])
        paragraphs.append({"context": line, "qas": [{"id": f"q{i}", "question": f"What comes after {words[1]}?",
                                                     "answers": [{"text": words[2], "answer_start": start}]}]})
    squad = root / "squad.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}),
                     encoding="utf-8")
    csv = root / "classes.csv"
    csv.write_text("text,label\n" + "".join(f"\"{line}\",{'yes' if ' the ' in line else 'no'}\n" for line in lines),
                   encoding="utf-8")
    choices = root / "choices.csv"
    rows = []
    for i, line in enumerate(lines):         # the context is a sentence's start; the right choice its end
        ends = [" ".join(other.split()[4:]) for other in lines]
        options = [ends[(i + k) % len(lines)] for k in range(4)]
        right = i % 4
        options[0], options[right] = options[right], options[0]
        rows.append(f"\"{' '.join(line.split()[:4])}\"," + ",".join(f"\"{o}\"" for o in options) + f",{right}\n")
    choices.write_text("context,choice0,choice1,choice2,choice3,label\n" + "".join(rows), encoding="utf-8")
    return {"token_classification": tags, "qa": squad, "classification": csv, "multiple_choice": choices}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    return write_data(tmp_path_factory.mktemp("family-data"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("family-models")
    return {family: base_folder(family, root / family) for family in FAMILIES}


def job(folder: Path, data: dict[str, Path], task: str, run_dir: Path, **training) -> JobSpec:
    _, _, rate, steps = TASKS[task]
    config = TrainingConfig(**{**dict(task=task, learning_rate=rate, warmup_steps=0, total_steps=steps, batch_size=4,
                                      max_seq_length=64, eval_every=0, checkpoint_every=0, nsp=False,
                                      device="cpu"), **training})
    return JobSpec(config, init_from=str(folder), data=str(data[task]), eval_fraction=0.0, run_dir=str(run_dir),
                   task_settings=dict(doc_stride=16, max_question_len=16) if task == "qa" else {})


def data_loss(prepared) -> float:
    """The task's loss on every training feature at once, dropout off (the model's mode is restored)."""
    trainer = prepared.trainer
    data, model = trainer.train_data, trainer.model
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = trainer.task.forward(model, data.collate(list(range(len(data)))), trainer.config)
    model.train(was_training)
    return float(trainer.task.losses(out)[0])


@pytest.fixture(scope="module", params=RUNS, ids=[f"{f}-{t}" for f, t in RUNS])
def run(request, folders, data, tmp_path_factory):
    family, task = request.param
    prepared = prepare_job(job(folders[family], data, task, tmp_path_factory.mktemp(f"{family}-{task}") / "run"))
    before = data_loss(prepared)
    steps: list[int] = []
    result = prepared.trainer.train(callback=lambda kind, record: steps.append(record["step"]) if kind == "train"
                                    else None)
    assert result.status == "finished" and steps == list(range(1, TASKS[task][3] + 1))
    return family, task, prepared, (before, data_loss(prepared))


def test_the_loss_goes_down(run):
    family, task, _, (before, after) = run
    assert after < 0.7 * before, (family, task, before, after)


def test_the_model_is_fed_segment_ids_only_where_transformers_feeds_them(run):
    family, task, prepared, _ = run
    data, model = prepared.trainer.train_data, prepared.trainer.model
    batch = data.collate(list(range(len(data))))
    reads = uses_segment_ids(model.config, prepared.tokenizer)
    assert reads == (family in ("electra", "albert"))        # RoBERTa, XLM-R: one type id; DistilBERT: none
    assert data.segment_ids == reads
    if task in PAIRS:                                         # the context (QA) or the choice is segment B
        assert bool(batch.token_type_ids.any()) == reads
        starts, rows = data.segment_starts.reshape(-1), [r for row in data.rows for r in (
            row if isinstance(row, tuple) else (row,))]
        assert all(0 < start < len(row) for start, row in zip(starts, rows))
    else:
        assert not batch.token_type_ids.any()


def test_the_checkpoint_loads_in_the_familys_class_with_the_same_logits(run):
    family, task, prepared, _ = run
    checkpoint = RunFolder(prepared.trainer.run_dir).checkpoints()[-1].path
    stem, (suffix, head, _, _) = saved_families.FAMILIES[family][3], TASKS[task]
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["model_type"] == family and config["architectures"] == [stem + suffix]
    theirs, info = getattr(transformers, stem + suffix).from_pretrained(checkpoint, output_loading_info=True,
                                                                        attn_implementation="eager")
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ours = load_directory(checkpoint).model.eval()
    data = prepared.trainer.train_data
    batch = data.collate(list(range(min(4, len(data)))))
    inputs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    if data.segment_ids:
        inputs["token_type_ids"] = batch.token_type_ids
    with torch.no_grad():
        mine, hf = ours(**inputs).result(head), theirs.eval()(**inputs)
    if head == "qa":
        torch.testing.assert_close(mine.start_logits, hf.start_logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(mine.end_logits, hf.end_logits, rtol=0, atol=1e-5)
    else:
        torch.testing.assert_close(mine.logits, hf.logits, rtol=0, atol=1e-5)
    if head != "qa":
        assert theirs.config.id2label == prepared.trainer.model.config.id2label


def test_a_task_whose_head_the_family_lacks_is_refused_in_one_sentence(folders, data, tmp_path):
    """RoBERTa has no next-sentence head: ``qa_mlm`` with NSP is refused before anything is read or written."""
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(CORPUS), encoding="utf-8")
    spec = job(folders["roberta"], data, "qa", tmp_path / "run")
    spec = spec.replace(task_settings={**spec.task_settings, "mlm_corpus": str(text)},
                        training=spec.training_config().replace(task="qa_mlm", nsp=True))
    with pytest.raises(ValueError) as refused:
        prepare_job(spec)
    message = str(refused.value)
    assert "is a RoBERTa model" in message and "no next-sentence head for RoBERTa" in message, message
    assert "can be fine-tuned for" in message and "token_classification" in message, message
    assert "next-sentence prediction off" in message and "\n" not in message, message
    assert message.count(". ") == 0 and not (tmp_path / "run").exists()


def test_the_table_of_mistakes_reads_each_familys_features(run, data):
    """The Fine-tune tab's held-out examples (``eval_examples``' predictors) read the texts back: a byte-level word
    without the space before it, a pair's first text and second text apart (a QA window's question and context, a
    choice's context and ending), whatever special tokens the family's template puts between them."""
    family, task, prepared, _ = run
    trainer, normalizer = prepared.trainer, prepared.tokenizer.backend.normalizer
    features = trainer.train_data
    predict = {"token_classification": predict_tags, "qa": predict_span, "classification": predict_class,
               "multiple_choice": predict_choice}[task]
    with torch.no_grad():
        found = predict(trainer.model.eval(), prepared.tokenizer, features, list(range(len(features))), "cpu")

    def same(text: str) -> str:       # as the tokenizer reads it (cased or not), spaces apart (WordPiece: "pieces ;")
        return "".join((normalizer.normalize_str(text) if normalizer is not None else text).split())
    lines = [line.rstrip(".") for line in CORPUS[:8]]
    if task == "token_classification":
        for prediction, line in zip(found, lines):
            words, read = [same(w) for w in line.split()], [same(w) for w in prediction.sentence]
            assert len(read) >= 8 and read[:-1] == words[:len(read) - 1], (read, words)
            assert words[len(read) - 1].startswith(read[-1])        # a sentence over 64 pieces: cut in its last word
    elif task == "qa":
        squad = json.loads(data[task].read_text(encoding="utf-8"))
        questions = {same(p["qas"][0]["question"]) for p in squad["data"][0]["paragraphs"]}
        assert all(same(p.text) in questions and p.context for p in found), [(p.text, p.context) for p in found]
    elif task == "classification":
        assert all(same(line).startswith(same(p.text)) and len(same(p.text)) > 40 for p, line in zip(found, lines))
    else:
        assert [same(p.text) for p in found] == [same(" ".join(line.split()[:4])) for line in lines]
        for prediction, line in zip(found, lines):         # the right ending is among the choices read back
            assert same(" ".join(line.split()[4:]))[:20] in same(prediction.context)


def test_qa_with_masked_lm_trains_a_roberta_without_next_sentence_prediction(folders, data, tmp_path):
    """``qa_mlm`` with NSP off: the masked-LM term's text batches carry RoBERTa's own specials and mask token
    (whole words masked), no NSP head is added, and the checkpoint is RoBERTa's masked-LM and QA classes."""
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(CORPUS), encoding="utf-8")
    spec = job(folders["roberta"], data, "qa", tmp_path / "run")
    spec = spec.replace(task_settings={**spec.task_settings, "mlm_corpus": str(text)}, training=spec.training_config().replace(
        task="qa_mlm", nsp=False, whole_word_masking=True, total_steps=4))
    prepared = prepare_job(spec)
    tokenizer, batch = prepared.tokenizer, prepared.trainer.train_data.pretraining.batch(0, 0)
    assert prepared.trainer.model.heads == ("mlm", "qa")
    assert batch.input_ids[:, 0].eq(tokenizer.token_to_id("<s>")).all()
    assert (batch.input_ids == tokenizer.token_to_id("<mask>")).any() and not batch.token_type_ids.any()
    assert prepared.trainer.train().status == "finished"
    checkpoint = RunFolder(prepared.trainer.run_dir).checkpoints()[-1].path
    assert json.loads((checkpoint / "config.json").read_text())["architectures"] == [
        "RobertaForMaskedLM", "RobertaForQuestionAnswering"]
    for name, other in (("RobertaForMaskedLM", "qa_outputs."), ("RobertaForQuestionAnswering", "lm_head.")):
        _, info = getattr(transformers, name).from_pretrained(checkpoint, output_loading_info=True)
        assert not info["missing_keys"] and all(key.startswith(other) for key in info["unexpected_keys"]), info


def test_a_task_the_family_has_no_head_for_is_refused(folders, data, tmp_path):
    """transformers has no ModernBERT multiple-choice class: the job says so in one sentence, writing nothing."""
    with pytest.raises(ValueError) as refused:
        prepare_job(job(folders["modernbert"], data, "multiple_choice", tmp_path / "run"))
    message = str(refused.value)
    assert "is a ModernBERT model" in message and "no multiple-choice head for ModernBERT" in message, message
    assert "\n" not in message and not (tmp_path / "run").exists()
