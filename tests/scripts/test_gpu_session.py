"""The GPU session rehearsed on the CPU (issue 35): the whole ``scripts/gpu_session.py`` on a tiny pack and a tiny
model with ``--budget-s 40``, in a Python where the app's packages (gradio, plotly, datasets, captum, ...) cannot be
imported, as on the device. Every stage runs or says honestly why not, the budget holds within 10%, and what
comes back (at most 8 files: parts, manifest, metrics, summary, log) is what ``scripts/gpu_assemble.py`` accepts."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from engine.checkpoints.hf_format import load_directory, save
from engine.model.config import BertConfig
from engine.model.heads import BertWithHeads
from engine.text.sentences import split_sentences
from engine.text.tokenizer import WordPieceTokenizer
from scripts.gpu import pack
from scripts.gpu.parts import join_parts
from support.device_imports import ROOT, run_without_app_packages

BUDGET_S = 40
TOKENIZER = ROOT / "assets" / "tokenizer"


def squad_items(data: dict) -> list[dict]:
    return [{"id": qa["id"], "question": qa["question"], "context": p["context"],
             "answers": [a["text"] for a in qa["answers"]]} for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """A tiny pack from the bundled text and SQuAD examples, a tiny model with the bundled vocabulary, and a tiny
    held-out data folder for the assembler."""
    root = tmp_path_factory.mktemp("gpu-rehearsal")
    tokenizer = WordPieceTokenizer.from_file(TOKENIZER)
    blocks = (ROOT / "assets" / "corpora" / "two-senses.txt").read_text(encoding="utf-8").split("\n\n")
    documents = [split_sentences(b) for b in blocks if b.strip()]
    squad = json.loads((ROOT / "assets" / "examples" / "tiny_squad.json").read_text(encoding="utf-8"))
    paragraphs = [" ".join(d) for d in documents[-4:]]
    heldout = {"wiki_paragraphs": paragraphs, "squad": squad_items(squad)[:6]}
    pack.write_pack(root / "pack", tokenizer, pack.encode_documents(documents * 3, tokenizer), squad, heldout)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    save(BertWithHeads(config, heads=("mlm", "nsp", "qa")), tokenizer, root / "model")
    data = root / "data"
    data.mkdir()
    (data / "wiki_heldout.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in paragraphs), encoding="utf-8")
    (data / "squad_heldout.json").write_text(json.dumps(squad), encoding="utf-8")
    return {"root": root, "pack": root / "pack", "model": root / "model", "data": data}


@pytest.fixture(scope="module")
def rehearsal(inputs) -> dict:
    out = inputs["root"] / "out"
    args = ["--out", str(out), "--budget-s", str(BUDGET_S), "--pack", str(inputs["pack"]),
            "--init-from", str(inputs["model"]), "--batch-size", "4", "--mlm-batch-size", "4", "--seq-len", "128",
            "--mlm-seq-len", "64", "--doc-stride", "32", "--eval-every-s", "6", "--mlm-tokens", "40",
            "--squad-questions", "4", "--warmup-steps", "2", "--patience", "100"]
    started = time.monotonic()
    done = run_without_app_packages(ROOT / "scripts" / "gpu_session.py", args, timeout=BUDGET_S * 3,
                                    env={"BERT_ENGINE_CACHE": str(inputs["root"] / "cache")})
    wall = time.monotonic() - started
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8")) if (out / "summary.json").exists() else {}
    return {"done": done, "wall": wall, "out": out, "summary": summary}


def test_every_stage_runs_or_says_why_not(rehearsal):
    done, stages = rehearsal["done"], rehearsal["summary"].get("stages", {})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert stages["environment"]["status"] == "passed" and "no CUDA" in stages["environment"]["detail"]
    for name in ("correctness", "throughput"):
        assert (stages[name]["status"], stages[name]["detail"]) == ("skipped", "no CUDA")
    assert stages["training"]["status"] == "passed" and stages["export"]["status"] == "passed"
    training = stages["training"]["data"]
    assert training["steps"] > 0 and training["evaluations"] >= 2
    assert {"top1", "f1", "exact_match"} <= set(training["start"]) and training["best"]["step"] >= 0
    assert "the stage's time is up" in training["stopped"]


def test_the_budget_holds_within_ten_percent(rehearsal):
    assert rehearsal["wall"] <= BUDGET_S * 1.1, f"the session took {rehearsal['wall']:.1f} s of {BUDGET_S}"
    assert rehearsal["summary"]["elapsed_s"] <= BUDGET_S * 1.1


def test_what_comes_back_fits_the_device_and_is_logged(rehearsal):
    files = sorted(p.name for p in rehearsal["out"].iterdir())
    assert len(files) <= 8 and rehearsal["summary"]["files"] == files
    assert {"session.log", "summary.json", "metrics.jsonl", "manifest.json", "model.tar.part-00"} <= set(files)
    records = [json.loads(line) for line in (rehearsal["out"] / "metrics.jsonl").read_text().splitlines()]
    kinds = {r["kind"] for r in records}
    assert kinds == {"train", "heldout"}
    assert all(0.0 <= r["top1"] <= 1.0 for r in records if r["kind"] == "heldout")
    log = (rehearsal["out"] / "session.log").read_text()
    assert "== training: passed" in log and "== export: passed" in log and "done in" in log


def test_the_parts_join_into_the_best_model(rehearsal, inputs, tmp_path):
    manifest = join_parts(rehearsal["out"], tmp_path / "model")
    loaded = load_directory(tmp_path / "model")
    assert set(loaded.heads) == {"mlm", "nsp", "qa"} and manifest["heads"] == ["mlm", "nsp", "qa"]
    weights = loaded.model.state_dict()["bert.encoder.layer.0.attention.self.query.weight"]
    assert weights.dtype == torch.float32      # stored in fp16, loaded for computing in fp32
    start = load_directory(inputs["model"]).model.state_dict()["bert.encoder.layer.0.attention.self.query.weight"]
    best = rehearsal["summary"]["stages"]["training"]["data"]["best"]["step"]
    assert torch.equal(weights, start.half().float()) == (best == 0)   # the start model, unless a later one was better


def test_the_assembler_joins_and_compares(rehearsal, inputs, tmp_path):
    report = tmp_path / "comparison.json"
    done = run_without_app_packages(ROOT / "scripts" / "gpu_assemble.py", [
        "--parts", str(rehearsal["out"]), "--out", str(tmp_path / "joined"), "--data", str(inputs["data"]),
        "--shipped", str(inputs["model"]), "--mlm-tokens", "30", "--squad-questions", "4", "--json", str(report)],
        timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "SHA-256 checked" in done.stdout and ("ship it" in done.stdout or "do not ship" in done.stdout)
    comparison = json.loads(report.read_text())
    assert comparison["new"]["questions"] == comparison["shipped"]["questions"] == 4
    assert comparison["better_on_both"] == (comparison["new"]["top1"] > comparison["shipped"]["top1"]
                                            and comparison["new"]["f1"] > comparison["shipped"]["f1"])


def test_the_assembler_refuses_a_damaged_part(rehearsal, inputs, tmp_path):
    for path in rehearsal["out"].glob("model.tar.part-*"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "manifest.json").write_bytes((rehearsal["out"] / "manifest.json").read_bytes())
    damaged = tmp_path / "model.tar.part-00"
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"x")
    done = run_without_app_packages(ROOT / "scripts" / "gpu_assemble.py", [
        "--parts", str(tmp_path), "--out", str(tmp_path / "joined"), "--data", str(inputs["data"])], timeout=60)
    assert done.returncode == 2 and "model.tar.part-00 differs from the manifest" in done.stderr
    assert not (tmp_path / "joined").exists()
