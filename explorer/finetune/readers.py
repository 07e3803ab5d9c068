"""The Fine-tune tab's data checks: each task's file read with the engine's own reader before a run starts.

A reader returns a ``DataCheck`` (how many examples, a line for the status: counts and the label or tag
set) or raises a ``ValueError`` naming the file (and the line) and saying what to fix. The labels a person
listed in the form, when given, must cover every label (classification) or tag (token classification).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.data.classification import read_classification_file
from engine.data.labels import label_names
from engine.data.multiple_choice import read_choice_file
from engine.data.qa_features import read_squad
from engine.data.tagged_text import read_tagged_file
from engine.training.tasks.job_documents import load_corpus
from engine.training.tasks.token_classification import is_bio

SHOWN_TAGS = 12          # tags named (with their counts) in a token-classification summary


@dataclass(frozen=True)
class DataCheck:
    """What a task's reader found in a file: how many examples, and a line about them for the status."""

    examples: int
    summary: str
    labels: tuple[str, ...] = ()        # classification / tagging: the distinct labels, in id order


def read_classification(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A classification CSV/TSV/JSONL: at least two examples and two different labels, each one of
    ``expected`` when it is given."""
    examples = read_classification_file(path)
    for e in examples:
        if expected and e.label not in expected:
            raise ValueError(f"{path.name}, line {e.line}: the label {e.label!r} is not one of the labels you "
                             f"listed ({', '.join(expected)}); fix that row or add the label to the list")
    names = tuple(label_names([e.label for e in examples]).values())
    if len(names) < 2:
        raise ValueError(f"{path.name}: classification needs at least two different labels; every row has "
                         f"{names[0]!r}")
    if len(examples) < 2:
        raise ValueError(f"{path.name}: one example is too few to train on and hold one out; add rows")
    return DataCheck(len(examples), f"{len(examples):,} examples · labels: {', '.join(names)}", names)


def read_qa(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A SQuAD v1.1 / v2.0 JSON file with at least one usable question."""
    squad = read_squad(path)
    if not squad.examples:
        raise ValueError(f"{path.name} has no usable questions ({squad.summary()})")
    contexts = len({e.context for e in squad.examples})
    impossible = sum(1 for e in squad.examples if e.is_impossible)
    unanswerable = (f" ({impossible:,} unanswerable: SQuAD v2.0, the model learns to answer \"no answer\" and the "
                    "held-out F1 uses a no-answer threshold picked on them)") if impossible else ""
    return DataCheck(len(squad.examples), f"{len(squad.examples):,} questions about {contexts:,} contexts{unanswerable}")


def read_tagged(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A CoNLL-U or ``word<TAB>tag`` file: at least two sentences and two different tags, each one of
    ``expected`` when it is given. The summary counts sentences and words and names the tags, most
    frequent first (and says when they are BIO entity tags)."""
    sentences = read_tagged_file(path)
    if expected:
        for sentence in sentences:
            for word, tag in zip(sentence.words, sentence.tags):
                if tag not in expected:
                    raise ValueError(f"{sentence.where} (the sentence that starts there): the word {word!r} has "
                                     f"the tag {tag!r}, which is not one of the tags you listed "
                                     f"({', '.join(expected)}); fix the tag or add it to the list")
    counts = Counter(tag for s in sentences for tag in s.tags)
    if len(counts) < 2:
        raise ValueError(f"{path.name}: tagging needs at least two different tags; every word has "
                         f"{next(iter(counts))!r}")
    if len(sentences) < 2:
        raise ValueError(f"{path.name}: one sentence is too few to train on and hold one out; add sentences "
                         "(a blank line between them)")
    words = sum(counts.values())
    common = [f"{tag} {n:,}" for tag, n in counts.most_common(SHOWN_TAGS)]
    more = f" and {len(counts) - SHOWN_TAGS} more" if len(counts) > SHOWN_TAGS else ""
    kind = "BIO entity tags (entity F1 is measured on the held-out sentences)" if is_bio(list(counts)) else "tags"
    return DataCheck(len(sentences), f"{len(sentences):,} sentences, {words:,} words · {len(counts)} {kind}: "
                                     f"{', '.join(common)}{more}", tuple(label_names(list(counts)).values()))


def read_choices(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A ``context, choice0 .. choiceN-1, label`` CSV with at least two examples."""
    examples = read_choice_file(path)
    if len(examples) < 2:
        raise ValueError(f"{path.name}: one example is too few to train on and hold one out; add rows")
    return DataCheck(len(examples), f"{len(examples):,} examples · {len(examples[0].choices)} choices each")


def read_any(path: Path, expected: tuple[str, ...] = ()) -> DataCheck:
    """A task's file with no reader of the tab's own (``explorer.finetune.tasks.plain_row``): its non-empty lines
    counted; the engine's data builder reads it when the run starts, and a bad file fails the run there."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        count = sum(1 for line in lines if line.strip())
    if not count:
        raise ValueError(f"{path.name} has no lines with text; upload a file with examples in it")
    return DataCheck(count, f"{count:,} lines (the engine reads them when the run starts)")


def check_next_sentence(fields: dict[str, Any]) -> DataCheck:
    """The built-in "which sentence comes next?" data a spec's ``corpus`` and ``max_documents`` and the task's
    ``num_choices`` (one dict) make: one example per pair of consecutive sentences of a document."""
    documents = load_corpus(fields["corpus"], fields.get("max_documents"))
    pairs = sum(max(0, len([s for s in doc if s.strip()]) - 1) for doc in documents)
    return DataCheck(pairs, f"{pairs:,} next-sentence examples from {len(documents):,} scenes of the built-in "
                            f"{fields['corpus']} corpus · {fields['num_choices']} choices each")
