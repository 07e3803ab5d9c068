"""The GPU session's stages in order, under one time budget (docs/design/gpu-session.md).

1. environment: GPU, torch/CUDA versions, bf16;
2. correctness (CUDA only, <= 90 s): our model against transformers on the device, every head, fp32 and bf16
   autocast, exact resume, the probes, two worker cycles (``scripts.gpu.correctness``);
3. throughput (CUDA only, <= 90 s): ``bench/train_throughput.py`` mini and base, ratio and MFU;
4. training: the default model further with ``qa_mlm`` on the carried pack, keeping the best held-out model;
5. export: that model in fp16, HF layout, in parts of < 16 MiB with a SHA-256 manifest.

Everything lands in ``--out`` (``$OUT`` on the device): ``session.log``, ``summary.json``, ``metrics.jsonl``,
``manifest.json`` and ``model.tar.part-NN``: at most the 8 files a device call brings back. A stage that fails
is recorded and the next one runs; the export runs whatever happened before it, when there is a model.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Sequence

from scripts.gpu import environment, parts, throughput
from scripts.gpu.budget import FAILED, PASSED, SKIPPED, Session, StageResult
from scripts.gpu.training import Recipe

ROOT = Path(__file__).resolve().parents[2]
METRICS_FILE = "metrics.jsonl"
MAX_FILES_BACK = 8
LIMITS = {"environment": 15.0, "correctness": 90.0, "throughput": 90.0}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_session.py", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--out", type=Path, default=None, help="where the results go (default: $OUT)")
    add("--budget-s", type=float, default=540.0, help="the whole session, seconds (default 540)")
    add("--pack", type=Path, default=ROOT / ".gpu" / "pack", help="the data pack (default .gpu/pack)")
    add("--skip", default="", help="comma-separated stages not to run: correctness, throughput, training")
    add("--keep-work", action="store_true", help="keep the work folder (the run, the unpacked data)")
    recipe = Recipe()
    for f in fields(Recipe):
        add("--" + f.name.replace("_", "-"), type=type(getattr(recipe, f.name)), default=getattr(recipe, f.name),
            help=f"training: {f.name} (default {getattr(recipe, f.name)})")
    return parser


def correctness_stage(deadline: float, cuda: bool, log: Any) -> StageResult:
    """The CUDA correctness subset; skipped without CUDA."""
    if not cuda:
        return StageResult(SKIPPED, "no CUDA")
    from scripts.gpu.correctness import run_checks

    checks = run_checks("cuda", deadline, log)
    counts = {s: sum(c.status == s for c in checks) for s in (PASSED, FAILED, SKIPPED)}
    failed = [f"{c.name}: {c.detail}" for c in checks if c.status == FAILED]
    status = FAILED if failed or not counts[PASSED] else PASSED
    detail = f"{counts[PASSED]} passed, {counts[FAILED]} failed, {counts[SKIPPED]} skipped" + (
        f"; {' | '.join(failed)}" if failed else "")
    return StageResult(status, detail, {"checks": [vars(c) for c in checks]})


class Run:
    """The session's state between stages: the work folder and, after training, the model to export."""

    def __init__(self, args: argparse.Namespace, session: Session) -> None:
        self.args, self.session = args, session
        self.work = Path(tempfile.mkdtemp(prefix="gpu-session-"))
        self.trainer: Any = None

    def recipe(self) -> Recipe:
        return Recipe(**{f.name: getattr(self.args, f.name) for f in fields(Recipe)})

    def training_stage(self, deadline: float) -> StageResult:
        from engine.checkpoints.hf_format import load
        from scripts.gpu import pack, training

        recipe = self.recipe()
        tokenizer = load(recipe.init_from).require_tokenizer("so the pack cannot be decoded")
        data = pack.unpack(self.args.pack, self.work / "data", tokenizer)
        self.session.log(f"unpacked: {data.info['wiki']['documents']:,} articles ({data.info['wiki']['tokens']:,} "
                         f"tokens), {data.info['squad']['questions']:,} SQuAD questions")
        trainer, keeper, summary = training.train(recipe, data, self.work, self.session.out / METRICS_FILE,
                                                  deadline, self.session.log)
        if trainer is None:
            return StageResult(FAILED, summary["stopped"], summary)
        self.trainer = trainer
        from scripts.gpu.heldout import describe

        detail = (f"{summary['steps']} steps ({summary['steps_per_s']} /s), stopped: {summary['stopped']}; "
                  f"start {describe(summary['start'])}; best (step {summary['best']['step']}) "
                  f"{describe(summary['best'])}")
        return StageResult(PASSED, detail, summary)

    def export_stage(self, deadline: float) -> StageResult:
        if self.trainer is None:
            return StageResult(SKIPPED, "no trained model")
        manifest = parts.export_parts(self.trainer.model, self.trainer.tokenizer, self.session.out)
        size = manifest["archive"]["bytes"]
        return StageResult(PASSED, f"{len(manifest['parts'])} parts, {size / 2**20:.1f} MiB, heads "
                                   f"{', '.join(manifest['heads'])}", manifest)


def main(argv: Sequence[str] | None = None, started: float | None = None) -> int:
    """Run the session; 0 when the export produced a model, 1 otherwise (the summary says why)."""
    started = time.monotonic() if started is None else started
    parser = build_parser()
    args = parser.parse_args(argv)
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    if out is None:
        parser.error("give --out (or set $OUT)")
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    session = Session(out, args.budget_s, started, settings={k: str(v) for k, v in vars(args).items()})
    reserve = min(30.0, max(6.0, 0.08 * args.budget_s))            # the export's share, kept to the end
    floor = reserve + 0.3 * args.budget_s                          # what the checks leave to training
    run = Run(args, session)
    try:
        env = session.stage("environment", environment.stage, LIMITS["environment"], reserve)
        cuda = bool(env.data.get("cuda_available")) and (args.device == "auto" or args.device.startswith("cuda"))
        for name, runner in (("correctness", lambda d: correctness_stage(d, cuda, session.log)),
                             ("throughput", lambda d: throughput.stage(d, cuda))):
            if name in skip:
                session.summary["stages"][name] = {"status": SKIPPED, "detail": "--skip"}
                continue
            session.stage(name, runner, LIMITS[name], floor)
        if "training" not in skip:
            session.stage("training", run.training_stage, args.budget_s, reserve)
        session.stage("export", run.export_stage, max(reserve, 30.0), -reserve)   # runs even when late
    finally:
        files = sorted(p.name for p in out.iterdir() if p.is_file())
        session.summary["files"] = files
        if len(files) > MAX_FILES_BACK:
            session.log(f"warning: {len(files)} files in {out}; a device call brings back {MAX_FILES_BACK}")
        session.log(f"done in {session.elapsed():.0f} s of {args.budget_s:.0f}: {', '.join(files)}")
        session.close()
        if not args.keep_work:
            shutil.rmtree(run.work, ignore_errors=True)
    return 0 if session.summary["stages"].get("export", {}).get("status") == PASSED else 1
