"""The feature-based way to use a pretrained model (BERT, Table 7): its weights frozen, a classifier fitted on the
vectors of some of its layers, against fine-tuning the whole model.

* **The vectors:** each word's vector at each layer is the mean of its pieces' vectors, one forward per sentence
  (``engine.probes.syntax.features.sentence_features``, what the Syntax tab's layer probe reads); layer 0 is the
  embeddings' output, layers 1..L the encoder layers'.
* **The recipes** (``RECIPES``, the paper's rows): the embeddings; the second-to-last or the last encoder layer;
  the sum of the last four; the last four concatenated (4 x hidden wide); the sum of every encoder layer. The
  paper's "weighted" sums learn a weight per layer inside its BiLSTM, and so does ours (``LayerMix``); the logistic
  regression weighs every layer the same (the vectors are standardised before it, so a sum and a mean are the same
  to it).
* **The classifier** (``CLASSIFIERS``, the scale's ``feature_classifier``): by default the layer probe's
  multinomial logistic regression (``probe_predict``: scikit-learn, L2, standardised inputs), which reads only
  what one word's vector holds; or the paper's two-layer BiLSTM over the sentence's vectors
  (``bilstm_tagger``), which reads its neighbours' too.
* **The score:** word accuracy (part of speech), or entity F1 for BIO tags (named entities: seqeval's entities,
  as the fine-tuning's ``entity_f1``), from the same held-out tags.
* **The split:** the same held-out sentences as the fine-tuning evaluation (``split_held_out`` with its fraction
  and seed), so both ways are scored on the same words (sentences too long for the model are left out).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.data.features import split_held_out
from engine.data.tagged_text import TaggedSentence, read_tagged_file
from engine.experiments.bilstm_tagger import TaggerSettings, bilstm_predict
from engine.model.loaded_model import LoadedModel
from engine.probes.syntax.conllu import DependencySentence
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.layer_probe import probe_predict
from engine.training.tasks.token_classification import entity_counts, entity_f1, tag_accuracy

CLASSIFIERS = ("logistic", "bilstm")      # the layer probe's logistic regression; the paper's two-layer BiLSTM

# recipe -> (what it is, in the paper's words; how the layers are picked; "sum" or "concat")
RECIPES: dict[str, tuple[str, str, str]] = {
    "embeddings": ("the embeddings' output", "embeddings", "concat"),
    "second-to-last": ("the second-to-last hidden layer", "second-to-last", "concat"),
    "last": ("the last hidden layer", "last", "concat"),
    "sum-last-4": ("the sum of the last four hidden layers", "last-4", "sum"),
    "concat-last-4": ("the last four hidden layers concatenated", "last-4", "concat"),
    "sum-all": ("the sum of every encoder layer", "all", "sum"),
    "concat-up-to-4": ("the last four hidden layers concatenated (every one, when there are fewer)", "up-to-4",
                       "concat"),                           # Table 8's feature-based column on any depth
}


def layers_of(recipe: str, num_layers: int) -> list[int]:
    """The layers (0 = the embeddings' output, 1..``num_layers`` the encoder's) that ``recipe`` reads."""
    if recipe not in RECIPES:
        raise ValueError(f"no feature recipe {recipe!r}; there are {', '.join(RECIPES)}")
    pick = RECIPES[recipe][1]
    if pick == "last-4" and num_layers < 4:
        raise ValueError(f"the recipe {recipe} needs a model of at least 4 encoder layers, not {num_layers}")
    if pick == "second-to-last" and num_layers < 2:
        raise ValueError(f"the recipe {recipe} needs a model of at least 2 encoder layers, not {num_layers}")
    return {"embeddings": [0], "second-to-last": [num_layers - 1], "last": [num_layers],
            "last-4": list(range(num_layers - 3, num_layers + 1)), "all": list(range(1, num_layers + 1)),
            "up-to-4": list(range(max(1, num_layers - 3), num_layers + 1))}[pick]


def combine(vectors: np.ndarray, recipe: str) -> np.ndarray:
    """One sentence's word features by ``recipe`` from its ``(L + 1, W, H)`` vectors: ``(W, H)``, or ``(W, 4H)``
    for the four layers concatenated (oldest layer first)."""
    layers = layers_of(recipe, vectors.shape[0] - 1)
    picked = vectors[layers]                                        # (k, W, H)
    if RECIPES[recipe][2] == "sum":
        return picked.sum(axis=0)
    return np.concatenate(list(picked), axis=-1)                    # (W, k * H)


def layers_to_mix(vectors: np.ndarray, recipe: str) -> np.ndarray:
    """One sentence's ``(W, k, H)`` layers that a sum ``recipe`` adds, for a classifier that learns their weights
    (the BiLSTM's ``LayerMix``: the paper's weighted sums)."""
    picked = vectors[layers_of(recipe, vectors.shape[0] - 1)]                      # (k, W, H)
    return picked.transpose(1, 0, 2)                                                # (W, k, H)


def _as_sentences(tagged: Sequence[TaggedSentence]) -> list[DependencySentence]:
    """The tagged sentences as the syntax probes' sentences (their tags as UPOS; no tree is needed)."""
    return [DependencySentence(tuple(s.words), (0,) * len(s.words), ("",) * len(s.words), tuple(s.tags))
            for s in tagged]


