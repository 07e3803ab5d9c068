"""Two models' layers compared over a set of sentences: CKA over a thousand tokens, not the handful of one input.

One input gives CKA over its own tokens only, a few dozen at most, fewer than a model's dimensions; the value is
then noisy and, with the plain estimator, biased towards 1 (``engine.probes.comparison.cka``). ``compare_on_sentences``
runs both models over a sentence set (by default :func:`default_sentences`: every 4th sentence of the bundled
``assets/corpora/two-senses.txt``, 80 plain-English sentences, 1,052 word pieces for BERT's uncased vocabulary) and
gives debiased and plain linear CKA of every layer pair over all their tokens together.

* ``sentence_states(loaded, sentences)``: one model's hidden states over every sentence (batched, padded), every
  token kept with its id and whether it is a special token; plain numpy, so a caller can keep it per model.
* ``compare_sentence_states(a, b, states_a, states_b)``: the CKA. Special tokens are left out: ``[CLS]`` and
  ``[SEP]`` are the same token at the same place in every sentence, so every model, trained or not, gives them a
  shared structure that would count as likeness. Two models that read every sentence into the same ids are
  compared token by token; otherwise each sentence's words are lined up as for one input (``align_words``, a word
  the mean of its pieces) and the CKA runs over the words; a sentence whose words cannot be lined up is skipped
  and named.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from engine import cancellation
from engine.model.loaded_model import LoadedModel
from engine.probes.comparison.cka import LayerGrid, cka_matrices, few_samples
from engine.probes.comparison.compare import no_word_ids, written_mask
from engine.probes.comparison.word_alignment import align_words
from engine.text.documents import read_documents
from engine.text.encoding import Encoding

SAMPLE_PATH = Path(__file__).resolve().parents[3] / "assets" / "corpora" / "two-senses.txt"
SAMPLE_EVERY = 4               # every 4th sentence: each of the corpus's 70 paragraphs gives one or two
SAMPLE_NAME = "the bundled sentence set"
BATCH_SIZE = 32


@functools.lru_cache(maxsize=1)
def default_sentences() -> tuple[str, ...]:
    """The default sentence set: every ``SAMPLE_EVERY``-th sentence of ``assets/corpora/two-senses.txt`` (80)."""
    return tuple(sentence for document in read_documents(SAMPLE_PATH) for sentence in document)[::SAMPLE_EVERY]


@dataclass(frozen=True)
class SentenceStates:
    """One model's hidden states over a sentence set, every token of every sentence one after another."""

    source: str
    sentences: tuple[str, ...]
    states: np.ndarray           # (L + 1, N, H) float32, [0] = the embeddings' output; N tokens, specials included
    ids: np.ndarray              # (N,) int64: each token's id
    starts: np.ndarray           # (M + 1,) int64: sentence m's tokens are [starts[m], starts[m + 1])
    special: np.ndarray          # (N,) bool: a special token ([CLS], [SEP], <s>, ...)

    def sentence_ids(self, index: int) -> np.ndarray:
        """The ids of sentence ``index``'s tokens."""
        return self.ids[self.starts[index]:self.starts[index + 1]]


@dataclass
class SetComparison(LayerGrid):
    """Linear CKA of every layer of A against every layer of B over a sentence set's tokens (or words)."""

    source_a: str
    source_b: str
    cka: np.ndarray              # (L_a + 1, L_b + 1): debiased linear CKA
    plain_cka: np.ndarray        # (L_a + 1, L_b + 1): the plain (biased) estimator, for comparison
    samples: int                 # the tokens (or words) the CKA runs over
    unit: str                    # "tokens" or "words"
    sentences: int               # the sentences they come from (skipped ones not counted)
    width: int                   # the wider model's hidden size
    few: bool                    # fewer samples than ``width`` (``cka.few_samples``)
    skipped: list[tuple[int, str]] = field(default_factory=list)   # (sentence index, why), by words only


def _encodings(loaded: LoadedModel, sentences: Sequence[str]) -> list[Encoding]:
    """Each sentence as ``loaded`` reads it, at most its usable length."""
    return loaded.require_tokenizer("so it cannot read sentences").encode_batch(
        list(sentences), max_length=loaded.config.max_tokens)


