"""The prepared GPU session: one command for a borrowed GPU machine (docs/design/gpu-session.md).

    python scripts/gpu_session.py --out "$OUT"                 # on the device, the data pack carried in .gpu/
    python scripts/gpu_session.py --out /tmp/rehearsal --budget-s 60   # a rehearsal here, on the CPU

Environment report, CUDA correctness (<= 90 s), throughput and MFU (<= 90 s), then training the default model
with the joint recipe for the rest of the budget, keeping the best held-out model, exported in fp16 parts of
< 16 MiB with a SHA-256 manifest. ``scripts/gpu_assemble.py`` joins the parts here and measures the model.
"""
from __future__ import annotations

import time

STARTED = time.monotonic()      # the budget counts from here, before torch is imported

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.gpu.session import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(started=STARTED))
