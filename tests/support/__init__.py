"""What the tests share: reference models and comparisons (``reference``, ``qa_reference``, ``checkpoint_helpers``),
a served app and its events (``app_helpers``, ``event_helpers``, ``probing_helpers``, ``hostile_helpers``), the
command lines and benches (``cli_helpers``, ``bench_helpers``), fine-tuning and heads fixtures, the browser
(``browser_helpers``) and the fault-injection child process (``fault_child``). Import as ``from support.x import y``."""
