"""Fill-mask on every family (docs/design/fill-mask.md): a folder holding a family's own tokenizer
(``support/family_tokenizers.py``) and a random masked-LM saved by ``transformers`` gives exactly the
``transformers`` fill-mask pipeline's results, whether the text writes ``[MASK]`` or the model's mask token."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.probes.heads.fill_mask import fill_mask, fill_mask_details
from support.family_tokenizers import build

pytestmark = pytest.mark.usefixtures("one_thread")
SCORE_TOLERANCE = 1e-4
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=64)

FAMILIES = {   # tokenizer family -> (config class and its fields, masked-LM class)
    "roberta": (transformers.RobertaConfig, SHAPE, transformers.RobertaForMaskedLM),
    "xlmr": (transformers.XLMRobertaConfig, SHAPE, transformers.XLMRobertaForMaskedLM),
    "albert": (transformers.AlbertConfig, dict(SHAPE, embedding_size=16), transformers.AlbertForMaskedLM),
    "distilbert": (transformers.DistilBertConfig, dict(dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                                                       max_position_embeddings=64), transformers.DistilBertForMaskedLM),
}

TEXTS = {   # {mask} is the model's mask token; {bert} is the [MASK] users type
    "one mask": ("The capital of France is {mask}.", {}),
    "typed [MASK]": ("The capital of France is {bert}.", {}),
    "mask first": ("{mask} is the capital of France.", {"top_k": 3}),
    "two masks": ("The {bert} sat on the {mask} today.", {}),
    "top_k=10": ("Paris is famous for its {mask}.", {"top_k": 10}),
    "targets": ("The capital of France is {mask}.", {"targets": ["Paris", "river", "xyzzy"]}),
}


def saved_folder(family: str, folder):
    """The family's tokenizer folder with a random masked-LM (std 0.3 or 0.6: a peaked, distinct top-k) beside it."""
    build(family, folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config_class, fields, mlm_class = FAMILIES[family]
    config = config_class(**fields, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = mlm_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6 if family == "distilbert" else 0.3)   # its 30k vocabulary needs more
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    folder = saved_folder(request.param, tmp_path_factory.mktemp(request.param))
    pipe = transformers.pipeline("fill-mask", model=str(folder), tokenizer=str(folder), device="cpu")
    return request.param, load(folder), pipe


def assert_same(ours, theirs) -> None:
    if theirs and isinstance(theirs[0], list):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert_same(o, t)
        return
    assert [(o["token"], o["token_str"], o["sequence"]) for o in ours] == \
           [(t["token"], t["token_str"], t["sequence"]) for t in theirs]
    assert max(abs(o["score"] - t["score"]) for o, t in zip(ours, theirs)) <= SCORE_TOLERANCE


@pytest.mark.parametrize("case", TEXTS)
def test_each_family_matches_the_transformers_pipeline(case, family):
    name, loaded, pipe = family
    text, kwargs = TEXTS[case]
    mask = pipe.tokenizer.mask_token
    ours = fill_mask(loaded, text.format(mask=mask, bert="[MASK]"), **kwargs)
    theirs = pipe(text.format(mask=mask, bert=mask), **kwargs)
    assert_same(ours, theirs)
    if "targets" not in kwargs:
        scores = [row["score"] for row in (ours if isinstance(ours[0], dict) else ours[0])]
        assert len(set(round(s, 6) for s in scores)) == len(scores), "random weights gave tied scores"


def test_mask_spelled_either_way_is_the_same_input(family):
    name, loaded, pipe = family
    mask = loaded.tokenizer.mask_token
    typed = fill_mask_details(loaded, "The capital of France is [MASK].")
    own = fill_mask_details(loaded, f"The capital of France is {mask}.")
    assert typed.input_ids == own.input_ids == pipe.tokenizer(f"The capital of France is {mask}.")["input_ids"]
    assert typed.mask_positions == own.mask_positions
    if name in ("roberta", "xlmr"):
        assert mask == "<mask>"
    mask_row = typed.masks[0]
    assert mask_row.display_tokens == [loaded.tokenizer.display_piece(t) for t in mask_row.tokens]
    if name == "roberta":   # byte-level pieces are shown readably; token_str stays the pipeline's decode
        assert not any("Ġ" in t for t in mask_row.display_tokens)


def test_no_mask_names_both_spellings_and_the_length_limit_is_max_tokens(family):
    name, loaded, _ = family
    mask = loaded.tokenizer.mask_token
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        fill_mask(loaded, "No mask here.")
    limit = loaded.config.max_tokens
    with pytest.raises(ValueError, match=f"at most {limit}"):
        fill_mask(loaded, f"{mask} " + "the " * limit)


def test_a_text_pair_reads_as_transformers_model_reads_it(family):
    """Segment ids go in as transformers passes them: none for RoBERTa, XLM-R and DistilBERT (ALBERT keeps its
    tokenizer's, which the 4.x tokenizers passed and its pretraining used; transformers 5's tokenizer drops them)."""
    name, loaded, pipe = family
    text, pair = "The capital of France is [MASK].", "Paris is on the river Seine."
    inputs = pipe.tokenizer(text.replace("[MASK]", pipe.tokenizer.mask_token), pair, return_tensors="pt")
    if name == "albert":
        inputs["token_type_ids"] = torch.tensor([loaded.tokenizer.encode(text, pair).token_type_ids])
    with torch.no_grad():
        logits = pipe.model(**inputs).logits[0]
    result = fill_mask_details(loaded, text, text_pair=pair)
    assert result.input_ids == inputs["input_ids"][0].tolist()
    expected = logits[result.mask_positions].softmax(-1).topk(5)
    assert result.masks[0].token_ids == expected.indices[0].tolist()
    assert result.masks[0].scores == pytest.approx(expected.values[0].tolist(), abs=1e-5)
