"""Joint fill: masks filled one at a time, the surest first, each step re-reading the filled words;
checked against the same loop written on transformers' BertForMaskedLM with the same random weights."""
from __future__ import annotations

import math
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch
import transformers

import engine
from engine.checkpoints.hf_format import ASSETS
from engine.model.loaded_model import LoadedModel
from engine.model.config import BertConfig
from engine.model.heads import BertWithHeads
from engine.probes.heads.fill_mask import fill_mask_details
from engine.probes.heads.joint_fill import JointFill, joint_fill
from support.reference import randomize_

pytestmark = pytest.mark.usefixtures("one_thread")

TOKENIZER = engine.WordPieceTokenizer.from_file(ASSETS / "tokenizer")
SCORE_TOLERANCE = 1e-5      # as the fill-mask parity (docs/design/model-correctness.md)


def config(**overrides) -> BertConfig:
    values = dict(vocab_size=TOKENIZER.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    return BertConfig(**{**values, **overrides})


@pytest.fixture(scope="module", params=[0, 3])
def seed(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def saved(seed, tmp_path_factory) -> Path:
    torch.manual_seed(seed)
    model = randomize_(BertWithHeads(config(), heads=("mlm",)), seed, scale=0.3).eval()
    return engine.save(model, TOKENIZER, tmp_path_factory.mktemp("joint") / "model")


@pytest.fixture(scope="module")
def ours(saved) -> LoadedModel:
    return engine.load(saved)


@pytest.fixture(scope="module")
def theirs(saved):
    model = transformers.BertForMaskedLM.from_pretrained(str(saved)).eval()
    return model, transformers.BertTokenizerFast.from_pretrained(str(saved))


def reference_joint_fill(model, tokenizer, text: str, pair: str | None = None) -> tuple[list[tuple], str]:
    """The rule, written on transformers: fill the mask whose top-1 probability is highest (a tie: the
    leftmost), put that token in, run again. Returns [(mask index, position, token id, probability)], text."""
    enc = tokenizer(text, pair, return_tensors="pt")
    ids = enc["input_ids"].clone()                                      # (1, S)
    masks = [i for i, t in enumerate(ids[0].tolist()) if t == tokenizer.mask_token_id]
    remaining, steps = list(masks), []
    while remaining:
        with torch.no_grad():
            logits = model(input_ids=ids, token_type_ids=enc["token_type_ids"],
                           attention_mask=enc["attention_mask"]).logits[0]  # (S, V)
        probs = logits[remaining].softmax(-1)                            # (R, V)
        best = [(probs[r].max().item(), -r) for r in range(len(remaining))]
        r = best.index(max(best))
        position = remaining.pop(r)
        token = int(probs[r].argmax())
        ids[0, position] = token
        steps.append((masks.index(position), position, token, best[r][0]))
    body = [t for i, t in enumerate(ids[0].tolist()) if t not in tokenizer.all_special_ids or i in masks]
    return steps, tokenizer.decode(body)


@pytest.mark.parametrize("text, pair", [
    ("The [MASK] sat on the [MASK].", None),
    ("[MASK] [MASK] went to the [MASK] yesterday.", None),
    ("Who sang the [MASK]?", "The [MASK] sang it [MASK]."),
])
def test_matches_the_rule_on_transformers(ours, theirs, text, pair):
    result = joint_fill(ours, text, pair)
    steps, sequence = reference_joint_fill(*theirs, text, pair)
    assert isinstance(result, JointFill) and len(result.steps) == len(steps) >= 2
    assert [(s.mask, s.position, s.token_id) for s in result.steps] == [x[:3] for x in steps]   # order and tokens
    assert [s.step for s in result.steps] == list(range(1, len(steps) + 1))
    for got, (_, _, _, p) in zip(result.steps, steps):
        assert abs(got.score - p) <= SCORE_TOLERANCE
        assert got.token == TOKENIZER.id_to_token(got.token_id)
    assert result.sequence == sequence
    assert result.probability == pytest.approx(math.prod(s.score for s in result.steps), rel=1e-12)
    assert [result.input_ids[s.position] for s in result.steps] == [s.token_id for s in result.steps]


def test_the_order_is_the_models_not_left_to_right(ours, theirs, seed):
    """With seed 3's weights the surest mask is not the first one, so the parity above really tests the order."""
    text = "[MASK] [MASK] went to the [MASK] yesterday."
    order = [s.mask for s in joint_fill(ours, text).steps]
    assert order == [x[0] for x in reference_joint_fill(*theirs, text)[0]]
    assert (order == sorted(order)) == (seed == 0), order


def test_the_first_step_is_the_surest_mask_of_the_per_mask_view(ours):
    """Before anything is filled, the joint fill sees what the per-mask (pipeline) view sees."""
    text = "[MASK] [MASK] went to the [MASK] yesterday."
    first = joint_fill(ours, text).steps[0]
    independent = fill_mask_details(ours, text, top_k=1).masks
    surest = max(independent, key=lambda m: (m.scores[0], -m.index))
    assert (first.mask, first.position, first.token_id) == (surest.index, surest.position, surest.token_ids[0])
    assert first.score == pytest.approx(surest.scores[0], abs=1e-7)


def test_equal_confidence_fills_the_leftmost_first():
    """A head whose transform outputs zeros predicts its bias everywhere: every mask ties at every step."""
    model = BertWithHeads(config(), heads=("mlm",)).eval()
    paris = TOKENIZER.token_to_id("paris")
    with torch.no_grad():
        model.cls.predictions.transform.LayerNorm.weight.zero_()
        model.cls.predictions.transform.LayerNorm.bias.zero_()
        model.cls.predictions.bias.zero_()
        model.cls.predictions.bias[paris] = 12.0
    loaded = LoadedModel(model, TOKENIZER, model.config, "hand-made")
    result = joint_fill(loaded, "[MASK] and [MASK] or [MASK]")
    assert [s.mask for s in result.steps] == [0, 1, 2]
    assert len({s.score for s in result.steps}) == 1 and result.steps[0].score > 0.8
    assert result.sequence == "paris and paris or paris"


def test_one_mask_is_the_pipelines_top_guess(ours):
    result = joint_fill(ours, "Nice to [MASK] you.")
    top = fill_mask_details(ours, "Nice to [MASK] you.", top_k=1).masks[0]
    assert [(s.step, s.mask, s.token_id) for s in result.steps] == [(1, 0, top.token_ids[0])]
    assert result.steps[0].score == pytest.approx(top.scores[0], abs=1e-7)
    assert result.to_dict()["steps"][0]["token_str"] == top.token_strs[0]


def test_errors_are_the_fill_masks(ours, tmp_path):
    with pytest.raises(ValueError, match=r"add at least one \[MASK\] token"):
        joint_fill(ours, "Nice to meet you.")
    qa = engine.load(engine.save(BertWithHeads(config(), heads=("qa",)).eval(), TOKENIZER, tmp_path / "qa"))
    with pytest.raises(ValueError, match="no masked-LM head"):
        joint_fill(qa, "Nice to [MASK] you.")


def test_a_model_of_one_segment_fills_a_pair_as_fill_mask_does():
    """A model without a second segment row (type_vocab_size 1, as RoBERTa's) reading a pair with a tokenizer that
    writes segment 1: no segment ids go in, as in fill-mask, instead of an index past its one row."""
    model = randomize_(BertWithHeads(config(type_vocab_size=1), heads=("mlm",)), 1, scale=0.3).eval()
    loaded = LoadedModel(model, TOKENIZER, model.config, "one segment")
    result = joint_fill(loaded, "the king is [MASK].", "the queen is [MASK].")
    per_mask = fill_mask_details(loaded, "the king is [MASK].", top_k=1, text_pair="the queen is [MASK].").masks
    assert len(result.steps) == 2
    first = result.steps[0]
    assert first.token_id == per_mask[first.mask].token_ids[0]          # its first step: fill-mask's top guess there
    assert first.score == pytest.approx(per_mask[first.mask].scores[0], abs=1e-6)
