"""Hostile input to the Tokenize, Embeddings, Attention (neuron view included) and Why endpoints of the served app.

Every case: a human message (error or warning) or a validated result, no stack trace or
exception class name, nothing written outside the runs and temp folders, and the same
endpoint still answers a normal call afterwards.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from gradio_client import Client

from support.hostile_helpers import (BEYOND_POSITIONS, BLANK, CJK, COMBINING, CONTROL, CONTROL_ONLY, EMOJI, EMPTY, HUGE,
                             LITERAL_SPECIALS, ONLY_SPECIALS, RTL, TOO_HUGE, ZERO_WIDTH, Sandbox,
                             call, call_raw, case_id, expect_error, expect_ok, inputs, run_case, sandbox,
                             serve_app)
from support.probing_helpers import make_services, write_run

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the cat sat on the mat."
DEFAULTS: dict[str, dict[str, Any]] = {
    "/tokenize": dict(model="default", text=TEXT, pair="", max_length=64),
    "/embeddings": dict(model="default", text=TEXT, pair="", layer=2, component="output", token="all"),
    "/embeddings_over_training": dict(model="default", positions=16),
    "/attention": dict(model="default", text=TEXT, pair="", layer=1, head=0, max_length=128, heads=[0, 1],
                       statistic="entropy"),
    "/ablate_heads": dict(model="default", text=TEXT, pair="", heads="1:1", top_k=3),
    "/attention_export": dict(model="default", text=TEXT, pair="", layer=1, head=2, max_length=64),
    "/attention_over_training": dict(model="default", text=TEXT, pair="", layer=1, head=3, max_length=64),
    "/neuron_view": dict(model="default", text=TEXT, pair="", layer=1, head=2, max_length=64, query=2),
    "/attribute": dict(model="default", task="fill_mask", text="the cat [MASK] on the mat.", pair="", target="",
                       which=0, method="integrated_gradients", score="logit", steps=8),
    "/compare": dict(model_a="default", model_b="default", text="the cat [MASK] on the mat.", layer=1, head=0,
                     top_k=3),
    "/syntax_heads": dict(model="default", sentences=40, data_file=None, relation="det", direction="dependent → head"),
    "/layer_probe": dict(model="default", sentences=40, data_file=None),
    "/syntax_over_training": dict(model="default", run="", sentences=40, data_file=None, relations="det, nsubj"),
}


def args(api: str, **changes: Any) -> list[Any]:
    """The endpoint's positional inputs: the defaults with ``changes``."""
    return inputs(DEFAULTS, api, **changes)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer) -> Iterator[tuple[Client, Sandbox]]:
    import app

    with sandbox(tmp_path_factory.mktemp("hostile-probing")) as box:
        write_run(box.runs, tiny_tokenizer)
        services = make_services(tiny_tokenizer, box.runs)
        with serve_app(app.create_app(services), box) as client:
            yield client, box


def summary_of(value: Any, index: int) -> str:
    return value[index]


