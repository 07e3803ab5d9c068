"""Split ``../shared/data`` into the training and held-out files the default model is built from.

The data sets are not part of the product; this script writes plain files *outside* the
repository (default ``../build/data``) that ``python -m engine.pretrain`` and
``python -m engine.finetune`` read, and that ``bench/model_quality.py`` measures on:

- ``wiki_train.jsonl``: one Wikipedia article per JSON line (its paragraphs joined by newlines),
  from the first WikiExtractor files, up to ``--wiki-train-mib`` (the corpus reader's cap is 50 MiB).
- ``wiki_heldout.jsonl``: the articles of the last ``--wiki-heldout-files`` files; never trained on.
- ``squad_train.json`` / ``squad_heldout.json``: SQuAD v1.1 split by whole articles (every tenth
  article is held out); training keeps only answers whose position is exact (the data's README
  lists the ambiguous ones), the held-out part keeps every question (EM/F1 compare texts).

The split is deterministic: the same inputs give byte-identical outputs.

    python scripts/prepare_default_model_data.py --data ../shared/data --out ../build/data
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

DOC_START = re.compile(r'<doc id="(\d+)" url="[^"]*" title="([^"]*)">')
MIN_PARAGRAPH_WORDS = 8   # drops titles, section headings ("History.") and template debris


def wiki_files(root: Path) -> list[Path]:
    """The WikiExtractor files in their natural order (AA/wiki_00 ... AB/wiki_49)."""
    return sorted(p for p in root.glob("*/wiki_*") if p.is_file())


def parse_wikiextractor(text: str) -> list[dict[str, str]]:
    """Articles of one WikiExtractor file: ``{"id", "title", "text"}`` with prose paragraphs only."""
    articles: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    paragraphs: list[str] = []
    for line in text.splitlines():
        match = DOC_START.match(line)
        if match:
            current, paragraphs = {"id": match.group(1), "title": match.group(2)}, []
            continue
        if line.startswith("</doc>"):
            if current is not None and paragraphs:
                articles.append({**current, "text": "\n".join(paragraphs)})
            current = None
            continue
        line = line.strip()
        if current is None or len(line.split()) < MIN_PARAGRAPH_WORDS or "{{" in line or "[[" in line:
            continue
        paragraphs.append(line)
    return articles


def write_jsonl(articles: list[dict[str, str]], path: Path) -> int:
    """Write one ``{"text": ...}`` per article; return the bytes written."""
    with path.open("w", encoding="utf-8") as handle:
        for article in articles:
            handle.write(json.dumps({"text": article["text"]}, ensure_ascii=False) + "\n")
    return path.stat().st_size


def split_wiki(root: Path, out: Path, train_mib: float, heldout_files: int) -> None:
    files = wiki_files(root)
    train_files, held_files = files[:-heldout_files], files[-heldout_files:]
    budget = int(train_mib * 2**20)
    train: list[dict[str, str]] = []
    size = 0
    for path in train_files:
        for article in parse_wikiextractor(path.read_text(encoding="utf-8")):
            line_bytes = len(json.dumps({"text": article["text"]}, ensure_ascii=False).encode()) + 1
            if size + line_bytes > budget:
                break
            train.append(article)
            size += line_bytes
        else:
            continue
        break
    held = [a for p in held_files for a in parse_wikiextractor(p.read_text(encoding="utf-8"))]
    print(f"wiki: {len(train)} training articles ({write_jsonl(train, out / 'wiki_train.jsonl') / 2**20:.1f} MiB), "
          f"{len(held)} held-out articles ({write_jsonl(held, out / 'wiki_heldout.jsonl') / 2**20:.1f} MiB) "
          f"from {held_files[0].relative_to(root)}..{held_files[-1].relative_to(root)}")


def split_squad(squad_dir: Path, out: Path, every: int) -> None:
    data = json.loads((squad_dir / "train-v1.1-recovered.json").read_text(encoding="utf-8"))
    ambiguous = set(json.loads((squad_dir / "train-v1.1-recovered.ambiguous-ids.json").read_text(encoding="utf-8")))
    train_articles, held_articles = [], []
    for index, article in enumerate(data["data"]):
        if index % every == every - 1:
            held_articles.append(article)
            continue
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for qa in paragraph["qas"] if qa["id"] not in ambiguous]
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        train_articles.append({**article, "paragraphs": paragraphs})
    for name, articles in (("squad_train.json", train_articles), ("squad_heldout.json", held_articles)):
        (out / name).write_text(json.dumps({"version": "1.1", "data": articles}, ensure_ascii=False), encoding="utf-8")
        questions = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
        print(f"squad: {name}: {len(articles)} articles, {questions} questions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data", help="the shared data folder")
    parser.add_argument("--out", default="../build/data", help="where the split files go (outside the repo)")
    parser.add_argument("--wiki-train-mib", type=float, default=45.0)
    parser.add_argument("--wiki-heldout-files", type=int, default=5)
    parser.add_argument("--squad-heldout-every", type=int, default=10)
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    split_wiki(data / "enwiki-2015-wikiextractor", out, args.wiki_train_mib, args.wiki_heldout_files)
    split_squad(data / "squad", out, args.squad_heldout_every)


if __name__ == "__main__":
    main()
