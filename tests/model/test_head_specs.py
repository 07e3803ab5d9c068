"""engine.model.head_specs: one spec per head is all a new head needs (model, checkpoints, description, its
own labels in the forward call, an attribution target in the probes and the Why tab), and the registry agrees
with transformers' classes. The toy head is written here as its own module would be, and registered with one
``register_head`` call: nothing else is edited."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import transformers
from torch import nn

from conftest import tiny_config
from engine.checkpoints import hf_format
from engine.checkpoints.key_mapping import architectures_for, hf_classes, hf_key
from engine.model.config import BertConfig
from engine.model.head_specs import (HEADS, JOINT_CLASSES, AttributionSpec, HeadInput, HeadSpec, register_head,
                                     unregister_head)
from engine.model.heads import BertWithHeads
from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.methods import attribute, target_names, target_spec
from engine.probes.attribution.targets import Target
from engine.training.loop.freezing import freeze_unused
from explorer.models.description import describe
from support.reference import hf_config, randomize_
from support.registry_checks import check_attribution_targets, check_heads


@dataclass
class ToyOutput:
    logits: torch.Tensor                     # (B, 3)
    loss: torch.Tensor | None = None


class ToyHead(nn.Module):
    """Three scores from the mean of the last hidden state, times a learnt scale."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.score = nn.Linear(config.hidden_size, 3)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.score(hidden.mean(dim=1)) * self.scale          # (B, S, H) -> (B, H) -> (B, 3)


def _run_toy(model: BertWithHeads, x: HeadInput) -> ToyOutput:
    logits = model.head_module("toy_scorer")(x.hidden)
    target = x.targets.get("toy_labels")                                # its own labels: (B,) in 0..2
    return ToyOutput(logits, None if target is None else nn.functional.cross_entropy(logits, target))


def toy_target(loaded: LoadedModel, text: str, text_pair: str | None, target: str | None,
               which: int | None) -> Target:
    """The toy head's attribution target: score ``which`` (default 0) of the three, for ``text``."""
    encoding = loaded.tokenizer.encode(text)
    index = 0 if which is None else which

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        return model(ids, compute=("toy_scorer",)).result("toy_scorer").logits              # (N, 3)

    return Target(task="toy_score", head="toy_scorer", tokens=list(encoding.tokens), input_ids=list(encoding.input_ids),
                  token_type_ids=list(encoding.token_type_ids), class_scores=scores, index=index, position=None,
                  description=f"toy score {index}", prediction="three toy scores")


TOY = HeadSpec("toy_scorer", "toy_scorer", "toy_scorer.", "BertForToyScoring", "toy-scoring", "toy scoring",
               build=lambda config, model: ToyHead(config), run=_run_toy, tried_in="Heads › Toy",
               init=lambda head: head.scale.data.fill_(2.0), targets=("toy_labels",),
               attribution=(AttributionSpec("toy_score", toy_target, "Toy: one of three scores", form=(
                   "Text", "the cat sat", "(not used)", "", "(not used)", "Which score: 1, 2 or 3")),))


@pytest.fixture
def toy_head():
    """The toy head registered for one test."""
    register_head(TOY)
    try:
        yield TOY
    finally:
        unregister_head(TOY.name)


def test_a_registered_head_is_built_run_saved_loaded_and_described(toy_head, tmp_path, tiny_tokenizer) -> None:
    torch.manual_seed(0)
    model = randomize_(BertWithHeads(tiny_config(), heads=("mlm", "toy_scorer")), seed=3).eval()
    assert model.heads == ("mlm", "toy_scorer") and isinstance(model.toy_scorer, ToyHead)
    assert not model.has_pooler                                      # neither head reads the pooled vector
    assert torch.equal(BertWithHeads(tiny_config(), heads=("toy_scorer",)).toy_scorer.scale, torch.tensor([2.0]))

    ids = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 3, 0]])
    mask = (ids != 0).long()
    out = model(ids, attention_mask=mask, toy_labels=torch.tensor([0, 2]))     # its own label argument
    expected = model.toy_scorer(out.encoder.last_hidden_state)
    assert torch.allclose(out.result("toy_scorer").logits, expected) and out.extra["toy_scorer"].logits.shape == (2, 3)
    assert torch.allclose(out.loss, out.result("toy_scorer").loss)   # the only head with targets here
    assert model(ids, attention_mask=mask, compute=("mlm",)).result("toy_scorer") is None

    assert architectures_for(model.heads) == ["BertForMaskedLM", "BertForToyScoring"]
    assert hf_classes()["BertForToyScoring"] == (("toy_scorer",), False)
    saved = hf_format.save(model, tiny_tokenizer, tmp_path / "toy")
    loaded = hf_format.load(saved)
    assert loaded.heads == ("mlm", "toy_scorer") and "toy_scorer" not in loaded.missing_heads
    theirs = loaded.model.state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(theirs[key], value), key
    assert torch.equal(loaded.model(ids, attention_mask=mask).result("toy_scorer").logits, expected)

    text = describe(loaded)
    assert "toy scoring (Heads › Toy)" in text and "masked LM (Fill-mask)" in text
    assert "add one in the **Fine-tune** tab" not in text           # a head with a place to try it
    with pytest.raises(ValueError, match="this model has no next-sentence head .*it has: masked-LM, toy-scoring"):
        loaded.require_head("nsp")

    freeze_unused(loaded.model, heads=("mlm",), uses_pooler=False)
    assert not any(p.requires_grad for p in loaded.model.toy_scorer.parameters())
    assert loaded.model.cls.predictions.bias.requires_grad


