"""Fill-mask: same output as the ``transformers`` fill-mask pipeline on the same saved directory,
the richer result for the UI, validation, and probing over checkpoints."""
from __future__ import annotations

import logging
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
import torch
import transformers

import engine
from engine.checkpoints.hf_format import ASSETS
from engine.model.loaded_model import LoadedModel
from engine.model.config import BertConfig
from engine.probes.heads.fill_mask import (FillMaskResult, fill_mask, fill_mask_details, fill_mask_from_logits,
                                           fill_mask_logits)
from engine.probes.heads.fill_mask_checkpoints import checkpoint_step, fill_mask_over_checkpoints
from engine.model.heads import BertWithHeads
from support.reference import randomize_

TOKENIZER = engine.WordPieceTokenizer.from_file(ASSETS / "tokenizer")
SCORE_TOLERANCE = 1e-5
MAX_DIFF: list[float] = []   # every parity score difference, for the summary test


def bundled_config(**overrides) -> BertConfig:
    values = dict(vocab_size=TOKENIZER.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    values.update(overrides)
    return BertConfig(**values)


def random_model(seed: int, heads=("mlm", "nsp"), **overrides) -> BertWithHeads:
    """Random weights large enough that the distribution at a mask is peaked (clear top-k order)."""
    torch.manual_seed(seed)
    return randomize_(BertWithHeads(bundled_config(**overrides), heads=heads), seed, scale=0.3).eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return engine.save(random_model(0), TOKENIZER, tmp_path_factory.mktemp("fm") / "model")


@pytest.fixture(scope="module")
def loaded(saved) -> LoadedModel:
    return engine.load(saved)


@pytest.fixture(scope="module")
def reference(saved):
    return transformers.pipeline("fill-mask", model=str(saved), tokenizer=str(saved), device="cpu")


def assert_same(ours, theirs) -> None:
    """Same nesting, tokens, token_str and sequences; scores within SCORE_TOLERANCE."""
    assert isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs)
    if theirs and isinstance(theirs[0], list):
        for o, t in zip(ours, theirs):
            assert_same(o, t)
        return
    assert all(isinstance(row, dict) for row in ours)
    for o, t in zip(ours, theirs):
        assert set(o) == {"score", "token", "token_str", "sequence"}
        assert (o["token"], o["token_str"], o["sequence"]) == (t["token"], t["token_str"], t["sequence"])
        assert isinstance(o["score"], float) and isinstance(o["token"], int)
        diff = abs(o["score"] - t["score"])
        MAX_DIFF.append(diff)
        assert diff <= SCORE_TOLERANCE, (o, t)


# --- parity with the transformers pipeline ---------------------------------------------------

