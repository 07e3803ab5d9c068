"""The Attention tab: heatmaps, model view, head stats, ablation, exports."""
