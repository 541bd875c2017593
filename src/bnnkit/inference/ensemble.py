"""Deep ensembles (Lakshminarayanan et al. 2017): K SGD runs, one predictive.

Each member has its own initialisation and data order (the run driver's keys of member k) and
follows :mod:`bnnkit.inference.sgd` exactly; the members train together in one vmapped step, or
one after another with ``sequential``. The posterior is the members' final parameters, one
sample per member, and ``bnnkit evaluate`` averages their predictions.

Example:
    >>> loop = Config(init_step_size=1e-3, num_epochs=2, batch_size=8, num_members=5).loop(64)
    >>> loop.num_members, loop.kept_units()  # every member's last epoch
    (5, [1])
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bnnkit.inference import sgd
from bnnkit.inference.base import Loop
from bnnkit.settings import MEMBERS, setting

build = sgd.build


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config(sgd.Config):
    """K members of :class:`bnnkit.inference.sgd.Config`."""

    METHOD: ClassVar[str] = "ensemble"
    API_NAME: ClassVar[str] = "Ensemble"

    num_members: int = setting(
        help="K members; each has its own initialisation and data order", bounds=MEMBERS
    )
    sequential: bool = setting(
        False,
        help="train members one after another instead of in one "
        "vmapped step (members that do not fit together)",
    )

    @property
    def label(self) -> str:
        return f"Deep ensemble (K={self.num_members})"

    def loop(self, num_train: int) -> Loop:
        return self.epoch_loop(
            num_train, num_members=self.num_members, vmap_members=not self.sequential
        )
