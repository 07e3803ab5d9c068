"""Running ``python -m engine.pretrain`` / ``engine.finetune`` as a user would: in a subprocess, or
under torchrun with N gloo processes on loopback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.app_helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


def run_cli(args: list[str], module: list[str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python <module> <args>`` from the repository root, one thread per process; output captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, *(module or ["-m", "engine.pretrain"]), *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def torchrun(module: str, args: list[str], processes: int = 2, timeout: float = 180) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --nproc_per_node=N -m <module> <args>`` on a free loopback port."""
    launcher = ["-m", "torch.distributed.run", f"--nproc_per_node={processes}", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}", "-m", module]
    return run_cli(args, module=launcher, timeout=timeout)