CASES = {
    "one mask": ("Nice to [MASK] you.", {}),
    "top_k=1": ("Nice to [MASK] you.", {"top_k": 1}),
    "top_k=10": ("The capital of France is [MASK].", {"top_k": 10}),
    "two masks": ("The [MASK] sat on the [MASK].", {}),
    "three masks top_k=3": ("[MASK] [MASK] went to the [MASK] yesterday.", {"top_k": 3}),
    "mask first and last": ("[MASK] is good [MASK]", {"top_k": 2}),
    "cased and accented": ("Héllo Wörld, the [MASK] is HERE!", {}),
    "literal [PAD] dropped": ("Nice to [MASK] you [PAD].", {}),
    "targets": ("Nice to [MASK] you.", {"targets": ["paris", "london"]}),
    "target string": ("Nice to [MASK] you.", {"targets": "paris"}),
    "targets cap top_k": ("Nice to [MASK] you.", {"targets": ["paris", "london", "meet"], "top_k": 10}),
    "targets below top_k": ("Nice to [MASK] you.", {"targets": ["paris", "london", "meet", "see"], "top_k": 2}),
    "targets first piece + duplicates": ("Nice to [MASK] you.",
                                         {"targets": ["Paris", "paris", "xyzzyq", "##ing", "[SEP]"]}),
    "targets two masks": ("The [MASK] sat on the [MASK].", {"targets": ["cat", "mat", "dog"]}),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_the_transformers_pipeline(case, loaded, reference):
    text, kwargs = CASES[case]
    assert_same(fill_mask(loaded, text, **kwargs), reference(text, **kwargs))


@pytest.mark.parametrize("case", CASES)
def test_results_from_kept_logits_equal_a_fresh_run(case, loaded):
    """Any Top-k and targets from one run's logits (the explorer keeps them per text): the same result."""
    text, kwargs = CASES[case]
    logits = fill_mask_logits(loaded, text)
    assert logits.dtype == np.float32 and logits.shape == (text.count("[MASK]"), loaded.config.vocab_size)
    assert fill_mask_from_logits(loaded, text, logits, **kwargs) == fill_mask_details(loaded, text, **kwargs)


def test_logits_of_another_text_are_refused(loaded):
    logits = fill_mask_logits(loaded, "The [MASK] sat on the [MASK].")
    with pytest.raises(ValueError, match="masks"):
        fill_mask_from_logits(loaded, "Nice to [MASK] you.", logits)


def test_multi_mask_sequences_keep_the_other_masks_and_specials(loaded):
    out = fill_mask(loaded, "The [MASK] sat on the [MASK].", top_k=2)
    assert len(out) == 2 and all(len(row) == 2 for row in out)
    first, second = out[0][0], out[1][0]
    assert first["sequence"].startswith("[CLS] the ") and first["sequence"].endswith("on the [MASK]. [SEP]")
    assert second["sequence"].startswith("[CLS] the [MASK] sat on the ")
    single = fill_mask(loaded, "Nice to [MASK] you.")[0]
    assert "[CLS]" not in single["sequence"] and "[SEP]" not in single["sequence"]


def test_target_probability_is_the_full_vocabulary_probability(loaded):
    best = fill_mask(loaded, "Nice to [MASK] you.", top_k=3)
    as_target = fill_mask(loaded, "Nice to [MASK] you.", targets=[best[2]["token_str"], best[0]["token_str"]])
    assert [r["token"] for r in as_target] == [best[0]["token"], best[2]["token"]]
    assert as_target[0]["score"] == pytest.approx(best[0]["score"], abs=1e-9)   # not renormalised over targets
    assert as_target[1]["score"] == pytest.approx(best[2]["score"], abs=1e-9)


def test_text_pair_matches_transformers_logits(loaded, reference):
    """The pipeline takes no pairs, so compare with the transformers model on the same pair encoding."""
    text, pair = "Who sang the song?", "The [MASK] sang it [MASK]."
    details = fill_mask_details(loaded, text, top_k=4, text_pair=pair)
    enc = reference.tokenizer(text, pair, return_tensors="pt")
    assert enc["input_ids"][0].tolist() == details.input_ids
    assert enc["token_type_ids"][0].tolist() == details.token_type_ids
    with torch.inference_mode():
        probs = reference.model(**enc).logits[0, details.mask_positions].softmax(-1)  # (M, V)
    values, ids = probs.topk(4)
    for m, mask in enumerate(details.masks):
        assert details.token_type_ids[mask.position] == 1
        assert mask.token_ids == ids[m].tolist()
        assert mask.scores == pytest.approx(values[m].tolist(), abs=SCORE_TOLERANCE)


def test_max_score_difference_is_tiny(loaded, reference):
    """Over every parity case at once: the largest score difference stays at float rounding."""
    MAX_DIFF.clear()
    for text, kwargs in CASES.values():
        assert_same(fill_mask(loaded, text, **kwargs), reference(text, **kwargs))
    assert len(MAX_DIFF) >= 50
    print(f"\nmax |score difference| over {len(MAX_DIFF)} predictions: {max(MAX_DIFF):.2e}")
    assert max(MAX_DIFF) <= 1e-6


# --- the detailed result -----------------------------------------------------------------------

def test_details_describe_the_input_and_every_mask(loaded):
    text = "The [MASK] sat on the [MASK]."
    details = fill_mask_details(loaded, text, top_k=4, targets=None)
    assert isinstance(details, FillMaskResult)
    assert details.tokens[0] == "[CLS]" and details.tokens[-1] == "[SEP]"
    assert details.mask_positions == [i for i, t in enumerate(details.tokens) if t == "[MASK]"] == [2, 6]
    assert details.top_k == 4 and details.targets is None and details.warnings == []
    assert details.source == str(loaded.path)
    assert details.to_pipeline() == fill_mask(loaded, text, top_k=4)
    for m, mask in enumerate(details.masks):
        assert (mask.index, mask.position) == (m, details.mask_positions[m])
        assert mask.tokens == [TOKENIZER.id_to_token(i) for i in mask.token_ids]
        assert mask.scores == sorted(mask.scores, reverse=True) and 0 < sum(mask.scores) <= 1
        assert 0 < mask.entropy < torch.log(torch.tensor(float(TOKENIZER.vocab_size))).item()
        assert mask.target_probabilities == {} and mask.tracked == {}


def test_details_report_target_probabilities_and_first_piece_warnings(loaded, caplog):
    with caplog.at_level(logging.WARNING, logger="engine.probes.heads.fill_mask"):
        details = fill_mask_details(loaded, "Nice to [MASK] you.", targets=["paris", "Paris", "xyzzyq"])
    assert [(t.text, t.token, t.exact) for t in details.targets] == [
        ("paris", "paris", True), ("Paris", "paris", False), ("xyzzyq", "x", False)]
    assert details.top_k == 2   # two distinct ids
    mask = details.masks[0]
    assert set(mask.target_probabilities) == {"paris", "Paris", "xyzzyq"}
    assert mask.target_probabilities["paris"] == mask.target_probabilities["Paris"]
    by_token = dict(zip(mask.tokens, mask.scores))
    assert by_token == {"paris": mask.target_probabilities["paris"], "x": mask.target_probabilities["xyzzyq"]}
    assert len(details.warnings) == 2 and "first of its" in details.warnings[1]
    assert "'Paris' is not in the vocabulary" in caplog.text


def test_biased_token_dominates():
    model = BertWithHeads(bundled_config(), heads=("mlm",)).eval()
    paris = TOKENIZER.token_to_id("paris")
    with torch.no_grad():
        model.cls.predictions.bias[paris] = 20.0
    loaded = LoadedModel(model, TOKENIZER, model.config, "hand-made")
    out = fill_mask(loaded, "The capital of France is [MASK].", top_k=3)
    assert out[0]["token"] == paris and out[0]["token_str"] == "paris" and out[0]["score"] > 0.9
    assert out[0]["sequence"] == "the capital of france is paris."
    assert fill_mask_details(loaded, "[MASK] and [MASK]", targets=["paris"]).masks[1].scores[0] > 0.9


# --- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kwargs, error, match", [
    ("Nice to meet you.", {}, ValueError, r"add at least one \[MASK\] token"),
    ("Nice to [mask] you.", {}, ValueError, r"\[MASK\]"),
    ("", {}, ValueError, "text is empty"),
    ("   \n", {}, ValueError, "text is empty"),
    (None, {}, TypeError, "text must be a str"),
    ("Nice to [MASK] you.", {"top_k": 0}, ValueError, "top_k must be at least 1"),
    ("Nice to [MASK] you.", {"top_k": -3}, ValueError, "top_k must be at least 1"),
    ("Nice to [MASK] you.", {"top_k": 2.5}, TypeError, "top_k must be an int"),
    ("Nice to [MASK] you.", {"top_k": True}, TypeError, "top_k must be an int"),
    ("Nice to [MASK] you." + " word" * 70, {}, ValueError, r"at most 64"),
    ("Nice to [MASK] you.", {"targets": [""]}, ValueError, "target '' is empty"),
    ("Nice to [MASK] you.", {"targets": ["   "]}, ValueError, "is empty"),
    ("Nice to [MASK] you.", {"targets": []}, ValueError, "targets is empty"),
    ("Nice to [MASK] you.", {"targets": ["paris", "\U0001F9EC"]}, ValueError, r"tokenizes to \[UNK\]"),
    ("Nice to [MASK] you.", {"targets": [3]}, TypeError, "each target must be a str"),
])
def test_invalid_inputs_give_clear_errors(text, kwargs, error, match, loaded):
    with pytest.raises(error, match=match):
        fill_mask(loaded, text, **kwargs)


