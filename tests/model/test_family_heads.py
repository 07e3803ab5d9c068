"""The heads a family has of its own (``engine.model.family_heads``, docs/design/families.md): RoBERTa's, XLM-R's,
ELECTRA's and DistilBERT's sequence classifiers on the first token, multiple choice for every family, ELECTRA's
replaced-token detection and ALBERT's sentence-order prediction. A random model of transformers' class, saved by
``save_pretrained``, loads through ``engine.load`` with no key left out; its logits (eager attention, fp32, a padded
batch) and its loss with labels are transformers' within 1e-5; our export loads back into that class with nothing
missing or unexpected and the same logits. The replaced-token probe's probabilities are sigmoid of
``ElectraForPreTraining``'s logits, its special tokens named by role."""
from __future__ import annotations

import json

import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load, save
from engine.model.families.registry import config_from_dict
from engine.model.heads import BertWithHeads
from engine.probes.heads.replaced_tokens import replaced_tokens
from support.reference import randomized

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-5
SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
STEMS = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "electra": "Electra", "distilbert": "DistilBert",
         "albert": "Albert"}


def make_config(name: str, **extra) -> transformers.PretrainedConfig:
    """A small random-sized config of family ``name`` (hidden 32, 2 or 3 layers)."""
    if name == "distilbert":
        return transformers.DistilBertConfig(vocab_size=120, dim=32, n_layers=3, n_heads=4, hidden_dim=48,
                                             max_position_embeddings=40, **extra)
    if name == "electra":
        return transformers.ElectraConfig(vocab_size=120, embedding_size=16, max_position_embeddings=40, **SHAPE,
                                          **extra)
    if name == "albert":
        return transformers.AlbertConfig(vocab_size=120, embedding_size=16, num_hidden_groups=2,
                                         max_position_embeddings=40, **SHAPE, **extra)
    cls = transformers.RobertaConfig if name == "roberta" else transformers.XLMRobertaConfig
    return cls(vocab_size=120 if name == "roberta" else 300, max_position_embeddings=26, **SHAPE, **extra)



