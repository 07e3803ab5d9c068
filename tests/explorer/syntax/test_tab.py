"""Syntax tab, served: /syntax_heads, /layer_probe and /syntax_over_training answer like the engine through
gradio_client with only the model key, an uploaded CoNLL-U file is read, a bad one is one sentence, and every
view clears its outputs when it fails."""
from __future__ import annotations

import json

import gradio as gr
import numpy as np
import pytest
from gradio_client import handle_file

from conftest import tiny_config
from engine.model.loaded_model import LoadedModel
from engine.model.heads import BertWithHeads
from engine.probes.syntax.conllu import read_conllu, read_sample
from engine.probes.syntax.features import sentence_features
from engine.probes.syntax.heads import DIRECTIONS, head_scores
from engine.probes.syntax.layer_probe import layer_probe
from engine.probes.syntax.over_training import POINTS
from engine.probes.syntax.parser import attention_parser
from explorer.services import Services
from explorer.syntax import links, tab, views
from support.event_helpers import failure_clears
from support.hostile_helpers import call, call_raw, expect_error
from support.probing_helpers import RUN, STEPS, make_services, tab_app, write_run
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")
COUNT = 24


@pytest.fixture(scope="module")
def services(tmp_path_factory, tiny_tokenizer) -> Services:
    """``default``: a tiny model with 256 positions (the tiny vocabulary spells most words letter by letter);
    the run's checkpoints have 64, so there long sentences are skipped."""
    runs = tmp_path_factory.mktemp("syntax-runs")
    write_run(runs, tiny_tokenizer)
    found = make_services(tiny_tokenizer, runs)
    model = randomize_(BertWithHeads(tiny_config(max_position_embeddings=256), heads=("mlm",)), 5, scale=0.3).eval()
    found.registry().pin("default", LoadedModel(model, tiny_tokenizer, model.config, "tiny, 256 positions"))
    return found


@pytest.fixture(scope="module")
def app(services) -> tuple[gr.Blocks, dict]:
    return tab_app(services, tab.build)


