"""Every model key the picker can show works in every probing endpoint from a fresh ``gradio_client``
session: the default, the live run, a checkpoint written after the app started and a model another
session loaded. The dropdown's choices are per browser session, so a new client once got
"Value: live is not in the list of choices: ['default']" for all but the startup list."""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from gradio_client import Client

from support.app_helpers import serve
from conftest import VOCAB, WORDS, tiny_config
from engine.checkpoints.hf_format import save
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.text.tokenizer import WordPieceTokenizer
from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.training_worker import TrainingWorker
from explorer.models.registry import ModelRegistry
from explorer.services import Services
from support.probing_helpers import write_run
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat [MASK] on the mat."
# endpoint -> inputs besides model_key (lengths that fit the tiny models' 64 positions)
CALLS: dict[str, dict[str, Any]] = {
    "/tokenize": dict(text=TEXT, max_length=32),
    "/embeddings": dict(text="the cat sat."),
    "/embeddings_over_training": dict(positions=8),
    "/attention": dict(text="the cat sat.", max_length=32),
    "/ablate_heads": dict(text=TEXT, heads="1:1"),
    "/attention_export": dict(text="the cat sat.", max_length=32),
    "/attention_over_training": dict(text="the cat sat.", max_length=32),
    "/fill_mask": dict(text=TEXT),
    "/fill_mask_over_training": dict(text=TEXT),
    "/answer": dict(question="who sat?", context="the cat sat on the mat.", max_seq_len=48, doc_stride=16),
    "/next_sentence": dict(sentence_a="the cat sat.", sentence_b="it ran to the house."),
    "/neuron_view": dict(text="the cat sat.", max_length=32, query=1),
    "/attribute": dict(task="fill_mask", text=TEXT, steps=4),
}


def documents(n_docs: int = 24) -> list[list[str]]:
    rng = random.Random(0)
    return [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + "." for _ in range(8)]
            for _ in range(n_docs)]


@pytest.fixture(scope="module")
def app_parts(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: WordPieceTokenizer
              ) -> Iterator[tuple[Client, Services, Path, Path]]:
    """The app, served before any run, checkpoint or loaded model exists (the startup list is 'default')."""
    import app

    root = tmp_path_factory.mktemp("keys")
    runs, models, vocab = root / "runs", root / "models", root / "tokenizer"
    tiny_tokenizer.save(vocab)
    torch.manual_seed(0)
    model = randomize_(BertWithHeads(tiny_config(), heads=("mlm", "nsp", "qa")), 0, scale=0.3).eval()
    save(model, tiny_tokenizer, models / "mine")
    worker = TrainingWorker(runs)
    registry = ModelRegistry(runs_root=runs, worker=worker, allowed_dirs=(models,), default_dir=None)
    registry.pin("default", LoadedModel(model, tiny_tokenizer, model.config, "tiny default"))
    services = Services(tokenizer=tiny_tokenizer, models=registry, worker=worker)
    with serve(app.create_app(services)) as client:
        yield client, services, runs, models
    worker.close(timeout_s=30)


def start_live_run(worker: TrainingWorker, vocab_dir: Path) -> None:
    spec = JobSpec(dict(total_steps=100_000, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=0,
                        warmup_steps=1, learning_rate=1e-3), preset="tiny",
                   model_overrides=dict(hidden_size=32, num_attention_heads=2, intermediate_size=37,
                                        max_position_embeddings=64), documents=documents(), tokenizer=str(vocab_dir))
    worker.start(spec)
    deadline = time.monotonic() + 60
    while not (worker.status().state == "running" and worker.status().step >= 1):
        assert worker.status().state in ("preparing", "running") and time.monotonic() < deadline, worker.status()
        time.sleep(0.02)
    worker.save_checkpoint_now()          # the run's own checkpoint, then hold it still while probing
    worker.pause()


def test_every_listed_key_works_in_every_endpoint_from_a_fresh_client(app_parts, tiny_tokenizer, tmp_path) -> None:
    client, services, runs, models = app_parts
    tiny_tokenizer.save(tmp_path / "vocab")
    start_live_run(services.worker, tmp_path / "vocab")
    write_run(runs, tiny_tokenizer, steps=(2, 4, 6), run="run-a")                     # written after start
    loaded = client.predict(source_text=str(models / "mine"), api_name="/load_model")   # another session
    loaded_key = loaded[0]["value"] if isinstance(loaded[0], dict) else loaded[0]
    keys = ["default", "live", "checkpoint:run-a/step-000004", loaded_key]
    assert loaded_key == "local:models/mine"                 # the allowed folder's name, not its path
    assert set(keys) <= set(services.registry().available_keys())

    fresh = Client(client.src, verbose=False)
    for key in keys:
        for endpoint, inputs in CALLS.items():
            if (key, endpoint) == ("live", "/answer"):        # a pretraining run has no QA head, and says so
                with pytest.raises(Exception, match="no question-answering \\(span\\) head"):
                    fresh.predict(model_key=key, api_name=endpoint, **inputs)
                continue
            result = fresh.predict(model_key=key, api_name=endpoint, **inputs)
            assert result is not None, (key, endpoint)
        summary = fresh.predict(model_a=key, model_b=key, text=TEXT, api_name="/compare")[0]    # two models
        assert "the same at every layer" in summary, key


def test_an_unknown_key_is_refused_with_the_keys_available_now(app_parts) -> None:
    client, *_ = app_parts
    fresh = Client(client.src, verbose=False)
    with pytest.raises(Exception, match=r"'no-such-model' is neither a model key.*Models available now: default"):
        fresh.predict(model_key="no-such-model", text="the cat sat.", api_name="/tokenize")
    with pytest.raises(Exception, match=r"does not exist.*Models available now: default"):
        fresh.predict(model_key="checkpoint:run-a/step-000099", text=TEXT, api_name="/fill_mask")


def test_a_page_load_lists_the_models_available_now(app_parts, tiny_tokenizer) -> None:
    """No wait for the picker's refresh timer: a page opened after a run wrote checkpoints lists them."""
    from explorer.models import picker as model_picker

    _, services, runs, _ = app_parts
    write_run(runs, tiny_tokenizer, steps=(3,), run="run-late", later_by_s=120)
    deadline = time.monotonic() + 10                     # the worker caches its checkpoint list for 1 s
    while True:
        update, keys, info = model_picker.on_page_load(services, "default")
        if "checkpoint:run-late/step-000003" in keys or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "checkpoint:run-late/step-000003" in keys and update["value"] == "default"
    assert [key for _, key in update["choices"]] == list(keys) and "tiny default" in info
    update, _, _ = model_picker.on_page_load(services, "checkpoint:gone/step-000001")
    assert update["value"] == "default"                  # a vanished choice falls back to the default
