"""Tiny fine-tuning data for the tests: SQuAD JSON and classification files over conftest's vocabulary."""
from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from engine.checkpoints.hf_format import save
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from tests.conftest import WORDS, tiny_config

NAMES = ("cat", "dog", "bird", "car", "tree", "house", "model", "token")
COLORS = ("red", "blue", "big", "small")
FILLER = [w for w in WORDS if w not in NAMES + COLORS]


def squad_json(num_contexts: int = 4, seed: int = 0, filler: int = 6, facts_per_context: int = 1,
               impossible: bool = False) -> dict:
    """SQuAD v1.1 JSON: each context states "the <name> was <color>" among filler words (for
    ``facts_per_context`` names); one question per fact ("what was the <name> ?"), so answers sit at
    varied positions. ``impossible``: SQuAD v2.0, each context also asked about a name it does not state
    (``is_impossible``, no answers)."""
    rng = random.Random(seed)
    paragraphs = []
    for c in range(num_contexts):
        names = rng.sample(NAMES, facts_per_context)
        parts, facts = [], []
        for name in names:
            parts.append(" ".join(rng.choice(FILLER) for _ in range(rng.randint(1, filler))))
            color = rng.choice(COLORS)
            prefix = " ".join(p for p in parts if p) + " " + f"the {name} was "
            facts.append((name, color, len(prefix)))
            parts.append(f"the {name} was {color} .")
        parts.append(" ".join(rng.choice(FILLER) for _ in range(rng.randint(0, filler))))
        context = " ".join(p for p in parts if p)
        qas = []
        for k, (name, color, start) in enumerate(facts):
            assert context[start:start + len(color)] == color, (context, start, color)
            qas.append({"id": f"c{c}q{k}", "question": f"what was the {name} ?",
                        "answers": [{"text": color, "answer_start": start}]})
        if impossible:
            absent = rng.choice([n for n in NAMES if n not in names])
            qas.append({"id": f"c{c}none", "question": f"what was the {absent} ?", "answers": [],
                        "is_impossible": True})
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "v2.0" if impossible else "1.1", "data": [{"title": "tiny", "paragraphs": paragraphs}]}


def write_squad(path: Path, **kwargs) -> Path:
    path.write_text(json.dumps(squad_json(**kwargs)), encoding="utf-8")
    return path


def classification_rows(count: int = 16, seed: int = 0) -> list[tuple[str, str]]:
    """(text, label): "animal" sentences name an animal, "thing" sentences a thing, among filler words."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = ("animal", "thing")[i % 2]
        key = rng.choice(("cat", "dog", "bird") if label == "animal" else ("car", "tree", "house"))
        words = [rng.choice(FILLER) for _ in range(rng.randint(3, 7))]
        words.insert(rng.randrange(len(words) + 1), key)
        rows.append((" ".join(words), label))
    return rows


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows), encoding="utf-8")
    return path


def word_tokenizer(texts: list[str]) -> WordPieceTokenizer:
    """A vocabulary of the texts' lowercase words (+ letters and punctuation), deterministic."""
    from tests.conftest import VOCAB
    words = sorted({w.strip(".,;!?'\"").lower() for t in texts for w in t.split()} - {""})
    return WordPieceTokenizer.from_vocab({tok: i for i, tok in enumerate(dict.fromkeys(VOCAB + words))})


def save_tiny_model(directory: Path, tokenizer: WordPieceTokenizer, heads: tuple[str, ...] = ("mlm", "nsp"),
                    seed: int = 0, **overrides) -> Path:
    """A tiny BERT (conftest's sizes, max 128 positions) with ``heads``, saved with ``tokenizer``."""
    values = dict(vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    values.update(overrides)
    torch.manual_seed(seed)
    save(BertWithHeads(tiny_config(**values), heads=heads), tokenizer, directory)
    return directory


def tagged_text(count: int = 16, seed: int = 0) -> str:
    """``word<TAB>tag`` sentences of filler words tagged ``O`` with one entity each: "red cat" is
    ``B-ANI I-ANI``, a lone "car" ``B-OBJ`` (animals ``ANI``, things ``OBJ``); a blank line between sentences."""
    kinds = {"cat": "ANI", "dog": "ANI", "bird": "ANI", "car": "OBJ", "tree": "OBJ", "house": "OBJ"}
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        words = [(w, "O") for w in rng.sample(FILLER, rng.randint(2, 5))]
        name = rng.choice(sorted(kinds))
        entity = ([("red", f"B-{kinds[name]}"), (name, f"I-{kinds[name]}")] if rng.random() < 0.5
                  else [(name, f"B-{kinds[name]}")])
        at = rng.randrange(len(words) + 1)
        sentences.append(words[:at] + entity + words[at:])
    return "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n"


def choice_csv(count: int = 16, num_choices: int = 3, seed: int = 0) -> str:
    """A multiple-choice CSV (``context, choice0.., label``): the right choice names the context's animal or
    thing, the others name different ones."""
    rng = random.Random(seed)
    header = "context," + ",".join(f"choice{k}" for k in range(num_choices)) + ",label\n"
    rows = []
    for _ in range(count):
        names = rng.sample(NAMES, num_choices)
        label = rng.randrange(num_choices)
        context = f"the {names[label]} {rng.choice(FILLER)} {rng.choice(FILLER)}"
        choices = [f"then the {name} ran" for name in names]
        rows.append(",".join([context, *choices, str(label)]) + "\n")
    return header + "".join(rows)
