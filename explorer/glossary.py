"""The words a learner meets in the app, each explained in one sentence: :data:`GLOSSARY`.

Tabs link a word where it appears with :func:`gloss` (an ``<abbr>`` whose hover title is the sentence and whose
click opens the entry in the Glossary panel), the Glossary panel lists every entry (:func:`glossary_markdown`),
and the part-of-speech views spell out the UPOS tags with :func:`upos_meaning` and :func:`upos_short`. One rule numbers layers
everywhere: :data:`LAYER_RULE`. Pure strings: no Gradio import, unit-tested in ``tests/explorer/test_glossary.py``.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One glossary word: ``term`` as shown, its one-sentence ``meaning``, and ``anchor`` (the HTML id)."""

    term: str
    meaning: str

    @property
    def anchor(self) -> str:
        """The entry's HTML id in the Glossary panel, e.g. ``gloss-doc-stride``."""
        return "gloss-" + re.sub(r"[^a-z0-9]+", "-", self.term.lower()).strip("-")


LAYER_RULE = ("Layers are numbered the same way in every tab: layer 0 is the embeddings' output (before any "
              "attention), and layer 1 to L are the outputs of the encoder's L layers; the attention heads of "
              "layer k are the ones that make layer k's output. Heads are numbered from 0.")

# The 17 universal part-of-speech tags (Universal Dependencies v2), spelled out.
UPOS_NAMES: dict[str, str] = {
    "ADJ": "adjective", "ADP": "adposition (a preposition such as 'in', 'of')", "ADV": "adverb",
    "AUX": "auxiliary verb ('is', 'has', 'will')", "CCONJ": "coordinating conjunction ('and', 'or', 'but')",
    "DET": "determiner ('the', 'a', 'this')", "INTJ": "interjection ('oh', 'yes')", "NOUN": "noun",
    "NUM": "numeral", "PART": "particle ('not', the 'to' of 'to go', possessive 's)",
    "PRON": "pronoun", "PROPN": "proper noun (a name)", "PUNCT": "punctuation",
    "SCONJ": "subordinating conjunction ('because', 'if', 'that')", "SYM": "symbol ('$', '%', ':)')",
    "VERB": "verb", "X": "other (a foreign word, a typo, a code)",
}

