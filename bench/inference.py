"""Forward-pass speed: our BertModel vs transformers.BertModel, same weights, fp32 CPU.

Prints milliseconds per forward for both and the ratio ours/theirs; the last line
gives the ratios. Both run in the same process under inference_mode, alternating call
by call (the order flips every round), and each side's median is taken: a machine
whose speed drifts (shared VMs do) then slows both sides alike.
With ``--qkv`` it times instead our inference with the fused Q/K/V projection (one GEMM over
a cached [Wq; Wk; Wv], ``BertSelfAttention.fuse_qkv``) against three GEMMs, paired the same
way, also at 16 tokens (a typical explorer input); the last line gives the ratios fused/three.
Usage: python bench/inference.py [--rounds-scale X] [--threads T] [--qkv]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import BertModel, preset  # noqa: E402
from engine.model.encoder import BertSelfAttention, init_bert_weights  # noqa: E402
from bench.timing import paired_times  # noqa: E402

# (preset, batch, sequence length, timing rounds)
CASES = [("mini", 1, 128, 400), ("base", 8, 128, 30)]
QKV_CASES = CASES + [("mini", 1, 16, 1500)]


def reference_model(ours: BertModel):
    """transformers.BertModel (its default SDPA attention) with our weights."""
    import transformers

    hf_config = transformers.BertConfig(**{k: v for k, v in ours.config.to_dict().items()
                                           if k not in ("architectures", "model_type")})
    theirs = transformers.BertModel(hf_config).eval()
    missing, unexpected = theirs.load_state_dict(ours.state_dict(), strict=False)
    assert not [k for k in missing if "position_ids" not in k and "token_type_ids" not in k], missing
    assert not unexpected, unexpected
    return theirs


def paired_medians(ours, theirs, rounds: int) -> tuple[float, float]:
    """Median seconds per call of ``ours`` and ``theirs``, timed alternately after warm-up."""
    times_ours, times_theirs = paired_times(ours, theirs, rounds)
    return statistics.median(times_ours), statistics.median(times_theirs)


def three_gemm_copy(model: BertModel) -> BertModel:
    """A copy of ``model`` (same weights, eval mode) whose attention projects Q, K and V with three GEMMs."""
    other = BertModel(model.config)
    for module in other.modules():
        if isinstance(module, BertSelfAttention):
            module.fuse_qkv = False
    other.load_state_dict(model.state_dict())
    return other.eval()


def case(name: str, batch: int, seq_len: int) -> tuple[BertModel, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One case: our randomly initialised ``name`` model (no dropout) and a batch of ids, mask and types."""
    config = preset(name, vocab_size=30522, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertModel(config).eval()
    init_bert_weights(model, config.initializer_range)
    ids = torch.randint(5, config.vocab_size, (batch, seq_len))            # (B, S)
    return model, ids, torch.ones_like(ids), torch.zeros_like(ids)


def compare_qkv(rounds_scale: float) -> None:
    """Fused vs three Q/K/V GEMMs in our inference, paired; prints ratios fused/three."""
    ratios = []
    for name, batch, seq_len, rounds in QKV_CASES:
        fused, ids, mask, types = case(name, batch, seq_len)
        three = three_gemm_copy(fused)
        with torch.inference_mode():
            diff = (fused(ids, mask, types).last_hidden_state - three(ids, mask, types).last_hidden_state).abs().max()
            t_fused, t_three = paired_times(lambda: fused(ids, mask, types), lambda: three(ids, mask, types),
                                            max(5, int(rounds * rounds_scale)))
        ratio = statistics.median(t_fused) / statistics.median(t_three)
        per_round = statistics.median(a / b for a, b in zip(t_fused, t_three))
        ratios.append(ratio)
        print(f"{name:5s} b={batch} s={seq_len}: fused {statistics.median(t_fused)*1e3:8.2f} ms  three GEMMs "
              f"{statistics.median(t_three)*1e3:8.2f} ms  ratio {ratio:.3f}  (per-round median {per_round:.3f}, "
              f"max |diff| {diff:.1e})")
    print("ratio fused/three: " + ", ".join(f"{n} s={s} {r:.3f}" for (n, _, s, _), r in zip(QKV_CASES, ratios)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds-scale", type=float, default=1.0, help="multiply every case's rounds")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    parser.add_argument("--qkv", action="store_true", help="time the fused Q/K/V projection against three GEMMs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32 CPU")
    if args.qkv:
        compare_qkv(args.rounds_scale)
        return
    ratios = []
    for name, batch, seq_len, rounds in CASES:
        ours, ids, mask, types = case(name, batch, seq_len)
        theirs = reference_model(ours)
        with torch.inference_mode():
            diff = (ours(ids, mask, types).last_hidden_state
                    - theirs(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state).abs().max()
            t_ours, t_theirs = paired_medians(
                lambda: ours(ids, mask, types),
                lambda: theirs(input_ids=ids, attention_mask=mask, token_type_ids=types),
                max(5, int(rounds * args.rounds_scale)))
        ratio = t_ours / t_theirs
        ratios.append(ratio)
        print(f"{name:5s} b={batch} s={seq_len}: ours {t_ours*1e3:8.2f} ms  transformers "
              f"{t_theirs*1e3:8.2f} ms  ratio {ratio:.3f}  (max |diff| {diff:.1e})")
    print("ratio ours/transformers: " + ", ".join(f"{n} {r:.3f}" for (n, *_), r in zip(CASES, ratios)))


if __name__ == "__main__":
    main()