def sentence_states(loaded: LoadedModel, sentences: Sequence[str] | None = None,
                    batch_size: int = BATCH_SIZE) -> SentenceStates:
    """``loaded``'s hidden states over ``sentences`` (default :func:`default_sentences`), batched and padded; checks
    for cancellation between batches. ``ValueError`` for no sentences or a model without a tokenizer."""
    sentences = tuple(default_sentences() if sentences is None else sentences)
    if not sentences or not all(isinstance(s, str) and s.strip() for s in sentences):
        raise ValueError("the sentence set is empty or has an empty sentence: give sentences with words")
    pad = loaded.require_tokenizer("so it cannot read sentences").pad_token_id or 0
    device = next(loaded.model.parameters()).device
    parts, ids, special, lengths = [], [], [], []
    for start in range(0, len(sentences), batch_size):
        cancellation.check()                                          # between batches: a cancelled request stops
        encodings = _encodings(loaded, sentences[start:start + batch_size])
        width = max(len(e.input_ids) for e in encodings)
        batch = torch.full((len(encodings), width), pad, dtype=torch.long)                  # (B, S)
        mask = torch.zeros((len(encodings), width), dtype=torch.long)                      # (B, S)
        for row, encoding in enumerate(encodings):
            batch[row, :len(encoding.input_ids)] = torch.tensor(encoding.input_ids)
            mask[row, :len(encoding.input_ids)] = 1
        with torch.inference_mode():
            out = loaded.model.bert(batch.to(device), attention_mask=mask.to(device),
                                    token_type_ids=torch.zeros_like(batch).to(device), output_hidden_states=True)
        hidden = torch.stack(out.hidden_states).float().cpu()        # L+1 x (B, S, H) -> (L+1, B, S, H)
        for row, encoding in enumerate(encodings):
            parts.append(hidden[:, row, :len(encoding.input_ids)])     # (L+1, S_m, H)
            ids += encoding.input_ids
            special += [bool(s) for s in encoding.special_tokens_mask]
            lengths.append(len(encoding.input_ids))
    states = torch.cat(parts, dim=1).numpy()                          # (L+1, N, H)
    return SentenceStates(loaded.source, sentences, states, np.asarray(ids, dtype=np.int64),
                          np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), np.asarray(special, dtype=bool))


def compare_sentence_states(a: LoadedModel, b: LoadedModel, states_a: SentenceStates,
                            states_b: SentenceStates) -> SetComparison:
    """Debiased and plain linear CKA of every layer pair over the sentence set both ``states_*`` hold (see the
    module docstring); ``a`` and ``b`` are the models they came from (their tokenizers line the words up).
    ``ValueError`` when the two hold different sentences or no sentence could be lined up."""
    if states_a.sentences != states_b.sentences:
        raise ValueError("the two models' states are over different sentences: compute both on the same set")
    same_ids = len(states_a.ids) == len(states_b.ids) and bool(np.array_equal(states_a.ids, states_b.ids)) \
        and bool(np.array_equal(states_a.starts, states_b.starts))
    skipped: list[tuple[int, str]] = []
    if same_ids:
        keep = ~states_a.special                                      # (N,)
        x = torch.from_numpy(states_a.states[:, keep])               # (L_a+1, n, H_a)
        y = torch.from_numpy(states_b.states[:, keep])               # (L_b+1, n, H_b)
        count = len(states_a.sentences)
    else:
        x, y, skipped = _pooled_by_words(a, b, states_a, states_b)  # (L+1, W, H) each
        count = len(states_a.sentences) - len(skipped)
    cancellation.check()
    plain, debiased = cka_matrices(x, y)                              # (L_a+1, L_b+1) each
    samples, width = int(x.shape[1]), max(x.shape[-1], y.shape[-1])
    return SetComparison(states_a.source, states_b.source, debiased, plain, samples,
                         "tokens" if same_ids else "words", count, width, few_samples(samples, (width,)), skipped)


def _pooled_by_words(a: LoadedModel, b: LoadedModel, states_a: SentenceStates, states_b: SentenceStates
                     ) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, str]]]:
    """Each side's states pooled over each sentence's aligned words, the words of every sentence one after
    another: (L_a+1, W, H_a), (L_b+1, W, H_b), and the sentences that could not be lined up."""
    sentences = states_a.sentences
    encodings_a, encodings_b = _encodings(a, sentences), _encodings(b, sentences)
    masks, no_words = (written_mask(a), written_mask(b)), (no_word_ids(a), no_word_ids(b))
    words_a, words_b, skipped = [], [], []
    for index, (sentence, enc_a, enc_b) in enumerate(zip(sentences, encodings_a, encodings_b)):
        if index % BATCH_SIZE == 0:
            cancellation.check()
        try:
            alignment = align_words(sentence, None, enc_a, enc_b, *masks, *no_words)
        except ValueError as error:
            skipped.append((index, str(error)))
            continue
        span_a = slice(states_a.starts[index], states_a.starts[index + 1])
        span_b = slice(states_b.starts[index], states_b.starts[index + 1])
        words_a.append(alignment.pool_states(torch.from_numpy(states_a.states[:, span_a]), "a"))   # (L_a+1, W_m, H_a)
        words_b.append(alignment.pool_states(torch.from_numpy(states_b.states[:, span_b]), "b"))   # (L_b+1, W_m, H_b)
    if not words_a:
        raise ValueError("no sentence of the set could be lined up by words between the two models: "
                         + (skipped[0][1] if skipped else "the set is empty"))
    return torch.cat(words_a, dim=1), torch.cat(words_b, dim=1), skipped


def compare_on_sentences(a: LoadedModel, b: LoadedModel, sentences: Sequence[str] | None = None) -> SetComparison:
    """Both models' hidden states over ``sentences`` (default :func:`default_sentences`) and their CKA:
    :func:`sentence_states` twice, then :func:`compare_sentence_states`."""
    states_a = sentence_states(a, sentences)
    cancellation.check()                                              # between the two models
    return compare_sentence_states(a, b, states_a, sentence_states(b, sentences))
