"""engine.training.worker.run_thread: what preparing a run says stays in sight. A vocabulary smaller than asked
is a ``warning: `` progress message, kept as the run's notice (the Training tab's status shows it), and a new run's
folder is named ``<task>-<yyyymmdd-hhmmss>``."""
from __future__ import annotations

import re

import pytest

from engine.training.tasks.job_spec import JobSpec
from engine.training.worker.training_worker import TrainingWorker

pytestmark = pytest.mark.usefixtures("one_thread")
TIMEOUT = 120.0


def test_a_small_vocabulary_is_a_kept_notice_and_the_folder_names_the_task(tmp_path):
    worker = TrainingWorker(tmp_path / "runs")
    try:
        worker.start(JobSpec(dict(total_steps=1, batch_size=4, max_seq_length=32, eval_every=0, checkpoint_every=0),
                             preset="tiny", corpus="shakespeare", max_documents=20, vocab_size=8000))
        assert worker.join(TIMEOUT)
        status = worker.status()
        assert status.state == "finished", status
        assert re.fullmatch(r"the vocabulary has [\d,]+ tokens, not the 8,000 asked: the training text holds too "
                            r"few distinct words and pieces for that many .*", status.notice or ""), status.notice
        assert re.fullmatch(r"pretraining-\d{8}-\d{6}", status.run_dir.name)
    finally:
        worker.close(timeout_s=TIMEOUT)
