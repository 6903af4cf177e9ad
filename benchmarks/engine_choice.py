"""`simulate` on a named engine, spelled for this checkout or an older one (before/after benchmarks).

Since issue #40 the engines are private (`hardmax.dynamics._engines.using(name)` forces one; `save=` says what is
kept). The benchmarks also run against a worktree of c4aa52a (PYTHONPATH=/tmp/base/src), which spells the same
call `simulate(..., engine=..., store=...)`: this module speaks whichever the imported hardmax understands.
"""

from __future__ import annotations

import contextlib

from hardmax.dynamics import simulate

try:
    from hardmax.dynamics import Save
    from hardmax.dynamics._engines import using
except ImportError:  # hardmax before issue #40
    using = None


def simulate_on(tokens, *, engine: str = "auto", final: bool = False, **kwargs):
    """`simulate(tokens, **kwargs)` on `engine` ("auto", "torch", "compiled"), keeping every layer or (`final`) the
    first and the last."""
    if using is None:
        return simulate(tokens, engine=engine, store="final" if final else "all", **kwargs)
    with using(engine) if engine != "auto" else contextlib.nullcontext():
        return simulate(tokens, save=Save.final() if final else Save(), **kwargs)
