"""BERT pretraining data: NSP instances, dynamic 80/10/10 masking, collation, batches.

The recipe is the original one (``create_pretraining_data.py`` in google-research/bert):
per document, fill a target length from consecutive sentences, split the chunk into
segments A and B; half the time B is the true continuation (IsNext, label 0), half the
time B comes from another document (NotNext, label 1) and the unused sentences are put
back; 10% of instances get a shorter random target; the longer segment is truncated
first, from a random end. Deliberate differences: so that the pairs are exactly
what the labels claim, a NotNext B is always drawn from a *different* document
(the original retries 10 times and may give up), and an IsNext chunk of a single
sentence takes the document's next sentence too instead of becoming NotNext (keeps
IsNext/NotNext at 50/50). And the shorter target is drawn per instance, not once per
document, so that about ``short_seq_prob`` of the instances (not of the documents) are short.

Masking (``engine.data.masking``) is redone every time a batch is collated (dynamic masking).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields
from typing import Iterable, Iterator, Sequence

import torch

from engine.text.corpus import Document
from engine.data.masking import IGNORE_INDEX, mask_tokens_detailed, whole_word_ids_from
from engine.text.tokenizer import WordPieceTokenizer


# ---------------------------------------------------------------------------- instances
@dataclass
class Instance:
    """One pretraining example before [CLS]/[SEP] are added; ``tokens_b`` empty without NSP."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool


def create_instances(documents_token_ids: Sequence[Sequence[Sequence[int]]], max_seq_length: int = 128,
                     short_seq_prob: float = 0.1, nsp: bool = True,
                     rng: random.Random | None = None) -> list[Instance]:
    """Instances from every document (a list of sentences, each a list of token ids), shuffled.

    With ``nsp`` each instance is a pair fitting ``max_seq_length`` with its three specials;
    without, a single segment fitting with two. Empty sentences and documents are ignored.
    Raises ValueError when ``nsp`` is on and fewer than two documents have text.
    """
    rng = rng or random.Random(0)
    documents = [[list(s) for s in doc if len(s) > 0] for doc in documents_token_ids]
    documents = [doc for doc in documents if doc]
    if not documents:
        raise ValueError("the corpus has no text to make pretraining instances from")
    if nsp and len(documents) < 2:
        raise ValueError("need at least two documents for next-sentence prediction "
                         "(NotNext segments come from another document); add documents or turn NSP off")
    specials = 3 if nsp else 2
    if max_seq_length < specials + (2 if nsp else 1):
        raise ValueError(f"max_seq_length={max_seq_length} is too small: need at least "
                         f"{specials + (2 if nsp else 1)} with {'NSP' if nsp else 'single segments'}")
    instances: list[Instance] = []
    for index in range(len(documents)):
        if nsp:
            instances.extend(_pairs_from_document(documents, index, max_seq_length - 3, short_seq_prob, rng))
        else:
            instances.extend(_singles_from_document(documents[index], max_seq_length - 2, short_seq_prob, rng))
    rng.shuffle(instances)
    return instances


