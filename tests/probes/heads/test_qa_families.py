"""Extractive QA on RoBERTa, DistilBERT, XLM-R and ALBERT folders (docs/design/qa.md, "Other families"): windows by the
tokenizer's layout (``<s> q </s></s> c </s>``), no segment ids where the model has none, the usable length
``config.max_tokens``; the logits are ``transformers``' model's on the same window ids and the answers follow the
4.x pipeline's rules (``support/qa_reference.py``) on ``transformers``' own tokenizer windows."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.data.qa_features import QAExample, build_qa_dataset
from engine.probes.heads.qa import answer_details
from engine.probes.heads.qa_lengths import QuestionTooLong, pair_specials, question_limit
from engine.text.qa_windows import encode_qa_windows
from support.family_tokenizers import CORPUS, build
from support.qa_reference import reference_postprocess

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = 1e-5
FAMILIES = {
    "roberta": (lambda v, pad: transformers.RobertaConfig(
        vocab_size=v, pad_token_id=pad, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=66), transformers.RobertaForQuestionAnswering),
    "distilbert": (lambda v, pad: transformers.DistilBertConfig(
        vocab_size=v, pad_token_id=pad, dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=64),
        transformers.DistilBertForQuestionAnswering),
    "xlmr": (lambda v, pad: transformers.XLMRobertaConfig(
        vocab_size=v, pad_token_id=pad, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=66), transformers.XLMRobertaForQuestionAnswering),
    "albert": (lambda v, pad: transformers.AlbertConfig(
        vocab_size=v, pad_token_id=pad, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=64), transformers.AlbertForQuestionAnswering),
}
ONE_SEGMENT = ("roberta", "xlmr")         # the families whose models have one type id (their tokenizers give 0s)
QUESTION = "What is the capital of France?"
CONTEXT = " ".join(CORPUS)                  # long enough for several windows of 40 tokens
QUESTIONS = [(QUESTION, {}), ("Who painted the famous portrait?", {"top_k": 5}),
             ("Where does the river flow?", {"top_k": 3, "align_to_words": False}),
             ("What does the model predict?", {"top_k": 2, "handle_impossible_answer": True})]


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    folder = build(request.param, tmp_path_factory.mktemp(request.param))
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    make_config, qa_class = FAMILIES[request.param]
    config = make_config(len(hf_tokenizer), hf_tokenizer.pad_token_id)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = qa_class(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    return request.param, load(folder), hf_tokenizer, model


def hf_windows(hf_tokenizer, question, context, max_seq_len, doc_stride):
    return hf_tokenizer(question, context, truncation="only_second", max_length=max_seq_len, stride=doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding="do_not_pad").encodings


def test_the_usable_length_is_max_tokens_and_the_layout_the_tokenizers(family):
    name, loaded, hf_tokenizer, _ = family
    assert loaded.config.max_tokens == 64
    details = answer_details(loaded, QUESTION, "Paris is the capital of France.")
    assert details.max_seq_len == 64
    window = details.windows[0]
    specials = [t for t, seq in zip(window.tokens, window.sequence_ids) if seq is None]
    assert specials == (["<s>", "</s>", "</s>", "</s>"] if name in ONE_SEGMENT else ["[CLS]", "[SEP]", "[SEP]"])
    assert pair_specials(loaded.tokenizer) == len(specials)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        answer_details(loaded, QUESTION, CONTEXT, max_seq_len=65)


@pytest.mark.parametrize("question, kwargs", QUESTIONS)
def test_answers_follow_the_pipeline_rules_on_transformers_windows_and_logits(family, question, kwargs):
    name, loaded, hf_tokenizer, model = family
    details = answer_details(loaded, question, CONTEXT, max_seq_len=40, doc_stride=12, **kwargs)
    windows = hf_windows(hf_tokenizer, question, CONTEXT, 40, 12)
    assert len(windows) > 2 and [[loaded.tokenizer.display_piece(t) for t in w.tokens] for w in windows] == \
        [list(w.tokens) for w in details.windows]              # the same pieces, shown readably (byte-level decoded)
    for window, ours in zip(windows, details.windows):   # transformers' model on what its tokenizer passes
        segments = {"token_type_ids": torch.tensor([window.type_ids])} if name == "albert" else {}
        with torch.no_grad():
            theirs = model(input_ids=torch.tensor([window.ids]), **segments)
        for got, expected in zip(ours.logits, (theirs.start_logits[0], theirs.end_logits[0])):
            assert np.abs(np.asarray(got) - expected.numpy()).max() <= TOL
    expected = reference_postprocess(windows, [w.logits for w in details.windows], CONTEXT,
                                     hf_tokenizer.cls_token_id, **kwargs)
    expected = [expected] if isinstance(expected, dict) else expected
    assert [(a["start"], a["end"], a["answer"]) for a in details.answers] == \
           [(a["start"], a["end"], a["answer"]) for a in expected]
    assert [a["score"] for a in details.answers] == pytest.approx([a["score"] for a in expected], abs=1e-7)
    for span in details.spans:                              # every answer is the context's own text
        assert span.answer == CONTEXT[span.start:span.end]
        if not span.is_null:
            window = details.windows[span.window]
            assert window.context_start <= span.start <= span.end <= window.context_end


def test_a_question_too_long_counts_the_familys_specials(family):
    name, loaded, hf_tokenizer, _ = family
    specials = pair_specials(loaded.tokenizer)
    limit = question_limit(40, 12, specials)
    question = "What " * (limit + 2) + "?"
    with pytest.raises(QuestionTooLong) as caught:
        answer_details(loaded, question, CONTEXT, max_seq_len=40, doc_stride=12)
    assert caught.value.limit == limit == 40 - specials - 13


def test_training_features_use_the_familys_windows_segments_and_labels(family):
    name, loaded, hf_tokenizer, _ = family
    tokenizer = loaded.tokenizer
    start = CONTEXT.index("Paris is the capital")
    example = QAExample("q", "Which city is the capital and largest city of France, on the river Seine?" * 2,
                        CONTEXT, [("Paris", start)])
    data = build_qa_dataset([example], tokenizer, 40, batch_size=4, doc_stride=12, max_question_len=10,
                            shuffle=False)
    windows = encode_qa_windows(tokenizer, example.question, CONTEXT, 40, 12, max_question_len=10)
    assert [list(r) for r in data.rows] == [w.input_ids for w in windows]
    assert all(sum(s == 0 for s in w.sequence_ids) <= 10 for w in windows)   # the question cut to 10 pieces
    assert data.segment_ids == (name not in ONE_SEGMENT)    # no segment ids, as transformers passes none
    for window, segment, (s, e) in zip(windows, data.segment_starts, data.targets):
        assert segment == window.sequence_ids.index(1)     # the context starts segment B (marked or not)
        if name not in ONE_SEGMENT:
            assert segment == window.token_type_ids.index(1)
        if (s, e) != (0, 0):
            assert window.offsets[s][0] <= start and window.offsets[e][1] >= start + len("Paris")
    assert any(tuple(t) != (0, 0) for t in data.targets)
    batch = data.batch(0, 0)
    assert bool(batch.token_type_ids.any()) == (name not in ONE_SEGMENT)
    with torch.no_grad():                                   # the features run through the model as they are
        loaded.model(batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids,
                     compute=("qa",))
