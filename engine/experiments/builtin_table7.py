"""``bert-table7``: Devlin et al. 2019 (BERT), Table 7: fine-tuning against the feature-based approach (CoNLL-2003
NER dev F1: fine-tuning 96.4; the frozen features of BERT-base fed to a two-layer BiLSTM: the embeddings 91.0,
second-to-last hidden 95.6, last hidden 94.9, weighted sum of the last four 95.9, the last four concatenated 96.1,
weighted sum of all 12 layers 95.5).

Every arm uses the same pretrained model (one run per seed, shared: ``runner.pretraining_owner``); they differ only
in how it is used on part-of-speech tagging and named entities (WNUT 17): fine-tuned whole, or a logistic regression
on frozen features of some of its layers (``engine.experiments.features``).
"""
from __future__ import annotations

from engine.experiments.definitions import Arm, Claim, Experiment

TABLE7_COLUMNS = ("CoNLL-2003 NER dev F1",)
LAYERS = 6                     # six encoder layers of the tiny width: "the last four" and "all" differ
MODEL = {"model_overrides": {"num_hidden_layers": LAYERS}}


def _use(name: str, label: str, features: str, f1: float) -> Arm:
    return Arm(name, label, job=MODEL, features=features, paper={TABLE7_COLUMNS[0]: f1})


BERT_TABLE7 = Experiment(
    name="bert-table7",
    title="Fine-tuning against frozen features (BERT, Table 7)",
    source="Devlin et al. 2019, BERT, Table 7 (BERT-base, CoNLL-2003 NER, dev F1)",
    factor="how the one pretrained model is used: fine-tuned whole, or its frozen features (which layers) fed to a "
           "classifier",
    arms=(_use("fine-tune", "fine-tuning", "", 96.4),
          _use("embeddings", "features: the embeddings", "embeddings", 91.0),
          _use("second-to-last", "features: second-to-last hidden", "second-to-last", 95.6),
          _use("last", "features: last hidden", "last", 94.9),
          _use("sum-last-4", "features: sum of the last four hidden", "sum-last-4", 95.9),
          _use("concat-last-4", "features: the last four hidden concatenated", "concat-last-4", 96.1),
          _use("sum-all", f"features: sum of all {LAYERS} layers", "sum-all", 95.5)),
    paper_columns=TABLE7_COLUMNS,
    extra_metrics=("ner_f1",),
    claims=(Claim("The last four layers concatenated come within a point of fine-tuning (96.1 vs 96.4): about as "
                  "good", "concat-last-4", "fine-tune", "pos_acc", "same"),
            Claim("The last four layers concatenated beat the embeddings alone (96.1 vs 91.0)", "concat-last-4",
                  "embeddings", "pos_acc")),
    note=f"Ours: one model per seed ({LAYERS} layers of the tiny width, MLM + NSP on Shakespeare) shared by every "
         "arm; part-of-speech tagging in place of NER for the claims. NER itself is measured too (entity F1 on "
         "2,000 WNUT 17 posts, each arm's way), but models of this size pretrained on Shakespeare tag every word "
         "of a post O there (F1 0), so no claim rests on it until the scale is raised (--preset, --steps). The "
         "feature arms fit a logistic regression (the Syntax tab's layer probe: standardised inputs, L2) on each "
         "word's vector, the mean of its pieces, in place of the paper's two-layer BiLSTM (which "
         "--feature-classifier bilstm uses, learning the summed layers' weights as the paper does; the regression "
         "weighs them equally); they are scored on the same held-out sentences as the fine-tuning (sentiment is "
         "fine-tuned only: —). The classifier is fitted to convergence while the fine-tuning has the experiments' short "
         "fixed budget (60 steps at the quick scale), and a word's vector from the embeddings alone already names "
         "the word, which goes a long way on POS tags: at this scale the comparison says more about those budgets "
         "than the paper's does. The masked-token accuracy is the shared model's, the same in every row.")
