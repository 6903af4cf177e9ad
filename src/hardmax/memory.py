"""Memory budgets: every size a user controls is checked against an estimate before anything is allocated.

One rule for the whole library and the command line: a computation whose size the caller chooses
(layers, tokens, dimensions, seeds, iterations, classes, ...) first states what it will allocate,

    require_memory(nbytes, "layers=100000000 (a trajectory of 1.0e8 × 3 × 2 float64)")

and is refused with one `MemoryBudgetError` line when that is more than the memory this process can
have: the memory the operating system reports available (Linux: ``MemAvailable``), or on a CUDA
device the free device memory, or ``$HARDMAX_MEMORY_LIMIT`` (bytes, or with a suffix: ``512M``,
``8G``) when that is set and smaller. `MemoryBudgetError` is a `ValueError` (the command line prints it
as ``hardmax <command>: error: …``, exit code 2) and a `MemoryError` (code that catches allocation
failures catches it too).

No torch at import: the command line checks its options before torch loads.
"""

from __future__ import annotations

import math
import os
import re

__all__ = ["MemoryBudgetError", "format_bytes", "memory_budget", "require_memory"]

# Used when the operating system does not say how much memory is available (not Linux, no sysconf).
_FALLBACK_BUDGET = 8 * 2**30
_SUFFIXES = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class MemoryBudgetError(ValueError, MemoryError):
    """A requested size needs more memory than is available; the message names the argument or option."""


def format_bytes(nbytes: float) -> str:
    """1536 -> '1.5 KiB'; 8.0e9 -> '7.45 GiB' (binary units, three significant digits)."""
    if not math.isfinite(nbytes):
        return "an unbounded amount"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{int(nbytes)} B"


def _parse_limit(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"HARDMAX_MEMORY_LIMIT must be a number of bytes such as 8G or 512M, got {text!r}")
    return int(float(match.group(1)) * _SUFFIXES[match.group(2).upper()])


def _available_host_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_BUDGET


def memory_budget(device=None) -> int:
    """Bytes a new allocation may take: available host memory (or free memory of a CUDA `device`),
    capped by ``$HARDMAX_MEMORY_LIMIT`` when set."""
    available = None
    if device is not None and str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            available = int(torch.cuda.mem_get_info(torch.device(device))[0])
    if available is None:
        available = _available_host_memory()
    limit = os.environ.get("HARDMAX_MEMORY_LIMIT")
    return min(available, _parse_limit(limit)) if limit else available


def require_memory(nbytes: float, what: str, *, device=None) -> None:
    """Raise `MemoryBudgetError` unless `nbytes` fit the `memory_budget` of `device` (None: the host).

    Args:
        nbytes: the estimate, in bytes (a float: products of user sizes may exceed any integer type).
        what: the argument or option and what it allocates, e.g.
            ``"--layers 100000000 (a trajectory of 100,000,001 layers × 3 tokens × 2 float64)"``;
            the message starts with it.
    """
    budget = memory_budget(device)
    if not nbytes <= budget:  # NaN and inf refused too
        where = "on the GPU" if device is not None and str(device).startswith("cuda") else "here"
        raise MemoryBudgetError(f"{what} needs about {format_bytes(nbytes)} of memory, more than the "
                                f"{format_bytes(budget)} available {where}; choose a smaller value")
