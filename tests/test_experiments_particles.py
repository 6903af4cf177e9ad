"""`hardmax.experiments.particles`: the phase diagram as one batch equals its β values run apart, the
metastable run shows its plateaus, the 2023 pictures satisfy their claims, and `reproduce` writes its files."""

from __future__ import annotations

import torch

from hardmax.dynamics import RK4, Bilinear, Field, Save, Softmax, Sphere, solve
from hardmax.experiments.particles import KINDS_2023, clustering_2023, metastability, phase_diagram, phase_table
from hardmax.theory import check_flow, cluster_counts


def test_the_phase_diagram_batch_is_each_beta_run_on_its_own():
    betas = [0.0, 2.0, 6.0]
    diagram = phase_diagram(betas, starts=12, n=6, d=3, steps=100, dt=0.2, save_every=25, dtype=torch.float64)
    assert diagram.single.shape == (3, 5)
    assert torch.allclose(diagram.times, torch.tensor([0.0, 5.0, 10.0, 15.0, 20.0], dtype=torch.float64))
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(3 * 12, 6, 3, dtype=torch.float64, generator=g), dim=-1)
    for b, beta in enumerate(betas):
        field = Field(Softmax(1.0), scores=Bilinear(beta * torch.eye(3, dtype=torch.float64)), manifold=Sphere())
        sol = solve(field, RK4(0.2), x[b * 12:(b + 1) * 12], steps=100, save=Save(every=25))
        single = (cluster_counts(sol.tokens, 1e-2) == 1).double().mean(-1)
        assert torch.equal(diagram.single[b], single)
    assert float(diagram.single[0, -1]) == 1.0  # β = 0: consensus
    assert "| β \\ t |" in phase_table(diagram)


def test_metastability_has_plateaus_and_a_staircase_of_energy():
    run = metastability(seed=1, t1=300.0)
    counts = run.clusters.tolist()
    assert counts[0] == 5 and counts[-1] == 1
    assert all(b <= a for a, b in zip(counts, counts[1:], strict=False))  # clusters only merge
    two = [i for i, c in enumerate(counts) if c == 2]
    assert float(run.solution.times[two[-1]] - run.solution.times[two[0]]) > 100  # a long plateau at 2 clusters
    energy = run.energy
    assert bool((energy[1:] >= energy[:-1] - 1e-12).all())
    jumps = energy.diff()
    quarter = (two[-1] - two[0]) // 4  # the middle of the plateau: flat; the merges: sharp rises
    assert float(jumps.max()) > 100 * float(jumps[two[0] + quarter:two[-1] - quarter].abs().max())
    assert check_flow(run.solution)["energy"].status == "passed"


def test_the_2023_pictures_satisfy_their_claims():
    for kind in KINDS_2023:
        report = check_flow(clustering_2023(kind, n=10, seed=2))
        assert report.passed, report.table()
        claim = "polytope" if kind in ("polytope", "boolean") else "hyperplanes"
        assert report[claim].status == "passed", (kind, report.table())


def test_the_one_dimensional_attention_becomes_boolean():
    sol = clustering_2023("boolean", n=8, seed=4)
    P = sol.attention[-1]
    assert float(torch.minimum(P, 1 - P).max()) < 1e-3


def test_bad_phase_diagram_settings_get_one_line():
    import pytest

    for betas, kwargs, message in (([-1.0], {}, "betas must be finite numbers ≥ 0"), ([], {}, "betas must be"),
                                   ([1.0], {"d": 1}, "d ≥ 2"), ([1.0], {"starts": 0}, "starts ≥ 1")):
        with pytest.raises(ValueError, match=message):
            phase_diagram(betas, **kwargs)


def test_a_device_this_machine_lacks_is_one_line(monkeypatch):
    """Issue #39 (13): phase_diagram(device="cuda") on a CPU build said nothing useful (a traceback)."""
    import pytest

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for device in ("cuda", "cuda:3", torch.device("cuda")):
        with pytest.raises(ValueError, match="no CUDA device is available"):
            phase_diagram([1.0], starts=2, n=4, steps=2, device=device)
    with pytest.raises(ValueError, match="device"):
        phase_diagram([1.0], starts=2, n=4, steps=2, device="gpu")
    for name, value in (("starts", 2.5), ("steps", "3"), ("n", True)):
        with pytest.raises(ValueError, match=f"{name} must be an integer"):
            phase_diagram([1.0], **{"starts": 2, "n": 4, "steps": 2, name: value})


def _small_reproduction(monkeypatch):
    """`reproduce` with one clustering picture and a short metastability run (the phase diagrams whole, --quick)."""
    from hardmax.experiments import particles

    monkeypatch.setattr(particles, "KINDS_2023", ("polytope",))
    short = particles.metastability
    monkeypatch.setattr(particles, "metastability", lambda **kw: short(**kw, t1=20.0))
    return particles


def test_a_diagram_computed_elsewhere_is_asked_for_before_the_pictures_and_gives_the_same_tables(tmp_path,
                                                                                                 monkeypatch):
    """`reproduce(diagram=...)` asks for both diagrams before it draws anything (a diagram may answer with a Future:
    computed elsewhere, it runs while the pictures are drawn), and its tables are those of the in-process run."""
    import concurrent.futures

    particles = _small_reproduction(monkeypatch)
    alone = particles.reproduce(tmp_path / "alone", quick=True, gifs=False, seed=3)
    events: list[str] = []
    futures: list[concurrent.futures.Future] = []

    def diagram(betas, *, starts, d, seed):
        events.append(f"asked S{d - 1}")
        future = concurrent.futures.Future()
        future.set_result(particles.phase_diagram(betas, starts=starts, d=d, seed=seed))
        futures.append(future)
        return future

    elsewhere = particles.reproduce(tmp_path / "elsewhere", quick=True, gifs=False, seed=3, diagram=diagram,
                                    progress=events.append)
    assert events[:2] == ["asked S1", "asked S2"] and len(events) > 2  # then the pictures' lines
    assert elsewhere.tables == alone.tables
    assert [p.name for p in elsewhere.files] == [p.name for p in alone.files]

    def failing(betas, *, starts, d, seed):
        future = concurrent.futures.Future()
        future.set_exception(RuntimeError(f"the S{d - 1} sweep failed"))
        return future

    import pytest

    with pytest.raises(RuntimeError, match="the S1 sweep failed"):
        particles.reproduce(tmp_path / "failing", quick=True, gifs=False, diagram=failing)
