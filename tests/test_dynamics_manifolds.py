"""The `Manifold` protocol: a manifold written here, in one class, with nothing in src/ touched — the torus
(S^1)^k ⊂ R^{2k} — reaches `solve` (against a slow loop of its equation), `check_flow` and the flow picture;
an object without the protocol's members gets a one-line error naming them; nothing in src/ asks a manifold
for its class."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from hardmax.dynamics import (
    RK4,
    Euler,
    Field,
    Flat,
    Manifold,
    Renormalised,
    Save,
    Softmax,
    Sphere,
    solve,
)
from hardmax.plots.flows import cluster_colours, flow_figure
from hardmax.theory.flows import check_flow

SRC = Path(__file__).resolve().parents[1] / "src" / "hardmax"


@dataclass(frozen=True)
class Torus:
    """Tokens on the torus (S^1)^k ⊂ R^{2k}: each pair of coordinates x_(p) = (x_{2p}, x_{2p+1}) a unit vector.

        ẋ_i = Π_{x_i}(V Σ_j P_ij x_j),   (Π_x u)_(p) = u_(p) − ⟨u_(p), x_(p)⟩ x_(p)   (tangent to every circle)
        retraction: each pair divided by its norm
    """

    renormalisable: bool = True  # step then retract each circle: the sphere codes' scheme, circle by circle

    name = "the torus (S^1)^k"
    min_dimension = 2
    euclidean = False
    unit_sphere = False

    def velocity(self, z, target, V):
        u = target if V is None else target @ V.transpose(-1, -2)
        x, u = z.unflatten(-1, (-1, 2)), u.unflatten(-1, (-1, 2))
        return (u - (u * x).sum(-1, keepdim=True) * x).flatten(-2)

    def retract(self, z):
        x = z.unflatten(-1, (-1, 2))
        return (x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)).flatten(-2)

    def check(self, z):
        if z.shape[-1] % 2:
            raise ValueError(f"tokens on the torus need an even dimension, got d = {z.shape[-1]}")
        norms = torch.linalg.vector_norm(z.detach().unflatten(-1, (-1, 2)), dim=-1)
        if not bool(((norms - 1).abs() <= 1e3 * torch.finfo(z.dtype).eps).all()):
            raise ValueError("tokens on the torus must have unit pairs of coordinates; normalise each pair first")

    def pad(self, z, mask):
        point = torch.zeros(z.shape[-1], dtype=z.dtype, device=z.device)
        point[::2] = 1
        return torch.where(mask.unsqueeze(-1), z, point)

    def cluster_tolerance(self, size):
        return 1e-2


def torus_tokens(batch: int, n: int, d: int, seed: int) -> torch.Tensor:
    """(batch, n, d) tokens with uniform angles on each circle."""
    angles = torch.rand(batch, n, d // 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    angles = 2 * math.pi * angles
    return torch.stack([torch.cos(angles), torch.sin(angles)], -1).flatten(-2)


# slow references, token by token and circle by circle, from the equation


def ref_velocity(x: np.ndarray, beta: float, V: np.ndarray) -> np.ndarray:
    """(n, d) Π_{x_i}(V Σ_j P_ij x_j), softmax P_ij ∝ exp(β⟨x_i, x_j⟩), one token and one circle at a time."""
    n, d = x.shape
    out = np.zeros_like(x)
    for i in range(n):
        s = [beta * float(x[i] @ x[j]) for j in range(n)]
        top = max(s)
        e = [math.exp(v - top) for v in s]
        target = sum(e[j] / sum(e) * x[j] for j in range(n))
        u = V @ target
        for p in range(0, d, 2):
            out[i, p:p + 2] = u[p:p + 2] - float(u[p:p + 2] @ x[i, p:p + 2]) * x[i, p:p + 2]
    return out


def ref_retract(x: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(len(x)):
        for p in range(0, x.shape[1], 2):
            out[i, p:p + 2] /= math.hypot(*x[i, p:p + 2])
    return out


def ref_solve(x: np.ndarray, beta: float, V: np.ndarray, method: str, dt: float, steps: int) -> np.ndarray:
    """(steps + 1, n, d) the states of Euler or RK4 steps, each retracted onto the torus."""
    states = [x]
    f = lambda y: ref_velocity(y, beta, V)  # noqa: E731
    for _ in range(steps):
        if method == "euler":
            x = ref_retract(x + dt * f(x))
        else:
            k1 = f(x)
            k2 = f(x + dt / 2 * k1)
            k3 = f(x + dt / 2 * k2)
            k4 = f(x + dt * k3)
            x = ref_retract(x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
        states.append(x)
    return np.stack(states)


def pair_norms_error(z: torch.Tensor) -> float:
    return float((torch.linalg.vector_norm(z.unflatten(-1, (-1, 2)), dim=-1) - 1).abs().max())


# --------------------------------------------------------------------------------------------


def test_the_toy_and_the_library_manifolds_satisfy_the_protocol():
    assert isinstance(Torus(), Manifold) and isinstance(Flat(), Manifold) and isinstance(Sphere(), Manifold)
    assert not isinstance(object(), Manifold)
    z = Torus().retract(torch.randn(1, 4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    assert solve(Field(Softmax(1.0), manifold=Torus()), Euler.layers(1.0), z, steps=2).engine == "reference"


@pytest.mark.parametrize("method, solver", [("euler", Euler(0.05)), ("rk4", RK4(0.05))])
def test_solve_on_a_new_manifold_is_its_equation_and_stays_on_it(method, solver):
    z = torus_tokens(3, 5, 4, seed=1)
    V = torch.tensor([[1.0, 0.3, 0.0, 0.1], [-0.2, 0.8, 0.4, 0.0], [0.0, 0.1, 1.2, -0.3], [0.2, 0.0, 0.1, 0.9]],
                     dtype=torch.float64)
    sol = solve(Field(Softmax(2.0), value=V, manifold=Torus()), solver, z, steps=30)
    assert sol.tokens.shape == (31, 3, 5, 4)
    assert pair_norms_error(sol.tokens) <= 1e-14  # on the torus to rounding, at every step
    for b in range(3):
        ref = ref_solve(z[b].numpy(), 2.0, V.numpy(), method, 0.05, 30)
        np.testing.assert_allclose(sol.tokens[:, b].numpy(), ref, rtol=0, atol=1e-12)
    assert float((sol.final - z).abs().max()) > 0.1  # the tokens moved


def test_padding_on_a_new_manifold_rides_along_and_is_put_back():
    z = torus_tokens(2, 5, 4, seed=2)
    z[1, 3:] = 0.0  # padding: off the torus, where the retraction would divide by zero
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    field = Field(Softmax(1.5), manifold=Torus())
    sol = solve(field, RK4(0.1), z, steps=20, mask=mask)
    assert torch.equal(sol.tokens[:, 1, 3:], torch.zeros(21, 2, 4))  # padding given back as given
    alone = solve(field, RK4(0.1), z[1, :3], steps=20)
    torch.testing.assert_close(sol.tokens[:, 1, :3], alone.tokens, rtol=0, atol=1e-13)


def test_a_new_manifold_is_asked_for_its_constraint_and_its_dimension():
    off = torus_tokens(1, 4, 4, seed=3)
    off[0, 0] *= 1.5
    with pytest.raises(ValueError, match="unit pairs") as info:
        solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), off, steps=1)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"tokens on the torus \(S\^1\)\^k need dimension d ≥ 2, got d = 1"):
        solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), torch.ones(3, 1, dtype=torch.float64), steps=1)


def test_renormalised_asks_the_manifold_whether_the_scheme_is_its_own():
    z = torus_tokens(1, 6, 2, seed=4)
    sol = solve(Field(Softmax(1.0), manifold=Torus()), Renormalised(0.1), z, steps=10)
    assert pair_norms_error(sol.tokens) <= 1e-14
    # on the circle (k = 1) the torus is S^1: the step is the sphere's, to rounding
    sphere = solve(Field(Softmax(1.0), manifold=Sphere()), Renormalised(0.1), z, steps=10)
    torch.testing.assert_close(sol.tokens, sphere.tokens, rtol=0, atol=1e-14)
    for manifold, name in ((replace(Torus(), renormalisable=False), "the torus"), (Flat(), "R\\^d")):
        with pytest.raises(ValueError, match=f"Renormalised is a scheme on the sphere .*not on {name}") as info:
            solve(Field(Softmax(1.0), manifold=manifold), Renormalised(0.1), z, steps=1)
        assert "\n" not in str(info.value)


def test_check_flow_on_a_new_manifold_tests_only_what_applies():
    z = torus_tokens(2, 5, 4, seed=5)
    sol = solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), z, steps=50, save=Save(every=10))
    report = check_flow(sol)
    assert report.passed and report.verdict == "NOT TESTED"
    assert report["finite"].status == "passed"
    assert report["norms"].status == "not tested" and report["norms"].value == "tokens in the torus (S^1)^k"
    for name in ("hull", "polytope", "hyperplanes", "boolean", "single_cluster", "energy"):
        assert report[name].status == "not tested", name
    assert "NOT TESTED" in report.table()


def test_the_flow_picture_of_a_new_manifold_renders(tmp_path):
    # on the circle (k = 1) softmax attention gathers tokens of a half circle into one cluster
    angles = torch.linspace(0.0, 2.5, 6, dtype=torch.float64)
    z = torch.stack([torch.cos(angles), torch.sin(angles)], -1)
    sol = solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), z, steps=300, save=Save(every=30))
    assert len(set(cluster_colours(sol))) == 1  # the manifold's cluster tolerance, 1e-2
    assert len(set(cluster_colours(solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), z, steps=1)))) == 6
    fig = flow_figure(sol, (0, -1), title="softmax on the torus")
    path = tmp_path / "torus.png"
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 2_000
    assert [ax.get_title() for ax in fig.axes] == ["t = 0", "t = 30"]
    four = solve(Field(Softmax(1.0), manifold=Torus()), RK4(0.1), torus_tokens(1, 5, 4, seed=6)[0], steps=5)
    flow_figure(four).savefig(tmp_path / "torus4.png")  # d = 4: the first circle's coordinates
    assert (tmp_path / "torus4.png").stat().st_size > 2_000


class _Partial:
    """Two of the protocol's members, and `check` that is not a method."""

    check = None

    def velocity(self, z, target, V):
        return target - z

    def retract(self, z):
        return z


