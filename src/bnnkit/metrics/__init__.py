"""Predictive metrics and convergence diagnostics."""

from bnnkit.metrics import diagnostics, predictive

__all__ = ["diagnostics", "predictive"]
