"""Experiments that combine the library's parts into reported results.

    dynamics.py    tokens -> simulate -> check_theorem: `SimulateConfig`, `run_simulation` -> `SimulationResult`,
                   `save_simulation` (trajectory, report, figure, GIF); `hardmax simulate`
    reproduce.py   the paper's Section 4: `ReproduceConfig`, the `quick` preset, `reproduce` (no torch at import)
    pipeline.py    its work: train or reuse a run per candidate, choose on validation, measure each d
    report.py      its report: results.md rendered from the results.json payload

Each experiment is importable (a config dataclass and one function) and has a `hardmax` command.
"""

__all__ = []