def _target_length(max_num_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _pairs_from_document(documents: list[list[list[int]]], index: int, max_num_tokens: int,
                         short_seq_prob: float, rng: random.Random) -> list[Instance]:
    document = documents[index]
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    instances: list[Instance] = []
    chunk: list[list[int]] = []
    length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            is_random_next = rng.random() < 0.5
            if not is_random_next and len(chunk) == 1:
                if i + 1 < len(document):          # IsNext needs two sentences: take the next one
                    i += 1
                    chunk.append(document[i])
                else:
                    is_random_next = True
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b: list[int] = []
            if is_random_next:
                other = rng.randrange(len(documents) - 1)
                other = other + 1 if other >= index else other      # any document but this one
                random_document = documents[other]
                target_b = target - len(tokens_a)
                for sentence in random_document[rng.randrange(len(random_document)):]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b:
                        break
                i -= len(chunk) - a_end            # put the unused sentences back
            else:
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append(Instance(tokens_a, tokens_b, is_random_next))
            chunk, length = [], 0
            target = _target_length(max_num_tokens, short_seq_prob, rng)
        i += 1
    return instances


def _singles_from_document(document: list[list[int]], max_num_tokens: int, short_seq_prob: float,
                           rng: random.Random) -> list[Instance]:
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    instances: list[Instance] = []
    chunk: list[int] = []
    for i, sentence in enumerate(document):
        chunk.extend(sentence)
        if i == len(document) - 1 or len(chunk) >= target:
            _truncate_pair(chunk, [], max_num_tokens, rng)
            instances.append(Instance(chunk, [], False))
            chunk = []
            target = _target_length(max_num_tokens, short_seq_prob, rng)
    return instances


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Shorten the longer list by one token at a time, from the front or back at random (in place)."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


# ---------------------------------------------------------------------------- collation
@dataclass(frozen=True)
class VocabSpec:
    """What collation needs to know about the vocabulary."""

    vocab_size: int
    pad_token_id: int
    cls_token_id: int
    sep_token_id: int
    mask_token_id: int
    random_token_ids: torch.Tensor         # (R,) ids a random replacement may take (no specials)
    continuation: torch.Tensor | None = None  # (V,) bool, True for "##" pieces; for whole-word masking

    @classmethod
    def from_tokenizer(cls, tokenizer: WordPieceTokenizer) -> "VocabSpec":
        """Special ids from the tokenizer; random replacements exclude all five special tokens."""
        size = tokenizer.vocab_size
        keep = torch.ones(size, dtype=torch.bool)
        keep[sorted(tokenizer.special_ids())] = False
        continuation = torch.zeros(size, dtype=torch.bool)
        for token, index in tokenizer.get_vocab().items():
            continuation[index] = token.startswith("##")
        return cls(size, tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
                   tokenizer.mask_token_id, keep.nonzero().flatten(), continuation)


@dataclass
class Batch:
    """A collated, masked batch: (B, S) tensors and the (B,) NSP label."""

    input_ids: torch.Tensor            # (B, S) after masking
    token_type_ids: torch.Tensor       # (B, S) 0 for [CLS] A [SEP], 1 for B [SEP], 0 at padding
    attention_mask: torch.Tensor       # (B, S) 1 for real tokens, 0 for padding
    special_tokens_mask: torch.Tensor  # (B, S) 1 for [CLS], [SEP] and padding
    labels: torch.Tensor               # (B, S) original id at masked positions, -100 elsewhere
    next_sentence_label: torch.Tensor  # (B,) 0 IsNext, 1 NotNext, -100 for single segments (no NSP)
    mask_kind: torch.Tensor            # (B, S) KIND_NONE / KIND_MASK / KIND_RANDOM / KIND_KEPT

    @property
    def num_tokens(self) -> int:
        """Real (non-padding) tokens in the batch, for tokens/s."""
        return int(self.attention_mask.sum().item())

    @property
    def has_nsp(self) -> bool:
        return bool((self.next_sentence_label != IGNORE_INDEX).any().item())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """A copy with every tensor on ``device``."""
        return Batch(**{f.name: getattr(self, f.name).to(device, non_blocking=non_blocking) for f in fields(self)})

    def model_inputs(self) -> dict[str, torch.Tensor]:
        """Keyword arguments for ``BertWithHeads.forward`` (no NSP label when there is no pair)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask,
                  "token_type_ids": self.token_type_ids, "labels": self.labels}
        if self.has_nsp:
            inputs["next_sentence_label"] = self.next_sentence_label
        return inputs


def collate(instances: Sequence[Instance], vocab: VocabSpec, mlm_probability: float = 0.15,
            generator: torch.Generator | None = None, whole_word: bool = False,
            pad_to: int | None = None) -> Batch:
    """``[CLS] A [SEP] B [SEP]`` (or ``[CLS] A [SEP]``) per instance, padded, freshly masked.

    Pads to the longest row, or to ``pad_to`` when given. Every call draws new masks from
    ``generator`` (dynamic masking).
    """
    if not instances:
        raise ValueError("cannot collate an empty list of instances")
    rows = []
    for inst in instances:
        ids = [vocab.cls_token_id, *inst.tokens_a, vocab.sep_token_id]
        types = [0] * len(ids)
        if inst.tokens_b:
            ids += [*inst.tokens_b, vocab.sep_token_id]
            types += [1] * (len(inst.tokens_b) + 1)
        rows.append((ids, types))
    longest = max(len(ids) for ids, _ in rows)
    width = longest if pad_to is None else pad_to
    if width < longest:
        raise ValueError(f"pad_to={pad_to} is shorter than the longest instance ({longest} tokens)")
    input_ids = torch.full((len(rows), width), vocab.pad_token_id, dtype=torch.long)     # (B, S)
    token_type_ids = torch.zeros((len(rows), width), dtype=torch.long)                   # (B, S)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)                   # (B, S)
    special = torch.ones((len(rows), width), dtype=torch.long)                           # (B, S)
    for r, ((ids, types), inst) in enumerate(zip(rows, instances)):
        n = len(ids)
        input_ids[r, :n] = torch.tensor(ids)
        token_type_ids[r, :n] = torch.tensor(types)
        attention_mask[r, :n] = 1
        special[r, 1:1 + len(inst.tokens_a)] = 0
        if inst.tokens_b:
            start = 2 + len(inst.tokens_a)
            special[r, start:start + len(inst.tokens_b)] = 0
    nsp_label = torch.tensor([(1 if inst.is_random_next else 0) if inst.tokens_b else IGNORE_INDEX
                              for inst in instances], dtype=torch.long)                  # (B,)
    words = None
    if whole_word:
        if vocab.continuation is None:
            raise ValueError("whole-word masking needs VocabSpec.continuation (use VocabSpec.from_tokenizer)")
        words = whole_word_ids_from(input_ids, special, vocab.continuation)              # (B, S)
    masked = mask_tokens_detailed(input_ids, special, vocab.vocab_size, vocab.mask_token_id, mlm_probability,
                                  generator, words, vocab.random_token_ids)
    return Batch(masked.input_ids, token_type_ids, attention_mask, special, masked.labels, nsp_label,
                 masked.mask_kind)


# ---------------------------------------------------------------------------- dataset
class PretrainingDataset:
    """Documents tokenized once; new instances every epoch; fresh masks every batch; all seeded.

    Epoch ``e`` uses ``random.Random(f"{seed}:{e}")`` for its instances and batch ``k`` of
    it a ``torch.Generator`` seeded from (seed, e, k), so any batch can be rebuilt exactly
    (``batches(start_step=n)`` resumes a run after n batches).
    """

    def __init__(self, documents: Iterable[Document], tokenizer: WordPieceTokenizer, max_seq_length: int = 128,
                 batch_size: int = 32, mlm_probability: float = 0.15, short_seq_prob: float = 0.1,
                 nsp: bool = True, whole_word: bool = False, seed: int = 0, pad_to_max_length: bool = False,
                 drop_last: bool = False) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.max_seq_length, self.batch_size = max_seq_length, batch_size
        self.mlm_probability, self.short_seq_prob = mlm_probability, short_seq_prob
        self.nsp, self.whole_word, self.seed = nsp, whole_word, seed
        self.pad_to = max_seq_length if pad_to_max_length else None
        self.drop_last = drop_last
        self.vocab = VocabSpec.from_tokenizer(tokenizer)
        self.documents_token_ids = tokenize_documents(documents, tokenizer, max_seq_length - (3 if nsp else 2))
        self._cached: tuple[int, list[Instance]] | None = None
        self.instances(0)                     # fail early (too few documents, too short a length)

    def instances(self, epoch: int) -> list[Instance]:
        """The (shuffled) instances of ``epoch``; the last epoch asked for is cached."""
        if self._cached is None or self._cached[0] != epoch:
            rng = random.Random(f"{self.seed}:{epoch}")
            self._cached = (epoch, create_instances(self.documents_token_ids, self.max_seq_length,
                                                    self.short_seq_prob, self.nsp, rng))
        return self._cached[1]

    def num_batches(self, epoch: int) -> int:
        """Batches in ``epoch`` (instance counts vary a little from epoch to epoch)."""
        n = len(self.instances(epoch))
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def batch(self, epoch: int, index: int) -> Batch:
        """Batch ``index`` of ``epoch``, masked with its own seeded generator."""
        chunk = self.instances(epoch)[index * self.batch_size:(index + 1) * self.batch_size]
        if not chunk:
            raise IndexError(f"epoch {epoch} has {self.num_batches(epoch)} batches; asked for {index}")
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + epoch) * 1_000_003 + index & (2**63 - 1))
        return collate(chunk, self.vocab, self.mlm_probability, generator, self.whole_word, self.pad_to)

    def epoch_batches(self, epoch: int) -> Iterator[Batch]:
        """Every batch of one epoch, in order."""
        for index in range(self.num_batches(epoch)):
            yield self.batch(epoch, index)

    def batches(self, start_step: int = 0) -> Iterator[Batch]:
        """Batches forever, epoch after epoch, skipping the first ``start_step`` (for resume)."""
        epoch = 0
        while True:
            count = self.num_batches(epoch)
            if count == 0:
                raise ValueError("the corpus makes fewer instances than one batch; lower batch_size")
            if start_step >= count:
                start_step -= count
            else:
                for index in range(start_step, count):
                    yield self.batch(epoch, index)
                start_step = 0
            epoch += 1

    def __iter__(self) -> Iterator[Batch]:
        return self.batches()


def tokenize_documents(documents: Iterable[Document], tokenizer: WordPieceTokenizer,
                       max_sentence_tokens: int | None = None) -> list[list[list[int]]]:
    """Token ids (no specials) per sentence per document; empty ones dropped.

    A sentence longer than ``max_sentence_tokens`` is cut into pieces of that size, so an
    upload without punctuation still makes full-length instances cheaply.
    """
    documents = [list(doc) for doc in documents]
    flat = [s for doc in documents for s in doc]
    encoded = tokenizer.backend.encode_batch(flat, add_special_tokens=False) if flat else []
    result: list[list[list[int]]] = []
    position = 0
    for doc in documents:
        sentences = []
        for enc in encoded[position:position + len(doc)]:
            ids = list(enc.ids)
            step = max_sentence_tokens or len(ids) or 1
            sentences.extend(ids[k:k + step] for k in range(0, len(ids), step))
        position += len(doc)
        if sentences:
            result.append(sentences)
    return result
