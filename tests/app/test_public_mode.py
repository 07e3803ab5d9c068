"""Public mode (admin token for training and local folders), queue bounds, and Spaces readiness:
README front matter, configuration by environment and demo warm-up (the ZeroGPU decorator: tests/explorer/test_gpu.py)."""
from __future__ import annotations

import zipfile

import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

import app  # noqa: E402
from support.app_helpers import serve  # noqa: E402
from conftest import tiny_config  # noqa: E402
from engine.checkpoints import hf_format as checkpoints  # noqa: E402
from engine.model.loaded_model import LoadedModel  # noqa: E402
from engine.model.heads import BertWithHeads  # noqa: E402
from explorer.models.registry import ModelRegistry  # noqa: E402
from engine.training.worker.training_worker import TrainingWorker  # noqa: E402
from explorer import services as services_mod  # noqa: E402
from explorer.serving import access as access  # noqa: E402
from explorer.models import picker as model_picker  # noqa: E402
from explorer.serving import warmup as warmup  # noqa: E402
from explorer.training import tab as training_tab  # noqa: E402
from support.training_inputs import OBJECTIVE_DEFAULTS  # noqa: E402
from explorer.serving.access import AccessPolicy  # noqa: E402
from explorer.services import Services  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "correct horse battery staple"
SETTINGS = ["tiny", "shakespeare", 200, 4000, 64, 16, 5e-4, 300, 0.15, False, True, "builtin", "", None, "train",
            "none", *OBJECTIVE_DEFAULTS]


def _tiny(heads: tuple[str, ...] = ("mlm", "nsp", "qa")) -> BertWithHeads:
    torch.manual_seed(0)
    return BertWithHeads(tiny_config(), heads=heads).eval()


def make_services(root: Path, tokenizer, policy: AccessPolicy) -> tuple[Services, list[Any]]:
    """Tiny default model, a models/ folder with one saved model, a worker whose start() only records."""
    models = root / "models"
    checkpoints.save(_tiny(("mlm",)), tokenizer, models / "saved")
    worker = TrainingWorker(runs_root=root / "runs")
    started: list[Any] = []
    worker.start = started.append  # type: ignore[method-assign]  # record, never train
    registry = ModelRegistry(runs_root=root / "runs", worker=worker, allowed_dirs=(models,), default_dir=None)
    model = _tiny()
    registry.pin("default", LoadedModel(model, tokenizer, model.config, "tiny test model"))
    return Services(tokenizer=tokenizer, worker=worker, models=registry, access=policy), started


def small_app(services: Services) -> gr.Blocks:
    with gr.Blocks(analytics_enabled=False) as demo:
        model_picker.build(services)
        with gr.Tab("Training"):
            training_tab.build(services)
    return demo


def handler(demo: gr.Blocks, api_name: str) -> tuple[Callable[..., Any], int]:
    """The function behind ``api_name`` and how many inputs it takes."""
    fn = next(f for f in demo.fns.values() if f.api_name == api_name)
    return fn.fn, len(fn.inputs)


# --- the policy ---------------------------------------------------------------------------

def test_policy_from_env() -> None:
    assert AccessPolicy.from_env({}) == AccessPolicy(public=False, admin_token="")
    policy = AccessPolicy.from_env({"EXPLORER_PUBLIC": "1", "EXPLORER_ADMIN_TOKEN": " s3cret "})
    assert policy.public and policy.admin_token == "s3cret" and policy.asks_for_token
    assert "s3cret" not in repr(policy)
    assert not AccessPolicy.from_env({"EXPLORER_PUBLIC": "0", "EXPLORER_ADMIN_TOKEN": "x"}).public
    assert not AccessPolicy.from_env({"EXPLORER_PUBLIC": "true"}).training_enabled


