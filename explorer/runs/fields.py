"""The Training form's number fields whose steps and ranges the browser keeps: the arrow keys and the mouse wheel
move the learning rate by 0.00001 and the masking rate by 0.01, never past their ranges (a plain ``gr.Number``
steps by 1: one ArrowUp turned a learning rate of 0.0005 into 1).

The range is the browser's (the ``<input type=number>`` ``min``/``max``); the form's handler checks what arrives
(``make_spec``: ``JobSpec.validate``), so a typed or hand-written out-of-range value gets the message that names
the setting, not Gradio's "Value 1.5 is greater than maximum value 0.99." that names none. (A ``gr.Number``
subclass would do the same, but Gradio writes a ``.pyi`` stub beside the module of every component class it
meets, into the source tree or an installed package.)
"""
from __future__ import annotations

from typing import Any

import gradio as gr

# (step, minimum, maximum): every usual learning rate (1e-5, 3e-5, 5e-4, 1e-3) is a whole number of steps from
# the minimum, so ArrowUp from 0.0005 gives 0.00051, not a value off the grid (a step counts from the minimum).
LEARNING_RATE = (0.00001, 0.00001, 1.0)
MASK_RATE = (0.01, 0.01, 0.99)


def ranged_number(value: float, label: str, limits: tuple[float, float, float], **kwargs: Any) -> gr.Number:
    """A ``gr.Number`` with ``limits`` = (step, minimum, maximum) for the browser's stepping, whose
    ``preprocess`` passes the value on unchecked for range (rounded to its ``precision`` when one is set): the
    handler checks it, naming the setting. ``explorer.ui_errors.check_number_inputs`` still refuses what is no
    number."""
    step, minimum, maximum = limits
    number = gr.Number(value, label=label, step=step, minimum=minimum, maximum=maximum, **kwargs)

    def preprocess(payload: float | None) -> float | int | None:
        return None if payload is None else number.round_to_precision(payload, number.precision)

    number.preprocess = preprocess
    return number
