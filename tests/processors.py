"""Which processor the tests run on: its maker and the widest vector set XLA:CPU uses there.

Pinned digests of floating-point results are kept per maker and set (XLA:CPU vectorises for the
widest set the processor has, and LLVM tunes the code to the processor), so a pinned test looks
its table up by :func:`processor` and skips where none is kept.
"""

from __future__ import annotations


def vector_isa() -> str | None:
    """The widest x86-64 vector set XLA:CPU can use here ("avx512", "avx2"), from the kernel's
    view of the processor; ``None`` where that cannot be read (not Linux, not x86-64)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = next(
                (line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), []
            )
    except OSError:
        return None
    if "avx512f" in flags:
        return "avx512"
    return "avx2" if "avx2" in flags else None


def processor() -> tuple[str | None, str | None]:
    """The processor's maker (``/proc/cpuinfo``'s ``vendor_id``) and :func:`vector_isa`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            vendor = next(
                (line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("vendor_id")),
                None,
            )
    except OSError:
        vendor = None
    return vendor, vector_isa()
