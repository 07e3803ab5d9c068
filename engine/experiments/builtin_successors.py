"""The built-in experiments of BERT's successors, each with its source's numbers (as printed) beside the arms.

- ``roberta-table2``: Liu et al. 2019 (RoBERTa), §4.2, Table 2: the input format and the next-sentence loss
  (BERT's segment pairs with NSP; single-sentence pairs with NSP; full sentences packed across documents, no NSP;
  full sentences within a document, no NSP): the pretraining setting ``packing`` (``engine.data.packing``).
- ``electra-compute``: Clark et al. 2020 (ELECTRA), Table 1: replaced-token detection against the masked LM at
  the same training compute. The rtd arm also trains its generator, so it runs fewer steps: as many as spend what
  the masked-LM arm's steps spend (``engine.experiments.compute``, FLOPs from the models' shapes).
"""
from __future__ import annotations

from engine.experiments.compute import arm_config, equal_compute_steps
from engine.experiments.definitions import Arm, Claim, Experiment, Scale

ROBERTA_TABLE2_COLUMNS = ("SQuAD 1.1/2.0 F1", "MNLI-m", "SST-2", "RACE")


def _format(name: str, label: str, nsp: bool, paper: tuple[str, float, float, float], tokens_like: str = "") -> Arm:
    return Arm(name, label, training={} if nsp else {"nsp": False},
               settings={} if name == "segment-pair" else {"packing": name},
               paper=dict(zip(ROBERTA_TABLE2_COLUMNS, paper)), tokens_like=tokens_like)


ROBERTA_TABLE2 = Experiment(
    name="roberta-table2",
    title="Segment pairs with NSP against full sentences without (RoBERTa, Table 2)",
    source="Liu et al. 2019, RoBERTa, §4.2, Table 2 (BERT-base size, dev sets; the paper's reference BERT-base: "
           "88.5/76.3, 84.3, 92.8, 64.3)",
    factor="how the text is cut into inputs, and whether there is a next-sentence loss",
    arms=(_format("segment-pair", "SEGMENT-PAIR + NSP (BERT's)", True, ("90.4/78.7", 84.0, 92.9, 64.2)),
          _format("sentence-pair", "SENTENCE-PAIR + NSP (one sentence per segment)", True,
                  ("88.7/76.2", 82.9, 92.1, 63.0), tokens_like="segment-pair"),
          _format("full-sentences", "FULL-SENTENCES, no NSP (crossing documents)", False,
                  ("90.4/79.1", 84.7, 92.5, 64.8), tokens_like="segment-pair"),
          _format("doc-sentences", "DOC-SENTENCES, no NSP (within a document)", False,
                  ("90.6/79.7", 84.7, 92.7, 65.6), tokens_like="full-sentences")),
    paper_columns=ROBERTA_TABLE2_COLUMNS,
    claims=(Claim("Single sentences per segment hurt the downstream tasks (SQuAD 1.1 88.7 vs 90.4, MNLI-m 82.9 vs "
                  "84.0, RACE 63.0 vs 64.2)", "segment-pair", "sentence-pair", "pos_acc"),
            Claim("Dropping NSP and packing full sentences matches segment pairs with NSP (MNLI-m 84.7 vs 84.0, "
                  "SST-2 92.5 vs 92.9)", "full-sentences", "segment-pair", "sentiment_acc", "same"),
            Claim("Dropping NSP and packing full sentences matches or improves token-level tasks (SQuAD 2.0 79.1 vs "
                  "78.7)", "full-sentences", "segment-pair", "pos_acc", "not-worse"),
            Claim("Keeping each input within one document is slightly better than crossing documents (SQuAD 2.0 "
                  "79.7 vs 79.1, RACE 65.6 vs 64.8)", "doc-sentences", "full-sentences", "pos_acc")),
    revision=1,                       # 7 Dec 2026: the three shorter formats grow their batch
    note="Ours: the tiny preset on Shakespeare (a play is a document); POS tagging and sentiment in place of SQuAD, "
         "MNLI, SST-2 and RACE. As RoBERTa did, SENTENCE-PAIR's batch grows to SEGMENT-PAIR's tokens per step and "
         "DOC-SENTENCES' to FULL-SENTENCES'; FULL-SENTENCES' grows to SEGMENT-PAIR's too, since at our 64 tokens "
         "whole sentences leave about a fifth of each input empty (at RoBERTa's 512, half a sentence). One batch "
         "size per arm, from the mean input length of the first epoch (engine.experiments.token_budget; RoBERTa "
         "grew each short DOC-SENTENCES batch on the fly); the scale line gives the most any arm could see. The "
         "packed arms fill each input with whole sentences up to the length (no shorter random inputs).")

ELECTRA_COLUMNS = ("paper row", "GLUE dev score", "train FLOPs", "parameters")


def rtd_steps(scale: Scale) -> int:
    """The replaced-token arm's steps at ``scale``: the training FLOPs of the masked-LM arm's ``scale.steps``
    (generator and discriminator counted; ``engine.experiments.compute``)."""
    config = arm_config(scale.preset, scale.vocab_size)
    return equal_compute_steps(scale.steps, config, scale.batch_size, scale.seq_length)


ELECTRA_COMPUTE = Experiment(
    name="electra-compute",
    title="Replaced-token detection against the masked LM at equal compute (ELECTRA, Table 1)",
    source="Clark et al. 2020, ELECTRA, Table 1 (GLUE dev; BERT-Small and ELECTRA-Small trained with the same "
           "FLOPs)",
    factor="the pretraining objective at the same training FLOPs: BERT's masked LM, or ELECTRA's replaced-token "
           "detection (a small generator fills the masks, the model kept tells every token replaced or not)",
    arms=(Arm("mlm", "masked LM (BERT)", training={"nsp": False},
              paper=dict(zip(ELECTRA_COLUMNS, ("BERT-Small", 75.1, "1.4e18", "14M")))),
          Arm("rtd", "replaced-token detection (ELECTRA), fewer steps for the same FLOPs", training={"nsp": False},
              settings={"objective": "rtd"}, steps_for=rtd_steps,
              paper=dict(zip(ELECTRA_COLUMNS, ("ELECTRA-Small", 79.9, "1.4e18", "14M"))))),
    paper_columns=ELECTRA_COLUMNS,
    claims=(Claim("At the same compute, replaced-token detection fine-tunes better than the masked LM (GLUE 79.9 "
                  "vs 75.1)", "rtd", "mlm", "pos_acc"),
            Claim("... on a sentence task too (GLUE 79.9 vs 75.1)", "rtd", "mlm", "sentiment_acc")),
    note="Ours: the tiny preset (the rtd arm an ELECTRA discriminator of the same size with a generator of 1/4 its "
         "width, ELECTRA's λ = 50) on Shakespeare, without NSP; POS tagging and sentiment in place of GLUE. The "
         "rtd arm runs fewer steps than the scale's (about 9 in 10 at the tiny preset), so that both arms spend "
         "the same training FLOPs by engine.experiments.compute's estimate from the models' shapes. The "
         "masked-token accuracy is not defined for the rtd arm, whose model is a discriminator (—).")
