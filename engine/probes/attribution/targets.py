"""What an attribution explains, head by head: the input row, the head's scores over its classes, which class.

Each ``*_target`` function encodes one input the way its probe does (``fill_mask``, ``qa``,
``next_sentence``, ``classify``, ``tag``, ``choose``), runs the head once to find the model's own
prediction (the default target), and returns a :class:`Target`: the row of token ids to attribute,
a function from a batch of such rows (N, S) to the head's scores (N, K) over its K classes, the
class to explain and words for the UI. The heads name them through one-signature builders
(``engine.probes.attribution.builders``); ``engine.probes.attribution.methods`` turns a ``Target`` into
numbers. Bad input raises ``ValueError`` with a sentence (no mask, empty text, too long, a model
without the head, a target that does not exist).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from engine.model.loaded_model import LoadedModel
from engine.checks import is_int
from engine.model.heads import BertWithHeads
from engine.probes.heads.choose import MIN_CHOICES, choose
from engine.probes.heads.classify import classify_details
from engine.probes.heads.fill_mask import fill_mask_details
from engine.probes.heads.head_inputs import check_text, encode_pairs
from engine.probes.heads.next_sentence import LABELS as NSP_LABELS
from engine.probes.heads.qa import answer_details
from engine.probes.heads.tag import tag_details
from engine.text.encoding import Encoding
from engine.text.qa_windows import encode_qa_windows
from engine.text.segment_ids import uses_segment_ids

QA_MASKED_LOGIT = -10000.0     # the QA pipeline's value for positions that cannot be in an answer

# (model, input_ids (N, S)) -> the head's scores (N, K); the model is the one attribution runs
ClassScores = Callable[[BertWithHeads, torch.Tensor], torch.Tensor]



def probability_text(probability: float) -> str:
    """A probability in the prediction's words: a percentage to 3 significant digits, never an exponent
    (0.0418 -> "4.18%", 1.2e-05 -> "0.0012%", under 0.001% -> "<0.001%")."""
    value = float(probability) * 100.0
    return "<0.001%" if 0 < value < 0.001 else f"{value:.3g}%"


@dataclass
class Target:
    """One prediction to explain: the input row, the head's class scores, the class, and words for the UI."""

    task: str
    head: str                       # the head that makes the prediction (``HEADS`` name)
    tokens: list[str]               # S pieces of the row attributed, specials included
    input_ids: list[int]
    token_type_ids: list[int]
    class_scores: ClassScores       # (model, ids (N, S)) -> (N, K)
    index: int                      # which of the K classes is explained
    position: int | None            # the token whose output the head reads (None: the pooled [CLS] / whole row)
    description: str                # what is explained, e.g. "'paris' at [MASK] 1 (position 6)"
    prediction: str                 # what the model predicts there, in words
    sigmoid: bool = False           # a one-label classifier: its probability is the sigmoid, not a softmax
    warnings: list[str] = field(default_factory=list)


