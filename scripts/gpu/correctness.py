"""The CUDA correctness subset of the GPU session: our engine on the device, checked in well under 90 s.

Each check is a function of the device that builds its own small random models (``correctness_models``) and
returns an :class:`Outcome`; :func:`run_checks` runs them in order, times them, logs one line each, turns an
exception into a failure and skips what the deadline leaves no time to start. The checks:

* ``fp32_parity:<head>``, one per head in ``HEADS``: our model with that head alone against
  ``transformers.<spec.hf_class>`` loaded from our Hugging Face export, fp32 with TF32 off, a padded batch
  (segment B, (B, C, S) for multiple choice); every ``*logits`` tensor and the last hidden state, max |diff| <= 1e-4;
* ``bf16_autocast``: the same pairs under ``torch.autocast(device, bfloat16)``, each side against its own fp32
  result and against the other, relative to max |theirs fp32|, <= 2e-2 (see :func:`check_bf16_autocast`);
* ``exact_resume``: a tiny pretraining job (precision auto: bf16 on CUDA) 2N steps straight vs N, checkpoint,
  resume and N more: the resumed losses equal the straight run's within 1e-6 (bit-exact on the CPU);
* ``probes``: fill-mask, QA, attention, embeddings and next-sentence on the device vs the CPU, within 1e-3;
* ``worker_cycles``: twice start, running, pause (the step holds 0.3 s), resume, a step more, stop, each
  state within 15 s.

Nothing here needs gradio, plotly, datasets, captum or seqeval; the captum attribution probe is not run.
"""
from __future__ import annotations

import contextlib
import functools
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.checkpoints.hf_format import load_directory, save
from engine.model.loaded_model import LoadedModel
from engine.model.config import BertConfig
from engine.model.head_specs import HEADS
from engine.model.heads import BertWithHeads
from engine.probes.inference import answer_details, attention, embeddings, fill_mask_details, next_sentence
from engine.training.jobs.setup import prepare_job
from engine.training.tasks.job_spec import JobSpec
from engine.training.loop.trainer import Trainer
from engine.training.worker.run_state import RunState
from engine.training.worker.shared_state import WorkerStatus
from engine.training.worker.training_worker import TrainingWorker
from scripts.gpu.correctness_models import (
    PARITY_CONFIG, TINY_MODEL, head_inputs, head_pair, max_abs_diff, paired_outputs, pretraining_spec,
    randomize_, relative_diff, tiny_tokenizer, write_corpus,
)

PARITY_BOUND = 1e-4        # fp32, ours vs transformers: max |diff| (measured 0 to 6e-8 on the CPU)
BF16_BOUND = 2e-2          # bf16 autocast: max |diff| / max |theirs fp32| (measured <= 7e-3 on the CPU)
RESUME_BOUND = 1e-6        # resumed vs straight per-step loss (0 on the CPU)
PROBE_BOUND = 1e-3         # device vs CPU probabilities, scores and activations, absolute
STATE_WAIT_S = 15.0        # the worker reaches each state within this
PAUSE_HOLD_S = 0.3         # a paused run's step does not move for this long
RESUME_STEPS = 4           # N: the straight run takes 2N steps, the resumed one N then N
ATTENTION = "sdpa"         # transformers' default; our fast path is SDPA too


@dataclass
class CheckResult:
    """One check's verdict, as the session log and its summary show it."""

    name: str
    status: str                 # "passed" | "failed" | "skipped"
    detail: str                 # one line a person reads: the numbers and the bound, or why skipped/failed
    seconds: float
    values: dict[str, float]    # the measured numbers and their bounds, e.g. {"max_abs_diff": 3e-6, "bound": 1e-4}


@dataclass
class Outcome:
    """What a check function returns: whether it passed, its line and its numbers."""

    passed: bool
    detail: str
    values: dict[str, float]


Check = Callable[[torch.device], Outcome]


def run_checks(device: str, deadline: float, log: Callable[[str], None] = print) -> list[CheckResult]:
    """Run every check on ``device`` ("cuda", "cuda:0" or "cpu"); ``deadline`` is a ``time.monotonic()`` value:
    a check not started before it is reported "skipped: out of time". A check that raises is "failed" with the
    exception's type and message in detail (never propagates). Log one line per check as it ends."""
    where = torch.device(device)
    results = []
    for name, check in planned_checks():
        result = _run_one(name, check, where, deadline)
        log(f"{result.status:7} {result.name} ({result.seconds:.1f} s): {result.detail}")
        results.append(result)
    return results


