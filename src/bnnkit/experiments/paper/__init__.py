"""The whole study of Izmailov et al. (2021) end to end, at three sizes: ``bnnkit paper``.

"What are Bayesian neural network posteriors really like?" asks six questions; each has an
experiment in :mod:`bnnkit.experiments`, and :func:`~bnnkit.experiments.paper.study.paper`
runs them in turn on the data this machine has, then scores the paper's findings and writes
one report:

1. ``compare_methods/``: SGD, a deep ensemble, four SGMCMC variants, MultiSWAG, MC dropout, IVON
   and MFVI against the reference on UCI yacht (regression) and an MNIST subset
   (:mod:`~bnnkit.experiments.compare_methods`), at ``full`` also a Fashion-MNIST subset; and
   SGD and the ensemble against the reference on a CIFAR-10 proxy subset;
2. ``convergence/``: split R-hat of the MNIST reference in weight and function space, and one
   long chain against several short ones (:mod:`~bnnkit.experiments.convergence`);
3. ``shift/``: HMC, SGD and the deep ensemble of a CIFAR-10 proxy subset on its corrupted test
   images (:mod:`~bnnkit.experiments.covariate_shift`), and ``shift_mnist/`` the MNIST runs on
   corrupted digits (every corruption is photometric, a blur, noise or an elastic warp: none
   mirrors or rotates, so each keeps a digit's label);
4. ``surface/``: the log posterior on the plane through the ends of three of the MNIST
   reference's chains (:mod:`~bnnkit.experiments.surface`);
5. ``temperature/``: MCLMC from the CIFAR-10 proxy reference's ensemble and cyclical SGHMC
   with and without augmentation against the posterior temperature on that subset, whose
   crops and flips keep the labels (:mod:`~bnnkit.experiments.temperature`);
6. ``prior_sweep/``: the model average under priors of several scales and shapes, each
   sampled by MCLMC from the members of that dataset's reference ensemble
   (:mod:`~bnnkit.experiments.prior_sweep`);
7. ``bbb_mnist/``: Bayes by Backprop in Blundell et al.'s setting
   (:mod:`~bnnkit.experiments.bbb_mnist`);
8. ``findings.md``: each finding of the paper's abstract, the measured figures it rests on, and
   whether they reproduce it (:func:`~bnnkit.experiments.paper.results.findings`);
   ``figures/finding_<n>.png``, each finding's figure as the paper draws it
   (:func:`~bnnkit.experiments.paper.results.finding_figures`); then ``report/`` (``bnnkit
   report`` of all of the above, each finding's figure with its verdict under it).

Every HMC reference is made the way ``bnnkit reference`` makes one
(:mod:`~bnnkit.experiments.reference`): a deep ensemble, then one HMC chain from each member,
tuned on its own; each finding names the weakest verdict of its references (certified,
reproducible, not a reference: :mod:`bnnkit.metrics.levels`), and is "not assessable" when
one is not a reference. The image networks have the prior
:data:`~bnnkit.experiments.paper.scales.IMAGE_PRIOR`, fixed by a rule before any data are
seen. The CIFAR-10 proxy (``cifar10_proxy``) is a lossy JPEG copy of CIFAR-10: fine for the
qualitative questions asked of it here, never a source of CIFAR-10 numbers.

A :class:`~bnnkit.experiments.paper.scales.Scale` fixes every size: ``tiny`` is a smoke test
of the whole pipeline, ``small`` the paper's small-data settings at the length two CPU cores
afford, ``full`` the longer chains and larger subsets an accelerator affords (their run times:
``docs/performance.md``, The paper study). Each experiment reuses finished runs and resumes
cut-off ones, so calling :func:`~bnnkit.experiments.paper.study.paper` again on the same
folder continues it.

The study has three jobs, each in modules of its own:

- what it runs: :mod:`~bnnkit.experiments.paper.scales` (the sizes,
  :class:`~bnnkit.experiments.paper.scales.Config` and the choices every scale shares) and
  :mod:`~bnnkit.experiments.paper.part_settings` (each part's settings at a scale);
- what it concludes: :mod:`~bnnkit.experiments.paper.levels` (the verdicts a finding rests
  on), :mod:`~bnnkit.experiments.paper.method_rows` (the compare-methods table
  as the findings read it), :mod:`~bnnkit.experiments.paper.verdicts` (the six findings and
  their verdicts) and :mod:`~bnnkit.experiments.paper.results` (a study folder's findings and
  figures);
- how it runs: :mod:`~bnnkit.experiments.paper.study` (the driver,
  :func:`~bnnkit.experiments.paper.study.paper`) and :mod:`~bnnkit.experiments.paper.layout`
  (the folder's file names).
"""
