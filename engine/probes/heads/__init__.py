"""What the model's task heads predict, each shaped as its ``transformers`` pipeline returns it: fill-mask per mask
(``fill_mask``) and jointly (``joint_fill``); extractive QA over windows (``qa``), one window's spans (``qa_spans``)
and the SQuAD metric (``squad_metric``); sequence classification (``classify``), token tagging (``tag``), multiple
choice (``choose``), next-sentence / sentence-order prediction (``next_sentence``), ELECTRA's replaced-token
detection (``replaced_tokens``), and those heads' checked inputs (``head_inputs``)."""
