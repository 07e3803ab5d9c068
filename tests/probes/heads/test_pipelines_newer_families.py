"""Fill-mask and QA on the families beyond BERT's layout (docs/design/families.md): an ELECTRA generator
(WordPiece), a ModernBERT (byte-level BPE, a local window shorter than the text) and a DeBERTa-v3 (SentencePiece,
relative positions), each saved by ``transformers`` beside its own kind of tokenizer, give the ``transformers``
fill-mask pipeline's top-5 (scores within 1e-4), and extractive QA gives the answers of the pipeline's rules
(``support/qa_reference.py``, transformers 4.x's post-processing) on the logits of transformers' own model run on
its tokenizer's windows."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
import torch
import transformers

from engine.checkpoints.hf_format import load
from engine.probes.heads.fill_mask import fill_mask
from engine.probes.heads.qa import answer_details
from engine.text.segment_ids import uses_segment_ids
from support.family_tokenizers import CORPUS
from support.qa_reference import reference_postprocess
from support.saved_families import FAMILIES, save_family_model

pytestmark = pytest.mark.usefixtures("one_thread")
NEWER = ("electra", "modernbert", "deberta-v2")
CONTEXT = " ".join(CORPUS)
TEXTS = [("The capital of France is {mask}.", {}), ("{mask} is the capital of France.", {"top_k": 3}),
         ("The {mask} sat on the {mask} today.", {}), ("Paris is famous for its {mask}.", {"top_k": 10})]


@pytest.fixture(scope="module", params=NEWER)
def family(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    mlm = save_family_model(request.param, root / "mlm")
    qa = save_family_model(request.param, root / "qa", "ForQuestionAnswering")
    stem = FAMILIES[request.param][3]
    pipe = transformers.pipeline("fill-mask", model=str(mlm), tokenizer=str(mlm), device="cpu")
    qa_model = getattr(transformers, stem + "ForQuestionAnswering").from_pretrained(qa, attn_implementation="eager")
    return request.param, load(mlm), pipe, load(qa), qa_model.eval(), transformers.AutoTokenizer.from_pretrained(qa)


@pytest.mark.parametrize("text, kwargs", TEXTS)
def test_fill_mask_gives_the_pipelines_top_k(family, text, kwargs):
    _, loaded, pipe, *_ = family
    mask = pipe.tokenizer.mask_token
    ours = fill_mask(loaded, text.format(mask="[MASK]"), **kwargs)      # [MASK] typed: read as the model's own
    theirs = pipe(text.format(mask=mask), **kwargs)
    rows = (ours, theirs) if isinstance(theirs[0], list) else ([ours], [theirs])
    for our_row, their_row in zip(*rows):
        assert [(o["token"], o["token_str"], o["sequence"]) for o in our_row] == \
               [(t["token"], t["token_str"], t["sequence"]) for t in their_row]
        assert max(abs(o["score"] - t["score"]) for o, t in zip(our_row, their_row)) <= 1e-4


@pytest.mark.parametrize("question, kwargs", [("What is the capital of France?", {}),
                                              ("Who painted the famous portrait?", {"top_k": 5}),
                                              ("What does the model predict?", {"handle_impossible_answer": True})])
def test_qa_answers_follow_the_pipeline_rules(family, question, kwargs):
    _, _, _, loaded, model, tokenizer = family
    details = answer_details(loaded, question, CONTEXT, max_seq_len=48, doc_stride=16, **kwargs)
    windows = tokenizer(question, CONTEXT, truncation="only_second", max_length=48, stride=16,
                        return_overflowing_tokens=True, return_offsets_mapping=True, padding="do_not_pad").encodings
    assert len(windows) > 2 and [w.ids for w in windows] == [
        [loaded.tokenizer.token_to_id(t) for t in w.tokens] for w in windows]
    segments = uses_segment_ids(loaded.config, loaded.tokenizer)
    for window, ours in zip(windows, details.windows):
        extra = {"token_type_ids": torch.tensor([window.type_ids])} if segments else {}
        with torch.no_grad():
            theirs = model(input_ids=torch.tensor([window.ids]), **extra)
        for got, expected in zip(ours.logits, (theirs.start_logits[0], theirs.end_logits[0])):
            assert np.abs(np.asarray(got) - expected.numpy()).max() <= 1e-5
    expected = reference_postprocess(windows, [w.logits for w in details.windows], CONTEXT,
                                     tokenizer.cls_token_id, **kwargs)
    expected = [expected] if isinstance(expected, dict) else expected
    assert [(a["start"], a["end"], a["answer"]) for a in details.answers] == \
           [(a["start"], a["end"], a["answer"]) for a in expected]
    assert [a["score"] for a in details.answers] == pytest.approx([a["score"] for a in expected], abs=1e-7)
