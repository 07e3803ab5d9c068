"""The prepared GPU session (docs/design/gpu-session.md): one command for a borrowed GPU machine that checks
CUDA correctness, measures throughput, trains the default model further under a time budget and sends back the
best model in parts small enough to come home.

Modules: ``budget`` (the deadline, stages and the session log), ``environment`` (what the machine is),
``correctness`` (our model against transformers on the device, exact resume, probes, worker cycles),
``throughput`` (``bench/train_throughput.py`` on the device, MFU), ``pack`` (the carried data: built here from
``../shared/data``, unpacked there), ``heldout`` (the fixed held-out sample the training stage scores),
``training`` (the ``qa_mlm`` recipe with early stopping), ``parts`` (fp16 export, parts, manifest; joined again
here), ``session`` (the stages in order). The command lines are ``scripts/gpu_session.py``,
``scripts/gpu_data_pack.py`` and ``scripts/gpu_assemble.py``.
"""
