"""One forward per sentence, kept as word-level attention and word vectors: what every syntax measure reads.

Each sentence's words go to the model's tokenizer as pre-split words (``is_pretokenized``), so every piece
belongs to one word (a word the tokenizer splits further, ``don't`` -> ``don ' t``, stays one word). Then, with
Clark et al. (2019): attention **to** a word is the **sum** over its pieces (the probability mass that lands on
the word), attention **from** a word the **mean** over its pieces; ``[CLS]`` and ``[SEP]`` are dropped (so a
word's row sums to at most 1). A word's vector at each layer is the **mean** of its pieces' vectors (layer 0 =
the embeddings' output, layers 1..L the encoder layers'). Sentences are run in batches of similar length; a
sentence too long for the model, or with a word that has no piece, is skipped and named in ``skipped``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence

BATCH_SIZE = 32


@dataclass
class SentenceFeatures:
    """The word-level attention and word vectors of the sentences a model could read."""

    source: str                                   # which model (LoadedModel.source)
    sentences: list[DependencySentence]           # the sentences kept, in the order given
    attention: list[np.ndarray]                   # per sentence (L, nh, W, W) float32; row i = where word i looks
    vectors: list[np.ndarray]                     # per sentence (L + 1, W, H) float32; [0] = the embeddings' output
    skipped: list[tuple[int, str]] = field(default_factory=list)   # (index in the input, why)
    num_layers: int = 0
    num_heads: int = 0


def word_membership(word_ids: Sequence[int | None], num_words: int) -> np.ndarray:
    """``(W, S)`` 0/1 matrix: entry ``[w, s]`` is 1 when piece ``s`` belongs to word ``w`` (specials: none)."""
    member = np.zeros((num_words, len(word_ids)), dtype=np.float32)
    for position, word in enumerate(word_ids):
        if word is not None:
            member[word, position] = 1.0
    return member


def word_attention(piece_maps: np.ndarray, word_ids: Sequence[int | None], num_words: int) -> np.ndarray:
    """Word-level maps from piece-level ``(..., S, S)`` maps: to a word = sum over its pieces, from a word =
    mean over its pieces, pieces of no word (``[CLS]``, ``[SEP]``, padding) dropped -> ``(..., W, W)``."""
    member = word_membership(word_ids, num_words)                       # (W, S)
    counts = member.sum(axis=1, keepdims=True)
    if (counts == 0).any():
        raise ValueError(f"word {int(np.argmin(counts[:, 0]))} has no piece")
    return (member / counts) @ piece_maps @ member.T                    # (W, S) @ (..., S, S) @ (S, W)


def encode_words(loaded: LoadedModel, sentences: Sequence[DependencySentence]) -> list:
    """The tokenizer's encodings of each sentence's words as pre-split words (``[CLS] ... [SEP]``)."""
    backend = loaded.require_tokenizer().backend
    return backend.encode_batch([list(s.words) for s in sentences], is_pretokenized=True)


def why_unreadable(encoding, sentence: DependencySentence, max_positions: int) -> str | None:
    """Why the model cannot read this sentence's encoding (too many pieces, a word with no piece), else None."""
    if len(encoding.ids) > max_positions:
        return f"{len(encoding.ids)} pieces, more than the model's {max_positions} positions"
    found = {w for w in encoding.word_ids if w is not None}
    if len(found) != len(sentence):
        missing = next(i for i in range(len(sentence)) if i not in found)
        return f"word {missing + 1} ({sentence.words[missing][:30]!r}) has no piece in this vocabulary"
    return None


def sentence_features(loaded: LoadedModel, sentences: Sequence[DependencySentence],
                      batch_size: int = BATCH_SIZE) -> SentenceFeatures:
    """Run ``loaded`` once over every sentence (in batches of similar length) and keep word-level attention and
    word vectors; :func:`engine.cancellation.check` runs between batches."""
    if not sentences:
        raise ValueError("no sentences given: a CoNLL-U file or the bundled sample has them")
    config = loaded.config
    encodings = encode_words(loaded, sentences)
    skipped: list[tuple[int, str]] = []
    readable: list[int] = []
    for index, (encoding, sentence) in enumerate(zip(encodings, sentences)):
        reason = why_unreadable(encoding, sentence, config.max_tokens)
        if reason is None:
            readable.append(index)
        else:
            skipped.append((index, reason))
    attention: dict[int, np.ndarray] = {}
    vectors: dict[int, np.ndarray] = {}
    order = sorted(readable, key=lambda i: len(encodings[i].ids))      # similar lengths batch together
    for start in range(0, len(order), max(1, int(batch_size))):
        cancellation.check()
        batch = order[start:start + batch_size]
        found = _run_batch(loaded, [encodings[i] for i in batch], [len(sentences[i]) for i in batch])
        for index, (maps, vecs) in zip(batch, found):
            attention[index], vectors[index] = maps, vecs
    return SentenceFeatures(source=loaded.source, sentences=[sentences[i] for i in readable],
                            attention=[attention[i] for i in readable], vectors=[vectors[i] for i in readable],
                            skipped=skipped, num_layers=config.num_hidden_layers,
                            num_heads=config.num_attention_heads)


def _run_batch(loaded: LoadedModel, encodings: Sequence, num_words: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One padded forward over ``encodings``: each sentence's ``(L, nh, W, W)`` maps and ``(L + 1, W, H)`` vectors."""
    device = next(loaded.model.parameters()).device
    length, width = max(len(e.ids) for e in encodings), max(num_words)
    ids = torch.full((len(encodings), length), loaded.tokenizer.pad_token_id, dtype=torch.long)   # (B, S)
    mask = torch.zeros_like(ids)                                                                  # (B, S)
    member = torch.zeros((len(encodings), width, length))                                         # (B, W, S)
    for row, encoding in enumerate(encodings):
        ids[row, :len(encoding.ids)] = torch.tensor(encoding.ids)
        mask[row, :len(encoding.ids)] = 1
        member[row] = torch.from_numpy(np.pad(word_membership(encoding.word_ids, num_words[row]),
                                              ((0, width - num_words[row]), (0, length - len(encoding.ids)))))
    mean = member / member.sum(-1, keepdim=True).clamp(min=1)                                     # (B, W, S)
    maps: list[torch.Tensor] = []

    def take(index: int, probes: dict[str, torch.Tensor]) -> None:
        probs = probes["probs"].float().cpu()                                                     # (B, nh, S, S)
        maps.append(mean[:, None] @ probs @ member[:, None].transpose(-1, -2))                    # (B, nh, W, W)

    with torch.inference_mode():
        out = loaded.model.bert(ids.to(device), attention_mask=mask.to(device),
                                token_type_ids=torch.zeros_like(ids).to(device), output_attentions=True,
                                output_hidden_states=True, on_layer=take)
        hidden = torch.stack([h.float().cpu() for h in out.hidden_states], dim=1)                 # (B, L+1, S, H)
        words = mean[:, None] @ hidden                                                            # (B, L+1, W, H)
        stacked = torch.stack(maps, dim=1)                                                        # (B, L, nh, W, W)
    return [(stacked[row, :, :, :n, :n].numpy().copy(), words[row, :, :n].numpy().copy())
            for row, n in enumerate(num_words)]
