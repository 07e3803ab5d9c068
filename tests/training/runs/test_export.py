"""A checkpoint downloaded as a .zip is a model transformers loads, with a card that says what it is."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoTokenizer, pipeline

from support.checkpoint_helpers import assert_strict, compare, hf_load
from support.saved_families import save_family_model
from engine.checkpoints.hf_format import load_directory
from engine.training.runs.export import EXPORTED_FILES, export_zip
from engine.training.tasks.job_spec import JobSpec
from engine.training.jobs.setup import prepare_job

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "run-a"
    spec = JobSpec(dict(total_steps=6, batch_size=4, max_seq_length=32, eval_every=3, eval_batches=2,
                        checkpoint_every=0, learning_rate=1e-3), preset="tiny", corpus="shakespeare",
                   max_documents=20, vocab_size=300, run_dir=str(run))
    job = prepare_job(spec)
    job.trainer.train()
    return job.trainer.last_checkpoint


def test_the_zip_loads_in_transformers_with_the_same_outputs(checkpoint: Path, tmp_path: Path) -> None:
    path = export_zip(checkpoint, tmp_path / "out")
    assert path.name == "run-a-step-000006.zip"
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "model")
    assert names == set(EXPORTED_FILES) | {"README.md"}                      # no optimizer state
    folder = tmp_path / "model"
    hf, info = hf_load("BertForPreTraining", folder)
    assert_strict(info)
    ours = load_directory(checkpoint).model.eval()
    theirs_tok, our_tok = AutoTokenizer.from_pretrained(folder), load_directory(checkpoint).tokenizer
    text = "to be or not to be, that is the question."
    encoded = theirs_tok(text, return_tensors="pt")
    assert encoded["input_ids"][0].tolist() == our_tok.encode(text).input_ids
    compare(ours, hf, "BertForPreTraining", {k: v for k, v in encoded.items()})
    assert theirs_tok.mask_token == "[MASK]" and torch.equal(encoded["attention_mask"], torch.ones_like(
        encoded["attention_mask"]))


def test_the_card_has_metadata_data_steps_losses_and_evaluations(checkpoint: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(export_zip(checkpoint, tmp_path)) as archive:
        card = archive.read("README.md").decode("utf-8")
    _, front, body = card.split("---", 2)
    meta = yaml.safe_load(front)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "fill-mask"
    assert meta["language"] == ["en"] and "bert" in meta["tags"] and "base_model" not in meta
    assert "Shakespeare" in body and "first 20 documents" in body and "learnt on the training documents" in body
    assert "6 of 6 steps" in body and "Last training step (6): MLM loss" in body
    assert "| step | MLM loss | MLM accuracy | NSP loss | NSP accuracy |" in body
    assert "\n| 3 | " in body and "\n| 6 | " in body                    # the held-out figures at steps 3 and 6
    assert "BertForPreTraining.from_pretrained" in body


def test_a_gone_checkpoint_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="gone or incomplete"):
        export_zip(tmp_path / "run" / "checkpoints" / "step-000001", tmp_path)


def test_a_roberta_continued_here_gets_a_card_whose_example_runs_in_transformers(tmp_path: Path) -> None:
    """Pretraining can continue from a RoBERTa (``init_from``): its card names the family and its vocabulary, and
    the card's fill-mask example is written with RoBERTa's ``<mask>``, so it runs as printed."""
    base = save_family_model("roberta", tmp_path / "roberta-base-tiny")
    spec = JobSpec(dict(total_steps=2, batch_size=2, max_seq_length=32, checkpoint_every=0, nsp=False,
                        learning_rate=1e-3), init_from=str(base), corpus="shakespeare", max_documents=6,
                   run_dir=str(tmp_path / "run-r"))
    job = prepare_job(spec)
    job.trainer.train()
    with zipfile.ZipFile(export_zip(job.trainer.last_checkpoint, tmp_path / "out")) as archive:
        archive.extractall(tmp_path / "model")
    card = (tmp_path / "model" / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(card.split("---", 2)[1])
    assert meta["tags"][0] == "roberta" and "A small RoBERTa" in card and "[MASK]" not in card
    assert f"The vocabulary is that of `{base}`" in card
    example = next(line for line in card.splitlines() if line.startswith("print(fill("))
    assert example == 'print(fill("the king is <mask> ."))'
    fill = pipeline("fill-mask", model=str(tmp_path / "model"))
    answers = fill(example.removeprefix('print(fill("').removesuffix('"))'))
    assert len(answers) == 5 and all(a["sequence"] for a in answers)             # the example runs as printed
