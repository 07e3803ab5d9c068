"""The paper's classifier on frozen features (BERT §5.3, Table 7: "a randomly initialized two-layer 768-dimensional
BiLSTM before the classification layer"): a two-layer bidirectional LSTM over one sentence's word vectors, then a
linear layer to the tags, trained with Adam on the training sentences and scored on the held-out ones.

Unlike the logistic regression (``layer_probe.probe_accuracy``), which reads one word's vector alone, the BiLSTM
also reads its neighbours' vectors: what the paper's feature-based numbers include. Its width is the model's hidden
size per direction (the paper's 768 is BERT-base's), inputs standardised with the training words' mean and spread;
seeded, so the same features give the same accuracy.

Given several layers of each word (a sentence as a ``(W, k, H)`` array), it learns how to weigh them as it trains,
as the paper's "weighted sum" rows do (ELMo's scalar mix: a softmax over k learned weights and one scale, each
layer standardised first); ``LayerMix.weights`` reads the weights it learned.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from engine.training.tasks.token_classification import tag_accuracy


@dataclass(frozen=True)
class TaggerSettings:
    """How the BiLSTM is trained: ``hidden`` units per direction, ``layers``, Adam ``updates`` (whole passes over
    the shuffled training sentences, the last one cut short), Adam's learning rate, sentences per batch and the
    seed of its initial weights and order."""

    hidden: int = 128
    layers: int = 2
    updates: int = 300
    learning_rate: float = 2e-3
    batch_sentences: int = 16
    seed: int = 0


class LayerMix(nn.Module):
    """k layers of each word (B, W, k, H) -> one (B, W, H): ``scale`` x the softmax-weighted sum (ELMo's scalar mix;
    the weights start equal)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(layers))
        self.scale = nn.Parameter(torch.ones(()))

    def weights(self) -> list[float]:
        """The learned weight of each layer (they sum to 1)."""
        return torch.softmax(self.logits.detach(), 0).tolist()

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.logits, 0)                                       # (k,)
        return self.scale * torch.einsum("bwkh,k->bwh", vectors, weights)              # (B, W, H)


class BiLSTMTagger(nn.Module):
    """Word vectors (B, W, F) -> tag logits (B, W, T) through a bidirectional LSTM and a linear layer; with
    ``layers`` > 0, (B, W, k, H) vectors mixed by a learned ``LayerMix`` first."""

    def __init__(self, features: int, tags: int, settings: TaggerSettings, layers: int = 0) -> None:
        super().__init__()
        self.mix = LayerMix(layers) if layers else None
        self.lstm = nn.LSTM(features, settings.hidden, num_layers=settings.layers, bidirectional=True,
                            batch_first=True)
        self.out = nn.Linear(2 * settings.hidden, tags)

    def forward(self, vectors: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.mix is not None:
            vectors = self.mix(vectors)                                               # (B, W, k, H) -> (B, W, H)
        packed = nn.utils.rnn.pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
        states, _ = self.lstm(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True,
                                                     total_length=vectors.shape[1])   # (B, W, 2 * hidden)
        return self.out(states)                                                       # (B, W, T)


def _batch(sentences: Sequence[np.ndarray], mean: np.ndarray, spread: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardised, zero-padded (B, W_max, F) or (B, W_max, k, H) vectors and the (B,) lengths."""
    lengths = torch.tensor([len(s) for s in sentences])
    padded = torch.zeros(len(sentences), int(lengths.max()), *sentences[0].shape[1:])
    for i, vectors in enumerate(sentences):
        padded[i, : len(vectors)] = torch.from_numpy(((vectors - mean) / spread).astype(np.float32))
    return padded, lengths


def train_bilstm(train: Sequence[np.ndarray], train_tags: Sequence[Sequence[str]],
                 settings: TaggerSettings = TaggerSettings()) -> tuple[BiLSTMTagger, list[str], np.ndarray, np.ndarray]:
    """A BiLSTM tagger trained on ``train`` (one (W, F) array per sentence, or (W, k, H): k layers to mix) with its
    tags; the model, its tag names by output index, and the training words' mean and spread it standardises with."""
    if not train:
        raise ValueError("the BiLSTM tagger needs training and held-out sentences")
    names = sorted({t for tags in train_tags for t in tags})
    index = {name: i for i, name in enumerate(names)}
    words = np.concatenate(list(train))                                               # (N, F) or (N, k, H)
    mean, spread = words.mean(axis=0), words.std(axis=0) + 1e-6
    generator = torch.Generator().manual_seed(settings.seed)
    torch.manual_seed(settings.seed)
    model = BiLSTMTagger(words.shape[-1], len(names), settings, layers=words.shape[1] if words.ndim == 3 else 0)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate)
    labels = [torch.tensor([index[t] for t in tags]) for tags in train_tags]
    model.train()
    batches: list[list[int]] = []
    while len(batches) < settings.updates:               # shuffled passes over the sentences
        order = torch.randperm(len(train), generator=generator).tolist()
        batches += [order[i:i + settings.batch_sentences] for i in range(0, len(order), settings.batch_sentences)]
    for chosen in batches[: settings.updates]:
        vectors, lengths = _batch([train[i] for i in chosen], mean, spread)
        wanted = nn.utils.rnn.pad_sequence([labels[i] for i in chosen], batch_first=True, padding_value=-100)
        logits = model(vectors, lengths)                                              # (B, W, T)
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(names)), wanted.reshape(-1),   # (B * W, T)
                                           ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), names, mean, spread


def bilstm_predict(train: Sequence[np.ndarray], train_tags: Sequence[Sequence[str]], test: Sequence[np.ndarray],
                   settings: TaggerSettings = TaggerSettings()) -> list[list[str]]:
    """The tags a BiLSTM tagger trained on ``train`` (``train_bilstm``) gives each held-out sentence of ``test``."""
    if not train or not test:
        raise ValueError("the BiLSTM tagger needs training and held-out sentences")
    model, names, mean, spread = train_bilstm(train, train_tags, settings)
    guessed: list[list[str]] = []
    with torch.no_grad():
        for start in range(0, len(test), settings.batch_sentences):
            part = list(test[start:start + settings.batch_sentences])
            vectors, lengths = _batch(part, mean, spread)
            best = model(vectors, lengths).argmax(-1)                                 # (B, W)
            guessed += [[names[int(g)] for g in best[row, : len(sentence)]] for row, sentence in enumerate(part)]
    return guessed


def bilstm_accuracy(train: Sequence[np.ndarray], train_tags: Sequence[Sequence[str]], test: Sequence[np.ndarray],
                    test_tags: Sequence[Sequence[str]], settings: TaggerSettings = TaggerSettings()) -> float:
    """Held-out word accuracy of a BiLSTM tagger trained on ``train`` (one (W, F) array per sentence) with its
    tags; a held-out tag never seen in training counts as wrong."""
    return tag_accuracy(test_tags, bilstm_predict(train, train_tags, test, settings))
