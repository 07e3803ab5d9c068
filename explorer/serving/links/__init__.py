"""A link that reopens a view, and embed mode (issue 43).

*Copy link* on every tab writes the tab's state into the page address's query (``?tab=attention&text=...``);
opening that address restores the fields and runs the tab's main action once. Nothing is stored on the server:
the link is the state. ``?embed=1`` shows the one view without the page's chrome (slides, iframes).

* ``fields.py``: one value of a link, by kind (text, number, choice, flag, list of numbers, token, model key),
  read with checks (a bad value gives the default and a sentence) and written back;
* ``schemas.py``: which widget of each tab's ``build`` dict maps to which query key (``LINKS``);
* ``query.py``: a whole link: the schema bound to the built widgets (ranges, choices and defaults read from them),
  a query parsed into field values, field values written as a bounded query;
* ``models.py``: a link's model key checked by the picker's rules (the same sentence, never a path) and the
  picked model's shape (how many layers and heads a link may name);
* ``wiring.py``: the *Copy link* buttons and the page-load restore (Gradio events);
* ``embed.py``: embed mode's CSS, and what it hides.
"""