def padded(config, shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Random ids of ``shape`` (..., S) avoiding the padding id; each last row padded after 9 tokens."""
    pad = config.pad_token_id
    ids = torch.randint(3, config.vocab_size, shape, generator=torch.Generator().manual_seed(1))
    ids[ids == pad] = pad + 1
    mask = torch.ones_like(ids)
    ids[..., -1, 9:], mask[..., -1, 9:] = pad, 0
    return {"input_ids": ids, "attention_mask": mask}


def assert_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """Same shape, max |difference| within ``TOL`` (measured: at most 7.2e-7)."""
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max() <= TOL


def saved_and_loaded(theirs: torch.nn.Module, tmp_path):
    """``theirs`` saved by transformers, then loaded by ``engine.load``; nothing of it may be ignored."""
    theirs.save_pretrained(tmp_path / "theirs")
    loaded = load(tmp_path / "theirs")
    assert loaded.ignored_keys == []
    return loaded


def exported(loaded, cls, tmp_path) -> torch.nn.Module:
    """Our export of ``loaded``, loaded by ``cls.from_pretrained``: its class named, nothing missing or unexpected."""
    save(loaded.model, loaded.tokenizer, tmp_path / "ours")
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["architectures"] == [cls.__name__]
    back, info = cls.from_pretrained(tmp_path / "ours", attn_implementation="eager", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    return back.eval()


@pytest.mark.parametrize("name", ["roberta", "xlm-roberta", "electra", "distilbert"])
@pytest.mark.parametrize("num_labels", [3, 1])
def test_the_first_token_classifiers_match_transformers_and_export_back(name, num_labels, tmp_path):
    """No pooler; logits and the loss (cross-entropy, MSE with one label) as the family's ForSequenceClassification."""
    cls = getattr(transformers, f"{STEMS[name]}ForSequenceClassification")
    config = make_config(name, num_labels=num_labels)
    theirs = randomized(cls, config)
    loaded = saved_and_loaded(theirs, tmp_path)
    assert loaded.heads == ("classifier",) and not loaded.model.has_pooler
    inputs = padded(config, (2, 24))
    labels = torch.tensor([2, 0]) if num_labels == 3 else torch.tensor([0.7, -1.2])
    with torch.no_grad():
        ours = loaded.model(**inputs, class_labels=labels).classifier
        expected = theirs(**inputs, labels=labels)
    assert_close(ours.logits, expected.logits)
    assert_close(ours.loss, expected.loss)
    with torch.no_grad():
        assert_close(exported(loaded, cls, tmp_path)(**inputs).logits, expected.logits)


@pytest.mark.parametrize("name", list(STEMS))
def test_multiple_choice_of_each_family_matches_transformers_and_exports_back(name, tmp_path):
    """(B, C, S) input: BERT's head on the pooler (RoBERTa, XLM-R, ALBERT), the family's own on the first token
    (DistilBERT's pre_classifier, ELECTRA's sequence summary)."""
    cls = getattr(transformers, f"{STEMS[name]}ForMultipleChoice")
    config = make_config(name)
    theirs = randomized(cls, config, seed=3)
    loaded = saved_and_loaded(theirs, tmp_path)
    assert loaded.heads == ("multiple_choice",)
    assert loaded.model.has_pooler == (name in ("roberta", "xlm-roberta", "albert"))
    inputs = padded(config, (2, 3, 14))                                  # (B, C, S), each last choice padded
    labels = torch.tensor([1, 2])
    with torch.no_grad():
        ours = loaded.model(**inputs, choice_labels=labels).multiple_choice
        expected = theirs(**inputs, labels=labels)
    assert_close(ours.logits, expected.logits)
    assert_close(ours.loss, expected.loss)
    with torch.no_grad():
        assert_close(exported(loaded, cls, tmp_path)(**inputs).logits, expected.logits)


def test_electras_replaced_token_head_matches_electra_for_pre_training(tmp_path):
    """One logit per token; the loss is the binary cross-entropy over the tokens the attention mask keeps."""
    config = make_config("electra")
    theirs = randomized(transformers.ElectraForPreTraining, config, seed=5)
    loaded = saved_and_loaded(theirs, tmp_path)
    assert loaded.heads == ("replaced_tokens",) and not loaded.model.has_pooler
    inputs = padded(config, (2, 24))
    labels = torch.randint(0, 2, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours = loaded.model(**inputs, replaced_labels=labels).result("replaced_tokens")
        expected = theirs(**inputs, labels=labels)
    keep = inputs["attention_mask"].bool()
    assert_close(ours.logits[keep], expected.logits[keep])
    assert_close(ours.loss, expected.loss)
    with torch.no_grad():
        back = exported(loaded, transformers.ElectraForPreTraining, tmp_path)(**inputs).logits
    assert_close(back[keep], expected.logits[keep])


def test_alberts_sentence_order_head_matches_albert_for_pre_training(tmp_path):
    """The masked LM and the sentence-order logits (in the NSP head's place), and the summed loss."""
    config = make_config("albert")
    theirs = randomized(transformers.AlbertForPreTraining, config, seed=7)
    loaded = saved_and_loaded(theirs, tmp_path)
    assert loaded.heads == ("mlm", "nsp") and loaded.model.specs["nsp"].noun == "sentence-order"
    inputs = padded(config, (2, 24))
    masked = torch.full((2, 24), -100)
    masked[0, 3], masked[1, 5] = inputs["input_ids"][0, 3], inputs["input_ids"][1, 5]
    order = torch.tensor([1, 0])
    with torch.no_grad():
        ours = loaded.model(**inputs, labels=masked, sentence_order_label=order)
        expected = theirs(**inputs, labels=masked, sentence_order_label=order)
    keep = inputs["attention_mask"].bool()
    assert_close(ours.mlm.logits[keep], expected.prediction_logits[keep])
    assert_close(ours.nsp.logits, expected.sop_logits)
    assert_close(ours.loss, expected.loss)
    with torch.no_grad():
        back = exported(loaded, transformers.AlbertForPreTraining, tmp_path)(**inputs)
    assert_close(back.sop_logits, expected.sop_logits)
    assert_close(back.prediction_logits[keep], expected.prediction_logits[keep])


@pytest.mark.parametrize("tokenizer_kind", ["wordpiece", "roberta"])
def test_the_replaced_token_probe_gives_sigmoid_of_transformers_logits(tokenizer_kind, tiny_tokenizer, tmp_path):
    """``replaced_tokens``: P(replaced) per token = sigmoid of ElectraForPreTraining's logits on the same encoding;
    the special tokens named by role, whatever the tokenizer calls them ([CLS] or <s>)."""
    from support.family_tokenizers import build

    folder = tmp_path / "discriminator"
    if tokenizer_kind == "wordpiece":
        tokenizer = tiny_tokenizer
        tokenizer.save(folder)
        size, pad, cls_token = tokenizer.vocab_size, tokenizer.pad_token_id, tokenizer.cls_token
    else:
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(build("roberta", folder))
        size, pad, cls_token = len(hf_tokenizer), hf_tokenizer.pad_token_id, hf_tokenizer.cls_token
    config = transformers.ElectraConfig(vocab_size=size, pad_token_id=pad, embedding_size=16,
                                        max_position_embeddings=64, **SHAPE)
    theirs = randomized(transformers.ElectraForPreTraining, config, seed=9)
    theirs.save_pretrained(folder)
    loaded = load(folder)
    text = "the cat sat on the mat"
    result = replaced_tokens(loaded, text)
    encoding = loaded.tokenizer.encode(text)
    with torch.no_grad():
        expected = torch.sigmoid(theirs(input_ids=torch.tensor([encoding.input_ids])).logits[0])
    assert (torch.tensor(result.probabilities) - expected).abs().max() <= TOL
    assert len(result.tokens) == len(result.roles) == len(encoding.input_ids)
    assert result.roles[0] == "cls" and result.roles[-1] == "sep" and set(result.roles[1:-1]) == {None}
    assert result.tokens[0] == cls_token and result.source == loaded.source
    assert set(result.replaced(0.0)) == set(range(1, len(encoding.input_ids) - 1))


def test_a_wrong_label_name_the_probe_and_odd_electra_summaries_are_refused_with_a_sentence(tmp_path):
    """Another head's labels (transformers' names: ``labels`` for replaced tokens, BERT's ``next_sentence_label``
    for sentence order) are refused rather than left unread; so are the probe on a model without the discriminator
    head and a multiple-choice ELECTRA whose sequence summary is not transformers' default."""
    electra = config_from_dict({**make_config("electra").to_dict(), "model_type": "electra"})
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="give the replaced-token labels as replaced_labels"):
        BertWithHeads(electra, heads=("replaced_tokens",))(ids, labels=torch.ones_like(ids))
    albert = config_from_dict({**make_config("albert").to_dict(), "model_type": "albert"})
    with pytest.raises(ValueError, match="predicts sentence order.*sentence_order_label"):
        BertWithHeads(albert, heads=("mlm", "nsp"))(ids, next_sentence_label=torch.tensor([0]))
    randomized(transformers.ElectraForMaskedLM, make_config("electra")).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no replaced-token detection head.*ElectraForPreTraining"):
        replaced_tokens(load(tmp_path), "a text")
    with pytest.raises(ValueError, match=r"sequence summary is not transformers' default \(summary_type\)"):
        config_from_dict({"model_type": "electra", "hidden_size": 32, "num_attention_heads": 4,
                          "architectures": ["ElectraForMultipleChoice"], "summary_type": "last"})