def planned_checks() -> list[tuple[str, Check]]:
    """(name, function) of every check in order: one fp32 parity check per registered head, then the rest.
    The functions are looked up when called, so a new head (or a replaced function) is covered."""
    parity = [(f"fp32_parity:{head}", functools.partial(check_head_parity, head=head)) for head in HEADS]
    return parity + [("bf16_autocast", check_bf16_autocast), ("exact_resume", check_exact_resume),
                     ("probes", check_probes), ("worker_cycles", check_worker_cycles)]


def _run_one(name: str, check: Check, device: torch.device, deadline: float) -> CheckResult:
    start = time.monotonic()
    if start >= deadline:
        return CheckResult(name, "skipped", "skipped: out of time (the deadline passed before it started)", 0.0, {})
    try:
        outcome = check(device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)                   # an asynchronous CUDA error belongs to this check
    except Exception as exc:                                 # noqa: BLE001 - a check never stops the session
        message = " ".join(str(exc).split()) or "(no message)"
        return CheckResult(name, "failed", f"{type(exc).__name__}: {message}", time.monotonic() - start, {})
    status = "passed" if outcome.passed else "failed"
    return CheckResult(name, status, outcome.detail, time.monotonic() - start, outcome.values)


@contextlib.contextmanager
def ieee_fp32(device: torch.device) -> Iterator[str]:
    """fp32 matmuls in full precision on CUDA while inside (TF32 off: the session may have turned it on for
    speed, and TF32's 10-bit mantissa alone would break 1e-4); yields what was set, restored on leaving."""
    if device.type != "cuda":
        yield "fp32"
        return
    matmul = torch.backends.cuda.matmul
    name = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"   # torch >= 2.9: the new API
    before = getattr(matmul, name)
    setattr(matmul, name, "ieee" if name == "fp32_precision" else False)
    try:
        yield f"fp32, TF32 off (was {name}={before})"
    finally:
        setattr(matmul, name, before)


def check_head_parity(device: torch.device, head: str) -> Outcome:
    """Our model with ``head`` alone vs ``transformers.<hf_class>`` loaded from our export: fp32 max |diff| of
    each ``*logits`` tensor and the last hidden state <= ``PARITY_BOUND``."""
    spec = HEADS[head]
    with tempfile.TemporaryDirectory(prefix="correctness-") as tmp, ieee_fp32(device) as precision:
        ours, theirs = head_pair(spec, device, Path(tmp) / "model", ATTENTION)
        inputs = head_inputs(spec, PARITY_CONFIG, device)
        pairs = paired_outputs(spec, ours, theirs, inputs)
    diffs = {name: max_abs_diff(a, b) for name, (a, b) in pairs.items()}
    worst = max(diffs.values())
    values = {**{f"max_abs_diff.{name}": d for name, d in diffs.items()}, "max_abs_diff": worst,
              "bound": PARITY_BOUND}
    shape = "x".join(map(str, inputs["input_ids"].shape))
    each = ", ".join(f"{name} {d:.2g}" for name, d in diffs.items())
    detail = (f"vs transformers.{spec.hf_class} from our export, {precision}, attention {ATTENTION} both sides, "
              f"padded {shape} batch: max |diff| {worst:.2g} ({each}) <= {PARITY_BOUND:g}")
    return Outcome(worst <= PARITY_BOUND, detail, values)


