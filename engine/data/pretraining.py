"""BERT pretraining data: NSP instances, dynamic 80/10/10 masking, collation, batches.

Instances follow the original recipe (``engine.data.instance_plan``, planned as token ranges of a
``TokenStore``); masking (``engine.data.masking``) is redone every time a batch is collated
(dynamic masking). The objective (``engine.data.pretraining_objective``) may instead fix masks per corpus token
(static masking), change the 80/10/10 mix, or be a left-to-right LM (next-token labels, nothing masked).
``PretrainingDataset`` reads a store that is memory-mapped from the corpus cache (``engine.data.token_cache``)
or built in memory (``TokenStore.from_texts``), so a corpus of any size trains in the same bounded memory: an
epoch visits the documents in a seeded order, in blocks of about ``BLOCK_TOKENS`` tokens whose instances are
planned (offsets only) and shuffled together; a batch reads the token ids of its own rows only.
"""
from __future__ import annotations

import hashlib
import math
import random
from array import array
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any, Iterator, Sequence

import numpy as np
import torch

from engine.data.instance_plan import Instance, check_lengths
from engine.data.causal_lm import next_token_labels
from engine.data.masking import IGNORE_INDEX, mask_tokens_detailed, whole_word_ids_from
from engine.data.packing import check_layout, join_rows, materialise_rows, plan_rows
from engine.data.pretraining_objective import MASKED_LM, PretrainingObjective
from engine.data.static_masking import static_mask_tokens, token_offsets
from engine.data.token_store import TokenStore
from engine.text.tokenizer import WordPieceTokenizer
from engine.text.words import continues_word, marks_word_starts

BLOCK_TOKENS = 1 << 22          # ~4M tokens (~17 MB of English) of documents planned and shuffled together
_PLANS_KEPT = 4                 # planned blocks kept in memory (the batches of N processes straddle few)


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
    continuation: torch.Tensor | None = None  # (V,) bool: continues a word (WordPiece "##x"; "x" after "Ġ"/"▁")
    sentences_start_words: bool = False       # a sentence's first piece starts a word, marked or not (byte-level)

    @classmethod
    def from_tokenizer(cls, tokenizer: WordPieceTokenizer) -> "VocabSpec":
        """Special ids from the tokenizer (by role); random replacements exclude every role token; which pieces
        continue a word, by the vocabulary's kind (``engine.text.words.continues_word``)."""
        size = tokenizer.vocab_size
        keep = torch.ones(size, dtype=torch.bool)
        keep[sorted(tokenizer.special_ids())] = False
        continuation = torch.tensor(continues_word(tokenizer), dtype=torch.bool)         # (V,)
        return cls(size, tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
                   tokenizer.mask_token_id, keep.nonzero().flatten(), continuation, marks_word_starts(tokenizer))


@dataclass
class Batch:
    """A collated, masked batch: (B, S) tensors and the (B,) NSP label."""

    input_ids: torch.Tensor            # (B, S) after masking
    token_type_ids: torch.Tensor       # (B, S) 0 for cls A sep, 1 for B sep, 0 at padding
    attention_mask: torch.Tensor       # (B, S) 1 for real tokens, 0 for padding
    special_tokens_mask: torch.Tensor  # (B, S) 1 for the cls and sep tokens and padding
    labels: torch.Tensor               # (B, S) original id at masked positions (clm: the next token), -100 elsewhere
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
        """Keyword arguments for ``BertWithHeads.forward`` (no NSP label when there is no pair); the left-to-right
        LM's causal attention mask is its task's to add (``PretrainingTask.forward``)."""
        inputs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask,
                  "token_type_ids": self.token_type_ids, "labels": self.labels}
        if self.has_nsp:
            inputs["next_sentence_label"] = self.next_sentence_label
        return inputs


