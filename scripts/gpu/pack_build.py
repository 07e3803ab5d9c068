"""Build the GPU session's data pack from ``../shared/data`` (here, never on the device; never committed).

The split is the model card's (``scripts/prepare_default_model_data.py``): Wikipedia training articles come
from every WikiExtractor file but the last ``heldout_files``; SQuAD training paragraphs from every article but
each tenth, without the questions whose answer position is ambiguous. The held-out sample the session scores
comes from the held-out files and articles only. Within the byte budget, the Wikipedia articles are taken in
file order (as ``wiki_train.jsonl``), the SQuAD paragraphs as a seeded sample across all training articles.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

import numpy as np

from engine.text.sentences import split_sentences
from engine.text.tokenizer import WordPieceTokenizer
from scripts.gpu import pack
from scripts.prepare_default_model_data import parse_wikiextractor, wiki_files

SQUAD_HELDOUT_EVERY = 10
TREE_LIMIT = 64 * 2**20           # what the device call carries: tracked + untracked files + carried paths


def fit_prefix(count: int, size_of: Callable[[int], int], budget: int, refine: int = 4) -> tuple[int, int]:
    """A prefix length ``n <= count`` with ``size_of(n) <= budget`` and its size: shrunk in proportion until it
    fits, then bisected ``refine`` times towards the smallest length that does not (``size_of`` is costly)."""
    n, size = count, size_of(count)
    too_long = count + 1
    while size > budget and n > 0:
        too_long = n
        n = max(0, min(n - 1, int(n * budget / size * 0.995)))
        size = size_of(n)
    for _ in range(refine):
        middle = (n + too_long) // 2
        if middle <= n or middle >= too_long:
            break
        middle_size = size_of(middle)
        if middle_size <= budget:
            n, size = middle, middle_size
        else:
            too_long = middle
    return n, size


def wiki_documents(root: Path, heldout_files: int, max_text_bytes: int) -> tuple[list[list[str]], list[str]]:
    """(training articles as sentence lists, up to ``max_text_bytes`` of text; held-out paragraphs)."""
    files = wiki_files(root)
    if len(files) <= heldout_files:
        raise ValueError(f"{root} has {len(files)} WikiExtractor files; more than {heldout_files} are needed")
    documents: list[list[str]] = []
    size = 0
    for path in files[:-heldout_files]:
        for article in parse_wikiextractor(path.read_text(encoding="utf-8")):
            documents.append(split_sentences(article["text"]))
            size += len(article["text"].encode("utf-8"))
            if size >= max_text_bytes:
                break
        if size >= max_text_bytes:
            break
    held = [p for path in files[-heldout_files:] for article in parse_wikiextractor(path.read_text(encoding="utf-8"))
            for p in article["text"].split("\n") if p.strip()]
    return documents, held


def squad_split(squad_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training paragraphs with their article's title, held-out questions as ``{"id", "question", "context",
    "answers"}``), by the card's rule."""
    data = json.loads((squad_dir / "train-v1.1-recovered.json").read_text(encoding="utf-8"))
    ambiguous = set(json.loads((squad_dir / "train-v1.1-recovered.ambiguous-ids.json").read_text(encoding="utf-8")))
    train, held = [], []
    for index, article in enumerate(data["data"]):
        for paragraph in article["paragraphs"]:
            if index % SQUAD_HELDOUT_EVERY == SQUAD_HELDOUT_EVERY - 1:
                held += [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"],
                          "answers": [a["text"] for a in qa["answers"]]} for qa in paragraph["qas"]]
                continue
            qas = [qa for qa in paragraph["qas"] if qa["id"] not in ambiguous]
            if qas:
                train.append({"title": article["title"], "paragraph": {**paragraph, "qas": qas}})
    return train, held


def squad_file(paragraphs: list[dict[str, Any]]) -> dict[str, Any]:
    """SQuAD v1.1 JSON of the chosen paragraphs, grouped by article title in order of first appearance."""
    articles: dict[str, list[dict[str, Any]]] = {}
    for item in paragraphs:
        articles.setdefault(item["title"], []).append(item["paragraph"])
    return {"version": "1.1", "data": [{"title": t, "paragraphs": p} for t, p in articles.items()]}