@pytest.mark.parametrize("manifold, message", [
    (object(), "object lacks name, min_dimension, euclidean, unit_sphere, renormalisable, velocity, retract, "
               "check, pad, cluster_tolerance"),
    (_Partial(), "_Partial lacks name, min_dimension, euclidean, unit_sphere, renormalisable, check, pad, "
                 "cluster_tolerance"),
    ("sphere", "str lacks name"),
    (Sphere, r"an instance such as Sphere\(\), not the class"),
    (Torus, r"an instance such as Torus\(\), not the class"),
])
def test_an_object_without_the_protocol_gets_a_one_line_error(manifold, message):
    with pytest.raises(ValueError, match=message) as info:
        Field(Softmax(1.0), manifold=manifold)
    assert "\n" not in str(info.value)


def test_nothing_asks_a_manifold_for_its_class():
    pattern = re.compile(r"isinstance\([^)]*\b(Sphere|Flat)\b|type\([^)]*manifold[^)]*\) is")
    files = [path for path in SRC.rglob("*.py") if path.name != "manifolds.py"]
    assert len(files) > 20 and SRC / "theory" / "flows.py" in files  # the sources were found
    found = [f"{path.relative_to(SRC)}:{k}" for path in files
             for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not found, f"ask the Manifold protocol instead: {found}"
