"""Several arms at once: ``torchrun --nproc-per-node N -m engine.experiment <name> ...`` shares an experiment's work.

A work unit is one seed and one pretraining owner with the arms that share its run (``runner.pretraining_owner``),
in the experiment's order (seed by seed, arm by arm); the arms of a unit stay together, in order, in one process
(the others read their owner's syntax metrics). Rank 0 trains (or reads) the shared vocabulary while the others
wait; then rank r runs units r, r + N, r + 2N, ... with ``runner.run_arm`` (each arm-seed resumable on its own, as in
one process); at the end every rank waits for the last, and rank 0 reads every arm's ``results.json`` in the order
one process would have returned them.

The ranks wait for each other through a gloo process group of their own (on the torchrun store, under its own
prefix), never the default one: with a default group the trainer would take each rank's pretraining for one
data-parallel run, while here each rank trains its own arms in a single process. Its timeout is long
(``WAIT_TIMEOUT``), since a rank may wait hours for the others' arms; a rank that fails ends the run (torchrun
stops the others), and running the same command again continues from every unit's newest checkpoint.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from engine.experiments.definitions import Arm, Experiment, Scale
from engine.experiments.runner import (
    ArmResult, Say, experiment_dir, pretraining_owner, read_result, run_arm, seed_dir, shared_tokenizer,
)

WAIT_TIMEOUT = timedelta(days=7)     # how long a rank waits for the others (arms may take hours each)
STORE_PREFIX = "engine.experiment"   # the group's keys on the torchrun store, apart from any other group's

Unit = tuple[int, tuple[Arm, ...]]   # (seed, the arms sharing one pretraining run, in the experiment's order)


def threads_per_rank() -> int:
    """Torch threads for each of this machine's ranks: its CPUs shared among them (LOCAL_WORLD_SIZE), at least 1."""
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, (os.cpu_count() or 1) // local)


def chosen_arms(experiment: Experiment, arms: Sequence[str] | None) -> list[Arm]:
    """The experiment's arms named in ``arms`` (every arm when None), in the experiment's order."""
    return [arm for arm in experiment.arms if arms is None or arm.name in arms]


def work_units(experiment: Experiment, scale: Scale, arms: Sequence[str] | None = None) -> list[Unit]:
    """The experiment's work, one unit per seed and pretraining run: seed by seed, each owner's arms together
    (in the experiment's order, an owner where its first chosen arm is)."""
    units: list[Unit] = []
    for seed in range(scale.seeds):
        groups: dict[str, list[Arm]] = {}
        for arm in chosen_arms(experiment, arms):
            groups.setdefault(pretraining_owner(experiment, arm).name, []).append(arm)
        units += [(seed, tuple(group)) for group in groups.values()]
    return units


def share(units: Sequence[Unit], rank: int, world_size: int) -> list[Unit]:
    """Rank ``rank``'s units of ``world_size``: units rank, rank + world_size, ..."""
    return list(units[rank::world_size])


def _waiting_group() -> tuple[dist.ProcessGroupGloo, int, int]:
    """This rank's gloo group with the others (the torchrun store's, under ``STORE_PREFIX``), its rank and size."""
    store, rank, world_size = next(dist.rendezvous("env://"))
    group = dist.ProcessGroupGloo(dist.PrefixStore(STORE_PREFIX, store), rank, world_size, WAIT_TIMEOUT)
    return group, rank, world_size


def run_shared(root: str | Path, experiment: Experiment, scale: Scale, say: Say,
               arms: Sequence[str] | None = None) -> list[ArmResult] | None:
    """This torchrun rank's share of ``runner.run_experiment``: rank 0 gets every arm-seed's numbers (in the order
    ``run_experiment`` returns them) once every rank is done; the other ranks get None."""
    root = Path(root)
    group, rank, world_size = _waiting_group()
    mine: Say = lambda message: say(f"[rank {rank}] {message}")    # noqa: E731
    if rank == 0:
        shared_tokenizer(root, experiment, scale, mine)
    group.barrier().wait()                                      # the vocabulary is there for every rank
    tokenizer = experiment_dir(root, experiment, scale) / "tokenizer"
    for seed, unit in share(work_units(experiment, scale, arms), rank, world_size):
        for arm in unit:
            run_arm(root, experiment, arm, scale, seed, tokenizer, mine)
    group.barrier().wait()                                      # every unit is measured
    if rank != 0:
        return None
    return [_kept(root, experiment, arm, seed, scale)
            for seed in range(scale.seeds) for arm in chosen_arms(experiment, arms)]


def _kept(root: Path, experiment: Experiment, arm: Arm, seed: int, scale: Scale) -> ArmResult:
    """An arm-seed's numbers as another rank kept them; RuntimeError in a sentence when they are not there."""
    found = read_result(seed_dir(root, experiment, arm, seed, scale))
    if not isinstance(found, ArmResult):
        raise RuntimeError(found or f"{arm.name} seed {seed}: no results.json after every rank finished; run the "
                                    "same command again to measure it")
    return found