def compression_comparison(documents: list[list[str]], tokenizer: WordPieceTokenizer,
                           sample_bytes: int = 3_000_000) -> dict[str, float]:
    """Training tokens per packed byte, xz of the ids vs xz of the text, on the first ``sample_bytes`` of text."""
    sample, size = [], 0
    for sentences in documents:
        sample.append(sentences)
        size += sum(len(s.encode("utf-8")) + 1 for s in sentences)
        if size >= sample_bytes:
            break
    ids = pack.encode_documents(sample, tokenizer)
    tokens = int(len(ids) - (ids <= pack.DOCUMENT_END).sum())
    text = "\n".join(json.dumps({"text": " ".join(s)}, ensure_ascii=False) for s in sample).encode("utf-8")
    return {"sample_text_bytes": len(text), "sample_tokens": tokens,
            "ids_tokens_per_byte": round(tokens / len(pack.xz(ids.astype("<u2").tobytes())), 4),
            "text_tokens_per_byte": round(tokens / len(pack.xz(text)), 4)}


def build(data: Path, out: Path, tokenizer: WordPieceTokenizer, budget: int = 8_000_000, squad_bytes: int = 2_000_000,
          heldout_paragraphs: int = 400, heldout_questions: int = 300, heldout_files: int = 5, seed: int = 0,
          say: Callable[[str], None] = print) -> dict[str, Any]:
    """Write a pack of at most ``budget`` bytes into ``out``: the SQuAD file takes up to ``squad_bytes``, the
    held-out sample what it needs, the Wikipedia ids the rest. Returns ``pack.json``'s content."""
    rng = np.random.default_rng(seed)
    train_squad, held_squad = squad_split(data / "squad")
    order = rng.permutation(len(train_squad))
    n_squad, squad_size = fit_prefix(len(order), lambda n: len(pack.xz(pack.json_bytes(
        squad_file([train_squad[i] for i in sorted(order[:n].tolist())])))), squad_bytes)
    squad = squad_file([train_squad[i] for i in sorted(order[:n_squad].tolist())])
    say(f"squad: {n_squad} of {len(train_squad)} training paragraphs, {squad_size:,} bytes packed")
    # text enough for the ids' share (~0.9 tokens per packed byte, ~4.7 text bytes per token), with headroom
    documents, held_wiki_all = wiki_documents(data / "enwiki-2015-wikiextractor", heldout_files,
                                              max_text_bytes=int(budget * 4))
    held_wiki = [held_wiki_all[i] for i in sorted(rng.choice(len(held_wiki_all), heldout_paragraphs, replace=False))]
    held_q = [held_squad[i] for i in sorted(rng.choice(len(held_squad), heldout_questions, replace=False))]
    heldout = {"wiki_paragraphs": held_wiki, "squad": held_q}
    heldout_size = len(pack.xz(pack.json_bytes(heldout)))
    wiki_budget = budget - squad_size - heldout_size - 4096          # pack.json and slack
    say(f"wiki: encoding {len(documents):,} articles; {wiki_budget:,} bytes left for their ids")
    per_document = [pack.encode_documents([d], tokenizer) for d in documents]
    n_wiki, wiki_size = fit_prefix(len(per_document), lambda n: len(pack.xz(
        np.concatenate(per_document[:n]).astype("<u2").tobytes())) if n else 0, wiki_budget)
    wiki_ids = np.concatenate(per_document[:n_wiki])
    say(f"wiki: {n_wiki:,} articles, {len(wiki_ids):,} ids, {wiki_size:,} bytes packed")
    details = {"split": {"wiki_heldout_files": heldout_files, "squad_heldout_every": SQUAD_HELDOUT_EVERY,
                         "seed": seed, "rule": "scripts/prepare_default_model_data.py"},
               "compression": compression_comparison(documents, tokenizer),
               "roundtrip": pack.roundtrip_agreement(wiki_ids, tokenizer)}
    return pack.write_pack(out, tokenizer, wiki_ids, squad, heldout, details)


def travelling_tree_bytes(repo: Path, carried: Path) -> int:
    """What a device call sends: tracked files, untracked files git does not ignore, and the carried folder."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            check=True, capture_output=True).stdout.split(b"\0")
    total = sum((repo / name.decode()).stat().st_size for name in listed if name and (repo / name.decode()).is_file())
    return total + sum(p.stat().st_size for p in carried.rglob("*") if p.is_file())
