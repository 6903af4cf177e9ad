"""Running `simulate` and `solve` on a chosen engine, for the tests that hold the engines to each other.

The engines are private (`hardmax.dynamics._engines`): a user never names one, `solve` chooses. The tests do, with
`_engines.using(name)`: "compiled" (the numba kernel), "torch" (the compact torch path of the paper's layers) and
"reference" (the loop over `solver.step`, which serves every case).
"""

from __future__ import annotations

from hardmax.dynamics import Save, simulate, solve
from hardmax.dynamics._engines import using


def simulate_on(engine: str, *args, **kwargs):
    """`simulate(*args, **kwargs)` on `engine` ("auto": the chooser's own pick)."""
    if engine == "auto":
        return simulate(*args, **kwargs)
    with using(engine):
        return simulate(*args, **kwargs)


def solve_on(engine: str, *args, **kwargs):
    """`solve(*args, **kwargs)` on `engine` ("auto": the chooser's own pick)."""
    if engine == "auto":
        return solve(*args, **kwargs)
    with using(engine):
        return solve(*args, **kwargs)


def save_of(store, attention: bool = False) -> Save:
    """The `Save` of the older spelling store= ("all", "final" or every k-th layer)."""
    if store == "all":
        return Save(attention=attention)
    if store == "final":
        return Save.final(attention=attention)
    return Save(every=store, attention=attention)
