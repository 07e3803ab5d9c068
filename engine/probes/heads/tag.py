"""Token classification: a tag for every word, as ``transformers``' token-classification pipeline with
``aggregation_strategy="first"``.

``tag_words(loaded, text)`` returns what ``pipeline("token-classification",
aggregation_strategy="first")`` returns on the same weights: ``[{"entity_group", "score", "word",
"start", "end"}]``. The pipeline's rules (transformers 5 ``TokenClassificationPipeline``,
``gather_pre_entities``, ``aggregate_words``, ``group_entities``), matched here:

1. **Tokens.** Special tokens are skipped. Each token's scores are the softmax of its logits.
2. **Words.** With a vocabulary that marks continuations (WordPiece's ``##``), a token is a *subword*
   when its vocabulary piece and the characters it covers differ in length (``"##ing"`` covers
   ``"ing"``); with one that does not (byte-level BPE, SentencePiece), when neither the character
   before it nor its first one is a space. An unknown token is never a subword and its word is the
   text it covers. A word is a token and the subwords after it.
3. **First.** A word takes the tag and score of its **first** token's best label (the first of equal
   ones); its ``word`` is its pieces decoded (``##`` joined), ``start``/``end`` its characters.
4. **Groups.** Adjacent words merge into one entity while their tags' types agree (``B-PER`` and
   ``I-PER`` are type ``PER``) and the later one is not a ``B-``; a tag without ``B-``/``I-`` counts
   as ``I-``, so adjacent equal tags merge too. A group's ``entity_group`` is its first tag after
   the first ``-`` (``B-PER`` → ``PER``, ``NOUN`` → ``NOUN``), its score the mean of its words'
   scores, its ``word`` the words decoded together.
5. **Ignored.** Groups of type ``O`` are left out (the pipeline's ``ignore_labels=["O"]``).

Unlike the pipeline, which truncates to the tokenizer's length silently, a text longer than the
model's positions is refused with a sentence. ``tag_details`` returns a :class:`TagResult` with
every word, every group (``O`` included) and whether the labels are BIO tags, for the UI.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from engine.model.loaded_model import LoadedModel
from engine.probes.heads.head_inputs import batch_tensors, check_text, encode_pairs

IGNORED = ("O",)


@dataclass
class TagSpan:
    """A tagged word, or a group of words (an entity): the pipeline's fields."""

    label: str          # a word's tag ("B-PER", "NOUN"); a group's type ("PER", "NOUN", "O")
    score: float        # a word's first-token probability of its tag; a group's mean over its words
    word: str           # the pieces decoded
    start: int          # characters of the text: text[start:end]
    end: int

    def as_dict(self, key: str = "entity_group") -> dict[str, Any]:
        """The pipeline's shape: ``{key: label, "score", "word", "start", "end"}``."""
        return {key: self.label, "score": self.score, "word": self.word, "start": self.start, "end": self.end}


@dataclass
class TagResult:
    """Everything the Tag words view shows for one text."""

    text: str
    source: str                      # which model (LoadedModel.source)
    tokens: list[str]                # S pieces, specials included
    labels: list[str]                # id2label, by id
    bio: bool                        # whether the labels are BIO tags (B-X / I-X)
    words: list[TagSpan]             # one per word, tags as given (rule 3)
    groups: list[TagSpan]            # adjacent words merged (rule 4), "O" groups included
    word_positions: list[int] = field(default_factory=list)   # per word: the position of its first token

    def to_pipeline(self, ignore_labels: tuple[str, ...] = IGNORED) -> list[dict[str, Any]]:
        """The groups as the pipeline returns them, without those of a type in ``ignore_labels``."""
        return [g.as_dict() for g in self.groups if g.label not in ignore_labels]


def tag_words(loaded: LoadedModel, text: str) -> list[dict[str, Any]]:
    """``pipeline("token-classification", aggregation_strategy="first")``'s output for ``text``."""
    return tag_details(loaded, text).to_pipeline()


def tag_details(loaded: LoadedModel, text: str) -> TagResult:
    """The :class:`TagResult` for ``text``: words, groups and the labels.

    Raises ``ValueError`` without a token-classification head, for empty text, or too long a text.
    """
    loaded.require_head("token_classifier")
    check_text(text, "text", "write a sentence to tag")
    encoding, = encode_pairs(loaded, [(text, None)])
    inputs = batch_tensors(loaded, [encoding])                                  # (1, S) each
    with torch.inference_mode():
        logits = loaded.model(**inputs, compute=("token_classifier",)).token_classifier.logits.float()[0]  # (S, L)
        probs = logits.softmax(-1)                                              # (S, L)
        best_scores, best_ids = probs.max(-1)                                   # (S,), (S,): first of equal ones
    labels = [loaded.config.id2label.get(i, f"LABEL_{i}") for i in range(probs.shape[-1])]
    tokenizer = loaded.tokenizer
    decode = tokenizer.backend.decoder.decode
    word_aware = bool(getattr(tokenizer.backend.model, "continuing_subword_prefix", None))   # WordPiece's "##"
    words: list[TagSpan] = []
    positions: list[int] = []
    pieces: list[str] = []
    for position, token_id in enumerate(encoding.input_ids):
        if encoding.special_tokens_mask[position]:
            continue
        piece = tokenizer.id_to_token(token_id)
        start, end = encoding.offsets[position]
        covered = text[start:end]
        subword = (len(piece) != len(covered) if word_aware                       # rule 2
                   else start > 0 and " " not in text[start - 1:start + 1])
        if token_id == tokenizer.unk_token_id:
            piece, subword = covered, False
        if subword and words:
            pieces.append(piece)
            words[-1].word, words[-1].end = decode(pieces), end
            continue
        pieces = [piece]
        positions.append(position)
        words.append(TagSpan(labels[int(best_ids[position])], float(best_scores[position]), decode(pieces), start, end))
    return TagResult(text=text, source=loaded.source, tokens=list(encoding.shown), labels=labels,
                     bio=any(label.startswith(("B-", "I-")) for label in labels), words=words,
                     groups=group_words(words, decode), word_positions=positions)


def split_tag(label: str) -> tuple[str, str]:
    """``("B" | "I", type)``: ``"B-PER"`` → ("B", "PER"); a tag without a prefix counts as ``I`` (the pipeline's rule)."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def group_words(words: list[TagSpan], decode: Any) -> list[TagSpan]:
    """Merge adjacent words into groups by rule 4; ``decode`` joins the words' texts (the tokenizer's decoder)."""
    groups: list[list[TagSpan]] = []
    for word in words:
        prefix, kind = split_tag(word.label)
        if groups and prefix != "B" and kind == split_tag(groups[-1][-1].label)[1]:
            groups[-1].append(word)
        else:
            groups.append([word])
    return [TagSpan(label=group[0].label.split("-", 1)[-1], score=sum(w.score for w in group) / len(group),
                    word=decode([w.word for w in group]), start=group[0].start, end=group[-1].end)
            for group in groups]
