"""Running ``python -m engine.pretrain`` / ``engine.finetune`` as a user would: in a subprocess,
under torchrun with N gloo processes on loopback, or as several torchrun "nodes" on this machine."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

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


def torchrun_nodes(module: str, args: list[str], nodes: int = 2, rendezvous: str = "c10d",
                   timeout: float = 300, node_env: Callable[[int], dict[str, str]] | None = None,
                   ) -> list[subprocess.CompletedProcess]:
    """``nodes`` torchrun agents started at once on this machine, each a "node" of one process:
    ``--nnodes=N --nproc_per_node=1`` with the c10d rendezvous (``--rdzv_backend=c10d``, an endpoint
    on a free loopback port, one ``--rdzv_id``) or the static one (``--node_rank=i`` and a master
    address). Returns each agent's result, in launch order. When an agent fails or ``timeout``
    passes, every agent's process group (the agent and its worker) is killed, so a lone node
    never waits out the rendezvous."""
    port = free_port()
    if rendezvous == "c10d":
        joins = [["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=nodes-{port}",
                  "--local_addr=127.0.0.1"]] * nodes
    elif rendezvous == "static":
        joins = [[f"--node_rank={i}", "--master_addr=127.0.0.1", f"--master_port={port}"] for i in range(nodes)]
    else:
        raise ValueError(f"rendezvous is 'c10d' or 'static', not {rendezvous!r}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    outputs = [(tempfile.TemporaryFile(mode="w+"), tempfile.TemporaryFile(mode="w+")) for _ in range(nodes)]
    agents: list[subprocess.Popen] = []
    try:
        for index, (join, (out, err)) in enumerate(zip(joins, outputs)):
            command = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", "--nproc_per_node=1",
                       *join, "-m", module, *args]
            own = {**env, **(node_env(index) if node_env is not None else {})}   # e.g. a token cache per node
            agents.append(subprocess.Popen(command, cwd=ROOT, env=own, stdout=out, stderr=err, text=True,
                                           start_new_session=True))
        deadline = time.monotonic() + timeout
        while any(agent.poll() is None for agent in agents):
            if time.monotonic() > deadline or any(agent.poll() not in (None, 0) for agent in agents):
                break
            time.sleep(0.2)
    finally:
        for agent in agents:
            if agent.poll() is None:
                os.killpg(agent.pid, signal.SIGKILL)   # its own session: the agent and its worker
            agent.wait(timeout=60)
    results = []
    for agent, (out, err) in zip(agents, outputs):
        out.seek(0)
        err.seek(0)
        results.append(subprocess.CompletedProcess(agent.args, agent.returncode, out.read(), err.read()))
        out.close()
        err.close()
    return results
