"""Runs: the one driver, run directories, several devices, progress.

- :func:`run`: any method of :data:`bnnkit.inference.METHODS` on a problem, into a run
  directory, with checkpoints and bit-exact resume (:mod:`bnnkit.runs.loop`);
- :func:`sample`: the same chains on any log density over a pytree, in memory or into a run
  directory, and :func:`load_chains` to read such a run back (:mod:`bnnkit.runs.density`);
- :class:`RunDir`: a run directory's files, lock and resume rules
  (:mod:`bnnkit.runs.directory`);
- :mod:`bnnkit.runs.initial`: start from another run; :mod:`bnnkit.runs.sharding`: several
  devices; :mod:`bnnkit.runs.progress`: the progress bar.
"""

from bnnkit.runs.density import Chains, load_chains, sample
from bnnkit.runs.directory import RunDir
from bnnkit.runs.loop import RunResult, evaluation_key, run

__all__ = ["Chains", "RunDir", "RunResult", "evaluation_key", "load_chains", "run", "sample"]
