"""BERT Explorer's Gradio UI: one package per tab (``explorer/<tab>/``), the page in ``explorer.page``
(``build_app``, ``THEME``, ``CSS``, ``JS``). Empty on purpose: importing a pure figure builder such as
``explorer.fill_mask.plots`` needs no Gradio."""