def check_bf16_autocast(device: torch.device) -> Outcome:
    """Every head's pair of ``check_head_parity`` with both forwards under ``torch.autocast(device, bfloat16)``:
    ours bf16 vs ours fp32, theirs bf16 vs theirs fp32, and ours bf16 vs theirs bf16, each as
    max |a - b| / max |theirs fp32| over the logits and the last hidden state, must be <= ``BF16_BOUND`` = 2e-2.

    Why 2e-2: bf16 keeps 8 significant bits (unit roundoff 2**-8 = 3.9e-3); autocast rounds the inputs of every
    matmul, and over three layers (LayerNorm and softmax stay fp32) the CPU measures at most 7e-3, so 2e-2 leaves
    a margin of about 3 while a real fault (a weight, bias or mask lost under autocast) is off by O(1). The check
    also fails when autocast did not act (our logits not bfloat16)."""
    worst = {"ours_bf16_vs_fp32": 0.0, "theirs_bf16_vs_fp32": 0.0, "ours_vs_theirs_bf16": 0.0}
    per_head: dict[str, float] = {}
    cast = True
    for head, spec in HEADS.items():
        with tempfile.TemporaryDirectory(prefix="correctness-") as tmp, ieee_fp32(device):
            ours, theirs = head_pair(spec, device, Path(tmp) / "model", ATTENTION)
            inputs = head_inputs(spec, PARITY_CONFIG, device)
            fp32 = paired_outputs(spec, ours, theirs, inputs)
            with torch.autocast(device.type, torch.bfloat16):
                bf16 = paired_outputs(spec, ours, theirs, inputs)
        cast &= all(a.dtype == torch.bfloat16 for name, (a, _) in bf16.items() if name.endswith("logits"))
        for name, (ours_fp32, theirs_fp32) in fp32.items():
            ours_bf16, theirs_bf16 = bf16[name]
            found = {"ours_bf16_vs_fp32": relative_diff(ours_bf16, ours_fp32, theirs_fp32),
                     "theirs_bf16_vs_fp32": relative_diff(theirs_bf16, theirs_fp32, theirs_fp32),
                     "ours_vs_theirs_bf16": relative_diff(ours_bf16, theirs_bf16, theirs_fp32)}
            worst = {k: max(v, found[k]) for k, v in worst.items()}
            per_head[f"{head}.worst"] = max(per_head.get(f"{head}.worst", 0.0), *found.values())
    top = max(per_head, key=per_head.get).split(".")[0]
    values = {**worst, **per_head, "autocast_bf16": float(cast), "bound": BF16_BOUND}
    detail = (f"{len(HEADS)} heads' logits and last hidden states under bf16 autocast, max |a - b| / max |theirs "
              f"fp32|: ours bf16 vs fp32 {worst['ours_bf16_vs_fp32']:.2g}, theirs bf16 vs fp32 "
              f"{worst['theirs_bf16_vs_fp32']:.2g}, ours vs theirs bf16 {worst['ours_vs_theirs_bf16']:.2g} "
              f"<= {BF16_BOUND:g} (worst head {top})" + ("" if cast else "; autocast did NOT produce bf16 logits"))
    return Outcome(cast and max(worst.values()) <= BF16_BOUND, detail, values)


def _train_losses(trainer: Trainer, num_steps: int | None = None) -> dict[int, float]:
    """Train (``num_steps`` more, or to the total) and return the loss of every step taken."""
    losses: dict[int, float] = {}

    def collect(kind: str, record: dict) -> None:
        if kind == "train":
            losses[int(record["step"])] = float(record["loss"])
    trainer.train(num_steps=num_steps, callback=collect)
    return losses


def check_exact_resume(device: torch.device) -> Outcome:
    """A tiny pretraining job 2N steps straight, and N steps, checkpoint, resume (``prepare_job`` with
    ``resume_from``) and N more: each resumed step's loss equals the straight run's within ``RESUME_BOUND``."""
    n = RESUME_STEPS
    with tempfile.TemporaryDirectory(prefix="correctness-") as tmp:
        root = Path(tmp)
        tiny_tokenizer().save(root / "tokenizer")
        spec = pretraining_spec(device, root / "straight", root / "tokenizer", write_corpus(root),
                                total_steps=2 * n, checkpoint_every=n)
        straight_job = prepare_job(spec)
        straight = _train_losses(straight_job.trainer)
        first = _train_losses(prepare_job(spec.replace(run_dir=str(root / "run"))).trainer, num_steps=n)
        resumed_job = prepare_job(JobSpec({"total_steps": 2 * n}, resume_from=str(root / "run")))
        if resumed_job.trainer.global_step != n:
            raise ValueError(f"the resumed run starts at step {resumed_job.trainer.global_step}, not {n}")
        resumed = _train_losses(resumed_job.trainer)
        weights = max(max_abs_diff(a, b) for a, b in zip(resumed_job.trainer.model.state_dict().values(),
                                                         straight_job.trainer.model.state_dict().values()))
        precision = resumed_job.trainer.autocast_dtype
    steps = list(range(n + 1, 2 * n + 1))
    if sorted(resumed) != steps:
        raise ValueError(f"the resumed run took steps {sorted(resumed)}, not {steps}")
    loss_diff = max(abs(resumed[s] - straight[s]) for s in steps)
    rerun_diff = max(abs(first[s] - straight[s]) for s in range(1, n + 1))
    exact = all(resumed[s] == straight[s] for s in steps)
    mode = "bf16 autocast" if precision is not None else "fp32"
    values = {"max_abs_loss_diff": loss_diff, "bit_exact": float(exact), "rerun_loss_diff": rerun_diff,
              "max_abs_weight_diff": weights, "bound": RESUME_BOUND}
    detail = (f"pretraining {2 * n} steps straight vs {n} + checkpoint + resume + {n} ({mode}): resumed losses "
              f"max |diff| {loss_diff:.2g} <= {RESUME_BOUND:g}, {'bit-exact' if exact else 'NOT bit-exact'}; final "
              f"weights max |diff| {weights:.2g}; two fresh runs' first {n} losses differ by {rerun_diff:.2g}")
    return Outcome(loss_diff <= RESUME_BOUND, detail, values)


