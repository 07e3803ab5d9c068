"""``python -m support.tiny_experiment_cli <args>`` (tests/ and the repository root on PYTHONPATH): ``python -m
engine.experiment <args>`` with the tiny test experiment (``tiny_experiment.TINY``, ``tiny-mix``) offered, so a
subprocess, or each process torchrun starts, can run it by name."""
from __future__ import annotations

import sys

from engine.experiment import main
from support.tiny_experiment import offered

if __name__ == "__main__":
    with offered():
        code = main()
    sys.exit(code)
