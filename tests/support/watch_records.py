"""Metrics records of a small pretraining run, as the run browser's tests (``tests/explorer/runs/watch/``) write
them into ``metrics.jsonl`` and draw them."""
from __future__ import annotations

TRAIN = [{"kind": "train", "step": s, "mlm_loss": 6.0 - s, "nsp_loss": 0.7, "mlm_acc": 0.1 * s, "nsp_acc": 0.5,
          "loss": 6.7 - s, "lr": 1e-3, "grad_norm": 2.0, "tokens_per_s": 1000.0, "elapsed": 0.5 * s}
         for s in (1, 2, 3)]
EVAL = {"kind": "eval", "step": 3, "eval_mlm_loss": 3.1, "eval_mlm_acc": 0.3, "eval_nsp_loss": 0.69,
        "eval_nsp_acc": 0.5}
LOSSES = [5.0, 4.0, 4.5, 3.0, 3.5, 2.0]


def records(scale: float = 1.0, lrs: list[float] | None = None) -> list[dict]:
    """Six train records (MLM losses ``LOSSES`` times ``scale``, learning rates ``lrs``) and an eval record."""
    lrs = lrs or [1e-3] * len(LOSSES)
    train = [{"kind": "train", "step": s, "mlm_loss": scale * loss, "nsp_loss": 0.7, "mlm_acc": 0.1 * s,
              "nsp_acc": 0.5, "loss": scale * loss + 0.7, "lr": lr, "grad_norm": 2.0}
             for s, (loss, lr) in enumerate(zip(LOSSES, lrs), start=1)]
    return [*train, {"kind": "eval", "step": 6, "eval_mlm_loss": 3.1 * scale, "eval_mlm_acc": 0.3,
                     "eval_nsp_loss": 0.69, "eval_nsp_acc": 0.5}]
