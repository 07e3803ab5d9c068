"""Experiment budgets (issue 47): each built-in experiment's wall time at its ``--quick`` or default scale on this
machine, against its budget (``--quick`` within 20 min, the default within 2 h, on 2 CPU cores).

Each experiment runs as a user runs it: ``python -m engine.experiment <name> [--quick]`` in a fresh process, under a
fresh ``--root`` (nothing is read back from an earlier run), its table written beside the figures. Printed per
experiment: the wall time, the budget, the ratio wall / budget (under 1: within it), the exit code and the load
average at its start and end (a loaded machine is slower; say so with the figures).

Reference measured in the same run, first: the seconds of one pretraining step of the scale's preset at the
experiments' batch (16 x 64 tokens; forward, backward and AdamW on random ids, ``bench/pretraining_step.py``),
the unit every arm's pretraining is made of, so that a figure from another machine can be read in steps
(wall / step time) too.

Usage: python bench/experiment_budget.py [--quick] [--root DIR] [--out DIR] [--module M] [NAME ...]
(default: every built-in experiment; ``--module`` runs another command line of the same flags, as the tests do
with their tiny experiment)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUICK_BUDGET_S = 20 * 60
DEFAULT_BUDGET_S = 2 * 60 * 60
BATCH, SEQ_LEN = 16, 64                   # the experiments' Scale batch_size and seq_length


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def step_seconds(preset_name: str = "tiny", steps: int = 20, vocab_size: int = 4000) -> float:
    """Median seconds of one pretraining step of ``preset_name`` at the experiments' batch, after 3 warm-up steps."""
    import torch

    from bench.pretraining_step import forward_ours, make_batch, train_step_fn
    from engine import BertWithHeads
    from engine.model.config import preset

    torch.manual_seed(0)
    config = preset(preset_name, vocab_size=vocab_size)
    model = BertWithHeads(config, heads=("mlm", "nsp"))
    step = train_step_fn(model, forward_ours, make_batch(config, BATCH, SEQ_LEN))
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_one(name: str, quick: bool, root: Path, out: Path, module: str, extra: list[str]) -> dict:
    """Run experiment ``name`` in a fresh process; its wall time, exit code and the load around it."""
    command = [sys.executable, "-m", module, name, *(["--quick"] if quick else []), "--root", str(root), *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    load_before = load_average()
    start = time.monotonic()
    with open(out / f"{name}.md", "w", encoding="utf-8") as table, open(out / f"{name}.log", "w") as log:
        code = subprocess.run(command, cwd=ROOT, env=env, stdout=table, stderr=log).returncode
    return {"name": name, "wall_s": time.monotonic() - start, "code": code, "load_before": load_before,
            "load_after": load_average()}


def minutes(seconds: float) -> str:
    """``seconds`` as "12 min 05 s"."""
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to time (default: every built-in one)")
    parser.add_argument("--quick", action="store_true", help="time the --quick scale (budget 20 min)")
    parser.add_argument("--root", type=Path, help="where the runs go (default: a fresh temporary folder)")
    parser.add_argument("--out", type=Path, default=Path("bench-experiments"), help="where tables and logs go")
    parser.add_argument("--module", default="engine.experiment", help="the command line to run (python -m M)")
    parser.add_argument("--preset", default="tiny", help="the preset of the reference step")
    args, extra = parser.parse_known_args(argv)           # anything else goes to the experiment (--steps ...)
    if not args.names:
        from engine.experiments.builtin import EXPERIMENTS
        args.names = list(EXPERIMENTS)
    args.out.mkdir(parents=True, exist_ok=True)
    budget = QUICK_BUDGET_S if args.quick else DEFAULT_BUDGET_S
    step = step_seconds(args.preset)
    print(f"reference: one {args.preset} pretraining step of {BATCH} x {SEQ_LEN} tokens: {1000 * step:.1f} ms "
          f"(load {load_average()})", flush=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="experiment-budget-") as scratch:
        root = args.root or Path(scratch)
        for name in args.names:
            found = run_one(name, args.quick, root, args.out, args.module, extra)
            failed += found["code"] != 0
            print(f"{name} ({'quick' if args.quick else 'default'}): {minutes(found['wall_s'])}, budget "
                  f"{minutes(budget)}, ratio {found['wall_s'] / budget:.2f}, {found['wall_s'] / step:,.0f} reference "
                  f"steps, exit {found['code']}, load {found['load_before']} -> {found['load_after']}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
