"""What the machine is: GPU, torch and CUDA versions, bf16 support, the packages the session uses."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any

import torch

from scripts.gpu.budget import PASSED, StageResult

PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "pyarrow")


def report() -> dict[str, Any]:
    """A plain dict of the machine's facts (no GPU: ``cuda_available`` False and the CPU's)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    facts: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(),
                             "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                             "packages": versions, "cuda_available": torch.cuda.is_available(),
                             "torch_cuda": torch.version.cuda}
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        facts.update(gpu_name=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                     gpu_memory_gib=round(properties.total_memory / 2**30, 1),
                     multiprocessors=properties.multi_processor_count,
                     compute_capability=f"{properties.major}.{properties.minor}",
                     bf16_supported=torch.cuda.is_bf16_supported(), cudnn=torch.backends.cudnn.version())
    return facts


def stage(deadline: float) -> StageResult:
    """The environment stage: always passes; its detail is the one line a person wants first."""
    facts = report()
    if facts["cuda_available"]:
        line = (f"{facts['gpu_name']} ({facts['gpu_memory_gib']} GiB, sm {facts['compute_capability']}, "
                f"bf16 {'yes' if facts['bf16_supported'] else 'no'}), torch {facts['packages']['torch']}, "
                f"CUDA {facts['torch_cuda']}")
    else:
        line = f"no CUDA: {facts['cpu_count']} CPU cores, torch {facts['packages']['torch']}"
    return StageResult(PASSED, line, facts)
