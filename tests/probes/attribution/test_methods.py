"""Attribution (``engine.probes.attribution.methods``): integrated gradients add up to F(input) - F(baseline) within
captum's convergence delta; gradient x input equals plain autograd on our model; both equal the same captum call
on the ``transformers`` class with the same random weights, head by head; the served model is never touched
(hooks, mode, gradients, inference caches); hostile input gives a sentence."""
from __future__ import annotations

import copy

import pytest
import torch
from captum.attr import LayerGradientXActivation, LayerIntegratedGradients
from transformers import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                          BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification)

from engine.model.loaded_model import LoadedModel
from engine.probes.attribution.methods import DEFAULT_STEPS, attribute, make_target, private_view
from engine.probes.attribution.targets import NoSuchIndex, target_token
from support.heads_helpers import BIO, SENTIMENT, hf_tokenizer, loaded_with
from support.probing_helpers import tiny_model
from support.reference import PARITY, hf_copy

pytestmark = pytest.mark.usefixtures("one_thread")

MASKED = "the cat [MASK] on the mat."
CONTEXT = "the cat sat on the mat. the dog ran to the house."
CHOICES = ["it ran to the house.", "a red car.", "the bird sang in the tree."]
# task -> (our head, transformers' class, id2label)
HEADS = {"fill_mask": ("mlm", BertForMaskedLM, None), "qa_start": ("qa", BertForQuestionAnswering, None),
         "qa_end": ("qa", BertForQuestionAnswering, None), "next_sentence": ("nsp", BertForNextSentencePrediction, None),
         "classify": ("classifier", BertForSequenceClassification, SENTIMENT),
         "tag": ("token_classifier", BertForTokenClassification, BIO),
         "choose": ("multiple_choice", BertForMultipleChoice, None)}
INPUTS = {"fill_mask": (MASKED, None), "qa_start": ("where did the dog run?", CONTEXT),
          "qa_end": ("where did the dog run?", CONTEXT), "next_sentence": ("the cat sat.", "it ran to the house."),
          "classify": ("the big dog played with a red car.", None), "tag": ("walter played with the cat in paris.", None),
          "choose": ("the cat sat on the mat.", "\n".join(CHOICES))}


@pytest.fixture(scope="module")
def models(tiny_tokenizer) -> dict[str, LoadedModel]:
    """One tiny model per head (only that head, so transformers' class loads it strictly)."""
    out = {}
    for seed, (task, (head, _, labels)) in enumerate(HEADS.items(), start=3):
        if head in ("mlm", "qa", "nsp"):
            model = tiny_model(seed, heads=(head,))
            out[task] = LoadedModel(model, tiny_tokenizer, model.config, f"tiny {head}")
        else:
            out[task] = loaded_with(head, tiny_tokenizer, seed=seed, id2label=labels)
    return out


@pytest.fixture(scope="module")
def hf_tok(tiny_tokenizer, tmp_path_factory):
    return hf_tokenizer(tiny_tokenizer, tmp_path_factory.mktemp("tok"))


