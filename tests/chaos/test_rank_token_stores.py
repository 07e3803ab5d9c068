"""Issue 45, item 6: ranks agree on their data. Two nodes whose token stores are each whole but differ (another
corpus file at the same path, a cache made from it) trained silently on mixed data; now every rank's store
content hash is gathered when the store is opened, and any difference stops every rank with one sentence naming
both ranks and both hashes. Single-process runs gather nothing."""
from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from engine.data.token_store import StoreWriter, TokenStore
from engine.training.jobs import setup
from engine.training.jobs.setup import prepare_job
from engine.training.loop import distributed as dist
from support.app_helpers import free_port
from support.cli_helpers import run_cli
from engine.training.tasks.job_spec import JobSpec
from tests.conftest import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")


def store_of(folder: Path, tokens: list[int]) -> TokenStore:
    """A real, consistent store: one document of two sentences of ``tokens``."""
    writer = StoreWriter(folder, vocab_size=100)
    half = len(tokens) // 2
    writer.add(np.array(tokens), np.array([half, len(tokens) - half]), np.array([2]))
    writer.finish({})
    return TokenStore.open(folder)


def job(run_dir, count: int) -> JobSpec:
    """A tiny pretraining job on ``count`` documents of four sentences."""
    rng = random.Random(0)
    documents = [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "." for _ in range(4)]
                 for _ in range(count)]
    training = dict(total_steps=1, batch_size=4, max_seq_length=32, eval_every=0, eval_batches=1, checkpoint_every=0)
    return JobSpec(training, preset="tiny", model_overrides=dict(hidden_size=32, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64), documents=documents, vocab_size=120,
                   run_dir=str(run_dir))


def test_the_first_rank_that_differs_from_rank_0_is_found():
    assert dist.first_difference(["a"]) is None
    assert dist.first_difference(["a", "a", "a"]) is None
    assert dist.first_difference(["a", "a", "b", "c"]) == 2
    assert dist.first_difference(["a", "b"]) == 1


def test_one_process_gathers_nothing_and_passes(tmp_path, monkeypatch):
    store = store_of(tmp_path / "one", [5, 6, 7, 8])
    assert dist.gather_object(store.content_hash) == [store.content_hash]
    assert setup.same_store_everywhere(store) is store


def test_a_difference_is_one_sentence_naming_both_ranks_and_both_hashes(tmp_path, monkeypatch):
    mine, theirs = store_of(tmp_path / "a", [5, 6, 7, 8]), store_of(tmp_path / "b", [5, 6, 7, 9])
    assert mine.content_hash != theirs.content_hash
    monkeypatch.setattr(dist, "gather_object", lambda value: [value, value, theirs.content_hash])
    with pytest.raises(ValueError) as raised:
        setup.same_store_everywhere(mine)
    message = str(raised.value)
    assert message.startswith("rank 0 and rank 2 hold different token stores")
    assert f"{mine.content_hash} on rank 0, {theirs.content_hash} on rank 2" in message
    assert message.count(". ") == 0 and "same corpus file" in message


def test_prepare_job_checks_the_store_before_building_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_ENGINE_CACHE", str(tmp_path / "cache"))
    seen: list[str] = []

    def other_on_rank_1(value: str) -> list[str]:
        seen.append(value)
        return [value, "0" * 64] if re.fullmatch(r"[0-9a-f]{64}", value) else [value, value]

    monkeypatch.setattr(dist, "gather_object", other_on_rank_1)
    with pytest.raises(ValueError, match="rank 0 and rank 1 hold different token stores"):
        prepare_job(job(tmp_path / "run", count=40))
    assert len(seen) == 1 and not (tmp_path / "run").exists()


RANKS_SCRIPT = """
import importlib.util
import sys
from pathlib import Path
import torch.distributed as dist
from engine.training.jobs.setup import same_store_everywhere
sys.path.insert(0, str(Path(sys.argv[2]).parents[1]))           # tests/, for the test module's own imports
found = importlib.util.spec_from_file_location("rank_token_stores", sys.argv[2])
test_module = importlib.util.module_from_spec(found)
found.loader.exec_module(test_module)
store_of = test_module.store_of
dist.init_process_group("gloo")
rank = dist.get_rank()
out = Path(sys.argv[1])
said = []
for case, tokens in (("same", [5, 6, 7, 8]), ("different", [5, 6, 7, 8 + rank])):
    store = store_of(out / f"{case}-{rank}", tokens)
    try:
        same_store_everywhere(store)
        said.append(f"{case}: ok {store.content_hash}")
    except ValueError as exc:
        said.append(f"{case}: {exc}")
(out / f"rank{rank}.txt").write_text("\\n".join(said))
dist.destroy_process_group()
"""


def test_two_gloo_ranks_with_different_stores_both_stop(tmp_path):
    """A real process group of two on 127.0.0.1: the same stores pass, different ones stop both ranks alike."""
    script = tmp_path / "ranks.py"
    script.write_text(RANKS_SCRIPT)
    launcher = ["-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                f"--master_port={free_port()}", str(script)]
    result = run_cli([str(tmp_path), __file__], module=launcher)
    assert result.returncode == 0, result.stderr[-3000:]
    said = [(tmp_path / f"rank{r}.txt").read_text().splitlines() for r in (0, 1)]
    assert said[0] == said[1], "both ranks decide alike"
    same, different = said[0]
    assert same.startswith("same: ok ")
    zero, one = (store_of(tmp_path / f"check-{r}", [5, 6, 7, 8 + r]).content_hash for r in (0, 1))
    assert different == (f"different: rank 0 and rank 1 hold different token stores (content hashes) ({zero} on "
                         f"rank 0, {one} on rank 1), so they would train on mixed data: give every node the same "
                         "corpus file and settings")