def test_the_toy_heads_labels_are_a_forward_keyword_only_while_it_is_registered(toy_head) -> None:
    model = BertWithHeads(tiny_config(), heads=("toy_scorer",)).eval()
    ids = torch.tensor([[2, 5, 6, 3]])
    assert model(ids, toy_labels=torch.tensor([1])).loss is not None
    assert model(ids, class_labels=torch.tensor([1])).loss is None         # the built-in names stay, unread here
    with pytest.raises(TypeError, match="unexpected keyword argument.*toy_label"):
        model(ids, toy_label=torch.tensor([1]))                               # a typo: no head reads it
    unregister_head("toy_scorer")
    try:
        with pytest.raises(TypeError, match="toy_labels"):
            BertWithHeads(tiny_config(), heads=())(ids, toy_labels=torch.tensor([1]))
    finally:
        register_head(TOY)


def test_the_toy_heads_attribution_target_is_explained_and_offered_by_the_why_tab(toy_head, tmp_path,
                                                                                   tiny_tokenizer) -> None:
    from explorer.why import actions

    model = randomize_(BertWithHeads(tiny_config(), heads=("mlm", "toy_scorer")), seed=3).eval()
    loaded = hf_format.load(hf_format.save(model, tiny_tokenizer, tmp_path / "toy"))
    assert target_names()[-1] == "toy_score" and target_spec("toy_score")[0] == "toy_scorer"
    assert ("Toy: one of three scores", "toy_score") == actions.task_choices()[-1]
    assert actions.form_updates("toy_score")[3]["label"] == "Which score: 1, 2 or 3"
    result = attribute(loaded, "toy_score", "the cat sat", which=2, n_steps=32)
    assert result.task == "toy_score" and result.target == "toy score 2" and len(result.attributions) == 5
    assert abs(result.convergence_delta) < 1e-3 * max(1.0, abs(result.target_score - result.baseline_score))
    with torch.no_grad():
        direct = loaded.model(torch.tensor([loaded.tokenizer.encode("the cat sat").input_ids])).extra["toy_scorer"]
    assert result.target_score == pytest.approx(float(direct.logits[0, 2]), abs=1e-5)


def test_the_attribution_probes_keep_no_table_of_heads() -> None:
    """The probes and heads.py read the specs: no head or target name is spelled in attribution/methods.py."""
    import ast
    from pathlib import Path

    import engine.probes.attribution.methods as attribution

    names = set(HEADS) | set(target_names())
    tree = ast.parse(Path(attribution.__file__).read_text())
    spelled = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names}
    assert not spelled


def test_registering_a_taken_name_or_module_is_refused(toy_head) -> None:
    before = list(HEADS)
    with pytest.raises(ValueError, match="registered already"):
        register_head(TOY)
    with pytest.raises(ValueError, match="registered already"):
        register_head(HeadSpec("other", "qa_outputs", "x.", "X", "x", "x", build=TOY.build, run=TOY.run))
    with pytest.raises(ValueError, match="BertWithHeads' own module"):
        register_head(HeadSpec("other", "dropout", "x.", "X", "x", "x", build=TOY.build, run=TOY.run))
    taken = AttributionSpec("fill_mask", toy_target, "x", form=("",) * 6)
    with pytest.raises(ValueError, match="attribution target named 'fill_mask' is registered already"):
        register_head(HeadSpec("other", "other", "x.", "X", "x", "x", build=TOY.build, run=TOY.run, attribution=(taken,)))
    assert list(HEADS) == before and before[-1] == "toy_scorer"          # the refused ones added nothing


def test_the_built_in_heads_in_canonical_order() -> None:
    check_heads()                      # the built-ins first, in order, each once; which are pooled, labelled, ...
    check_attribution_targets()


def test_the_registry_checks_hold_with_the_toy_head_registered(toy_head) -> None:
    """What the registry tests assert (here, and the Why tab's dropdown and examples) holds once a head is
    added the recipe's way: they name the built-ins, never the whole registry."""
    check_heads()
    check_attribution_targets()
    assert list(HEADS)[-1] == "toy_scorer"                               # after the built-ins


@pytest.mark.parametrize("name", list(HEADS))
def test_each_head_agrees_with_its_transformers_class(name) -> None:
    spec = HEADS[name]
    config = tiny_config(id2label={0: "a", 1: "b", 2: "c"})
    ours = BertWithHeads(config, heads=(name,)).state_dict()
    if spec.hf_num_labels is not None:           # transformers sizes it by num_labels: export writes that many
        config = config.replace(id2label={i: f"L{i}" for i in range(spec.hf_num_labels)})
    theirs = getattr(transformers, spec.hf_class)(hf_config(config)).state_dict()
    assert any(key.startswith(spec.hf_prefix) for key in theirs)
    others = {s.hf_prefix for s in HEADS.values() if s.hf_prefix != spec.hf_prefix}
    assert not any(key.startswith(tuple(others)) for key in theirs)   # the class carries this head alone
    assert ("bert.pooler.dense.weight" in theirs) == spec.pooled
    head_keys = [k for k in ours if k.startswith(spec.prefix) and k[len(spec.prefix):] not in spec.tied]
    assert head_keys
    for key in head_keys:                        # each weight of ours is transformers' under hf_key, same shape
        assert theirs[hf_key(key)].shape == ours[key].shape, key
    if spec.labelled:                            # sized by id2label (checkpoint import reads it from here)
        assert ours[spec.prefix + "weight"].shape[0] == theirs[spec.hf_prefix + "weight"].shape[0] == 3


def test_joint_classes_carry_their_heads_and_the_pooler_when_one_reads_it() -> None:
    for name, heads in JOINT_CLASSES.items():
        theirs = getattr(transformers, name)(hf_config(tiny_config())).state_dict()
        assert all(any(k.startswith(HEADS[h].hf_prefix) for k in theirs) for h in heads)
        assert hf_classes()[name] == (heads, "bert.pooler.dense.weight" in theirs)
