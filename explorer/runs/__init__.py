"""The run UI the Training and Fine-tune tabs share: the run controls, the status line, the curves, the run
browser and the ranged number fields. It imports neither tab: both tabs import it."""
