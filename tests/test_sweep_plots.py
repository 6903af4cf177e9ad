"""Pictures of sweep tables: the critical γ read off P(one cluster) over β and n, against closed forms."""

from __future__ import annotations

import math

import pytest
from sweep_cases import serial_executor

from hardmax.sweep import read_table, sweep
from hardmax.sweep.plots import critical_curve, critical_gamma, curve


def _rows(n: int, beta_c: float, betas) -> list[dict]:
    """phase_cell rows whose P(one cluster) falls linearly from 1 at β = 0 through 1/2 at β_c."""
    return [{"task": "phase_cell", "n": n, "beta": b, "error": None,
             "single_final": min(1.0, max(0.0, 1 - b / (2 * beta_c)))} for b in betas]


def test_critical_gamma_is_beta_c_over_log_n():
    betas = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    table = _rows(16, 2.5, betas) + _rows(64, 3.7, betas) + _rows(256, 20.0, betas)
    gamma = critical_gamma(table)
    assert gamma[16] == pytest.approx(2.5 / math.log(16), rel=1e-12)
    assert gamma[64] == pytest.approx(3.7 / math.log(64), rel=1e-12)
    assert math.isnan(gamma[256])  # P never falls through 1/2 within β ≤ 8
    seeds = [{**r, "single_final": r["single_final"] + (0.1 if k % 2 else -0.1)}
             for k, r in enumerate(_rows(16, 2.5, betas) * 2)]  # two seeds per cell, averaged
    assert critical_gamma(sorted(seeds, key=lambda r: r["beta"]))[16] == pytest.approx(gamma[16])
    assert critical_curve(table).axes and curve(table, "beta", "single_final", by="n").axes
    with pytest.raises(ValueError, match="level must lie in"):
        critical_gamma(table, level=1.0)
    with pytest.raises(ValueError, match="no phase_cell rows"):
        critical_gamma([{"task": "noop", "x": 1.0, "error": None}])
    with pytest.raises(ValueError, match="no column 'single_t9'"):
        critical_gamma(table, column="single_t9")


def test_a_phase_diagram_from_a_sweep_is_the_cells_diagrams_and_draws(tmp_path):
    """`phase_cell` rows back into the PhaseDiagram `hardmax particles` draws: each β's row is phase_diagram([β])."""
    import torch

    from hardmax.experiments.particles import phase_diagram, phase_table
    from hardmax.sweep.plots import phase_diagram_of, phase_heatmap

    grid = {"beta": [0.0, 2.0, 6.0], "starts": [6], "n": [8], "steps": [40], "seed": [3]}
    with serial_executor() as ex:
        sweep("phase_cell", grid, out=tmp_path, executor=ex, progress=False)
    diagram = phase_diagram_of(read_table(tmp_path))
    for i, beta in enumerate(grid["beta"]):
        alone = phase_diagram([beta], starts=6, n=8, d=3, steps=40, seed=3)
        assert torch.equal(diagram.single[i], alone.single[0]) and torch.equal(diagram.times, alone.times)
        assert torch.equal(diagram.mean_clusters[i], alone.mean_clusters[0])
    assert "β \\ t" in phase_table(diagram)
    assert phase_heatmap(read_table(tmp_path)).axes and curve(read_table(tmp_path), "beta", "single_final").axes
    with pytest.raises(ValueError, match="no column 'nope'"):
        curve(read_table(tmp_path), "beta", "nope")
