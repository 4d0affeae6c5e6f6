"""Scores to metrics, baselines, transfer, the summary, figures and report tables."""
