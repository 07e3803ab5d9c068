"""torchrun / DistributedDataParallel plumbing for the trainer: PyTorch's own, nothing home-made.

``torchrun --nproc_per_node=N -m engine.pretrain ...`` sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT; ``init_from_env`` joins the process group from them (gloo on
CPU, nccl on CUDA). Without those variables (or with WORLD_SIZE=1) everything here is a
no-op, so single-process code calls these helpers unconditionally.
"""
from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def env_world_size() -> int:
    """WORLD_SIZE from the environment (1 when not launched by torchrun)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def is_distributed() -> bool:
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main_process() -> bool:
    return rank() == 0


def init_from_env(device: str = "auto", timeout_s: float = 1800.0) -> str:
    """Join the torchrun process group when WORLD_SIZE > 1; returns the device to train on.

    ``device`` is ``auto``/``cpu``/``cuda``; on CUDA each process takes ``cuda:LOCAL_RANK``
    and the backend is nccl, otherwise gloo. Single-process: returns ``device`` unchanged.
    """
    if env_world_size() <= 1 or is_distributed():
        return device
    for name in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise RuntimeError(f"WORLD_SIZE is set but {name} is not: launch with torchrun "
                               "(python -m torch.distributed.run --nproc_per_node=N -m engine.pretrain ...)")
    use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        index = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return device


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def cleanup() -> None:
    """Leave the process group (safe to call when there is none)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over the processes, in place; unchanged when single-process."""
    if is_distributed():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def any_process(flag: bool, device: torch.device | str = "cpu") -> bool:
    """True on every process when ``flag`` is true on any (e.g. a Ctrl-C seen by one)."""
    if not is_distributed():
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def main_process_flag(flag: bool, device: torch.device | str = "cpu") -> bool:
    """Rank 0's ``flag`` on every process: a decision only the main process makes (e.g. from its clock)."""
    if not is_distributed():
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.broadcast(value, src=0)
    return bool(value.item())


def wrap_model(model: nn.Module, device: torch.device, find_unused_parameters: bool = False) -> nn.Module:
    """``DistributedDataParallel(model)`` in a process group, else the model itself."""
    if not is_distributed():
        return model
    device_ids = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids,
                                               find_unused_parameters=find_unused_parameters)


def no_sync(net: nn.Module, skip: bool) -> Any:
    """``net.no_sync()`` (no gradient all-reduce) when ``skip`` and ``net`` is DDP; else a null context."""
    if skip and isinstance(net, nn.parallel.DistributedDataParallel):
        return net.no_sync()
    return contextlib.nullcontext()


def rank_seed(seed: int, step: int = 0) -> int:
    """A seed for this process's dropout stream: ``seed`` on rank 0 (single-process runs are
    unchanged), a distinct deterministic one on the other ranks."""
    r = rank()
    return seed if r == 0 else (seed * 1_000_003 + step) * 1_000_003 + r & (2**63 - 1)


def broadcast_object(value: Any) -> Any:
    """Rank 0's ``value`` on every process (pickled; for small things: a path, a vocabulary)."""
    if not is_distributed():
        return value
    holder = [value if rank() == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def gather_object(value: Any) -> list[Any]:
    """Every process's ``value``, in rank order (pickled; for small things); ``[value]`` when single-process."""
    if not is_distributed():
        return [value]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def first_difference(values: Sequence[Any]) -> int | None:
    """The first rank whose value differs from rank 0's, or None when every rank holds the same."""
    return next((r for r, value in enumerate(values) if value != values[0]), None)


def same_everywhere(value: str, what: str, advice: str) -> None:
    """ValueError, on every rank alike, when some rank's ``value`` (a fingerprint of ``what``) differs from rank
    0's: one sentence naming both ranks and both values, then ``advice``. Single-process: nothing to check."""
    values = gather_object(value)
    other = first_difference(values)
    if other is not None:
        raise ValueError(f"rank 0 and rank {other} hold different {what} ({values[0]} on rank 0, {values[other]} on "
                         f"rank {other}), so they would train on mixed data: {advice}")
