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
  long chain against several short ones, ``bnnkit convergence``;
- :mod:`~bnnkit.experiments.compare_methods`: SGD, deep ensembles and SGMCMC against an HMC
  reference, ``bnnkit experiment compare-methods``;
- :mod:`~bnnkit.experiments.prior_sweep`: HMC under Gaussian priors of three scales and other
  shapes of equal variance, ``bnnkit experiment prior-sweep``;
- :mod:`~bnnkit.experiments.bbb_mnist`: Bayes by Backprop on MNIST (Blundell et al. 2015) with
  pruning, ``bnnkit experiment bbb-mnist``;
- :mod:`~bnnkit.experiments.temperature`: test metrics against the posterior temperature for
  HMC and SGMCMC with and without augmentation, ``bnnkit experiment temperature``;
- :mod:`~bnnkit.experiments.run_reuse`: their runs made once (finished reused, cut off
  resumed).

:mod:`~bnnkit.output_folder` is their shared ``--out DIR`` check.

Every ``bnnkit`` call builds ``bnnkit experiment``'s parser, which imports each experiment
module for its ``Config``; so these modules import the runs, the evaluation and the report's
plots inside the functions that run or draw, not at their top, where every command would pay
for them (docs/performance.md, "Command-line start-up", measures it).
"""
