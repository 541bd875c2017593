"""The paper's questions as library functions (Izmailov et al. 2021), each runnable from the CLI.

- :mod:`~bnnkit.experiments.pruning`: weight pruning by signal-to-noise ratio (Blundell et al.
  2015), ``bnnkit prune``;
- :mod:`~bnnkit.experiments.prior_predictive`: draws from the prior predictive,
  ``bnnkit prior-predictive``;
- :mod:`~bnnkit.experiments.surface`: the posterior on the plane through three parameter
  vectors, ``bnnkit surface``;
- :mod:`~bnnkit.experiments.covariate_shift`: stored posteriors on corrupted test images,
  accuracy, NLL and ECE per corruption and severity, ``bnnkit shift``;
- :mod:`~bnnkit.experiments.convergence`: split R-hat in weight and function space, and one
  long chain against several short ones, ``bnnkit convergence``.

:mod:`~bnnkit.experiments.output_folder` is their shared ``--out DIR`` check.
"""
