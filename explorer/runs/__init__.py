"""The run UI the tabs share: the run controls, the status line, the curves, the run browser and the ranged number
fields (the Training and Fine-tune tabs), and the run picker every over-training view uses. It imports no tab."""
