"""Predictive metrics and convergence diagnostics."""

from bnnkit.metrics import diagnostics, mcmc, mcmc_summary, predictive

__all__ = ["diagnostics", "mcmc", "mcmc_summary", "predictive"]
