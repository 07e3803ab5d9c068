"""The notebook API (``explorer.notebook``) and its example, ``docs/notebook.ipynb``, executed as CI executes it:
nbclient with a local python3 kernel (ipykernel) of this interpreter, offline, from ``docs/`` as Jupyter runs it.
Each view's output holds the view's markup and its data, and no http(s) URL; the API's errors are one sentence."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from engine.checkpoints.hf_format import DEFAULT_MODEL_DIR
from explorer import notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "docs" / "notebook.ipynb"
URL = re.compile(r"https?://[^\s\"'<>)]*", re.IGNORECASE)
NAMESPACES = ("http://www.w3.org/",)          # an XML namespace names, it fetches nothing
CELL_TIMEOUT_S = 240
TEXT = "The cat sat on the mat because it was tired."


def external_urls(text: str) -> list[str]:
    """Every http(s) URL in ``text`` but XML namespaces."""
    return [url for url in URL.findall(text) if not url.lower().startswith(NAMESPACES)]


@pytest.fixture(scope="module")
def model():
    return notebook.load_model(DEFAULT_MODEL_DIR)


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """docs/notebook.ipynb run top to bottom by nbclient on a kernel of this interpreter, in docs/, offline."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    home = tmp_path_factory.mktemp("jupyter")
    spec = home / "kernels" / "python3"                  # pinned to this interpreter (JUPYTER_PATH is read first)
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this venv)", "language": "python"}), encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:
        for name, value in {"JUPYTER_PATH": str(home), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
                            "IPYTHONDIR": str(home / "ipython"), "HF_HUB_OFFLINE": "1",
                            "TRANSFORMERS_OFFLINE": "1", "EXPLORER_DEVICE": "cpu", "OMP_NUM_THREADS": "1",
                            "MPLBACKEND": "Agg"}.items():
            env.setenv(name, value)
        book = nbformat.read(NOTEBOOK, as_version=4)
        client = nbclient.NotebookClient(book, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        client.execute()
    return book


def html_outputs(book) -> list[str]:
    return [output["data"]["text/html"] for cell in book.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if "text/html" in output.get("data", {})]


def test_the_example_notebook_is_committed_without_outputs() -> None:
    book = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [cell for cell in book["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    uses = "".join("".join(cell["source"]) for cell in code)
    assert "DEFAULT_MODEL_DIR" in uses and all(name in uses for name in ("attention_view", "neuron_view",
                                                                          "embeddings_view"))


def test_the_example_notebook_runs_and_renders_each_view_inline(executed) -> None:
    errors = [output for cell in executed.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors
    shown = html_outputs(executed)
    markup = {"attention": ("attn-heatmap", "attn-head-view", "attn-model-view", "BertAttentionViews.mount"),
              "neuron": ("neuron-view", "BertNeuronView.mount"), "embeddings": ("emb-dimensions", "emb-similarity")}
    for view, marks in markup.items():
        found = [out for out in shown if all(mark in out for mark in marks)]
        assert len(found) == 1, (view, [out[:200] for out in shown])
        out = found[0]
        assert out.startswith("<iframe srcdoc=") and "sa-values" in out and "BertArrays" in out
        assert not external_urls(out), external_urls(out)[:5]
    saved = [line for cell in executed.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
             if output.get("output_type") == "stream" for line in output["text"].splitlines()]
    assert any(line.startswith("attention.html: ") and line.endswith(" bytes") for line in saved)


def test_a_view_saves_the_document_it_shows(model, tmp_path: Path) -> None:
    view = notebook.attention_view(model, TEXT, layer=2, head=3, heads=[1, 3])
    path = view.save(tmp_path / "view.html")
    assert path.read_text(encoding="utf-8") == view.html
    assert view.html.startswith("<!DOCTYPE html>") and 'option value="2" selected' in view.html
    assert f'height: {notebook.HEIGHTS["attention"]}px' in view._repr_html_()
    values = json.loads(re.search(r'id="sa-values">(.*?)</script>', view.html, re.S).group(1))
    assert [v["kind"] for v in values] == ["maps", "head_view", "model_view"]
    assert (values[0]["layer"], values[0]["head"], values[1]["heads"]) == (1, 3, [1, 3])   # the engine's layer index


def test_the_views_take_a_key_and_a_pair(model) -> None:
    by_key = notebook.neuron_view("default", TEXT, "It slept.", layer=1, head=0, query=2)
    values = json.loads(re.search(r'id="sa-values">(.*?)</script>', by_key.html, re.S).group(1))
    assert values[0]["kind"] == "neuron" and values[0]["query"] == 2 and "[SEP]" in values[0]["tokens"][-1]
    assert values[0]["tokens"].count("[SEP]") == 2
    maps = notebook.embeddings_view(model, TEXT, component="position")
    assert 'value="position" selected' in maps.html


@pytest.mark.parametrize("call, message", [
    (lambda m: notebook.attention_view(m, TEXT, layer=0), "layer 0 is the embeddings' output"),
    (lambda m: notebook.attention_view(m, TEXT, head=12), "head 12 does not exist"),
    (lambda m: notebook.attention_view(m, "   "), "text must be a non-empty string"),
    (lambda m: notebook.attention_view(m, TEXT, heads=[0, 40]), "heads [40] do not exist"),
    (lambda m: notebook.attention_view(m, TEXT, heads=["a"]), "heads must be a list of head numbers from 0 to 11"),
    (lambda m: notebook.attention_view("no-such-model", TEXT), "'no-such-model' is neither a model key"),
    (lambda m: notebook.attention_view(m, TEXT, max_length=4), "max_length must be a whole number from 8"),
    (lambda m: notebook.neuron_view(m, TEXT, query=99), "query must be a token position from 0 to 12"),
    (lambda m: notebook.embeddings_view(m, TEXT, component="colour"), "unknown component 'colour'"),
    (lambda m: notebook.load_model(3), "model must be a folder, a model key or a LoadedModel"),
])
def test_bad_input_is_one_sentence(model, call, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        call(model)
    assert message in str(caught.value)
