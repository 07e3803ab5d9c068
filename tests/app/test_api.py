"""The served app's API as a ``gradio_client`` user meets it: every parameter named, the model always
``model_key``, every optional input with the UI's default (a call with only the required inputs works),
the API examples of the README and docs/API.md run as written, and both name every public endpoint."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest
from gradio_client import Client

import torch

from support.app_helpers import serve
from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from support.probing_helpers import make_services
from support.reference import randomize_

ROOT = Path(__file__).resolve().parents[2]
# the built-in tabs' endpoint -> the inputs a caller must give; everything else has a default (a tab added later
# has its own in its tests/explorer/<name>/test_tab.py, and the docs checks below read the served list)
REQUIRED = {
    "/next_sentence": ["sentence_a", "sentence_b"], "/classify": ["text"], "/choose": ["context", "choices"], "/tag_words": ["text"],
    "/replaced_tokens": ["text"],
    "/load_model": ["source_text"], "/tokenize": ["text"], "/embeddings": ["text"], "/embeddings_over_training": [],
    "/attention": ["text"], "/ablate_heads": ["text", "heads"], "/attention_export": ["text"],
    "/attention_over_training": ["text"], "/neuron_view": ["text"], "/attribute": ["text"], "/fill_mask": ["text"],
    "/fill_mask_over_training": ["text"],
    "/answer": ["question", "context"], "/train_start": [], "/train_pause": [], "/train_resume": [], "/train_continue": [],
    "/train_stop": [], "/train_save": [], "/train_status": [], "/finetune_start": [], "/finetune_status": [],
    "/compare": ["text"], "/compare_over_run": ["text"], "/neighbours_index": [], "/neighbours": ["text"],
    "/syntax_heads": [], "/layer_probe": [], "/syntax_over_training": [],
}
NO_MODEL = ("/load_model", "/finetune_status",      # endpoints that take no model (besides /train_*)
            "/compare_over_run")                    # (a run: two of its checkpoints)
TWO_MODELS = ("/compare",)                          # model A and model B


@pytest.fixture(scope="module")
def client(tiny_tokenizer, tmp_path_factory) -> Iterator[Client]:
    """The app on a tiny model with as many positions as the bundled one (the UI's length defaults fit it)."""
    import app

    torch.manual_seed(0)
    model = randomize_(BertWithHeads(tiny_config(max_position_embeddings=512), heads=("mlm", "nsp", "qa")), 0,
                       scale=0.3).eval()
    services = make_services(tiny_tokenizer, tmp_path_factory.mktemp("runs"))
    services.models.pin("default", LoadedModel(model, tiny_tokenizer, model.config, "tiny model, 512 positions"))
    with serve(app.create_app(services)) as client:
        yield client


@pytest.fixture(scope="module")
def endpoints(client: Client) -> dict[str, list[dict]]:
    return {name: info["parameters"] for name, info in
            client.view_api(return_format="dict", print_info=False)["named_endpoints"].items()}


def test_every_public_endpoint_needs_only_what_a_user_must_give(endpoints):
    assert set(REQUIRED) <= set(endpoints)
    for name, parameters in endpoints.items():
        required = [p["parameter_name"] for p in parameters if not p["parameter_has_default"]]
        assert required == REQUIRED.get(name, required), name
        assert not any(re.fullmatch(r"param_\d+", p["parameter_name"]) for p in parameters), name


def test_the_model_parameter_has_one_name(endpoints):
    for name, parameters in endpoints.items():
        names = [p["parameter_name"] for p in parameters]
        assert "model" not in names, name
        if name in TWO_MODELS:
            assert names[:2] == ["model_a", "model_b"], name
        elif name not in NO_MODEL and not name.startswith("/train_"):
            assert names[0] == "model_key", name


def test_probing_endpoints_answer_a_call_with_only_the_required_inputs(client: Client):
    tokens = client.predict(text="the cat sat.", api_name="/tokenize")
    assert "tokens" in tokens[1]
    fill = client.predict(text="the cat [MASK] on the mat.", api_name="/fill_mask")
    assert len(fill[1]) == 5 and {"score", "token", "token_str", "sequence"} <= set(fill[1][0])
    answer = client.predict(question="who sat?", context="the cat sat on the mat.", api_name="/answer")
    assert {"score", "start", "end", "answer"} <= set(answer[1])           # top_k 1: one dict, as the pipeline
    attention = client.predict(text="the cat sat.", api_name="/attention")
    assert attention[0] is not None
    embeddings = client.predict(text="the cat sat.", api_name="/embeddings")
    assert embeddings[0] is not None
    exported = client.predict(text="the cat sat.", api_name="/attention_export")
    assert {Path(f).suffix for f in exported} == {".png", ".svg", ".json"}


def markdown_section(path: str, heading: str) -> str:
    """The text of ``path`` under the level-2 ``heading``, up to the next level-2 heading."""
    text = (ROOT / path).read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


# (file, section): the probing examples a user copies; docs/API.md's training example runs in
# tests/explorer/training/test_text_source.py
API_EXAMPLES = (("README.md", "The API"), ("docs/API.md", "Probing"))


@pytest.mark.parametrize(("path", "heading"), API_EXAMPLES)
def test_the_documented_api_examples_run(client: Client, capsys, path: str, heading: str):
    examples = re.findall(r"```python\n(.*?)```", markdown_section(path, heading), flags=re.S)
    assert examples and all("client.predict(" in code for code in examples)
    for code in examples:
        exec(compile(code.replace("http://127.0.0.1:7860/", client.src), path, "exec"), {})
    printed = capsys.readouterr().out
    assert "tokens" in printed and "score" in printed


@pytest.mark.parametrize(("path", "heading"), [("README.md", "The API"), ("docs/API.md", None)])
def test_the_docs_name_every_public_endpoint(endpoints, path: str, heading: str | None):
    """The README's endpoint list and docs/API.md: a new endpoint is documented where users look for it."""
    text = markdown_section(path, heading) if heading else (ROOT / path).read_text(encoding="utf-8")
    missing = [name for name in endpoints if f"`{name}`" not in text]
    assert not missing, f"{path} does not name these public endpoints: {missing}"