def test_require_admin_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    AccessPolicy().require_admin(None)  # private mode: everyone is admin
    public = AccessPolicy(public=True, admin_token="s3cret")
    compared: list[tuple[bytes, bytes]] = []
    real = access.hmac.compare_digest
    monkeypatch.setattr(access.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    public.require_admin("s3cret")
    assert compared == [(b"s3cret", b"s3cret")]  # constant-time comparison
    with pytest.raises(gr.Error, match="No admin token was given.*'Admin token' box"):
        public.require_admin("  ")
    with pytest.raises(gr.Error, match="admin token is wrong") as err:
        public.require_admin("guess", "stop training")
    assert "stop training" in str(err.value) and "s3cret" not in str(err.value)
    with pytest.raises(gr.Error, match="switched off"):
        AccessPolicy(public=True).require_admin("anything")


# --- public mode through the server --------------------------------------------------------

@pytest.fixture(scope="module")
def public(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Iterator[tuple[Client, Services, list[Any]]]:
    services, started = make_services(tmp_path_factory.mktemp("public"), tiny_tokenizer,
                                      AccessPolicy(public=True, admin_token=TOKEN))
    with serve(small_app(services)) as client:
        yield client, services, started


@pytest.mark.parametrize("token, message", [("", "No admin token"), ("nope", "admin token is wrong")])
def test_training_controls_need_the_token(public, token: str, message: str) -> None:
    client, _, started = public
    with pytest.raises(AppError, match=message):
        client.predict(*SETTINGS, token, api_name="/train_start")
    for name in ("/train_pause", "/train_resume", "/train_stop", "/train_save"):
        with pytest.raises(AppError, match=message):
            client.predict(token, api_name=name)
    assert started == []


def test_admin_can_start_and_control_training(public) -> None:
    client, _, started = public
    client.predict(*SETTINGS, TOKEN, api_name="/train_start")
    assert len(started) == 1 and started[0].preset == "tiny"
    assert "idle" in client.predict(TOKEN, api_name="/train_pause")
    assert "idle" in client.predict(TOKEN, api_name="/train_stop")
    assert "**idle**" in client.predict(api_name="/train_status")[0]  # watching stays open to all


def test_local_folders_need_the_token_hub_ids_do_not(public) -> None:
    client, services, _ = public
    folder = str(services.registry().allowed_dirs[0] / "saved")
    for token, message in (("", "No admin token"), ("nope", "admin token is wrong")):
        with pytest.raises(AppError, match=message):
            client.predict(folder, token, api_name="/load_model")
    with pytest.raises(AppError, match="offline mode"):  # no token needed, but only where the hub is reachable
        client.predict("owner/name", "", api_name="/load_model")
    with pytest.raises(ValueError, match="only the admin can load models from local folders"):
        services.model(f"local:{folder}")
    _, info = client.predict(folder, TOKEN, api_name="/load_model")
    assert "local" in info and "Heads: masked LM" in info
    listed = services.registry().canonical(f"local:{folder}").text
    assert services.model(listed).heads == ("mlm",)  # now in the picker, by its listed key: open to all
    refusals = []
    for path in (folder, str(services.registry().allowed_dirs[0] / "no-such-folder")):   # a server path: no oracle
        with pytest.raises(ValueError) as refused:
            services.model(f"local:{path}")
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1] and "only the admin can load models from local folders" in refusals[0]


def test_public_checkpoint_download_only_serves_listed_checkpoints(tmp_path: Path, tiny_tokenizer) -> None:
    from gradio import helpers
    from support.probing_helpers import write_run

    services, _ = make_services(tmp_path, tiny_tokenizer, AccessPolicy(public=True, admin_token=TOKEN))
    listed = write_run(tmp_path / "runs", tiny_tokenizer, steps=(2,))[0]
    pick, _ = handler(small_app(services), "train_pick_checkpoint")

    def select(path: Path | str) -> Any:
        row = ["x", 2, "run", str(path)]
        evt = gr.SelectData(None, {"index": [0, 0], "value": "x", "selected": True, "row_value": row})
        return pick(*helpers.special_args(pick, [], None, evt)[0])

    exported = Path(select(listed.relative_to(tmp_path / "runs").as_posix()))   # the row as the table shows it
    assert exported.name == "run-a-step-000002.zip"
    with zipfile.ZipFile(exported) as archive:
        assert {"config.json", "model.safetensors", "README.md"} <= set(archive.namelist())
    with pytest.raises(gr.Error, match="Pick a checkpoint from the table"):  # a forged row: a private model folder
        select(tmp_path / "models" / "saved")
    with pytest.raises(gr.Error, match="Pick a checkpoint from the table"):  # the listed one by its server path:
        select(listed)                                                       # no confirming a guessed path


def test_public_mode_without_token_switches_training_off(tmp_path: Path, tiny_tokenizer) -> None:
    services, started = make_services(tmp_path, tiny_tokenizer, AccessPolicy(public=True))
    demo = small_app(services)
    start, inputs = handler(demo, "train_start")
    assert inputs == len(SETTINGS)  # no token box: nothing would unlock it
    with pytest.raises(gr.Error, match="switched off"):
        start(*SETTINGS)
    pause, inputs = handler(demo, "train_pause")
    assert inputs == 0
    with pytest.raises(gr.Error, match="switched off"):
        pause()
    load, inputs = handler(demo, "load_model")
    with pytest.raises(gr.Error, match="switched off"):
        load(str(tmp_path / "models" / "saved"))
    assert started == []


def test_private_mode_works_as_before(tmp_path: Path, tiny_tokenizer) -> None:
    services, started = make_services(tmp_path, tiny_tokenizer, AccessPolicy())
    demo = small_app(services)
    start, inputs = handler(demo, "train_start")
    assert inputs == len(SETTINGS)
    start(*SETTINGS)
    assert len(started) == 1
    pause, inputs = handler(demo, "train_pause")
    assert inputs == 0 and "idle" in pause()
    load, inputs = handler(demo, "load_model")
    assert inputs == 1
    _, info = load(str(tmp_path / "models" / "saved"))
    assert "Heads: masked LM" in info


# --- queue, launch and configuration --------------------------------------------------------

def test_queue_settings() -> None:
    assert app.queue_settings({}) == (2, 64)
    assert app.queue_settings({"EXPLORER_PUBLIC": "1"}) == (2, 16)
    assert app.queue_settings({"EXPLORER_QUEUE_SIZE": "5", "EXPLORER_CONCURRENCY": "3"}) == (3, 5)
    for bad in ("0", "-1", "many"):
        with pytest.raises(ValueError, match="EXPLORER_QUEUE_SIZE"):
            app.queue_settings({"EXPLORER_QUEUE_SIZE": bad})


def test_create_app_bounds_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "build_app", lambda services=None: gr.Blocks(analytics_enabled=False))
    demo = app.create_app(environ={"EXPLORER_PUBLIC": "1", "EXPLORER_CONCURRENCY": "1"})
    assert demo._queue.max_size == 16 and demo._queue.default_concurrency_limit == 1


