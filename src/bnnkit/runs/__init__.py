"""Runs: the one driver, run directories, several devices, progress.

- :func:`run`: any method of :data:`bnnkit.inference.METHODS` on a problem, into a run
  directory, with checkpoints and bit-exact resume (:mod:`bnnkit.runs.loop`);
- :func:`sample`: the same chains on any log density over a pytree, in memory or into a run
  directory (:mod:`bnnkit.runs.density`);
- :mod:`bnnkit.runs.lifecycle`: what both share: a run directory's life from its lock to
  "finished" and the rules over several processes (the key streams, :mod:`bnnkit.runs.keys`,
  and the sampler's tally, :mod:`bnnkit.runs.tally`, have modules of their own);
- :func:`load_run`: any run directory read back (:mod:`bnnkit.runs.stored`), and
  :func:`load_chains`, the chains of a :func:`sample` run;
- :class:`RunDir`: a run directory's files, lock and resume rules
  (:mod:`bnnkit.runs.directory`);
- :mod:`bnnkit.runs.initial`: start from another run; :mod:`bnnkit.runs.sharding`: several
  devices; :mod:`bnnkit.runs.progress`: the progress bar.
"""

from bnnkit.runs.chains import Chains
from bnnkit.runs.density import sample
from bnnkit.runs.directory import RunDir
from bnnkit.runs.keys import evaluation_key
from bnnkit.runs.loop import RunResult, run
from bnnkit.runs.stored import StoredRun, load_chains, load_run

__all__ = [
    "Chains",
    "RunDir",
    "RunResult",
    "StoredRun",
    "evaluation_key",
    "load_chains",
    "load_run",
    "run",
    "sample",
]