def test_the_endpoints_are_listed_and_need_only_the_model_key(client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for name in ("/syntax_heads", "/layer_probe", "/syntax_over_training"):
        parameters = endpoints[name]["parameters"]
        assert parameters[0]["parameter_name"] == "model_key", name
        assert all(p["parameter_has_default"] for p in parameters[1:]), name
    assert "/syntax_heads_redraw" not in endpoints


def test_syntax_heads_equals_the_engine(client, services) -> None:
    summary, overview, grid, table, numbers = client.predict("default", COUNT, None, "det", DIRECTIONS[0],
                                                             api_name="/syntax_heads")
    expected = head_scores(sentence_features(services.model("default"), read_sample()[:COUNT]))
    assert numbers["relations"] == expected.relations
    for direction in DIRECTIONS:
        np.testing.assert_allclose(numbers["accuracy"][direction], expected.accuracy[direction], atol=1e-6)
        np.testing.assert_allclose(numbers["baseline"][direction], expected.baseline[direction], atol=1e-6)
    assert [row[0] for row in table["data"]] == expected.relations
    assert numbers["num_sentences"] == COUNT and not numbers["skipped"] and "det" in expected.relations
    assert "bundled sample" in summary and "**det**" in summary and "beats the best fixed-offset" in summary


def test_each_relation_has_an_example_sentence_of_its_own(client) -> None:
    """A best-head row's example sentence holds an arc of the row's relation, and no two rows share one when the
    sentences allow it (the first sentence of the sample holds five of the relations)."""
    table = client.predict("default", COUNT, None, "det", DIRECTIONS[0], api_name="/syntax_heads")[3]
    rows = [(row[0], row[links.EXAMPLE_COLUMN]) for row in table["data"]]
    holding = {s.text: set(s.relations) for s in read_sample()[:COUNT]}
    assert all(relation in holding[example] for relation, example in rows)
    assert len({example for _, example in rows}) == len(rows) > 10


def test_a_relation_found_in_one_sentence_keeps_it(client, tmp_path) -> None:
    """Uploaded: the first and shortest sentence is the only one with ``det`` and holds ``amod`` too: ``det`` keeps
    it and ``amod`` shows the other sentence (each one's first sentence would be the example of both). ``obj`` and
    ``nmod``, with 9 arcs each, are not scored."""
    def sentence(relations: list[str]) -> str:                    # word 1 is the root, every other word its dependent
        return "\n".join(["1\tx\t_\tVERB\t_\t_\t0\troot\t_\t_"] + [
            f"{i + 2}\tx\t_\tNOUN\t_\t_\t1\t{relation}\t_\t_" for i, relation in enumerate(relations)])
    path = tmp_path / "shared.conllu"
    path.write_text("\n\n".join([sentence(["det"] * 10 + ["amod"] * 10), sentence(["amod"] * 10 + ["obj", "nmod"] * 9)])
                    + "\n", encoding="utf-8")
    table = client.predict("default", 2, handle_file(str(path)), "det", DIRECTIONS[0], api_name="/syntax_heads")[3]
    example = {row[0]: row[links.EXAMPLE_COLUMN] for row in table["data"]}
    assert set(example) == {"det", "amod"}
    assert [len(example[r].split()) for r in ("det", "amod")] == [21, 29]


def test_only_the_model_key(client) -> None:
    numbers = client.predict("default", api_name="/syntax_heads")[-1]
    assert numbers["num_sentences"] + len(numbers["skipped"]) == tab.DEFAULT_SENTENCES


def test_layer_probe_equals_the_engine(client, services) -> None:
    summary, chart, numbers = client.predict("default", COUNT, None, api_name="/layer_probe")
    expected = layer_probe(sentence_features(services.model("default"), read_sample()[:COUNT]))
    assert [row["accuracy"] for row in numbers["layers"]] == pytest.approx(expected.accuracy.tolist())
    assert [row["selectivity"] for row in numbers["layers"]] == pytest.approx(expected.selectivity.tolist())
    assert numbers["best_layer"] == expected.best_layer and "Selectivity peaks at **layer" in summary
    parsed = attention_parser(sentence_features(services.model("default"), read_sample()[:COUNT]))
    assert numbers["attention_parser"] == pytest.approx(parsed.to_pipeline())
    assert "attention-only parser" in summary and f"{parsed.uas:.1%}" in summary


def test_an_uploaded_conllu_file_is_read(client, tmp_path) -> None:
    path = tmp_path / "mine.conllu"
    sample = read_sample()
    path.write_text("\n\n".join("\n".join(f"{i + 1}\t{w}\t_\t{u}\t_\t_\t{h}\t{r}\t_\t_" for i, (w, u, h, r) in
                                          enumerate(zip(s.words, s.upos, s.heads, s.relations)))
                                for s in sample[:30]) + "\n", encoding="utf-8")
    assert [s.words for s in read_conllu(path)] == [s.words for s in sample[:30]]
    summary, *_, numbers = client.predict("default", 30, handle_file(str(path)), "det", DIRECTIONS[1],
                                          api_name="/syntax_heads")
    assert "mine.conllu" in summary and numbers["num_sentences"] + len(numbers["skipped"]) == 30


def test_a_treebank_the_server_keeps_is_read_by_its_key(client, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "corpora"
    folder.mkdir()
    sample = read_sample()
    (folder / "ewt-part.conllu").write_text("\n\n".join(
        "\n".join(f"{i + 1}\t{w}\t_\t{u}\t_\t_\t{h}\t{r}\t_\t_" for i, (w, u, h, r) in
                  enumerate(zip(s.words, s.upos, s.heads, s.relations))) for s in sample[5:25]) + "\n", encoding="utf-8")
    monkeypatch.setenv("EXPLORER_CORPUS_DIRS", str(folder))
    summary, *_, numbers = client.predict("default", 20, None, "det", DIRECTIONS[0], "server:ewt-part.conllu",
                                          api_name="/syntax_heads")
    assert "server:ewt-part.conllu" in summary and str(folder) not in summary
    assert numbers["num_sentences"] + len(numbers["skipped"]) == 20
    outcome = call(client, "default", 20, None, "det", DIRECTIONS[0], str(folder / "ewt-part.conllu"),
                   api_name="/syntax_heads")                                   # a server path is no key
    expect_error(outcome, "There is no treebank .* on the server; choose one of: bundled, server:ewt-part.conllu")


@pytest.mark.parametrize("content, name, message", [
    ("1\tthe\t_\tDET\t_\t_\t2\tdet\n", "bad.conllu", r"bad\.conllu, line 1 has 8 tab-separated column"),
    ("1\tthe\tthe\tDET\t_\t_\t5\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n", "heads.conllu",
     "word 1's head is 5, but the sentence has 2 words"),
    ("just some text\n", "notes.pdf", r"Invalid file type.*conllu"),            # Gradio refuses it first
])
def test_a_bad_upload_is_one_sentence(client, tmp_path, content, name, message) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    outcome = call(client, "default", COUNT, handle_file(str(path)), "det", DIRECTIONS[0], api_name="/syntax_heads")
    expect_error(outcome, message)
    assert str(tmp_path) not in outcome.error                                     # no server path


@pytest.mark.parametrize("args, message", [
    (("default", 1), "at least 2|minimum"),
    (("nope", COUNT), "Models available now"),
    (("default", COUNT, None, "det", "sideways"), "not in the list of choices"),       # Gradio's own check
    (("default", COUNT, None, "nonexistent"), "'nonexistent' is not a relation scored on .*: pick one of .*det"),
])
def test_bad_input_is_one_sentence(client, args, message) -> None:
    expect_error(call(client, *args, api_name="/syntax_heads"), message)


def test_the_handlers_own_checks(services) -> None:
    with pytest.raises(gr.Error, match="direction must be one of"):
        views.heads_view(services, "default", COUNT, None, "det", "sideways")
    with pytest.raises(gr.Error, match="Sentences"):
        views.heads_view(services, "default", 5000, None, "det", DIRECTIONS[0])
    with pytest.raises(gr.Error, match=r"notes\.pdf is not a CoNLL-U file"):
        views.sentences_for("/tmp/notes.pdf", COUNT)
    with pytest.raises(gr.Error, match=r"gone\.conllu did not arrive"):
        views.sentences_for({"path": "/nonexistent/gone.conllu"}, COUNT)
    for unknown, shown in (("nonexistent", "'nonexistent'"), ("<b>x</b>", "That relation"), (["det"], "That relation")):
        with pytest.raises(gr.Error) as raised:
            views.heads_view(services, "default", COUNT, None, unknown, DIRECTIONS[0])
        assert raised.value.message.startswith(f"{shown} is not a relation scored on the bundled sample")
        known = head_scores(sentence_features(services.model("default"), read_sample()[:COUNT])).relations
        assert f"pick one of {', '.join(known)} (the relations with at least 10 arcs there)" in raised.value.message
    for none_given in (None, "", "  "):                             # nothing chosen: det is drawn
        assert "**det**" in views.heads_view(services, "default", COUNT, None, none_given, DIRECTIONS[0])[0]


def test_over_training_walks_the_runs_checkpoints_and_caches_them(client, services) -> None:
    POINTS.clear()
    note, chart, numbers = client.predict("default", RUN, COUNT, None, "det, nsubj, nothing",
                                          api_name="/syntax_over_training")
    assert [p["step"] for p in numbers["points"]] == list(STEPS)
    assert f"Run **{RUN}**" in note and "0 of 3 point(s) from the cache" in note and "nothing" in note
    direct = head_scores(sentence_features(services.model(f"checkpoint:{RUN}/step-{STEPS[0]:06d}"),
                                           read_sample()[:COUNT]))
    expected = [(row["relation"], f"{row['layer']}-{row['head']}", row["accuracy"]) for row in direct.best_heads()]
    found = [(row["relation"], row["head"], row["accuracy"]) for row in numbers["points"][0]["best_heads"]]
    assert found == expected and expected                         # the checkpoints' 64 positions skip long sentences
    again = client.predict("default", RUN, COUNT, None, "det", api_name="/syntax_over_training")[0]
    assert "3 of 3 point(s) from the cache" in again


def test_no_checkpoints_is_one_sentence(tiny_tokenizer) -> None:
    empty = make_services(tiny_tokenizer, None)
    with pytest.raises(gr.Error, match="no training checkpoints yet"):
        views.over_training_view(empty, "default", "", COUNT, None, "det")


def test_every_view_clears_its_outputs_on_failure(app) -> None:
    demo, w = app
    heads = [w[name] for name in tab.HEADS_OUTPUTS]
    assert failure_clears(demo, "syntax_heads", heads) and failure_clears(demo, "syntax_heads_redraw", heads)
    assert failure_clears(demo, "layer_probe", [w["probe_summary"], w["probe_chart"], w["probe_json"]])
    assert failure_clears(demo, "syntax_over_training", [w["over_note"], w["over_chart"], w["over_json"]])


def test_the_intro_links_the_glossary() -> None:
    for anchor in ("dependency-head", "dependency-relation", "probe", "control-task", "selectivity", "uas"):
        assert f'data-gloss="gloss-{anchor}"' in tab.INTRO, anchor


def test_a_server_path_is_not_read(client, tmp_path) -> None:
    """A hand-written request naming a file on the server (not uploaded) is refused by Gradio, and its content
    never comes back."""
    secret = tmp_path / "secret.conllu"
    secret.write_text("1\tword\t_\tTOPSECRET\t_\t_\t0\troot\t_\t_\n", encoding="utf-8")   # read: the tag is quoted
    body = json.dumps({"data": ["default", COUNT, {"path": str(secret), "meta": {"_type": "gradio.FileData"}},
                                "det", DIRECTIONS[0], "bundled"]})
    outcome = call_raw(client, "/syntax_heads", body)
    assert outcome.error is not None and "TOPSECRET" not in outcome.error and str(tmp_path) not in outcome.error