def test_space_binds_all_interfaces() -> None:
    assert app.launch_options({"SPACE_ID": "me/bert-explorer"})["server_name"] == "0.0.0.0"
    assert "server_name" not in app.launch_options({"SPACE_ID": "me/x", "GRADIO_SERVER_NAME": "127.0.0.1"})
    assert "server_name" not in app.launch_options({})


def test_default_model_may_be_a_hub_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_tokenizer) -> None:
    saved = checkpoints.save(_tiny(("mlm",)), tiny_tokenizer, tmp_path / "snapshot")
    fetched: list[str] = []
    monkeypatch.setattr(services_mod.hub, "download", lambda repo, **options: fetched.append(repo) or saved)
    monkeypatch.setenv("EXPLORER_DEFAULT_MODEL", "owner/tiny-bert")
    registry = services_mod.make_registry(tmp_path / "runs", None)
    assert registry.choices()[0].label == "Default model (hub: owner/tiny-bert)"
    assert registry.get("default").heads == ("mlm",) and fetched == ["owner/tiny-bert"]
    monkeypatch.setenv("EXPLORER_DEFAULT_MODEL", str(saved))  # a folder stays a folder
    assert services_mod.default_hub_from_env() is None
    assert services_mod.make_registry(tmp_path / "runs", None).default_dir == saved


def test_readme_front_matter_matches_the_pins() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "README.md must start with Spaces front matter"
    meta = yaml.safe_load(match.group(1))
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE))
    assert meta["sdk"] == "gradio" and str(meta["sdk_version"]) == pins["gradio"]
    assert meta["app_file"] == "app.py" and (ROOT / meta["app_file"]).is_file()
    assert str(meta["python_version"]) == "3.11"


def test_readme_documents_every_setting() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in ("EXPLORER_DEFAULT_MODEL", "EXPLORER_RUNS_DIR", "EXPLORER_MODEL_DIRS", "EXPLORER_PUBLIC",
                 "EXPLORER_ADMIN_TOKEN", "GRADIO_SERVER_PORT", "GRADIO_SERVER_NAME", "EXPLORER_CONCURRENCY",
                 "EXPLORER_QUEUE_SIZE", "EXPLORER_MAX_UPLOAD_MB", "EXPLORER_DEMO", "HF_HUB_OFFLINE", "SPACE_ID"):
        assert f"`{name}`" in text, name


# --- demo mode ------------------------------------------------------------------------------

def test_demo_warm_up_runs_every_tab_example(tmp_path: Path, tiny_tokenizer) -> None:
    services, _ = make_services(tmp_path, tiny_tokenizer, AccessPolicy())
    done = warmup.run_examples(services)
    for prefix in ("tokenize", "embeddings", "attention", "fill_mask", "answer", "neuron_view", "attribute"):
        assert any(name.startswith(prefix) for name in done), prefix
    assert warmup.run_examples(services, key="encoder-that-does-not-exist") == []


def test_main_starts_demo_warm_up_in_background(monkeypatch: pytest.MonkeyPatch, tiny_tokenizer) -> None:
    launched: list[dict[str, Any]] = []
    warmed: list[Services] = []

    class FakeDemo:
        local_url = "http://127.0.0.1:7860/"

        def launch(self, **kwargs: Any) -> None:
            launched.append(kwargs)

        def block_thread(self) -> None:
            """main() launches without blocking, starts its after-start work, then blocks here."""

    services = Services(tokenizer=tiny_tokenizer)
    monkeypatch.setattr(app, "after_start", lambda s: None)
    monkeypatch.setattr(app, "default_services", lambda runs_root=None: services)
    monkeypatch.setattr(app, "create_app", lambda s=None, environ=None: FakeDemo())
    monkeypatch.setattr(warmup, "start", warmed.append)
    monkeypatch.setenv("EXPLORER_DEMO", "1")
    monkeypatch.setenv("SPACE_ID", "me/bert-explorer")
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    app.main([])                                   # no arguments (main() reads sys.argv, pytest's here)
    assert warmed == [services]
    assert launched[0]["server_name"] == "0.0.0.0" and launched[0]["share"] is False
    monkeypatch.setenv("EXPLORER_DEMO", "0")
    app.main([])                                   # no arguments (main() reads sys.argv, pytest's here)
    assert warmed == [services] and len(launched) == 2