_ENTRIES = (
    Entry("WordPiece", "BERT's tokenizer: a word it does not know whole is split into known pieces, and a piece "
                       "that continues a word is written with ## in front (play ##ing)."),
    Entry("[CLS]", "The token put first in every input; its final vector summarises the input for the "
                   "next-sentence and classification heads."),
    Entry("[SEP]", "The token that ends each segment (sentence A, sentence B)."),
    Entry("[MASK]", "The token that hides a word during pretraining; the masked-LM head guesses what was there."),
    Entry("[UNK]", "The token that stands for text the vocabulary has no piece for (an emoji, a rare script)."),
    Entry("segment", "Which sentence a token belongs to, A or B; BERT adds a segment (token type) vector to "
                     "every token."),
    Entry("position embedding", "A learned vector per position (0, 1, 2, ...) added to each token so the model "
                                "knows word order."),
    Entry("embedding", "The vector a token is turned into; the embeddings' output is token + position + segment "
                       "vectors, normalised."),
    Entry("layer", LAYER_RULE),
    Entry("attention head", "One of the parallel attention maps in a layer: each token's query is compared with "
                            "every token's key, and the softmax of those scores says how much of each token's value "
                            "it takes."),
    Entry("softmax", "Turns a list of scores into probabilities that are all positive and add up to 1 "
                     "(bigger scores get exponentially more)."),
    Entry("logit", "A raw score before the softmax; only differences between logits matter, and a logit is not "
                   "a probability."),
    Entry("probability", "The softmax of the logits, between 0% and 100%; the app never shows a probability above "
                         "100%."),
    Entry("nats", "The unit of information with the natural logarithm: a loss of 0.69 nats is a fair coin's "
                  "guess, and a change of 1 nat multiplies the probability by e ≈ 2.7."),
    Entry("loss", "What training makes smaller: here the cross-entropy, the average of -ln(probability of the "
                  "right answer), in nats."),
    Entry("perplexity", "The exponential of the masked-LM loss (e to the power of the loss): the number of equally "
                        "likely words the model is choosing between on average."),
    Entry("MLM", "Masked language modelling, the first pretraining task: hide 15% of the tokens and predict them "
                 "from both sides."),
    Entry("NSP", "Next-sentence prediction, the second pretraining task: say whether sentence B really followed "
                 "sentence A (50% of pairs) or was drawn at random; guessing scores 50%."),
    Entry("pooler", "A dense layer with tanh on the [CLS] vector, used by the next-sentence and classification "
                    "heads."),
    Entry("head (task)", "A small layer on top of the encoder for one task: masked LM, next sentence, classify, "
                         "tag words, choose, or answer questions."),
    Entry("fine-tune", "Train a pretrained model a little more, with a new head, on a labelled task."),
    Entry("learning rate", "How big a step each training update takes; BERT warms it up from 0 and then lowers it "
                           "linearly."),
    Entry("warm-up", "The first training steps, during which the learning rate rises from 0 to its peak."),
    Entry("checkpoint", "The model (and the optimizer's state, to resume) saved at one training step."),
    Entry("smoothing", "An exponential moving average of a noisy curve: each point mixes the new value with the "
                       "smoothed one before it."),
    Entry("PCA", "Principal component analysis: the two directions along which the vectors vary most, used to "
                 "draw many-dimensional vectors on a flat plot."),
    Entry("cosine similarity", "How closely two vectors point the same way, from -1 to 1, whatever their lengths."),
    Entry("CKA", "Centred kernel alignment: a number up to 1 that says how similar two models' vectors at a layer "
                 "are over the same tokens (1 = the same up to rotation and scale, about 0 = unrelated; the debiased "
                 "estimate needs many tokens)."),
    Entry("ablation", "Switching a part off (here: an attention head's output set to zero) to see how much the "
                      "prediction depends on it."),
    Entry("attribution", "How much each input token pushed a prediction up or down (integrated gradients: the "
                         "gradient summed along a path from a blank input)."),
    Entry("doc stride", "When a context is longer than the model's window it is cut into overlapping windows; "
                        "the stride is how many tokens two neighbouring windows share."),
    Entry("null score", "In SQuAD 2.0 question answering, the score of answering nothing (the span at [CLS]); "
                        "when it beats every span, the model prefers no answer."),
    Entry("exact match", "The share of questions whose predicted answer is exactly a right answer, after "
                         "lower-casing and removing punctuation and articles."),
    Entry("F1", "The overlap of the predicted and right answers (or tags), the balance of precision and recall, "
                "from 0% to 100%."),
    Entry("UPOS", "Universal part-of-speech tags: 17 word classes shared by every language in Universal "
                  "Dependencies, e.g. NOUN, VERB, ADP (adposition)."),
    Entry("dependency head", "The word another word depends on in a sentence's grammar tree (in 'the cat', 'cat' is "
                             "the head of 'the'); the main verb's head is the root."),
    Entry("dependency relation", "The kind of link between a word and its dependency head, e.g. det (determiner), "
                                 "nsubj (subject), obj (object), in the Universal Dependencies names."),
    Entry("probe", "A small classifier trained on a model's vectors to read something out of them (here, each "
                   "word's part of speech); what it reads, the vectors hold in a form that simple."),
    Entry("control task", "A made-up task for a probe in which every word type gets a random but fixed tag; "
                          "what a probe learns there, it learns by memorising words, not from the model."),
    Entry("selectivity", "A probe's accuracy on the real task minus its accuracy on the control task: high when "
                         "the vectors, not the probe's own memory, carry the answer."),
    Entry("UAS", "Unlabelled attachment score: the share of words whose predicted dependency head is the right "
                 "word, whatever the relation's name."),
)

GLOSSARY: dict[str, Entry] = {entry.term.lower(): entry for entry in _ENTRIES}


def entry(term: str) -> Entry:
    """The glossary entry of ``term`` (any case); a KeyError names the known terms."""
    try:
        return GLOSSARY[term.lower()]
    except KeyError:
        raise KeyError(f"{term!r} is not in the glossary; known: {', '.join(sorted(GLOSSARY))}") from None


def gloss(term: str, shown: str | None = None) -> str:
    """``shown`` (default: the term) as an ``<abbr class="gloss">`` whose hover title is the term's sentence and
    whose second class and ``data-gloss`` name its Glossary anchor (a click opens the entry: the page script in
    ``explorer.page.JS``). For Markdown and HTML: Gradio's Markdown sanitizer drops ``data-`` attributes, so the
    script reads the anchor from the class."""
    item = entry(term)
    text = html.escape(shown if shown is not None else item.term, quote=True)
    return (f'<abbr class="gloss {item.anchor}" title="{html.escape(item.meaning, quote=True)}" '
            f'data-gloss="{item.anchor}">{text}</abbr>')


def upos_meaning(tag: str) -> str:
    """What a UPOS tag means, any case (``ADP`` → ``adposition (a preposition such as 'in', 'of')``); "" for
    another label (a named-entity tag such as ``B-PER``)."""
    return UPOS_NAMES.get(tag.upper(), "")


def upos_short(tag: str) -> str:
    """A UPOS tag's name without its examples (``ADP`` → ``adposition``); "" for another label."""
    return upos_meaning(tag).split(" (", 1)[0]


def glossary_markdown() -> str:
    """Every entry as Markdown, A to Z, each under an anchor (``<a id=...>``) the tabs' links open."""
    rows = [f'<a id="{item.anchor}"></a>**{html.escape(item.term)}**: {html.escape(item.meaning)}'
            for item in sorted(_ENTRIES, key=lambda e: e.term.strip("[]").lower())]
    tags = ", ".join(f"**{tag}** {name}" for tag, name in UPOS_NAMES.items())
    return "\n\n".join([*rows, f"**The UPOS tags:** {html.escape(tags)}."])
