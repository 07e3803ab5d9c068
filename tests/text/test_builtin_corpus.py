"""The built-in Shakespeare corpus (engine.text.builtin_corpus): the play parser, offline loading, prefixes."""
from __future__ import annotations

import pytest

from engine.text.builtin_corpus import builtin_corpus, parse_play_markdown


PLAY = """# A Play

## ACT I

### SCENE I. A room.

_Enter ALICE and
BOB, with others_

**ALICE**  
Who is there? Speak, I say.  
Or else be gone.

**BOB**  
_\\[Aside]_ A friend\\--no more.

KING

**HENRY**  
Peace, Bob. _Exit_

### SCENE II. Elsewhere.

*Enter CAROL.*

**CAROL**  
All is well.  
"""


def test_parse_play_markdown_keeps_only_spoken_text():
    scenes = parse_play_markdown(PLAY)
    assert scenes == [["Who is there?", "Speak, I say.", "Or else be gone.", "A friend--no more.", "Peace, Bob."],
                      ["All is well."]]


def test_builtin_shakespeare_loads_offline(no_internet):
    docs = builtin_corpus("shakespeare")
    assert 600 <= len(docs) <= 900                               # one per scene of ~38 plays
    assert 40_000 <= sum(len(doc) for doc in docs) <= 70_000     # sentences
    assert all(doc and all(s.strip() for s in doc) for doc in docs)
    sentences = {s for doc in docs for s in doc}
    assert "To be, or not to be: that is the question: Whether 'tis nobler in the mind to suffer The slings " \
           "and arrows of outrageous fortune, Or to take arms against a sea of troubles, And by opposing end them?" \
           in sentences
    assert not any(("**" in s or s.startswith("_") or "\\" in s) for s in sentences)
    assert builtin_corpus("shakespeare") == docs                 # deterministic (and cached)
    assert len(builtin_corpus(max_documents=5)) == 5
    with pytest.raises(ValueError, match="unknown built-in corpus"):
        builtin_corpus("wikipedia")


def test_builtin_corpus_first_documents_are_a_prefix_of_the_whole():
    """Asking for a few scenes parses only the plays needed, and gives exactly the whole corpus's first scenes."""
    few = builtin_corpus("shakespeare", max_documents=7)
    whole = builtin_corpus("shakespeare")
    assert len(few) == 7 and few == whole[:7]
    few[0].append("mutating a result must not change the next one")
    assert builtin_corpus("shakespeare", max_documents=7)[0] == whole[0]