def test_length_limit_counts_special_tokens(loaded):
    fits = "[MASK]" + " word" * 61          # 62 pieces + [CLS] + [SEP] = 64
    assert len(fill_mask(loaded, fits)) == 5
    with pytest.raises(ValueError, match="65 tokens long .* at most 64"):
        fill_mask(loaded, fits + " word")


def test_model_without_mlm_head_is_refused(tmp_path):
    qa = engine.load(engine.save(random_model(1, heads=("qa",)), TOKENIZER, tmp_path / "qa"))
    with pytest.raises(ValueError, match="no masked-LM head"):
        fill_mask(qa, "Nice to [MASK] you.")


def test_model_without_tokenizer_is_refused(tmp_path):
    bare = engine.load(engine.save(random_model(1), None, tmp_path / "bare"))
    with pytest.raises(ValueError, match="no tokenizer"):
        fill_mask(bare, "Nice to [MASK] you.")


def test_top_k_larger_than_the_vocabulary_is_clamped(make_config, tiny_tokenizer):
    # This config has 3 more embeddings than the tokenizer has tokens: they have no text.
    model = BertWithHeads(make_config(), heads=("mlm",)).eval()
    loaded = LoadedModel(model, tiny_tokenizer, model.config, "tiny")
    details = fill_mask_details(loaded, "the cat sat on the [MASK] .", top_k=10_000)
    vocab = model.config.vocab_size
    assert details.top_k == vocab and len(details.masks[0].token_ids) == vocab
    assert sorted(details.masks[0].token_ids) == list(range(vocab))
    assert sum(details.masks[0].scores) == pytest.approx(1.0, abs=1e-5)
    assert "larger than the vocabulary" in details.warnings[0]
    mask = details.masks[0]
    extra = [tok for i, tok in zip(mask.token_ids, mask.tokens) if i >= tiny_tokenizer.vocab_size]
    assert extra == ["", "", ""]


