"""A pretraining job's data (``engine.training.jobs.pretraining_data``): any file, folder, glob or saved dataset
trains through the command line, is tokenised once into the cache, is split as earlier versions split
documents, and a run over a many-block corpus resumes bit for bit from its saved data position."""
from __future__ import annotations

import json
import random
import re

import datasets
import numpy as np
import pytest
import torch

from support.cli_helpers import run_cli
from engine.checkpoints.hf_format import load
from engine.data import pretraining
from engine.pretrain import main
from engine.text.documents import train_eval_split
from engine.training.jobs import pretraining_data
from engine.training.jobs.pretraining_data import split_ids
from engine.training.runs.state import read_metrics

SMALL = ["--preset", "tiny", "--seq-len", "32", "--vocab-size", "200", "--batch-size", "4", "--eval-batches", "1",
         "--threads", "1", "--no-progress", "--dropout", "0", "--schedule", "inverse_sqrt", "--warmup", "0"]
WORDS = "the cat dog sat on a mat bird sang in tree red blue big small house ran far home".split()


@pytest.fixture(autouse=True)
def keep_threads():
    """In-process runs pass --threads 1; give the other tests their thread count back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def article(rng: random.Random) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))).capitalize() + "."
                    for _ in range(rng.randint(3, 8)))


@pytest.fixture(scope="module")
def corpus_folder(tmp_path_factory):
    """A folder of .jsonl and .txt files, in a subfolder too."""
    rng = random.Random(0)
    root = tmp_path_factory.mktemp("corpus")
    (root / "part2").mkdir()
    (root / "a.jsonl").write_text("\n".join(json.dumps({"text": article(rng)}) for _ in range(30)), encoding="utf-8")
    (root / "part2" / "b.txt").write_text("\n\n".join(article(rng) for _ in range(30)), encoding="utf-8")
    return root


@pytest.mark.slow
def test_a_folder_corpus_trains_and_a_second_run_reads_the_cache(corpus_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(cache))
    first = run_cli([*SMALL, "--corpus", str(corpus_folder), "--steps", "2", "--run-dir", str(tmp_path / "one")])
    assert first.returncode == 0, first.stderr[-3000:]
    assert "57 training documents" in first.stderr, "60 documents, 3 held out"
    stores = list((cache / "corpora").iterdir())
    assert len(stores) == 1 and json.loads((stores[0] / "meta.json").read_text())["documents"] == 60
    written = (stores[0] / "tokens.bin").stat().st_mtime_ns
    # the same files again, named by a glob: the vocabulary and the tokens come from the cache
    assert main([*SMALL, "--corpus", str(corpus_folder / "**" / "*.*"), "--steps", "2",
                 "--run-dir", str(tmp_path / "three")]) == 0
    assert (stores[0] / "tokens.bin").stat().st_mtime_ns == written, "the same files are not tokenised again"
    assert len(list((cache / "corpora").iterdir())) == len(list((cache / "vocabularies").iterdir())) == 1
    losses = [[r["mlm_loss"] for r in read_metrics(tmp_path / name / "metrics.jsonl") if r["kind"] == "train"]
              for name in ("one", "three")]
    assert losses[0] == losses[1], "the cached tokens and vocabulary give the very same run"


def test_a_saved_hugging_face_dataset_trains_with_its_text_column(tmp_path, capsys):
    rng = random.Random(1)
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"body": [article(rng) for _ in range(40)], "id": list(range(40))}).save_to_disk(str(saved))
    assert main([*SMALL, "--dataset", str(saved), "--text-column", "body", "--steps", "2",
                 "--run-dir", str(tmp_path / "run")]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (record["dataset"], record["text_column"]) == (str(saved), "body")
    assert set(load(tmp_path / "run" / "checkpoints" / "step-000002").heads) == {"mlm", "nsp"}
    capsys.readouterr()
    assert main([*SMALL, "--dataset", str(saved), "--steps", "2", "--run-dir", str(tmp_path / "wrong")]) == 2
    assert "has no column 'text' (its columns: body, id)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*SMALL, "--dataset", str(saved), "--corpus", "shakespeare"])
    assert exit_info.value.code == 2 and "not both" in capsys.readouterr().err


def test_a_many_block_corpus_resumes_bit_for_bit(corpus_folder, tmp_path, monkeypatch):
    """Epochs cut into blocks (as a large corpus's are): 3 steps, a stop, 3 more = 6 straight steps."""
    monkeypatch.setattr(pretraining, "BLOCK_TOKENS", 400)
    args = [*SMALL, "--corpus", str(corpus_folder), "--checkpoint-every", "3", "--steps", "6"]
    assert main([*args, "--run-dir", str(tmp_path / "whole")]) == 0     # (the second run reads the cached vocabulary)
    assert main([*args, "--run-dir", str(tmp_path / "stopped"), "--stop-at", "3"]) == 0
    state = torch.load(tmp_path / "stopped" / "checkpoints" / "step-000003" / "training_state.pt", weights_only=True)
    assert state["data_position"]["block_counts"], "the checkpoint keeps the data position"
    assert main(["--resume", str(tmp_path / "stopped"), "--threads", "1", "--no-progress"]) == 0
    whole = load(tmp_path / "whole" / "checkpoints" / "step-000006").model.state_dict()
    resumed = load(tmp_path / "stopped" / "checkpoints" / "step-000006").model.state_dict()
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


def test_documents_are_split_as_earlier_versions_split_them(monkeypatch):
    for count in (1, 2, 3, 5, 40, 333):
        train, held_out = split_ids(count, 0.05, 7, nsp=False)
        old_train, old_held = train_eval_split(list(range(count)), 0.05, random.Random(7))
        assert train.tolist() == old_train and held_out.tolist() == old_held
    train, held_out = split_ids(40, 0.01, 0, nsp=True)
    assert len(held_out) == 2 and len(train) == 38, "NSP needs two held-out documents"
    monkeypatch.setattr(pretraining_data, "EXACT_SPLIT_UP_TO", 10)           # a huge corpus: a numpy permutation
    train, held_out = split_ids(5000, 0.05, 3, nsp=True)
    assert len(held_out) == 250 and sorted(np.concatenate([train, held_out]).tolist()) == list(range(5000))
    assert np.array_equal(split_ids(5000, 0.05, 3, nsp=True)[1], held_out), "seeded"


def test_a_rank_with_another_vocabulary_stops_with_a_sentence(monkeypatch, tiny_tokenizer):
    """Issue 38: a given tokenizer (or a start model's) that differs on some node would mean other words there."""
    from engine.text.tokenizer import WordPieceTokenizer
    from engine.training.jobs import pretraining_data
    from engine.training.loop import distributed as dist

    vocab = tiny_tokenizer.get_vocab()
    swapped = dict(vocab)
    first, second = sorted(vocab, key=vocab.get)[-2:]
    swapped[first], swapped[second] = vocab[second], vocab[first]
    rank0 = pretraining_data.vocabulary_fingerprint(tiny_tokenizer)
    monkeypatch.setattr(dist, "is_distributed", lambda: True)
    monkeypatch.setattr(dist, "rank", lambda: 1)
    monkeypatch.setattr(dist, "broadcast_object", lambda value: rank0)      # what rank 0 sends
    pretraining_data.same_vocabulary_everywhere(tiny_tokenizer)             # the same: nothing to say
    with pytest.raises(ValueError, match="rank 1\\) has another vocabulary than rank 0"):
        pretraining_data.same_vocabulary_everywhere(WordPieceTokenizer.from_vocab(swapped))


def test_a_vocabulary_smaller_than_asked_says_so_and_why(corpus_folder, tmp_path, monkeypatch, capsys):
    assert pretraining_data.vocabulary_shortfall(8000, 8000) is None
    assert pretraining_data.vocabulary_shortfall(8000, 231) == (
        "the vocabulary has 231 tokens, not the 8,000 asked: the training text holds too few distinct words and "
        "pieces for that many (a larger corpus, or a smaller --vocab-size, says the same)")
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    small = [*SMALL[:4], "--vocab-size", "2000", *SMALL[6:]]
    assert main([*small, "--corpus", str(corpus_folder), "--steps", "1", "--run-dir", str(tmp_path / "run")]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and re.search(r"has \d+ tokens, not the 2,000 asked: the training text", warned[0])