def truncated(index: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        assert "truncated" in value[index], value[index]
    return check


def table_has(index: int, token: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        tokens = [row[1] for row in value[index]["data"]]
        assert token in tokens, tokens
    return check


def tokens_are(expected: list[str]) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        assert [row[1] for row in value[2]["data"]] == expected
    return check


def three_files(value: Any) -> None:
    names = sorted(Path(v).suffix for v in value)
    assert names == [".json", ".png", ".svg"], value
    payload = json.loads(Path(next(v for v in value if v.endswith(".json"))).read_text(encoding="utf-8"))
    assert (payload["layer"], payload["head"]) == (1, 2) and len(payload["attention"]) == len(payload["tokens"])


OK = None


def exactly(message: str) -> str:
    """The regex of exactly ``message`` (the whole error, nothing around it)."""
    return "^" + re.escape(message) + "$"


AVAILABLE = "Models available now: default"   # an unknown key's message lists the keys that work
# (api, changes, expected): a regex the error must match, or OK / a check of the result.
CASES: list[tuple[str, dict[str, Any], Any]] = [
    # --- /tokenize
    ("/tokenize", dict(text=EMPTY), "Type some text"),
    ("/tokenize", dict(text=BLANK), "Type some text"),
    ("/tokenize", dict(text=HUGE), truncated(1)),
    ("/tokenize", dict(text=TOO_HUGE), "too long.*100,000"),
    ("/tokenize", dict(text=TEXT, pair=TOO_HUGE), "text pair is too long"),
    ("/tokenize", dict(text=BEYOND_POSITIONS), truncated(1)),
    ("/tokenize", dict(text=ONLY_SPECIALS), table_has(2, "[PAD]")),
    ("/tokenize", dict(text=LITERAL_SPECIALS, pair=LITERAL_SPECIALS), table_has(2, "cat")),
    ("/tokenize", dict(text=EMOJI), table_has(2, "[UNK]")),
    ("/tokenize", dict(text=CJK, pair=RTL), OK),
    ("/tokenize", dict(text=COMBINING), OK),
    ("/tokenize", dict(text=CONTROL), table_has(2, "on")),        # control characters are dropped
    ("/tokenize", dict(text=ZERO_WIDTH), table_has(2, "sat")),
    ("/tokenize", dict(text=CONTROL_ONLY), tokens_are(["[CLS]", "[SEP]"])),
    ("/tokenize", dict(max_length=0), "max_length|Max length|minimum"),
    ("/tokenize", dict(max_length=10**6), "max_length|Max length|maximum"),
    ("/tokenize", dict(max_length=128), "from 8 to 64, got 128"),       # the slider allows more than the model has
    ("/tokenize", dict(model="checkpoint:../../etc/passwd"), "not a checkpoint name.*" + AVAILABLE),
    ("/tokenize", dict(model="local:/etc"), "allowed model folders|only the admin"),
    ("/tokenize", dict(model="hub:owner/name"), "switched off|offline"),
    ("/tokenize", dict(model="checkpoint:run-a/step-999999"), "does not exist.*" + AVAILABLE),
    # --- /embeddings
    ("/embeddings", dict(text=BLANK), "Type some text to embed"),
    ("/embeddings", dict(text=HUGE), OK),
    ("/embeddings", dict(text=ONLY_SPECIALS, pair=ONLY_SPECIALS), OK),
    ("/embeddings", dict(text=EMOJI, pair=CJK), OK),
    ("/embeddings", dict(text=ZERO_WIDTH, pair=RTL), OK),
    ("/embeddings", dict(text=CONTROL_ONLY), OK),
    ("/embeddings", dict(layer=5), OK),                 # a layer left from a deeper model: a warning, the last one
    ("/embeddings", dict(layer=-1), "Layer|minimum"),
    ("/embeddings", dict(layer=10**6), "Layer|maximum"),
    ("/embeddings", dict(component="../../etc"), "component|choices"),
    ("/embeddings", dict(token="999"), OK),             # a warning, then all tokens
    ("/embeddings", dict(token="abc"), "neither 'all' nor a token position"),
    ("/embeddings", dict(model="no such model"), "neither a model key.*" + AVAILABLE),
    ("/embeddings_over_training", dict(positions=0), "Positions|minimum"),
    ("/embeddings_over_training", dict(positions=10**6), "Positions|maximum"),
    ("/embeddings_over_training", dict(model="checkpoint:../x/y"), "not a checkpoint name|no checkpoints"),
    # --- /attention
    ("/attention", dict(text=EMPTY), "Type a sentence"),
    ("/attention", dict(text=BEYOND_POSITIONS), truncated(5)),
    ("/attention", dict(text=LITERAL_SPECIALS, pair=ONLY_SPECIALS), OK),
    ("/attention", dict(text=EMOJI, pair=COMBINING), OK),
    ("/attention", dict(text=CONTROL, pair=ZERO_WIDTH), OK),
    ("/attention", dict(layer=3), "layer 3 does not exist"),
    ("/attention", dict(head=4), "head 4 does not exist"),
    ("/attention", dict(layer=-3), "layer|minimum"),
    ("/attention", dict(layer=10**6), "layer|maximum"),
    ("/attention", dict(heads=[99]), "heads \\[99\\] do not exist"),
    ("/attention", dict(heads=[0, 99]), OK),                       # a warning; head 0 is drawn
    ("/attention", dict(heads=[-1, 0]), "heads \\[-1\\] do not exist"),
    ("/attention", dict(heads=[99, -1]), exactly("heads [-1, 99] do not exist: this model's layers have heads 0 to 3")),
    ("/attention", dict(statistic="__class__"), "statistic|choices"),
    ("/attention", dict(max_length=3), "Max length|minimum"),
    ("/ablate_heads", dict(heads=""), "Name the heads"),
    ("/ablate_heads", dict(heads="9:9"), "layer 9 does not exist"),
    ("/ablate_heads", dict(heads="1:7"), "head 7 does not exist"),
    ("/ablate_heads", dict(heads="\u00b2:1"), "is not layer:head"),
    ("/ablate_heads", dict(heads="a:b; drop table"), "is not layer:head"),
    ("/ablate_heads", dict(heads="1:*, 2:*"), OK),              # every head removed: still a result
    ("/ablate_heads", dict(text=" ".join(["[MASK]"] * 50)), OK),
    ("/ablate_heads", dict(model="encoder"), "masked-LM head"),
    ("/ablate_heads", dict(top_k=0), "Top-k|minimum"),
    ("/ablate_heads", dict(text=TOO_HUGE), "too long"),
    ("/attention_export", dict(), three_files),
    ("/attention_export", dict(layer=7), "layer 7 does not exist"),
    ("/attention_export", dict(text=CJK + EMOJI + RTL), OK),
    ("/attention_over_training", dict(head=9), "head 9 does not exist"),
    ("/attention_over_training", dict(text=BLANK), "Type a sentence"),
    ("/attention_over_training", dict(text=BEYOND_POSITIONS), OK),
    # --- /neuron_view (the Attention tab's accordion)
    ("/neuron_view", dict(), OK),
    ("/neuron_view", dict(text=EMPTY), "Type a sentence"),
    ("/neuron_view", dict(text=BEYOND_POSITIONS, query=63), OK),           # truncated to the max length
    ("/neuron_view", dict(text=EMOJI, pair=CJK, query=0), OK),
    ("/neuron_view", dict(text=CONTROL_ONLY, query=1), OK),                # [CLS] [SEP]
    ("/neuron_view", dict(query=99), "query token 99 does not exist: the input has 9 tokens"),
    ("/neuron_view", dict(query=-1), "query token \\(0 = \\[CLS\\]\\) must be a whole number of at least 0, got -1"),
    ("/neuron_view", dict(query="../../etc"), "\\[CLS\\]\\) must be a whole number, got '../../etc'"),
    ("/neuron_view", dict(layer=3), "layer 3 does not exist"),
    ("/neuron_view", dict(head=4), "head 4 does not exist"),
    # a slider's value that is no number is refused by the app's check, before Gradio's own (which has no message)
    ("/neuron_view", dict(layer="abc"), exactly("Layer (from 1) must be a whole number, got 'abc'.")),
    ("/neuron_view", dict(head=None), exactly("Head (from 0) must be a whole number, got None.")),
    ("/neuron_view", dict(max_length="1e999"), "^Max length .*must be a whole number, got '1e999'\\.$"),
    ("/neuron_view", dict(model="encoder"), OK),                           # attention needs no head
    ("/neuron_view", dict(text=TOO_HUGE), "too long"),
    # --- /attribute (the Why tab)
    ("/attribute", dict(), OK),
    ("/attribute", dict(text=EMPTY), "Type the text with \\[mask\\]"),
    ("/attribute", dict(text=TEXT), "no mask token found"),
    ("/attribute", dict(text=BEYOND_POSITIONS + " [MASK]"), "tokens long but this model takes at most 64"),
    ("/attribute", dict(text=TOO_HUGE), "too long"),
    ("/attribute", dict(text=ONLY_SPECIALS + " [MASK]"), OK),
    ("/attribute", dict(text=EMOJI + " [MASK] " + CJK), OK),
    ("/attribute", dict(text="[MASK] " + CONTROL), OK),
    ("/attribute", dict(target="<script>alert(1)</script>"), "the target '<script>alert\\(1\\)</script>' is not one "
                                                             "token of this model's vocabulary: it splits into"),
    # an unknown word is refused, not replaced by its first piece (which the fill-mask pipeline would take)
    ("/attribute", dict(target="zzzzqqq"), exactly(
        "the target 'zzzzqqq' is not one token of this model's vocabulary: it splits into 7 pieces "
        "(z ##z ##z ##z ##q ##q ##q) and a prediction is one token, so give a word the vocabulary holds whole, "
        "or leave the target empty")),
    ("/attribute", dict(target="Cat"), OK),                       # one piece once lowercased: 'cat', as the pipeline
    # 'Which' counts from 1 (0 = the default), and so does its message
    ("/attribute", dict(which=3), exactly("There is no [MASK] 3: the input has 1 [MASK], so 'Which' must be 1 "
                                          "(counting from 1), or 0 for the default.")),
    ("/attribute", dict(which=99, text="the [MASK] sat on the [MASK]."), exactly(
        "There is no [MASK] 99: the input has 2 [MASK]s, so 'Which' must be 1 to 2 (counting from 1), or 0 for "
        "the default.")),
    ("/attribute", dict(which=2, text="the [MASK] sat on the [MASK]."), OK),
    ("/attribute", dict(which=-1), "'Which' .* must be a whole number of at least 0|minimum"),
    ("/attribute", dict(steps=1), "Steps must be a whole number from 2 to 300|minimum"),
    ("/attribute", dict(steps=10**6), "Steps must be a whole number from 2 to 300|maximum"),
    ("/attribute", dict(task="__class__"), "Unknown prediction|choices"),
    ("/attribute", dict(method="exec"), "Unknown method|choices"),
    ("/attribute", dict(score="odds"), "Unknown score|choices"),
    ("/attribute", dict(model="encoder"), "has no masked LM"),
    ("/attribute", dict(task="classify"), "has no sequence classification head"),
    ("/attribute", dict(task="qa_start", text="who sat?"), "Type the context"),
    ("/attribute", dict(task="qa_end", text="who sat?", pair=TEXT), OK),
    ("/attribute", dict(task="next_sentence", text=TEXT, pair=EMOJI), OK),
    ("/attribute", dict(task="next_sentence", text=TEXT, pair=TEXT, target="Maybe"), "'Maybe' is not one of"),
    ("/attribute", dict(model="no such model"), "neither a model key.*" + AVAILABLE),
    # --- /compare
    ("/compare", dict(layer="abc"), exactly("Layer (from 1) must be a whole number, got 'abc'.")),
    ("/compare", dict(head="nan"), exactly("Head (from 0) must be a whole number, got 'nan'.")),
    ("/compare", dict(layer=99), exactly("layer 99 does not exist: this model has 2 layers, numbered 1 to 2 "
                                         "(layer 0 is the embeddings' output)")),
    # --- /syntax_heads, /layer_probe, /syntax_over_training (the tiny model's 64 positions skip long sentences)
    ("/syntax_heads", dict(sentences="abc"), r"^Sentences \(.*\) must be a whole number, got 'abc'\.$"),
    ("/syntax_heads", dict(sentences=10**9), "greater than maximum value 1000"),
    ("/syntax_heads", dict(sentences=3), "no relation has 10 or more arcs"),
    ("/syntax_heads", dict(relation="<script>alert(1)</script>"), r"^That relation is not a relation scored on the "
                                                                  r"bundled sample .*: pick one of [a-z, ]+ \(the"),
    ("/syntax_heads", dict(relation="nonexistent"), "^'nonexistent' is not a relation scored on .*: pick one of .*det"),
    ("/syntax_heads", dict(model="no such model"), "neither a model key.*" + AVAILABLE),
    ("/layer_probe", dict(sentences=-5), "less than minimum value 2"),
    ("/syntax_over_training", dict(run="no-such-run"), "has no checkpoints"),
    ("/syntax_over_training", dict(relations="x" * 5000), lambda value: len(value[0]) < 2000),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_hostile_input(served: tuple[Client, Sandbox], case: tuple[str, dict[str, Any], Any]) -> None:
    client, box = served
    run_case(client, box, DEFAULTS, case)


def test_warning_for_a_layer_past_the_models_last(served: tuple[Client, Sandbox]) -> None:
    client, _ = served
    outcome = call(client, *args("/embeddings", layer=5), api_name="/embeddings")
    expect_ok(outcome)
    assert any("This model has 2 layers: showing the last one (2), not 5" in w for w in outcome.warnings), \
        outcome.warnings


def test_warning_for_an_unknown_token_position(served: tuple[Client, Sandbox]) -> None:
    client, _ = served
    outcome = call(client, *args("/embeddings", token="999"), api_name="/embeddings")
    expect_ok(outcome)
    assert any("Position 999 is not in this input" in w for w in outcome.warnings), outcome.warnings


@pytest.mark.parametrize("api", ["/tokenize", "/embeddings", "/attention", "/ablate_heads"])
def test_lone_surrogate_in_a_hand_written_request(served: tuple[Client, Sandbox], api: str) -> None:
    """JSON may escape a lone surrogate (\\ud800), which is not text; the tokenizer must never see it."""
    client, box = served
    values = json.dumps(args(api, text="the cat SURROGATE sat")).replace("SURROGATE", "\\ud800")
    with box.no_stray_writes():
        expect_error(call_raw(client, api, '{"data": ' + values + '}'), "not valid Unicode")
        expect_ok(call(client, *args(api), api_name=api))


@pytest.mark.parametrize("api,field,shown", [("/compare", "layer", "Layer (from 1)"), ("/compare", "top_k", "Top k"),
                                             ("/neuron_view", "layer", "Layer (from 1)")])
@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN"])
def test_a_number_json_allows_but_no_form_does(served: tuple[Client, Sandbox], api: str, field: str, shown: str,
                                              number: str) -> None:
    """Python's JSON reads Infinity and NaN (gradio_client cannot even send them): a sentence, not ``{"error": null}``."""
    client, box = served
    values = json.dumps(args(api, **{field: "NUMBER"})).replace('"NUMBER"', number)
    with box.no_stray_writes():
        got = {"Infinity": "inf", "-Infinity": "-inf", "NaN": "nan"}[number]
        expect_error(call_raw(client, api, '{"data": ' + values + '}'),
                     exactly(f"{shown} must be a whole number, got {got}."))
        expect_ok(call(client, *args(api), api_name=api))