PROBE_TEXT = ("the small bird sang in the big tree.", "they played with the blue car.")
FILL_TEXT = ("the cat [MASK] on the mat.", "a bird [MASK] in the tree.")
QA_TEXT = ("where did the dog run?", "the cat sat on the mat and the dog ran to the house with a red car.")
TIE = 1e-5                 # top-k neighbours closer than this may swap between devices


def _probe(loaded: LoadedModel) -> tuple[dict[str, object], dict[str, tuple[list, list[float]]]]:
    """The tabs' probes on ``loaded``: (numbers by name, (ranked choices, their scores) by name)."""
    fill = fill_mask_details(loaded, FILL_TEXT[0], top_k=5, text_pair=FILL_TEXT[1])
    qa = answer_details(loaded, *QA_TEXT, top_k=3)
    att = attention(loaded, *PROBE_TEXT)
    emb = embeddings(loaded, *PROBE_TEXT, neighbours=5)
    nsp = next_sentence(loaded, *PROBE_TEXT)
    numbers = {"fill_mask.scores": [m.scores for m in fill.masks], "fill_mask.entropy": [m.entropy for m in fill.masks],
               "answer.scores": [s["score"] for s in qa.answers], "answer.null_score": qa.null_score,
               "attention.probabilities": att.attentions, "embeddings.output": emb.output,
               "embeddings.contextual": emb.contextual, "embeddings.neighbour_scores": emb.neighbour_scores,
               "next_sentence.probabilities": nsp.probabilities, "next_sentence.cls_attention": nsp.cls_attention}
    ranked = {f"fill_mask[{m.index}]": (m.token_ids, m.scores) for m in fill.masks}
    ranked["answer"] = ([(s["start"], s["end"]) for s in qa.answers], [s["score"] for s in qa.answers])
    return numbers, ranked


def _ranking_differs(here: list, there: list, scores: list[float]) -> bool:
    """Whether two best-first lists differ beyond near-ties (adjacent ``scores`` within ``TIE`` may swap)."""
    gaps = [abs(a - b) for a, b in zip(scores, scores[1:])]
    return here != there and (len(here) != len(there) or min(gaps, default=1.0) > TIE)


def check_probes(device: torch.device) -> Outcome:
    """A tiny saved model (MLM, NSP and QA heads, a tokenizer) loaded with ``load_directory`` on ``device`` and
    on the CPU: fill-mask, QA, attention, embeddings and next-sentence agree within ``PROBE_BOUND`` and rank the
    same top tokens and spans. Attribution (captum, not on the GPU machine) is not run."""
    tokenizer = tiny_tokenizer()
    with tempfile.TemporaryDirectory(prefix="correctness-") as tmp:
        torch.manual_seed(5)
        model = BertWithHeads(BertConfig(vocab_size=tokenizer.vocab_size, **TINY_MODEL), ("mlm", "nsp", "qa"))
        save(randomize_(model, 5, scale=0.3), tokenizer, Path(tmp) / "model")
        with ieee_fp32(device):
            here, here_ranked = _probe(load_directory(Path(tmp) / "model", device))
            cpu, cpu_ranked = _probe(load_directory(Path(tmp) / "model", "cpu"))
    diffs = {name: max_abs_diff(torch.as_tensor(here[name], dtype=torch.float64),
                                torch.as_tensor(cpu[name], dtype=torch.float64)) for name in cpu}
    differ = [name for name, (ranked, scores) in cpu_ranked.items()
              if _ranking_differs(here_ranked[name][0], ranked, scores)]
    worst = max(diffs, key=diffs.get)
    values = {**{f"max_abs_diff.{name}": d for name, d in diffs.items()}, "max_abs_diff": diffs[worst],
              "rankings_differ": float(len(differ)), "bound": PROBE_BOUND}
    detail = (f"fill-mask, QA, attention, embeddings, next-sentence on {device} vs cpu: max |diff| "
              f"{diffs[worst]:.2g} ({worst}) <= {PROBE_BOUND:g}; top tokens and spans "
              + (f"DIFFER in {', '.join(differ)}" if differ else "the same")
              + "; attribution not run (captum is not on the GPU machine)")
    return Outcome(diffs[worst] <= PROBE_BOUND and not differ, detail, values)


