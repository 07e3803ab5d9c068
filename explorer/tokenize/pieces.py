"""The Tokenize tab's main view: the pieces the model sees, as escaped HTML (pure, no Gradio).

One ``<span class="wp ...">`` per piece, in input order, ``[CLS]``/``[SEP]`` included. Pieces of
one word sit in one ``wp-word`` group (same colour, no gap, never split over two lines); a piece is
shown as a reader sees it (``TokenRow.shown``: a ``##`` piece keeps its ``##``, a byte-level or SentencePiece
word start shows ``▁``). Pieces cut by truncation sit right after the last kept piece of their segment. Classes say what a piece is (styled by ``.wordpieces`` rules in
``assets/style.css``): ``wp-A``/``wp-B`` its segment, ``wp-w0``..``wp-w5`` its word colour,
``wp-special``, ``wp-cont`` (a ``##`` piece), ``wp-unk`` (``[UNK]``, with the text it replaced in a
``<sub>``) and ``wp-cut`` (cut by truncation; the model never sees it). Every piece has a ``title``
(the hover text): position, id, segment, character span and source text.
"""
from __future__ import annotations

from html import escape

from engine.text.token_explain import Explanation, TokenRow

WORD_COLORS = 6                 # word colour classes wp-w0..wp-w5, cycled by word
MAX_CUT_SHOWN = 50              # truncated pieces drawn per segment; the rest are counted
LEGEND = ('<div class="wp-legend"><strong>Pieces the model sees</strong>, in order · key: '
          '<span class="wp wp-A">segment A</span> <span class="wp wp-B">segment B</span> '
          '<span class="wp wp-special">special</span> <span class="wp wp-unk">[UNK]</span> '
          '<span class="wp wp-cut">cut by truncation</span> · one colour = one word · hover a piece for its '
          'position, id and characters</div>')


def pieces_html(expl: Explanation, unk_token: str = "[UNK]") -> str:
    """The pieces of ``expl`` as one HTML ``<div>``, every text escaped (see the module docstring)."""
    cut = {seg: [r for r in expl.dropped if r.segment == seg] for seg in "AB"}
    groups: list[str] = []
    run: list[TokenRow] = []        # the content pieces since the last special

    def end_of_run() -> None:       # a segment's last kept piece: the pieces cut from it go just after
        groups.extend(_words(run, unk_token))
        if run:
            seg = run[-1].segment
            groups.extend(_cut(cut.pop(seg, []), expl.num_dropped.get(seg, 0), expl.max_length, unk_token))
        run.clear()

    for row in expl.rows:
        if row.segment != "special":
            run.append(row)
            continue
        end_of_run()
        groups.append(_piece(row, unk_token))
    end_of_run()
    for seg, rows in cut.items():   # anything cut but not placed yet
        groups += _cut(rows, expl.num_dropped.get(seg, 0), expl.max_length, unk_token)
    return f'<div class="wp-view">{LEGEND}<div class="wp-strip">{" ".join(groups)}</div></div>'


def _words(rows: list[TokenRow], unk_token: str, max_length: int | None = None) -> list[str]:
    """Consecutive pieces of one word in one ``wp-word`` group each."""
    groups: list[str] = []
    word: list[str] = []
    key: tuple[str, int | None] | None = None
    for row in rows:
        if word and ((row.segment, row.word_id) != key or row.word_id is None):
            groups.append(f'<span class="wp-word">{"".join(word)}</span>')
            word = []
        key = (row.segment, row.word_id)
        word.append(_piece(row, unk_token, max_length))
    if word:
        groups.append(f'<span class="wp-word">{"".join(word)}</span>')
    return groups


def _cut(rows: list[TokenRow], total: int, max_length: int, unk_token: str) -> list[str]:
    """One segment's cut pieces: a scissors mark, the first ``MAX_CUT_SHOWN`` pieces, a count of the rest
    (``total`` pieces were cut from the segment)."""
    if not rows:
        return []
    more = total - min(len(rows), MAX_CUT_SHOWN)
    mark = escape(f"cut by truncation at max length {max_length}: the model never sees what follows", quote=True)
    return [f'<span class="wp-cut-mark" title="{mark}">✂</span>',
            *_words(rows[:MAX_CUT_SHOWN], unk_token, max_length),
            *([f'<span class="wp-cut-more">… and {more:,} more cut</span>'] if more > 0 else [])]


def _piece(row: TokenRow, unk_token: str, max_length: int | None = None) -> str:
    """One piece as a ``<span>`` with its classes, hover text and, for ``[UNK]``, the replaced text; with a
    ``max_length``, a piece that truncation cut."""
    cut = max_length is not None
    unk = row.token == unk_token and not row.special
    classes = ["wp", "wp-special" if row.special else f"wp-{row.segment}"]
    if not row.special and row.word_id is not None:
        classes.append(f"wp-w{row.word_id % WORD_COLORS}")
    if row.is_continuation:
        classes.append("wp-cont")
    if unk:
        classes.append("wp-unk")
    if cut:
        classes.append("wp-cut")
    where = (f"cut by truncation (max length {max_length}): the model never sees this piece"
             if cut else f"position {row.index}")
    name = row.shown or row.token
    spelled = f" (vocabulary piece {row.token})" if name != row.token else ""
    lines = [f"{name}{spelled} · {where}", f"id {row.id} · " + (
        "special token" if row.special else f"segment {row.segment} (type id {row.type_id}), word {row.word_id}")]
    if not row.special:
        lines.append(f"chars {row.start}–{row.end} of text {row.segment}: “{row.text}”")
    if unk:
        lines.append(f"{unk_token}: the vocabulary has no piece for “{row.text}”")
    body = escape(name)
    if unk:
        body += f'<sub class="wp-src">{escape(row.text)}</sub>'
    return f'<span class="{" ".join(classes)}" title="{escape(chr(10).join(lines), quote=True)}">{body}</span>'
