"""torchrun across nodes: two "nodes" on this machine, one process each, gloo, joined by the c10d
rendezvous (and by the static one), writing into one run folder as a shared filesystem would.

The reference is one process taking the same optimizer steps: per step the same global batch of
the same micro-batches. Two nodes at ``--batch-size 4`` read micro-batches 2k and 2k+1 of the
identically built dataset at step k; one process reads the same two with ``--batch-size 4
--grad-accum 2``. (One process at ``--batch-size 8`` reads the same sequences but draws other
masks: each micro-batch's masks come from a generator seeded by its own index, so its losses differ.)
Dropout is 0, since every rank has its own dropout stream. Then every logged number is the single
process's up to float rounding: the two runs add the same per-micro-batch sums in another order.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from support.cli_helpers import run_cli, torchrun_nodes
from engine.checkpoints.hf_format import load
from engine.training.runs.state import read_metrics

TINY = ["--preset", "tiny", "--max-documents", "40", "--seq-len", "32", "--dropout", "0",
        "--schedule", "inverse_sqrt", "--warmup", "0", "--lr", "1e-3", "--eval-batches", "2", "--threads", "1",
        "--no-progress"]
PER_RANK = ["--batch-size", "4"]                       # x 2 nodes = a global batch of 8
ONE_PROCESS = ["--batch-size", "4", "--grad-accum", "2"]   # the same 8 sequences, masks and weighting
COMPARED = ("loss", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc", "lr")


def records(run_dir: Path, kind: str) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == kind]


def assert_same_numbers(got: list[dict], expected: list[dict], names: tuple[str, ...]) -> None:
    """Step by step, the same steps and each named number equal up to float rounding."""
    assert [r["step"] for r in got] == [r["step"] for r in expected]
    for mine, theirs in zip(got, expected):
        for name in names:
            assert mine[name] == pytest.approx(theirs[name], rel=1e-5, abs=1e-7), (mine["step"], name)


def one_process(run_dir: Path, tokenizer: Path, steps: int) -> Path:
    """The reference: one process, the same global batch, the vocabulary the nodes used."""
    result = run_cli([*TINY, *ONE_PROCESS, "--tokenizer", str(tokenizer), "--steps", str(steps),
                      "--checkpoint-every", "2", "--run-dir", str(run_dir)], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def the_main_node(nodes: list[subprocess.CompletedProcess], finished: str) -> int:
    """Every node exited 0 and exactly one (rank 0's) reported the run; its index."""
    failed = [i for i, node in enumerate(nodes) if node.returncode != 0]   # -9: killed when another failed
    assert not failed, "\n".join(f"node {i} exited {nodes[i].returncode}:\n{nodes[i].stderr[-2000:]}" for i in failed)
    said = [i for i, node in enumerate(nodes) if finished in node.stderr]
    assert len(said) == 1, [node.stderr[-1500:] for node in nodes]
    assert "2 process(es), global batch 8" in nodes[said[0]].stderr
    return said[0]


def assert_checkpoints(run_dir: Path, reference: Path, names: list[str]) -> None:
    """Exactly these checkpoints, no staging leftovers, each loads and holds the reference's weights."""
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == names
    for name in names:
        loaded = load(run_dir / "checkpoints" / name)
        expected = load(reference / "checkpoints" / name)
        assert set(loaded.heads) == {"mlm", "nsp"}
        assert loaded.tokenizer.backend.get_vocab() == expected.tokenizer.backend.get_vocab()
        mine, theirs = loaded.model.state_dict(), expected.model.state_dict()
        assert mine.keys() == theirs.keys()
        for key in theirs:
            torch.testing.assert_close(mine[key], theirs[key], rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("rendezvous", ["c10d", "static"])
def test_two_nodes_train_as_one_process_with_the_same_global_batch(rendezvous, tmp_path):
    """Two one-process nodes, 4 steps: rank 0 trains the vocabulary and hands it to the other node, only
    rank 0 logs, evaluates and writes, and every logged number and saved weight is one process's."""
    shared = tmp_path / "shared-run"
    nodes = torchrun_nodes("engine.pretrain", [*TINY, *PER_RANK, "--vocab-size", "300", "--steps", "4",
                                               "--checkpoint-every", "2", "--run-dir", str(shared)],
                           rendezvous=rendezvous)
    main = the_main_node(nodes, "done: step 4")
    if rendezvous == "static":
        assert main == 0                  # --node_rank=0 is rank 0; c10d numbers the nodes as they join
    reference = one_process(tmp_path / "one-process", shared / "tokenizer", steps=4)
    # one record per step (a second writer would double them), as one process logs them
    assert_same_numbers(records(shared, "train"), records(reference, "train"), COMPARED)
    evaluation = records(shared, "eval")
    assert [r["step"] for r in evaluation] == [4]
    assert_same_numbers(evaluation, records(reference, "eval"), ("eval_mlm_loss", "eval_nsp_loss"))
    assert_checkpoints(shared, reference, ["step-000002", "step-000004"])
    assert {"checkpoints", "metrics.jsonl", "run.json", "tokenizer"} <= {p.name for p in shared.iterdir()}


def test_a_two_node_run_stopped_midway_resumes_on_two_nodes_as_if_uninterrupted(tmp_path):
    """Stopped after step 2 (a checkpoint), then ``--resume`` on two new nodes: every node reads the
    checkpoint from the shared folder, and steps 3-4 are the uninterrupted single process's."""
    shared = tmp_path / "shared-run"
    first = torchrun_nodes("engine.pretrain", [*TINY, *PER_RANK, "--vocab-size", "300", "--steps", "4",
                                               "--stop-at", "2", "--run-dir", str(shared)])
    the_main_node(first, "stopped at step 2")
    assert sorted(p.name for p in (shared / "checkpoints").iterdir()) == ["step-000002"]
    second = torchrun_nodes("engine.pretrain", ["--resume", str(shared), "--steps", "4", "--threads", "1",
                                                "--no-progress"])
    main = the_main_node(second, "done: step 4")
    assert "resuming" in second[main].stderr
    reference = one_process(tmp_path / "one-process", shared / "tokenizer", steps=4)
    assert_same_numbers(records(shared, "train"), records(reference, "train"), COMPARED)
    assert_checkpoints(shared, reference, ["step-000002", "step-000004"])


def test_two_nodes_with_caches_of_their_own_train_on_rank_0s_vocabulary(tmp_path):
    """Issue 38: each node has its own token cache, so each would train a vocabulary of its own (the trainer may
    keep other pieces, and numbers ties its own way); rank 0 trains it and the other rank uses the very same ids,
    so both nodes' token stores are the same store."""
    shared = tmp_path / "shared-run"
    caches = [tmp_path / f"cache-{i}" for i in range(2)]
    nodes = torchrun_nodes("engine.pretrain", [*TINY, *PER_RANK, "--vocab-size", "2000", "--steps", "2",
                                               "--run-dir", str(shared)],
                           node_env=lambda i: {"BERT_ENGINE_CACHE": str(caches[i])})
    the_main_node(nodes, "done: step 2")
    stores = [sorted(p.name for p in (cache / "corpora").iterdir()) for cache in caches]
    assert stores[0] == stores[1] and len(stores[0]) == 1, "the store's key holds the tokenizer's fingerprint"
    assert [p.exists() for p in (caches[0] / "vocabularies", caches[1] / "vocabularies")] == [True, False]

