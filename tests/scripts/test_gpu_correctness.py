"""scripts.gpu.correctness on the CPU: every check passes, one fp32 parity result per registered head, finite
numbers within their bounds, the deadline and a raising check handled, and no package the GPU machine lacks.

The full run happens once, in a subprocess where the packages the GPU machine lacks cannot be imported
(``support.device_imports``): the same code the GPU session runs, in the same missing-package conditions.
"""
from __future__ import annotations

import json
import math
import time

import pytest
import torch

from engine.model.head_specs import HEADS
from scripts.gpu import correctness
from scripts.gpu.correctness import Outcome
from support.device_imports import run_code_without_app_packages

CHECK_FUNCTIONS = ("check_head_parity", "check_bf16_autocast", "check_exact_resume", "check_probes",
                   "check_worker_cycles")
# The measured value(s) of each check (by name prefix) and the key of the bound they must stay within.
MEASURED = {"fp32_parity:": (("max_abs_diff",), "bound"),
            "bf16_autocast": (("ours_bf16_vs_fp32", "theirs_bf16_vs_fp32", "ours_vs_theirs_bf16"), "bound"),
            "exact_resume": (("max_abs_loss_diff",), "bound"), "probes": (("max_abs_diff",), "bound"),
            "worker_cycles": (("max_wait_s",), "bound_s")}

CHILD = """
import torch

torch.set_num_threads(1)                       # tiny models; the worker check trains on a second thread
from scripts.gpu.correctness import run_checks

results = run_checks("cpu", time.monotonic() + 120, log=lambda line: print(line, flush=True))
loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED - {"httpx2"})
with open(sys.argv[2], "w") as out:
    json.dump({"results": [vars(r) for r in results], "loaded": loaded}, out)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """``run_checks("cpu", ...)`` once, without the packages the GPU machine lacks: {"results", "loaded", "log"}."""
    out = tmp_path_factory.mktemp("gpu-correctness") / "results.json"
    child = run_code_without_app_packages(CHILD, [str(out)], timeout=240)
    assert child.returncode == 0 and out.exists(), f"stdout:\n{child.stdout[-3000:]}\nstderr:\n{child.stderr[-3000:]}"
    return {**json.loads(out.read_text()), "log": child.stdout}


def test_every_check_passes_on_the_cpu(run):
    failed = [f"{r['name']} {r['status']}: {r['detail']}" for r in run["results"] if r["status"] != "passed"]
    assert not failed, "\n".join(failed)
    assert [r["name"] for r in run["results"]] == [name for name, _ in correctness.planned_checks()]
    assert len(run["log"].strip().splitlines()) == len(run["results"])          # one line per check


def test_one_parity_result_per_registered_head(run):
    names = [r["name"] for r in run["results"]]
    assert [n for n in names if n.startswith("fp32_parity:")] == [f"fp32_parity:{head}" for head in HEADS]
    bf16 = next(r for r in run["results"] if r["name"] == "bf16_autocast")
    assert {f"{head}.worst" for head in HEADS} <= set(bf16["values"])           # bf16 covers every head too


def test_values_are_finite_and_within_their_bounds(run):
    for result in run["results"]:
        values, detail = result["values"], result["detail"]
        assert values and all(isinstance(v, float) and math.isfinite(v) for v in values.values()), result
        assert detail and "\n" not in detail and result["seconds"] >= 0, result
        measured, bound = next(spec for prefix, spec in MEASURED.items() if result["name"].startswith(prefix))
        for key in measured:
            assert 0 <= values[key] <= values[bound], (result["name"], key, values)
    by_name = {r["name"]: r["values"] for r in run["results"]}
    assert by_name["exact_resume"]["bit_exact"] == 1.0                           # the CPU resumes bit for bit
    assert by_name["bf16_autocast"]["autocast_bf16"] == 1.0
    assert by_name["fp32_parity:mlm"]["bound"] == 1e-4 and by_name["bf16_autocast"]["bound"] == 2e-2


def test_no_package_missing_on_the_gpu_machine_is_needed(run):
    assert run["loaded"] == []


def test_a_past_deadline_skips_every_check():
    lines: list[str] = []
    results = correctness.run_checks("cpu", time.monotonic() - 1.0, log=lines.append)
    assert [r.name for r in results] == [name for name, _ in correctness.planned_checks()]
    assert all(r.status == "skipped" and r.detail.startswith("skipped: out of time") for r in results)
    assert len(lines) == len(results) and all("skipped" in line for line in lines)


def quick(passed: bool = True):
    """A stand-in check function (any signature) that returns at once."""
    return lambda device, **kwargs: Outcome(passed, f"stand-in on {device}", {"value": 0.0, "bound": 1.0})


def test_a_raising_check_fails_with_its_message_and_the_others_run(monkeypatch):
    for name in CHECK_FUNCTIONS:
        monkeypatch.setattr(correctness, name, quick())

    def explode(device):
        raise RuntimeError("probe exploded\n  on two lines")
    monkeypatch.setattr(correctness, "check_probes", explode)
    monkeypatch.setattr(correctness, "check_exact_resume", quick(passed=False))
    lines: list[str] = []
    results = {r.name: r for r in correctness.run_checks("cpu", time.monotonic() + 60, log=lines.append)}
    assert results["probes"].status == "failed"
    assert results["probes"].detail == "RuntimeError: probe exploded on two lines"
    assert results["exact_resume"].status == "failed" and results["exact_resume"].detail == "stand-in on cpu"
    assert {r.status for name, r in results.items() if name not in ("probes", "exact_resume")} == {"passed"}
    assert len(lines) == len(results) and any("probe exploded" in line for line in lines)


def test_a_check_started_before_the_deadline_runs_and_the_rest_are_skipped(monkeypatch):
    def slow(device, head):
        time.sleep(0.05)
        return quick()(device)
    monkeypatch.setattr(correctness, "check_head_parity", slow)
    results = correctness.run_checks("cpu", time.monotonic() + 0.01, log=lambda line: None)
    assert results[0].status == "passed" and results[0].seconds >= 0.05
    assert {r.status for r in results[1:]} == {"skipped"}


def test_tf32_is_off_inside_the_fp32_checks_and_restored_after():
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with correctness.ieee_fp32(torch.device("cuda")) as said:     # only flags: nothing runs on a GPU here
        assert matmul.fp32_precision == "ieee" and "TF32 off" in said
    assert matmul.fp32_precision == before
    with correctness.ieee_fp32(torch.device("cpu")) as said:
        assert said == "fp32" and matmul.fp32_precision == before
