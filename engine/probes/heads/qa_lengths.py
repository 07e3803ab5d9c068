"""How long the QA pipeline's windows are, and how long a question may be in them (docs/design/qa.md, rule 1).

``transformers``' v4 ``QuestionAnsweringPipeline`` defaults ``max_seq_len`` to min(384, the model's max) and
``doc_stride`` to min(max_seq_len // 2, 128); `window_lengths` applies those defaults and its checks. A window
holds the question, a part of the context and the tokenizer's special tokens (`pair_specials`: BERT 3,
RoBERTa 4). Where the context must be cut into windows and the question leaves no room for ``doc_stride + 1``
context tokens, the fast tokenizer (and so the pipeline) fails; `check_question_fits` raises
`QuestionTooLong` there instead, naming the longest question that fits (`question_limit`).
"""
from __future__ import annotations

from engine.checks import is_int
from engine.model.loaded_model import LoadedModel

DEFAULT_MAX_SEQ_LEN = 384
DEFAULT_DOC_STRIDE = 128
SPECIAL_TOKENS = 3             # BERT's [CLS] question [SEP] context [SEP]; a tokenizer's own count: pair_specials


class QuestionTooLong(ValueError):
    """The question leaves a window no room for ``doc_stride + 1`` context tokens (the fast
    tokenizer, and so the pipeline, fails then); ``limit`` is the longest question that fits."""

    def __init__(self, tokens: int, limit: int, max_seq_len: int, doc_stride: int) -> None:
        self.tokens, self.limit, self.max_seq_len, self.doc_stride = tokens, limit, max_seq_len, doc_stride
        super().__init__(f"the question is {tokens} tokens long, which leaves no room for the context: with "
                         f"max_seq_len {max_seq_len} and doc_stride {doc_stride} it may have at most {limit} tokens, "
                         f"so shorten the question or raise max_seq_len")


def window_lengths(loaded: LoadedModel, max_seq_len: int | None, doc_stride: int | None) -> tuple[int, int]:
    """``(max_seq_len, doc_stride)`` with the pipeline's defaults filled in: max_seq_len min(384, model max),
    doc_stride min(max_seq_len // 2, 128); the model's max is ``config.max_tokens`` (its positions less
    RoBERTa's offset). ValueError for a length that is not a whole number, too small, or too large."""
    limit = loaded.config.max_tokens
    if max_seq_len is None:
        max_seq_len = min(DEFAULT_MAX_SEQ_LEN, limit)
    if not is_int(max_seq_len) or max_seq_len < 4:
        raise ValueError(f"max_seq_len must be an int >= 4, got {max_seq_len!r}")
    if max_seq_len > limit:
        offset = loaded.config.max_position_embeddings - limit
        raise ValueError(f"max_seq_len ({max_seq_len}) is larger than the model's max_position_embeddings "
                         + (f"({limit})" if not offset else f"less its position offset ({limit})"))
    if doc_stride is None:
        doc_stride = min(max_seq_len // 2, DEFAULT_DOC_STRIDE)
    if not is_int(doc_stride) or doc_stride < 0:
        raise ValueError(f"doc_stride must be an int >= 0, got {doc_stride!r}")
    if doc_stride >= max_seq_len:
        raise ValueError(f"`doc_stride` ({doc_stride}) is larger than `max_seq_len` ({max_seq_len}); "
                         f"it must be smaller")
    return max_seq_len, doc_stride


def pair_specials(tokenizer) -> int:
    """How many special tokens the tokenizer's post-processor puts around a question and a context (BERT 3,
    RoBERTa's ``<s> q </s></s> c </s>`` 4)."""
    processor = tokenizer.backend.post_processor
    return 0 if processor is None else processor.num_special_tokens_to_add(True)


def question_limit(max_seq_len: int, doc_stride: int, specials: int = SPECIAL_TOKENS) -> int:
    """The longest question (in tokens) whose windows still hold ``doc_stride + 1`` context tokens, with
    ``specials`` special tokens in a window (`pair_specials`)."""
    return max_seq_len - specials - doc_stride - 1


def check_question_fits(num_question: int, num_context: int, max_seq_len: int, doc_stride: int,
                        specials: int = SPECIAL_TOKENS) -> None:
    """Raise `QuestionTooLong` where the fast tokenizer fails: the context must be cut into
    windows, and a window has no room for more than ``doc_stride`` context tokens."""
    if num_question + num_context + specials <= max_seq_len:
        return                                              # one window, nothing is truncated
    limit = question_limit(max_seq_len, doc_stride, specials)
    if num_question > limit:
        raise QuestionTooLong(num_question, max(limit, 0), max_seq_len, doc_stride)