# --- probe over checkpoints --------------------------------------------------------------------

def test_probe_over_checkpoints_labels_and_tracks_tokens(saved, tmp_path):
    first = engine.save(random_model(10), TOKENIZER, tmp_path / "run" / "step-000100")
    second = engine.save(random_model(20), TOKENIZER, tmp_path / "run" / "step-000200")
    probes = fill_mask_over_checkpoints([first, str(second), engine.load(saved)], "Nice to [MASK] you.", top_k=3)
    assert [label for label, _ in probes] == ["step-000100", "step-000200", "model"]
    assert [checkpoint_step(label) for label, _ in probes] == [100, 200, None]
    results = [r for _, r in probes]
    assert results[0].to_pipeline() != results[1].to_pipeline()
    assert results[0].to_pipeline() == fill_mask(engine.load(first), "Nice to [MASK] you.", top_k=3)
    union = {tok for r in results for tok in r.masks[0].tokens}
    for result in results:
        mask = result.masks[0]
        assert set(mask.tracked) == union
        for tok, score in zip(mask.tokens, mask.scores):
            assert mask.tracked[tok] == pytest.approx(score, abs=1e-9)
        assert all(0 <= p <= mask.scores[0] + 1e-9 for p in mask.tracked.values())


def test_probe_needs_a_checkpoint_and_reports_load_errors(tmp_path):
    with pytest.raises(ValueError, match="no checkpoints"):
        fill_mask_over_checkpoints([], "Nice to [MASK] you.")
    with pytest.raises(FileNotFoundError):
        fill_mask_over_checkpoints([tmp_path / "missing"], "Nice to [MASK] you.")


@pytest.mark.parametrize("label, step", [("step-000200", 200), ("checkpoint-50", 50), ("step_7", 7),
                                         ("final", None), ("step-abc", None)])
def test_checkpoint_step(label, step):
    assert checkpoint_step(label) == step