def _wait(worker: TrainingWorker, reached: Callable[[WorkerStatus], bool], what: str) -> float:
    """Seconds until ``reached(worker.status())``; ``TimeoutError`` after ``STATE_WAIT_S``, ``RuntimeError`` when
    the run ends first."""
    start = time.monotonic()
    while True:
        status = worker.status()
        if reached(status):
            return time.monotonic() - start
        if status.state.is_terminal:
            raise RuntimeError(f"the run ended {status.state} while waiting for {what}: "
                               f"{status.error or status.message}")
        if time.monotonic() - start > STATE_WAIT_S:
            raise TimeoutError(f"not {what} within {STATE_WAIT_S:g} s (the run is {status.state}: {status.message})")
        time.sleep(0.005)


def _worker_cycle(worker: TrainingWorker, spec: JobSpec, cycle: int) -> dict[str, float]:
    """start -> running -> pause (the step holds) -> resume -> a further step -> stop; seconds to each state."""
    worker.start(spec)
    took = {"running": _wait(worker, lambda s: s.state == RunState.RUNNING and s.step >= 1, "running a step")}
    worker.pause()
    took["paused"] = _wait(worker, lambda s: s.state == RunState.PAUSED and s.waiting, "paused between steps")
    held = worker.status().step
    time.sleep(PAUSE_HOLD_S)
    moved = worker.status().step - held
    if moved:
        raise RuntimeError(f"cycle {cycle}: the paused run took {moved} step(s) in {PAUSE_HOLD_S:g} s")
    worker.resume()
    took["resumed"] = _wait(worker, lambda s: s.state == RunState.RUNNING and s.step > held, "a step after resume")
    worker.stop()
    took["stopped"] = _wait(worker, lambda s: s.state.is_terminal, "stopped")
    if worker.status().outcome != RunState.STOPPED:
        raise RuntimeError(f"cycle {cycle}: the run ended {worker.status().outcome}, not {RunState.STOPPED}")
    return {f"cycle{cycle}.{state}_s": seconds for state, seconds in took.items()}


def check_worker_cycles(device: torch.device) -> Outcome:
    """Two cycles of ``TrainingWorker`` on ``device``: start a long tiny pretraining run, wait until running,
    pause (no step for ``PAUSE_HOLD_S``), resume, wait for a further step, stop; each state within
    ``STATE_WAIT_S``. The worker is closed (its run stopped and joined) whatever happens."""
    with tempfile.TemporaryDirectory(prefix="correctness-") as tmp:
        tiny_tokenizer().save(Path(tmp) / "tokenizer")
        worker = TrainingWorker(runs_root=Path(tmp) / "runs")
        spec = pretraining_spec(device, None, Path(tmp) / "tokenizer", write_corpus(Path(tmp)), total_steps=100_000)
        try:
            took = {**_worker_cycle(worker, spec, 1), **_worker_cycle(worker, spec, 2)}
        finally:
            worker.close(timeout_s=STATE_WAIT_S)
        if not worker.join(STATE_WAIT_S):
            raise TimeoutError(f"the worker's run did not end within {STATE_WAIT_S:g} s of close()")
    slowest = max(took, key=took.get)
    values = {**took, "max_wait_s": took[slowest], "bound_s": STATE_WAIT_S, "pause_hold_s": PAUSE_HOLD_S}
    detail = (f"2 cycles start/running/pause/hold {PAUSE_HOLD_S:g} s/resume/step/stop: every state reached, "
              f"slowest {slowest} {took[slowest]:.2f} s <= {STATE_WAIT_S:g} s; no step while paused")
    return Outcome(took[slowest] <= STATE_WAIT_S, detail, values)