def _row(loaded: LoadedModel, input_ids: Sequence[int], token_type_ids: Sequence[int]
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """``attention_mask`` and ``token_type_ids`` (1, S) of one unpadded row on the model's device (type ids 0
    for a model that takes none, ``segment_ids.uses_segment_ids``, as ``head_inputs.batch_tensors``)."""
    device = next(loaded.model.parameters()).device
    types = list(token_type_ids) if uses_segment_ids(loaded.config, loaded.tokenizer) else [0] * len(input_ids)
    return (torch.ones((1, len(input_ids)), dtype=torch.long, device=device),     # (1, S)
            torch.tensor([types], device=device))                                  # (1, S)


def _expand(row: torch.Tensor, n: int) -> torch.Tensor:
    return row.expand(n, -1)                                              # (1, S) -> (N, S)


class NoSuchIndex(ValueError):
    """An index past the things there are (``index`` is 0-based): the engine's message counts from 0, and a
    caller whose form counts from 1 can say the same with its own numbering from ``what``, ``index`` and
    ``count``."""

    def __init__(self, what: str, index: int, count: int) -> None:
        self.what, self.index, self.count = what, index, count
        there = f"there {'is' if count == 1 else 'are'} {count} {what}{'' if count == 1 else 's'}"
        super().__init__(f"{what} index {index} does not exist: {there} (indices counted from 0: 0 to {count - 1})")


def _which(value: int | None, count: int, what: str, default: int = 0) -> int:
    """A 0-based index into ``count`` things, or a ``ValueError`` (``NoSuchIndex`` past the end) naming the range."""
    if value is None:
        return default
    if not is_int(value):
        raise ValueError(f"the {what} index must be a whole number, got {value!r}")
    if not 0 <= value < count:
        raise NoSuchIndex(what, value, count)
    return value


def target_token(loaded: LoadedModel, word: str) -> str:
    """The vocabulary token a fill-mask target names, looked up as ``transformers``' ``FillMaskPipeline.
    get_target_ids`` does (the word itself if it is a vocabulary entry, else its pieces, tokenized without
    specials: "Paris" -> "paris" in an uncased vocabulary). Where that pipeline would take the *first* of
    several pieces ("zzzzqqq" -> "z", with only a log warning), this refuses: a logit belongs to one token,
    and explaining "z" is not explaining the word. ``ValueError`` also for no piece or ``[UNK]``."""
    tokenizer = loaded.require_tokenizer("so it cannot look up the target")
    if word in tokenizer.get_vocab():
        return word
    pieces = tokenizer.backend.encode(word, add_special_tokens=False).tokens
    unknown = tokenizer.id_to_token(tokenizer.unk_token_id)
    if not pieces or pieces == [unknown]:
        raise ValueError(f"the target {word!r} is not in this model's vocabulary (it reads as "
                         f"{'nothing' if not pieces else unknown}); give one word the vocabulary holds, or leave "
                         "the target empty for the model's top prediction")
    if len(pieces) > 1:
        shown = " ".join(pieces[:8]) + (" …" if len(pieces) > 8 else "")
        raise ValueError(f"the target {word!r} is not one token of this model's vocabulary: it splits into "
                         f"{len(pieces)} pieces ({shown}) and a prediction is one token, so give a word the "
                         "vocabulary holds whole, or leave the target empty")
    return pieces[0]


def label_index(labels: Sequence[str], label: str | None, default: int) -> int:
    """The index of ``label`` among ``labels`` (exact, else ignoring case); ``default`` for None or blank."""
    if label is None or not str(label).strip():
        return default
    text = str(label).strip()
    if text in labels:
        return list(labels).index(text)
    folded = [i for i, name in enumerate(labels) if name.lower() == text.lower()]
    if folded:
        return folded[0]
    shown = ", ".join(labels[:20]) + (f" and {len(labels) - 20} more" if len(labels) > 20 else "")
    raise ValueError(f"{text!r} is not one of this head's labels: {shown}")


def fill_mask_target(loaded: LoadedModel, text: str, text_pair: str | None = None, mask: int | None = None,
                     token: str | None = None) -> Target:
    """The score of ``token`` (default: the top prediction) at the ``mask``-th ``[MASK]`` (0-based, default the first)."""
    wanted = token.strip() if isinstance(token, str) and token.strip() else None
    details = fill_mask_details(loaded, text, 1, None, text_pair)         # checks head, text, mask; the top-1
    m = _which(mask, len(details.masks), "[MASK]")
    best = details.masks[m]
    if wanted:                                                             # one vocabulary token, else refused
        details = fill_mask_details(loaded, text, 1, [target_token(loaded, wanted)], text_pair)
    found = details.masks[m]
    token_id, piece, position = found.token_ids[0], found.display_tokens[0], found.position
    attention_mask, types = _row(loaded, details.input_ids, details.token_type_ids)
    at_mask = torch.zeros_like(attention_mask, dtype=torch.bool)           # (1, S): the MLM head runs only here
    at_mask[0, position] = True

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        return model(ids, attention_mask=_expand(attention_mask, n), token_type_ids=_expand(types, n),
                     mlm_positions=_expand(at_mask, n), compute=("mlm",)).mlm.logits      # (N, V)

    mask_token = loaded.tokenizer.id_to_token(loaded.tokenizer.mask_token_id)
    number = f" {m + 1}" if len(details.masks) > 1 else ""
    where = f"{mask_token}{number} (position {position})"
    return Target(task="fill_mask", head="mlm", tokens=details.tokens, input_ids=details.input_ids,
                  token_type_ids=details.token_type_ids, class_scores=scores, index=token_id, position=position,
                  description=f"{piece!r} at {where}",
                  prediction=f"{best.display_tokens[0]!r} (probability {probability_text(best.scores[0])})",
                  warnings=list(details.warnings))


def qa_target(loaded: LoadedModel, question: str, context: str, end: bool = False) -> Target:
    """The start (or end) logit of the best answer's first (last) token, in the window it was found in."""
    result = answer_details(loaded, question, context)                    # checks head, texts, lengths
    span = next((s for s in result.spans if not s.is_null), None)
    if span is None:
        raise ValueError("the model found no answer span in this context, so there is no prediction to explain")
    windows = encode_qa_windows(loaded.tokenizer, question, context, result.max_seq_len, result.doc_stride,
                                max_question_len=max(1, len(result.question_tokens)))
    window = windows[span.window]
    attention_mask, types = _row(loaded, window.input_ids, window.token_type_ids)
    cannot = torch.tensor([[bool(p) for p in result.windows[span.window].p_mask]],
                          device=attention_mask.device)                   # (1, S): question, [SEP]
    position = span.end_token if end else span.start_token
    side = "end" if end else "start"

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        qa = model(ids, attention_mask=_expand(attention_mask, n), token_type_ids=_expand(types, n),
                   compute=("qa",)).qa
        logits = qa.end_logits if end else qa.start_logits                # (N, S)
        return logits.masked_fill(_expand(cannot, n), QA_MASKED_LOGIT)    # (N, S), as the pipeline masks them

    note = f" (window {span.window + 1} of {len(windows)})" if len(windows) > 1 else ""
    return Target(task=f"qa_{side}", head="qa", tokens=list(window.tokens), input_ids=list(window.input_ids),
                  token_type_ids=list(window.token_type_ids), class_scores=scores, index=position, position=position,
                  description=f"the answer's {side} at {window.tokens[position]!r} (position {position}){note}",
                  prediction=f"the answer {span.answer!r} (score {probability_text(span.score)})")


def _pooled_target(loaded: LoadedModel, task: str, head: str, encoding: Encoding, labels: Sequence[str],
                   label: str | None, default: Callable[[torch.Tensor], int], what: str, sigmoid: bool = False,
                   warnings: list[str] | None = None) -> Target:
    """A head that scores the whole row (NSP, sequence classification): its logits (N, K) over ``labels``."""
    attention_mask, types = _row(loaded, encoding.input_ids, encoding.token_type_ids)

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        out = model(ids, attention_mask=_expand(attention_mask, n), token_type_ids=_expand(types, n), compute=(head,))
        return out.result(head).logits                                                     # (N, K)

    with torch.inference_mode():
        logits = scores(loaded.model, torch.tensor([encoding.input_ids], device=attention_mask.device))[0].float()
    index = label_index(labels, label, default(logits))
    best = int(logits.argmax())
    return Target(task=task, head=head, tokens=list(encoding.shown), input_ids=list(encoding.input_ids),
                  token_type_ids=list(encoding.token_type_ids), class_scores=scores, index=index, position=None,
                  description=f"{what} {labels[index]!r}", prediction=f"{labels[best]!r}", sigmoid=sigmoid,
                  warnings=warnings or [])


def next_sentence_target(loaded: LoadedModel, text: str, text_pair: str, label: str | None = None) -> Target:
    """The NSP head's logit of ``label`` (``IsNext`` by default, or ``NotNext``) for ``[CLS] A [SEP] B [SEP]``."""
    loaded.require_head("nsp")
    check_text(text, "sentence A", "write the first sentence")
    check_text(text_pair, "sentence B", "write the sentence that may follow A")
    encoding, = encode_pairs(loaded, [(text, text_pair)])
    return _pooled_target(loaded, "next_sentence", "nsp", encoding, list(NSP_LABELS), label, lambda _: 0,
                          "the next-sentence label")


def classify_target(loaded: LoadedModel, text: str, text_pair: str | None = None, label: str | None = None) -> Target:
    """The classifier's logit of ``label`` (default: the predicted label)."""
    details = classify_details(loaded, text, text_pair)                   # checks head, text, length
    encoding, = encode_pairs(loaded, [(details.text, details.text_pair)])
    return _pooled_target(loaded, "classify", "classifier", encoding, details.labels, label,
                          lambda logits: int(logits.argmax()), "the label", sigmoid=details.function == "sigmoid")


def tag_target(loaded: LoadedModel, text: str, word: int | None = None, tag: str | None = None) -> Target:
    """The tagger's logit of ``tag`` (default: its prediction) at the first piece of the ``word``-th word
    (0-based; default the first word not tagged ``O``, else the first word)."""
    details = tag_details(loaded, text)                                   # checks head, text, length
    if not details.words:
        raise ValueError("the text has no words to tag (only special tokens?); write a sentence")
    default = next((i for i, w in enumerate(details.words) if w.label != "O"), 0)
    w = _which(word, len(details.words), "word", default)
    position = details.word_positions[w]
    encoding, = encode_pairs(loaded, [(text, None)])
    attention_mask, types = _row(loaded, encoding.input_ids, encoding.token_type_ids)

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        out = model(ids, attention_mask=_expand(attention_mask, n), token_type_ids=_expand(types, n),
                    compute=("token_classifier",))
        return out.token_classifier.logits[:, position]                   # (N, S, K) -> (N, K)

    index = label_index(details.labels, tag, details.labels.index(details.words[w].label))
    return Target(task="tag", head="token_classifier", tokens=list(encoding.shown),
                  input_ids=list(encoding.input_ids), token_type_ids=list(encoding.token_type_ids),
                  class_scores=scores, index=index, position=position,
                  description=f"the tag {details.labels[index]!r} of the word {details.words[w].word!r} "
                              f"(word {w + 1}, position {position})",
                  prediction=f"{details.words[w].label!r} (probability {probability_text(details.words[w].score)})")


def choose_target(loaded: LoadedModel, context: str, choices: Sequence[str], choice: int | None = None) -> Target:
    """The score of ``choice`` (0-based; default the model's pick) from its own ``[CLS] context [SEP] choice [SEP]``
    row; the other choices' scores stay as they are (so its probability is against them as given)."""
    result = choose(loaded, context, choices)                             # checks head, texts, count, lengths
    c = _which(choice, len(result.choices), "choice", result.best)
    encoding, = encode_pairs(loaded, [(context, result.choices[c])], [f"the context with choice {c + 1}"])
    attention_mask, types = _row(loaded, encoding.input_ids, encoding.token_type_ids)
    others = torch.tensor(result.logits, device=attention_mask.device)    # (C,), fixed

    def scores(model: BertWithHeads, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[0]
        own = model(ids.unsqueeze(1), attention_mask=_expand(attention_mask, n).unsqueeze(1),     # (N, 1, S)
                    token_type_ids=_expand(types, n).unsqueeze(1), compute=("multiple_choice",)).multiple_choice
        logits = others.to(own.logits).expand(n, -1).clone()              # (N, C)
        logits[:, c] = own.logits[:, 0]                                   # (N, 1) -> column c
        return logits

    best = result.best
    return Target(task="choose", head="multiple_choice", tokens=list(encoding.shown),
                  input_ids=list(encoding.input_ids), token_type_ids=list(encoding.token_type_ids),
                  class_scores=scores, index=c, position=None, description=f"choice {c + 1} ({result.choices[c]!r})",
                  prediction=f"choice {best + 1} ({result.choices[best]!r}, probability "
                             f"{probability_text(result.probabilities[best])})")


__all__ = ["Target", "NoSuchIndex", "target_token", "fill_mask_target", "qa_target", "next_sentence_target",
           "classify_target", "tag_target", "choose_target", "label_index", "MIN_CHOICES"]