def hf_forward(task: str, hf: torch.nn.Module, types: torch.Tensor, index: int, position: int | None,
               probability: bool = False):
    """transformers' score of ``index`` for a batch of rows (N, S): the same quantity ours explains."""
    def forward(ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        kwargs = dict(attention_mask=torch.ones_like(ids), token_type_ids=types.expand(n, -1))
        if task == "choose":
            logits = hf(input_ids=ids.unsqueeze(1), **{k: v.unsqueeze(1) for k, v in kwargs.items()}).logits  # (N, 1)
            return logits[:, 0]
        out = hf(input_ids=ids, **kwargs)
        if task in ("qa_start", "qa_end"):
            scores = out.start_logits if task == "qa_start" else out.end_logits          # (N, S)
        elif task in ("fill_mask", "tag"):
            scores = out.logits[:, position]                                              # (N, S, K) -> (N, K)
        else:
            scores = out.logits                                                           # (N, K)
        return scores.softmax(-1)[:, index] if probability else scores[:, index]
    return forward


def hf_encoding(task: str, hf_tok, text: str, pair: str | None, target) -> dict[str, torch.Tensor]:
    if task == "choose":
        return hf_tok(text, CHOICES[target.index], return_tensors="pt")
    if task in ("qa_start", "qa_end"):
        return hf_tok(text, pair, return_tensors="pt")
    return hf_tok(text, pair, return_tensors="pt") if pair else hf_tok(text, return_tensors="pt")


@pytest.mark.parametrize("task", list(HEADS))
@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_equals_the_same_captum_call_on_transformers(models, hf_tok, task, method) -> None:
    loaded = models[task]
    text, pair = INPUTS[task]
    target = make_target(loaded, task, text, pair)
    encoded = hf_encoding(task, hf_tok, text, pair, target)
    assert encoded["input_ids"][0].tolist() == target.input_ids
    hf = hf_copy(loaded.model, HEADS[task][1])
    position = target.position
    if task == "fill_mask":
        assert position == target.input_ids.index(loaded.tokenizer.mask_token_id)
    if task == "tag":                                                       # a word's first piece
        words = encoded.word_ids()
        assert words[position] is not None and words[position - 1] != words[position]
    forward = hf_forward(task, hf, encoded["token_type_ids"], target.index, position)
    with torch.no_grad():
        if task not in ("qa_start", "qa_end", "choose"):                    # the default target is the prediction
            assert target.index == int(hf_forward(task, hf, encoded["token_type_ids"], slice(None), position)(
                encoded["input_ids"]).argmax()) or task == "next_sentence"
    ours = attribute(loaded, task, text, pair, method=method, n_steps=24)
    ids = encoded["input_ids"]
    layer = hf.bert.embeddings.word_embeddings
    if method == "integrated_gradients":
        baseline = torch.tensor([[loaded.tokenizer.token_to_id(t) for t in ours.baseline_tokens]])
        theirs, delta = LayerIntegratedGradients(forward, layer).attribute(ids, baselines=baseline, n_steps=24,
                                                                            return_convergence_delta=True)
        assert ours.convergence_delta == pytest.approx(float(delta[0]), abs=1e-4)
        with torch.no_grad():
            assert ours.baseline_score == pytest.approx(float(forward(baseline)[0]), abs=PARITY)
    else:
        theirs = LayerGradientXActivation(forward, layer).attribute(ids)
    with torch.no_grad():
        assert ours.target_score == pytest.approx(float(forward(ids)[0]), abs=PARITY)
    assert ours.attributions == pytest.approx(theirs[0].sum(-1).tolist(), abs=PARITY)
    assert ours.tokens == hf_tok.convert_ids_to_tokens(ids[0])


@pytest.mark.parametrize("score", ["logit", "probability"])
def test_fill_mask_probability_equals_transformers_too(models, hf_tok, score) -> None:
    loaded = models["fill_mask"]
    ours = attribute(loaded, "fill_mask", MASKED, target="dog", score=score, n_steps=16)
    encoded = hf_tok(MASKED, return_tensors="pt")
    position = encoded["input_ids"][0].tolist().index(hf_tok.mask_token_id)
    hf = hf_copy(loaded.model, BertForMaskedLM)
    forward = hf_forward("fill_mask", hf, encoded["token_type_ids"], hf_tok.convert_tokens_to_ids("dog"), position,
                         probability=score == "probability")
    baseline = torch.tensor([[loaded.tokenizer.token_to_id(t) for t in ours.baseline_tokens]])
    found = LayerIntegratedGradients(forward, hf.bert.embeddings.word_embeddings).attribute(
        encoded["input_ids"], baselines=baseline, n_steps=16)
    assert ours.attributions == pytest.approx(found[0].sum(-1).tolist(), abs=PARITY)
    assert "'dog'" in ours.target and ours.score == score


@pytest.mark.parametrize("task", ["fill_mask", "next_sentence", "classify", "choose"])
def test_integrated_gradients_add_up_to_the_score_difference_within_the_delta(models, task) -> None:
    text, pair = INPUTS[task]
    coarse = attribute(models[task], task, text, pair, n_steps=4)
    fine = attribute(models[task], task, text, pair, n_steps=200)
    for found in (coarse, fine):
        difference = found.target_score - found.baseline_score
        assert abs(found.total - difference) == pytest.approx(abs(found.convergence_delta), abs=2e-5)
    assert abs(fine.convergence_delta) < 1e-4 * max(1.0, abs(fine.target_score - fine.baseline_score))
    assert abs(fine.convergence_delta) <= abs(coarse.convergence_delta) + 1e-6
    assert fine.n_steps == 200 and fine.method == "integrated_gradients"
    assert fine.baseline_tokens[0] == "[CLS]" and fine.baseline_tokens[-1] == "[SEP]"
    kept = {"[CLS]", "[SEP]", "[MASK]"}
    assert all(b == (t if t in kept else "[PAD]") for t, b in zip(fine.tokens, fine.baseline_tokens))


@pytest.mark.parametrize("task", list(HEADS))
@pytest.mark.parametrize("score", ["logit", "probability"])
def test_gradient_x_input_equals_plain_autograd(models, task, score) -> None:
    loaded = models[task]
    text, pair = INPUTS[task]
    target = make_target(loaded, task, text, pair)
    model = copy.deepcopy(loaded.model)
    kept: dict[str, torch.Tensor] = {}

    def keep(module, inputs, output):
        output.retain_grad()
        kept["embedding"] = output

    hook = model.bert.embeddings.word_embeddings.register_forward_hook(keep)
    with torch.enable_grad():
        scores = target.class_scores(model, torch.tensor([target.input_ids]))                  # (1, K)
        chosen = scores[0, target.index]
        if score == "probability":
            chosen = scores[0, target.index].sigmoid() if target.sigmoid else scores[0].softmax(-1)[target.index]
        chosen.backward()
    hook.remove()
    reference = (kept["embedding"].grad * kept["embedding"]).sum(-1)[0]                         # (S,)
    ours = attribute(loaded, task, text, pair, method="gradient_x_input", score=score)
    assert ours.attributions == pytest.approx(reference.tolist(), abs=1e-6)
    assert ours.target_score == pytest.approx(float(chosen.detach()), abs=1e-6)
    assert (ours.baseline, ours.baseline_score, ours.convergence_delta, ours.n_steps) == (None, None, None, None)


def test_the_served_model_is_never_touched(models) -> None:
    loaded = models["fill_mask"]
    model = loaded.model
    ids = torch.tensor([make_target(loaded, "fill_mask", MASKED).input_ids])
    with torch.inference_mode():
        before = model(ids, compute=("mlm",)).mlm.logits.clone()                # builds the inference caches
    caches = [m.inference_cache for m in model.modules() if hasattr(m, "inference_cache")]
    assert any(c is not None for c in caches)
    during = []

    def check(fraction: float) -> None:               # runs inside captum's hooked passes on the view
        with torch.inference_mode():
            during.append(float((model(ids, compute=("mlm",)).mlm.logits - before).abs().max()))

    found = attribute(loaded, "fill_mask", MASKED, progress=check, n_steps=8)
    assert during and max(during) == 0.0
    assert [m.inference_cache for m in model.modules() if hasattr(m, "inference_cache")] == caches
    assert not model.training and all(not m._forward_hooks for m in model.modules())
    assert all(p.requires_grad and p.grad is None for p in model.parameters())
    assert found.tokens[0] == "[CLS]"


def test_the_private_view_shares_the_weights_and_refuses_other_precisions(models) -> None:
    model = models["fill_mask"].model
    view = private_view(model)
    assert view is not model and not view.training
    for mine, theirs in zip(view.parameters(), model.parameters()):
        assert mine.data_ptr() == theirs.data_ptr() and not mine.requires_grad
    assert view.cls.predictions.decoder.weight is view.bert.embeddings.word_embeddings.weight
    with pytest.raises(ValueError, match="fp32"):
        private_view(copy.deepcopy(model).half())


def test_progress_reaches_one_and_default_steps(models) -> None:
    seen = []
    found = attribute(models["classify"], "classify", "the dog sat.", progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0) and found.n_steps == DEFAULT_STEPS


def test_targets_follow_the_arguments(models) -> None:
    tag = attribute(models["tag"], "tag", "walter played with the cat.", which=1, target="B-LOC",
                    method="gradient_x_input")
    assert "'B-LOC'" in tag.target and "'played'" in tag.target and "word 2" in tag.target
    nsp = attribute(models["next_sentence"], "next_sentence", "the cat sat.", "it ran.", target="notnext",
                    method="gradient_x_input")
    assert "'NotNext'" in nsp.target
    choice = attribute(models["choose"], "choose", "the cat sat.", CHOICES, which=2, method="gradient_x_input")
    assert choice.target.startswith("choice 3") and choice.tokens[-2] == "."
    two = attribute(models["fill_mask"], "fill_mask", "the [MASK] sat on the [MASK].", which=1,
                    method="gradient_x_input")
    assert "[MASK] 2 (position 6)" in two.target
    assert two.as_dict()["sum"] == pytest.approx(two.total)
    cased = attribute(models["fill_mask"], "fill_mask", MASKED, target="Dog", method="gradient_x_input")
    assert cased.target.startswith("'dog' at") and cased.warnings == []      # one piece once normalised, as the pipeline


def test_a_target_word_is_one_vocabulary_token_or_refused(models, hf_tok) -> None:
    """The lookup of transformers' FillMaskPipeline.get_target_ids (the word, else its pieces), except that
    where the pipeline takes the first of several pieces, the explanation is refused."""
    loaded = models["fill_mask"]
    assert target_token(loaded, "dog") == "dog" and target_token(loaded, "##s") == "##s"     # vocabulary entries
    assert target_token(loaded, "DOG") == "dog" == hf_tok.convert_ids_to_tokens(
        hf_tok("DOG", add_special_tokens=False)["input_ids"])[0]
    with pytest.raises(ValueError) as caught:
        target_token(loaded, "zzzzqqq")
    assert str(caught.value) == ("the target 'zzzzqqq' is not one token of this model's vocabulary: it splits into 7 "
                                 "pieces (z ##z ##z ##z ##q ##q ##q) and a prediction is one token, so give a word "
                                 "the vocabulary holds whole, or leave the target empty")
    assert hf_tok.tokenize("zzzzqqq") == ["z", "##z", "##z", "##z", "##q", "##q", "##q"]   # the pipeline would take 'z'
    with pytest.raises(ValueError, match="splits into 12 pieces \\(x ##y ##z ##z ##y ##x ##y ##z …\\)"):
        target_token(loaded, "xyzzyxyzzyxy")
    with pytest.raises(ValueError, match="^the target '.u200b' is not in this model's vocabulary \\(it reads as "
                                         "nothing\\); give one word"):
        target_token(loaded, "\u200b")


def test_an_index_past_the_end_counts_from_zero_and_carries_its_numbers(models) -> None:
    with pytest.raises(NoSuchIndex) as caught:
        attribute(models["fill_mask"], "fill_mask", "the [MASK] sat on the [MASK].", which=2)
    assert (caught.value.what, caught.value.index, caught.value.count) == ("[MASK]", 2, 2)
    assert str(caught.value) == "[MASK] index 2 does not exist: there are 2 [MASK]s (indices counted from 0: 0 to 1)"


@pytest.mark.parametrize("task,text,pair,extra,match", [
    ("fill_mask", "the cat sat on the mat.", None, {}, "no mask token found"),
    ("fill_mask", "   ", None, {}, "text is empty"),
    ("fill_mask", "the cat " * 40 + "[MASK].", None, {}, "tokens long but this model takes at most 64"),
    ("fill_mask", MASKED, None, {"which": 1}, r"\[MASK\] index 1 does not exist: there is 1 \[MASK\]"),
    ("fill_mask", MASKED, None, {"method": "saliency"}, "unknown method 'saliency'"),
    ("fill_mask", MASKED, None, {"n_steps": 1}, "n_steps must be a whole number from 2 to 300"),
    ("fill_mask", MASKED, None, {"n_steps": 2.5}, "n_steps must be a whole number"),
    ("fill_mask", MASKED, None, {"score": "odds"}, "unknown score 'odds'"),
    ("fill_mask", MASKED, None, {"target": "😀"}, "is not in this model's vocabulary \\(it reads as \\[UNK\\]\\)"),
    ("fill_mask", MASKED, None, {"target": "xyzzy"}, "splits into 5 pieces \\(x ##y ##z ##z ##y\\)"),
    ("summarise", MASKED, None, {}, "unknown task 'summarise'"),
    ("qa_start", "who sat?", "", {}, "`context` cannot be empty"),
    ("next_sentence", "the cat sat.", "", {}, "sentence B is empty"),
    ("classify", "the cat sat.", None, {"target": "angry"}, "'angry' is not one of this head's labels: negative"),
    ("tag", "the cat sat.", None, {"which": 7}, "word index 7 does not exist: there are 4 words"),
    ("choose", "the cat sat.", "only one", {}, "at least 2 choices"),
])
def test_hostile_input_is_a_sentence(models, task, text, pair, extra, match) -> None:
    loaded = models.get(task, models["fill_mask"])
    with pytest.raises(ValueError, match=match):
        attribute(loaded, task, text, pair, **extra)


@pytest.mark.parametrize("task,head", [("fill_mask", "masked-LM"), ("qa_start", "question-answering"),
                                       ("next_sentence", "next-sentence"), ("classify", "sequence-classification"),
                                       ("tag", "token-classification"), ("choose", "multiple-choice")])
def test_a_model_without_the_head_says_so(tiny_tokenizer, task, head) -> None:
    bare = tiny_model(1, heads=())
    loaded = LoadedModel(bare, tiny_tokenizer, bare.config, "tiny encoder")
    text, pair = INPUTS[task]
    with pytest.raises(ValueError, match=f"has no {head}"):
        attribute(loaded, task, text, pair)


def test_a_model_without_a_tokenizer_says_so(models) -> None:
    loaded = models["fill_mask"]
    with pytest.raises(ValueError, match="no tokenizer files"):
        attribute(LoadedModel(loaded.model, None, loaded.config, "no vocabulary"), "fill_mask", MASKED)


def test_the_prediction_words_write_a_probability_as_a_percentage_never_an_exponent() -> None:
    """The engine's sentence for a prediction ("'sat' (probability 4.18%)") reads for a learner at any size."""
    from engine.probes.attribution.targets import probability_text

    assert [probability_text(p) for p in (0.0418, 1.2e-05, 3.12e-04, 1.0, 0.0, 1e-9)] == [
        "4.18%", "0.0012%", "0.0312%", "100%", "0%", "<0.001%"]
