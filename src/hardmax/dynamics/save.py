"""What a run keeps: `Save`, one object for `solve` and `simulate`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Save"]


@dataclass(frozen=True)
class Save:
    """What `solve` keeps: every k-th step and the last (`every`), or the states at given `times` (the only
    choice of an adaptive solver), and the attention matrix P at each saved state (`attention`)."""

    every: int | None = 1
    times: tuple[float, ...] | None = None
    attention: bool = False

    def __post_init__(self):
        e = self.every
        if e is not None and (isinstance(e, bool) or not isinstance(e, int | np.integer) or e < 1):
            raise ValueError(f"Save(every=k) needs an integer k ≥ 1 (or Save.final()), got {e!r}")
        if self.times is not None:
            t = tuple(float(x) for x in self.times)
            increasing = all(b > a for a, b in zip(t, t[1:], strict=False))
            if not t or not all(math.isfinite(x) for x in t) or not increasing or t[0] < 0:
                raise ValueError("Save(times=...) needs increasing finite times ≥ 0")
            object.__setattr__(self, "times", t)

    @classmethod
    def final(cls, attention: bool = False) -> Save:
        """Keep the start and the end only."""
        return cls(every=None, attention=attention)

    def indices(self, steps: int) -> tuple[int, ...]:
        """The saved steps among 0..`steps`: every `every`-th and the last, or (`every` None) the first and the last."""
        if self.every is None:
            return (0, steps) if steps else (0,)
        return tuple(sorted({*range(0, steps + 1, int(self.every)), steps}))