def frozen_feature_tags(loaded: LoadedModel, recipe: str, data: Path, held_out_fraction: float, seed: int,
                        classifier: str = "logistic") -> tuple[list[list[str]], list[list[str]]]:
    """(gold, guessed): the tags of each held-out sentence of ``data`` and those ``classifier`` (``CLASSIFIERS``)
    gives on ``recipe``'s frozen features of ``loaded``, trained on the sentences the fine-tuning evaluation
    trains on (the same seeded split)."""
    if classifier not in CLASSIFIERS:
        raise ValueError(f"no feature classifier {classifier!r}; there are {', '.join(CLASSIFIERS)}")
    train, held_out = split_held_out(read_tagged_file(data), held_out_fraction, seed)
    if not held_out:
        raise ValueError(f"{data}: no sentence is held out to measure the features on")

    def gather(part: Sequence[TaggedSentence]) -> tuple[list[np.ndarray], list[tuple[str, ...]]]:
        found = sentence_features(loaded, _as_sentences(part))
        if not found.sentences:
            raise ValueError(f"{data}: the model can read none of these sentences")
        weighed = classifier == "bilstm" and RECIPES[recipe][2] == "sum"           # the BiLSTM learns the weights
        return ([layers_to_mix(v, recipe) if weighed else combine(v, recipe) for v in found.vectors],
                [tuple(s.upos) for s in found.sentences])

    train_x, train_y = gather(train)                         # one (W, F) array and W tags per sentence
    test_x, test_y = gather(held_out)
    gold = [list(tags) for tags in test_y]
    if classifier == "bilstm":
        return gold, bilstm_predict(train_x, train_y, test_x, TaggerSettings(hidden=loaded.config.hidden_size,
                                                                             seed=seed))
    words = probe_predict(np.concatenate(train_x), np.array([t for tags in train_y for t in tags]),
                          np.concatenate(test_x)).tolist()
    cuts = np.cumsum([0, *(len(tags) for tags in gold)])
    return gold, [[str(t) for t in words[a:b]] for a, b in zip(cuts[:-1], cuts[1:])]


def frozen_feature_accuracy(loaded: LoadedModel, recipe: str, data: Path, held_out_fraction: float,
                            seed: int, classifier: str = "logistic") -> float:
    """Held-out word accuracy of ``classifier`` on ``recipe``'s frozen features of ``loaded`` (a held-out tag
    never seen in training counts as wrong)."""
    return tag_accuracy(*frozen_feature_tags(loaded, recipe, data, held_out_fraction, seed, classifier))


def frozen_feature_f1(loaded: LoadedModel, recipe: str, data: Path, held_out_fraction: float, seed: int,
                      classifier: str = "logistic") -> float:
    """Held-out entity F1 (seqeval's micro average over BIO entities) of ``classifier`` on ``recipe``'s frozen
    features of ``loaded``: what fine-tuning on BIO tags logs as ``entity_f1``."""
    gold, guessed = frozen_feature_tags(loaded, recipe, data, held_out_fraction, seed, classifier)
    return entity_f1(*entity_counts(gold, guessed))[2]