def collate(instances: Sequence[Instance], vocab: VocabSpec, mlm_probability: float = 0.15,
            generator: torch.Generator | None = None, whole_word: bool = False,
            pad_to: int | None = None, objective: PretrainingObjective = MASKED_LM,
            plan_rows: np.ndarray | None = None, seed: int = 0) -> Batch:
    """``cls A sep B sep`` (or ``cls A sep``) per instance, with the tokenizer's cls and sep tokens (by role:
    BERT's [CLS] / [SEP], RoBERTa's <s> / </s>), padded, freshly masked.

    Pads to the longest row, or to ``pad_to`` when given. Every call draws new masks from
    ``generator`` (dynamic masking); whole-word masking starts a word at each sentence's start too.
    ``objective``: its mask mix; static masks (hashed from ``seed`` and each token's corpus offset, which the
    instances' ``plan_rows`` give); or, for the left-to-right LM, the input unmasked and the next token as label.
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
        special[r, [1 + s for s in inst.separators_a]] = 1        # a packed input's document separators
        if inst.tokens_b:
            start = 2 + len(inst.tokens_a)
            special[r, start:start + len(inst.tokens_b)] = 0
    nsp_label = torch.tensor([(1 if inst.is_random_next else 0) if inst.tokens_b else IGNORE_INDEX
                              for inst in instances], dtype=torch.long)                  # (B,)
    if objective.causal:                  # nothing masked: every real position but the last predicts the next
        return Batch(input_ids, token_type_ids, attention_mask, special, next_token_labels(input_ids, attention_mask),
                     nsp_label, torch.zeros_like(input_ids))
    words = None
    if whole_word:
        if vocab.continuation is None:
            raise ValueError("whole-word masking needs VocabSpec.continuation (use VocabSpec.from_tokenizer)")
        sentence_starts = torch.zeros((len(rows), width), dtype=torch.bool)               # (B, S)
        for r, inst in enumerate(instances if vocab.sentences_start_words else ()):
            for start in inst.starts_a:
                sentence_starts[r, 1 + start] = True
            for start in inst.starts_b:
                sentence_starts[r, 2 + len(inst.tokens_a) + start] = True
        words = whole_word_ids_from(input_ids, special, vocab.continuation, sentence_starts)   # (B, S)
    if objective.static:
        if plan_rows is None or len(plan_rows) != len(instances):
            raise ValueError("static masking needs the instances' plan rows (their offsets in the corpus)")
        masked = static_mask_tokens(input_ids, special, token_offsets(plan_rows, width), seed, vocab.vocab_size,
                                    vocab.mask_token_id, mlm_probability, words, vocab.random_token_ids,
                                    objective.mask_mix)
    else:
        masked = mask_tokens_detailed(input_ids, special, vocab.vocab_size, vocab.mask_token_id, mlm_probability,
                                      generator, words, vocab.random_token_ids, objective.mask_mix)
    return Batch(masked.input_ids, token_type_ids, attention_mask, special, masked.labels, nsp_label,
                 masked.mask_kind)


# ---------------------------------------------------------------------------- dataset
class PretrainingDataset:
    """Documents tokenized once; new instances every epoch; fresh masks every batch; all seeded.

    ``store`` holds the tokenised documents; ``pool`` the ids of those this dataset uses (the training
    or the held-out share; all by default).
    Epoch ``e`` visits the pool in blocks (one block, in pool order, when the pool is under
    ``BLOCK_TOKENS``; else a seeded permutation cut into blocks of about that many tokens), block
    ``b`` planned with ``random.Random(f"{seed}:{e}")`` (``f"{seed}:{e}:{b}"`` after the first);
    batch ``k`` is instances ``[k*B, (k+1)*B)`` of the blocks one after another, masked by a
    ``torch.Generator`` seeded from (seed, e, k), so any batch can be rebuilt exactly and read
    at random (rank r of N reads its own batches only). ``objective``: static masks are seeded by (seed, each
    token's corpus offset) instead; the left-to-right LM masks nothing (``engine.data.pretraining_objective``).
    """

    def __init__(self, store: TokenStore, tokenizer: WordPieceTokenizer,
                 max_seq_length: int = 128, batch_size: int = 32, mlm_probability: float = 0.15,
                 short_seq_prob: float = 0.1, nsp: bool = True, whole_word: bool = False, seed: int = 0,
                 pad_to_max_length: bool = False, drop_last: bool = False, pool: np.ndarray | None = None,
                 objective: PretrainingObjective = MASKED_LM) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        check_layout(objective.packing, nsp, objective.causal)
        self.objective = objective
        check_lengths(max_seq_length, nsp)
        self.max_seq_length, self.batch_size = max_seq_length, batch_size
        self.mlm_probability, self.short_seq_prob = mlm_probability, short_seq_prob
        self.nsp, self.whole_word, self.seed = nsp, whole_word, seed
        self.pad_to = max_seq_length if pad_to_max_length else None
        self.drop_last = drop_last
        self.vocab = VocabSpec.from_tokenizer(tokenizer)
        self.store = store
        pool = np.arange(store.num_documents) if pool is None else np.asarray(pool, dtype=np.int64)
        self.pool = pool[store.document_token_counts()[pool] > 0]               # (P,) documents with text
        if len(self.pool) == 0:
            raise ValueError("the corpus has no text to make pretraining instances from")
        if nsp and len(self.pool) < 2 and not objective.sentence_order:
            raise ValueError("need at least two documents for next-sentence prediction "
                             "(NotNext segments come from another document); add documents or turn NSP off")
        self._pool_tokens = store.document_token_counts()[self.pool]          # (P,)
        self._order: tuple[int, list[np.ndarray]] | None = None
        self._counts: dict[int, list[int]] = {}
        self._plans: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()

    @property
    def num_documents(self) -> int:
        return len(self.pool)

    @property
    def num_tokens(self) -> int:
        return int(self._pool_tokens.sum())

    # ------------------------------------------------------------------ blocks
    def _blocks(self, epoch: int) -> list[np.ndarray]:
        """Pool positions of each block of ``epoch`` (the last epoch asked for is kept)."""
        if self._order is None or self._order[0] != epoch:
            if self.num_tokens <= BLOCK_TOKENS:
                blocks = [np.arange(len(self.pool))]
            else:
                order = np.random.default_rng([self.seed, epoch]).permutation(len(self.pool))      # (P,)
                ends = np.cumsum(self._pool_tokens[order])                                      # (P,)
                cuts = np.searchsorted(ends, np.arange(BLOCK_TOKENS, int(ends[-1]), BLOCK_TOKENS), side="right")
                blocks = [part for part in np.split(order, cuts) if len(part)]
            self._order = (epoch, blocks)
        return self._order[1]

    def _plan(self, epoch: int, block: int) -> np.ndarray:
        """(N, 5) plan rows of one block, shuffled (a few are kept)."""
        key = (epoch, block)
        if key not in self._plans:
            self.store.release_pages()        # a new block: the pages the last ones read need not stay mapped
            rng = random.Random(f"{self.seed}:{epoch}" if block == 0 else f"{self.seed}:{epoch}:{block}")
            self._plans[key] = plan_rows(self.store, self.pool, self._blocks(epoch)[block].tolist(),
                                         self.max_seq_length, self.short_seq_prob, self.nsp, rng,
                                         self.objective.pair_task, self.objective.packing)
            while len(self._plans) > _PLANS_KEPT:
                self._plans.popitem(last=False)
        self._plans.move_to_end(key)
        return self._plans[key]

    def _planned(self, epoch: int, instances: int | None) -> list[int]:
        """Instance counts of ``epoch``'s blocks, planning until they reach ``instances`` (None: all)."""
        counts = self._counts.setdefault(epoch, [])
        blocks = self._blocks(epoch)
        while len(counts) < len(blocks) and (instances is None or sum(counts) < instances):
            counts.append(len(self._plan(epoch, len(counts))))
        return counts

    def planned_instances(self, epoch: int, at_least: int | None = None) -> int:
        """Instances of ``epoch`` counted by planning its blocks until there are ``at_least`` (None: all)."""
        return sum(self._planned(epoch, at_least))

    def position_state(self, epoch: int) -> dict[str, Any]:
        """The instance counts of ``epoch``'s blocks planned so far (a checkpoint keeps them)."""
        return {"block_counts": list(self._counts.get(epoch, []))}

    def restore_position(self, epoch: int, state: dict[str, Any]) -> None:
        """Counts saved by ``position_state``: a resumed run finds its batches without planning the blocks
        before them. Counts that do not fit this corpus (a damaged or foreign state) are ignored: the blocks
        are planned again, which gives the same counts."""
        counts = state.get("block_counts") if isinstance(state, dict) else None
        if (isinstance(counts, list) and len(counts) <= len(self._blocks(epoch))
                and all(type(c) is int and c >= 0 for c in counts)):
            self._counts[epoch] = list(counts)

    # ------------------------------------------------------------------ batches
    def instances(self, epoch: int) -> list[Instance]:
        """Every instance of ``epoch``, in order, token ids read (for small data and tests)."""
        counts = self._planned(epoch, None)
        return [inst for block in range(len(counts))
                for inst in materialise_rows(self.store, self._plan(epoch, block), self.vocab.sep_token_id)]

    def has_batches(self, epoch: int, end: int) -> bool:
        """Whether ``epoch`` has batches ``0 .. end-1`` (planning only as far as that needs)."""
        needed = (end - 1) * self.batch_size + (self.batch_size if self.drop_last else 1)
        return sum(self._planned(epoch, needed)) >= needed

    def num_batches(self, epoch: int) -> int:
        """Batches in ``epoch`` (instance counts vary a little from epoch to epoch); plans the whole epoch."""
        n = sum(self._planned(epoch, None))
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def batch(self, epoch: int, index: int) -> Batch:
        """Batch ``index`` of ``epoch``, masked with its own seeded generator."""
        if index < 0 or not self.has_batches(epoch, index + 1):
            raise IndexError(f"epoch {epoch} has {self.num_batches(epoch)} batches; asked for {index}")
        chunk = self._rows(epoch, index * self.batch_size, (index + 1) * self.batch_size)
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + epoch) * 1_000_003 + index & (2**63 - 1))
        instances = materialise_rows(self.store, chunk, self.vocab.sep_token_id)
        return collate(instances, self.vocab, self.mlm_probability, generator, self.whole_word, self.pad_to,
                       self.objective, chunk, self.seed)

    def _rows(self, epoch: int, start: int, end: int) -> np.ndarray:
        """(n, 5) plan rows ``start .. end-1`` of ``epoch``'s instance sequence."""
        counts = self._planned(epoch, end)
        parts, offset = [], 0
        for block, count in enumerate(counts):
            if offset + count > start and offset < end:
                rows = self._plan(epoch, block)
                parts.append(rows[max(0, start - offset):end - offset])
            offset += count
        return join_rows(parts)

    def epoch_batches(self, epoch: int) -> Iterator[Batch]:
        """Every batch of one epoch, in order."""
        index = 0
        while self.has_batches(epoch, index + 1):
            yield self.batch(epoch, index)
            index += 1

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

    def fingerprint(self) -> str:
        """A hash of the documents' token ids (the store's content and this pool) and the sampling settings.

        A pool under ``BLOCK_TOKENS`` is hashed sentence by sentence as earlier versions did, so their runs
        still continue; a larger one by the store's content hash and the pool's ids."""
        digest = hashlib.sha256()
        digest.update(repr((self.seed, self.batch_size, self.max_seq_length, self.mlm_probability,
                            self.short_seq_prob, self.nsp, self.whole_word, self.pad_to, self.drop_last,
                            self.vocab.vocab_size)).encode())
        if not self.objective.is_default:           # BERT's objective hashes as it always did
            digest.update(repr(self.objective.key()).encode())
        if self.num_tokens > BLOCK_TOKENS:
            digest.update(f"store:{self.store.content_hash}:".encode() + self.pool.astype("<i8").tobytes())
            return digest.hexdigest()
        for document in self.pool.tolist():
            ends = self.store.sentence_ends(document)
            for a, b in zip(ends[:-1], ends[1:]):
                digest.update(array("q", self.store.token_ids(a, b)).tobytes() + b"|")
            digest.update(b"#")
        return digest.hexdigest()

