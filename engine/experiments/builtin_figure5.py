"""``bert-figure5``: Devlin et al. 2019 (BERT), Figure 5: the masked LM against a left-to-right LM over the
pretraining steps, each checkpoint measured downstream ("the MLM model converges marginally slower than LTR but
outperforms it in absolute accuracy almost immediately").

The figure is a plot (MNLI dev accuracy of BERT-base at 200k to 1M steps), so its numbers are not printed; the
paper's columns give what the figure shows in words and Table 5's final MNLI-m of the same two objectives (both
without NSP). Ours: each arm's checkpoints at a quarter, half, three quarters and all of the steps, each fine-tuned
on POS tagging the same way as the final model (``Experiment.measure_at``; ``engine.experiments.series``).
"""
from __future__ import annotations

from engine.experiments.definitions import Arm, Claim, Experiment

FIGURE5_COLUMNS = ("Figure 5: MNLI dev over 1M steps", "Table 5: MNLI-m, final (no NSP)")
QUARTERS = (0.25, 0.5, 0.75)

BERT_FIGURE5 = Experiment(
    name="bert-figure5",
    title="Masked LM against left-to-right over the pretraining steps (BERT, Figure 5)",
    source="Devlin et al. 2019, BERT, Figure 5 (BERT-base, MNLI dev accuracy after 200k to 1M steps)",
    factor="the pre-training objective (masked LM or left-to-right LM, both without NSP), measured at each "
           "quarter of the pretraining steps",
    arms=(Arm("mlm", "masked LM (BERT's), no NSP", training={"nsp": False},
              paper=dict(zip(FIGURE5_COLUMNS, ("ahead of LTR almost from the start; still rising at 1M steps "
                                               "(about +1.0 from 500k to 1M)", 83.9)))),
          Arm("ltr", "left-to-right LM, no NSP", training={"nsp": False}, settings={"objective": "clm"},
              paper=dict(zip(FIGURE5_COLUMNS, ("converges marginally faster, below MLM throughout", 82.1))))),
    paper_columns=FIGURE5_COLUMNS,
    claims=(Claim("MLM outperforms LTR almost immediately: it is ahead already at the first checkpoint (a quarter "
                  "of the steps)", "mlm", "ltr", "pos_acc", at=(0.25,)),
            Claim("MLM is ahead at the end of pretraining (MNLI-m 83.9 vs 82.1 in Table 5)", "mlm", "ltr",
                  "pos_acc"),
            Claim("MLM converges marginally slower: it gains more than LTR between the first checkpoint and the "
                  "last", "mlm", "ltr", "pos_acc", at=(0.25, 1.0))),
    measure_at=QUARTERS,
    measure_metrics=("pos_acc",),
    note="Ours: the tiny preset on Shakespeare; each checkpoint fine-tuned on our POS tagging (not MNLI) with the "
         "same fixed settings as the final model, so the series shows what each objective has learnt by then. The "
         "paper kept the left-to-right model left-only when fine-tuning; ours fine-tunes it with full attention. "
         "The masked-token accuracy is not defined for the left-to-right arm (—).")
