"""Attribution speed: the Why tab's integrated gradients on a 32-token fill-mask input, against one plain
forward + backward pass of the same input measured in the same run.

Both run in one process, alternating call by call (``bench.timing.paired_times``); each side's median
is taken. The reference is plain torch: the model (the same private view the attribution uses) from the
word embeddings to the explained logit, and the gradient back to those embeddings. Also timed: gradient
× input (captum, one pass) and the first call of all (captum's import included), and, for a few step
counts, integrated gradients' time and convergence delta. The goal (issue 14): at most 2 s for the
default model and 32 tokens on 2 CPU cores. The last line gives the figures.
Usage: python bench/attribution.py [--model default] [--tokens 32] [--rounds 7] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.timing import paired_times  # noqa: E402
from engine.checkpoints.hf_format import load  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.probes.attribution.methods import DEFAULT_STEPS, attribute, make_target, pick, private_view  # noqa: E402

BUDGET_S = 2.0
WORDS = ("it is a large city on a river with many old houses and a long history of art and music , "
         "and people come from far away to see its streets , parks and churches .").split()


def text_of_length(loaded: LoadedModel, tokens: int) -> str:
    """"The capital of France is [MASK]." followed by words (a word that would overshoot gives way to ".")
    until the input is exactly ``tokens`` long, specials included."""
    def length(text: str) -> int:
        return len(loaded.tokenizer.encode(text, max_length=10_000).input_ids)

    text = "The capital of France is [MASK]."
    if length(text) > tokens:
        raise ValueError(f"{tokens} tokens are too few for {text!r}")
    words = iter(WORDS * 50)
    while length(text) < tokens:
        word = next(words)
        text += " " + (word if length(text + " " + word) <= tokens else ".")
    return text


def plain_pass(loaded: LoadedModel, text: str):
    """A function running one forward from the word embeddings to the explained logit and the gradient back."""
    target = make_target(loaded, "fill_mask", text)
    view = private_view(loaded.model)
    ids = torch.tensor([target.input_ids])                                          # (1, S)
    layer = view.bert.embeddings.word_embeddings
    kept: list[torch.Tensor] = []

    def track(module, inputs, output):                                              # the embeddings as a leaf
        kept.append(output.detach().requires_grad_())
        return kept[-1]

    def run() -> torch.Tensor:
        kept.clear()
        handle = layer.register_forward_hook(track)
        try:
            with torch.enable_grad():
                score = pick(target.class_scores(view, ids), target.index, "logit")    # (1,)
                return torch.autograd.grad(score.sum(), kept[0])[0]                 # (1, S, H)
        finally:
            handle.remove()
    return run


def measure(loaded: LoadedModel, tokens: int, rounds: int, steps: tuple[int, ...] = (16, 32, DEFAULT_STEPS, 100),
            warmup: int = 2) -> dict:
    """Seconds (medians) for integrated gradients at the default steps, gradient x input and the plain pass;
    the first call; and per step count, integrated gradients' seconds (median of 3) and convergence delta."""
    text = text_of_length(loaded, tokens)
    start = time.perf_counter()
    first = attribute(loaded, "fill_mask", text)                                     # imports captum
    first_s = time.perf_counter() - start
    plain = plain_pass(loaded, text)
    ig_times, plain_times = paired_times(lambda: attribute(loaded, "fill_mask", text), plain, rounds, warmup)
    gxi_times, _ = paired_times(lambda: attribute(loaded, "fill_mask", text, method="gradient_x_input"), plain,
                                rounds, warmup)
    by_steps = {}
    for n in steps:                                                                  # the median of 3 calls
        seconds = []
        for _ in range(3):
            begin = time.perf_counter()
            found = attribute(loaded, "fill_mask", text, n_steps=n)
            seconds.append(time.perf_counter() - begin)
        by_steps[n] = (statistics.median(seconds), found.convergence_delta, found.target_score - found.baseline_score)
    return {"text": text, "tokens": len(first.tokens), "target": first.target, "first_s": first_s,
            "ig_s": statistics.median(ig_times), "gxi_s": statistics.median(gxi_times),
            "plain_s": statistics.median(plain_times), "delta": first.convergence_delta,
            "difference": first.target_score - first.baseline_score, "by_steps": by_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load(args.model)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; model {loaded.source}")
    found = measure(loaded, args.tokens, args.rounds)
    print(f"input ({found['tokens']} tokens): {found['text']!r}; explaining {found['target']}")
    print(f"first call (captum's import included): {found['first_s']:.2f} s")
    for n, (seconds, delta, difference) in found["by_steps"].items():
        print(f"  integrated gradients, {n:3d} steps: {seconds:.2f} s, delta {delta:+.2e} "
              f"({abs(delta) / abs(difference):.1e} of the difference {difference:.3g})")
    ratio, gxi = found["ig_s"] / found["plain_s"], found["gxi_s"] / found["plain_s"]
    met = "met" if found["ig_s"] <= BUDGET_S else "NOT met"
    print(f"integrated gradients ({DEFAULT_STEPS} steps) {found['ig_s']:.3f} s = {ratio:.1f}x one plain forward+backward "
          f"({found['plain_s'] * 1000:.1f} ms); gradient x input {found['gxi_s'] * 1000:.1f} ms = {gxi:.1f}x; "
          f"budget {BUDGET_S:.0f} s {met}")


if __name__ == "__main__":
    main()
