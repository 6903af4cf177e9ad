"""The sweep's tasks: each row is what the library says of its cell, computed here again from the library's own
calls (`hardmax.dynamics.solve`, `hardmax.theory`, `hardmax.measures`, `hardmax.experiments`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hardmax.sweep import TASKS, cells


def _run(name: str, **parameters) -> dict:
    task = TASKS[name]
    cell = cells(task, [parameters])[0]
    return task.function(**cell)


def test_every_task_declares_typed_parameters_and_a_docstring():
    assert {"noop", "spin", "phase_cell", "simulate", "solve", "rate", "att_svm_seed", "att_svm_solve",
            "train_candidate"} <= set(TASKS)
    for task in TASKS.values():
        assert task.function.__doc__ and all(kind in (bool, int, float, str) for kind, _ in task.parameters.values())


def test_solve_is_the_sphere_flow_with_its_checks():
    from hardmax.dynamics import RK4, Field, Save, Softmax, Sphere, solve
    from hardmax.theory import check_flow, cluster_counts, energy

    row = _run("solve", n=6, d=3, beta=2.0, steps=60, dt=0.1, starts=3, seed=5)
    g = torch.Generator().manual_seed(5)
    x = torch.nn.functional.normalize(torch.randn(3, 6, 3, dtype=torch.float64, generator=g), dim=-1)
    run = solve(Field(Softmax(2.0), manifold=Sphere()), RK4(0.1), x, steps=60, save=Save(every=3))
    counts = cluster_counts(run.tokens[-1], 1e-2).double()
    assert row["passed"] == check_flow(run, tol=1e-2).passed and row["verdict"] == check_flow(run, tol=1e-2).verdict
    assert row["clusters_final"] == float(counts.mean()) and row["single_final"] == float((counts == 1).double().mean())
    assert row["energy_final"] == float(energy(run.tokens[-1], 2.0).mean())
    assert row["t_final"] == pytest.approx(6.0)
    with pytest.raises(ValueError, match="solver must be one of"):
        _run("solve", n=4, solver="leapfrog", seed=1)


def test_rate_is_the_coding_rate_before_and_after_the_layers():
    from hardmax.dynamics import simulate
    from hardmax.measures import coding_rate

    row = _run("rate", n=9, d=2, layers=12, eps=0.5, seed=7)
    tokens = np.random.default_rng(7).standard_normal((9, 2))
    run = simulate(tokens, alpha=0.5, layers=12)
    assert row["rate_start"] == float(coding_rate(torch.as_tensor(tokens), 0.5))
    assert row["rate_final"] == float(coding_rate(run.tokens[-1], 0.5))
    assert row["rate_ratio"] == row["rate_final"] / row["rate_start"]


def test_att_svm_seed_is_a_one_seed_synthetic_run():
    from hardmax.experiments.svm import SyntheticConfig, run_synthetic

    row = _run("att_svm_seed", iterations=200, seed=11)
    result = run_synthetic(SyntheticConfig(seeds=1, iterations=200, seed=11))
    assert row["corr_W_fro"] == float(result.curves["corr(W_k, W^mm_α)"][0, -1])
    assert row["corr_KQ_nuc"] == float(result.curves["corr((KQᵀ)_k, W^mm_⋆,α)"][0, -1])
    assert row["locally_optimal_W"] == bool(result.locally_optimal["W"][0])
    assert 0.5 < row["mass_W"] <= 1


def test_att_svm_solve_gives_the_batched_runs_svms_of_its_seed():
    """The Att-SVMs of seed s, solved alone in a cell from the problems drawn again, are those of the batched run."""
    from hardmax.experiments.svm import SyntheticConfig, run_synthetic

    config = SyntheticConfig(seeds=4, iterations=150, seed=3)
    result = run_synthetic(config)
    for s in (0, 3):
        selections = {p: ",".join(map(str, result.paths[p].selection[s].tolist())) for p in ("W", "KQ")}
        row = _run("att_svm_solve", seeds=4, seed=3, index=s, selection_W=selections["W"],
                   selection_KQ=selections["KQ"])
        assert row["failure"] is None and row["solves"] >= 2
        for p, norm in (("W", "fro"), ("W", "nuc"), ("KQ", "fro"), ("KQ", "nuc")):
            assert torch.equal(torch.tensor(row[f"W_{p}_{norm}"], dtype=torch.float64).reshape(10, 10),
                               result.svm[(p, norm)][s])
    with pytest.raises(ValueError, match="index must lie in"):
        _run("att_svm_solve", seeds=4, seed=3, index=4, selection_W="0", selection_KQ="0")


def test_phase_cells_with_their_block_are_the_one_batch_diagram():
    from hardmax.experiments.particles import _drawn, phase_diagram

    betas = [0.0, 3.0, 8.0]
    whole = phase_diagram(betas, starts=5, n=6, d=2, steps=30, seed=2)
    _drawn.cache_clear()
    for i, beta in reversed(list(enumerate(betas))):
        row = _run("phase_cell", beta=beta, starts=5, n=6, d=2, steps=30, seed=2, dtype="float32", index=i, of=3)
        assert _drawn.cache_info().misses == 1  # the diagram's starts drawn once for its cells, as in one batch
        assert [row[f"single_t{float(t):g}"] for t in whole.times] == whole.single[i].tolist()
        assert [row[f"clusters_t{float(t):g}"] for t in whole.times] == whole.mean_clusters[i].tolist()
    with pytest.raises(ValueError, match="block must be"):
        _run("phase_cell", beta=1.0, seed=2, index=3, of=3)
