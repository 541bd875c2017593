"""What inference methods return: representations of p(θ | D) with ``sample(key, n)``."""

from bnnkit.posterior.samples import Samples

__all__ = ["Samples"]
