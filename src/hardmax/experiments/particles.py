"""The particle-system papers' experiments on `hardmax.dynamics.solve`: their clustering pictures, the
metastability picture and the phase diagram of a single cluster.

    clustering_2023(kind)  the four pictures of Geshkovski, Letrouit, Polyanskiy, Rigollet (2023), "The emergence
                           of clusters in self-attention dynamics": "polytope" (V = I), "hyperplanes" (V with a
                           simple positive dominant eigenvalue), "polytope x hyperplanes" (V = diag(1, −1/2)),
                           "boolean" (d = 1, V = 1: the attention matrix becomes Boolean)
    metastability()        n = 5 tokens on the circle, SA at β = 4, T = 400, dt = 0.1 ("step then renormalise"):
                           plateaus of the cluster count and the staircase of E_β (Geshkovski, Koubbi,
                           Polyanskiy, Rigollet 2024)
    phase_diagram(betas)   P(one cluster) over (t, β) for n tokens on S^{d−1}, every start and every β one batch

Every run is one batched `solve`: no loop over starts, β values or tokens.
"""

from __future__ import annotations

import concurrent.futures
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import RK4, Bilinear, Field, Renormalised, Rescaled, Save, Softmax, Solution, Sphere, solve
from hardmax.memory import require_memory
from hardmax.theory import cluster_counts, energy

__all__ = ["Metastability", "PhaseDiagram", "Reproduction", "clustering_2023", "metastability", "phase_diagram",
           "phase_table", "reproduce"]

KINDS_2023 = ("polytope", "hyperplanes", "polytope x hyperplanes", "boolean")
# The metastability picture's start: of seeds 0-11 (n = 5, β = 4), one whose two clusters last longest before
# merging within T = 400 (t ≈ 7 to 214); `reproduce` keeps it whatever its `seed`, so that the docs' picture stays.
METASTABLE_SEED = 1
# The value matrix of the 2023 paper's two-dimensional hyperplane picture (its code's example).
HYPERPLANES_V = ((0.64709742, 0.81911926), (0.61210449, 0.63263484))


def clustering_2023(kind: str, *, n: int = 20, t1: float = 8.0, dt: float = 0.01, seed: int = 0,
                    save_every: int = 10) -> Solution:
    """One of the 2023 paper's clustering pictures: rescaled tokens z_i = e^{−tV} x_i of ẋ_i = Σ_j P_ij V x_j,
    P = softmax(⟨z_i, z_j⟩ in the unrescaled frame), solved with RK4 from n uniform tokens in [−5, 5]^d.

    Returns the `Solution` (saved every `save_every` steps); `hardmax.theory.check_flow` checks its claim.
    """
    if kind not in KINDS_2023:
        raise ValueError(f"kind must be one of {KINDS_2023}, got {kind!r}")
    d = 1 if kind == "boolean" else 2
    V = {"polytope": torch.eye(2), "hyperplanes": torch.tensor(HYPERPLANES_V),
         "polytope x hyperplanes": torch.diag(torch.tensor([1.0, -0.5])), "boolean": torch.eye(1)}[kind]
    V = V.to(torch.float64)
    g = torch.Generator().manual_seed(seed)
    z = torch.rand(n, d, dtype=torch.float64, generator=g) * 10 - 5
    field = Field(Softmax(1.0), scores=Rescaled(Bilinear(), V), value=V)
    return solve(field, RK4(dt), z, t1=t1, save=Save(every=save_every, attention=kind == "boolean"))


@dataclass(frozen=True)
class Metastability:
    """A metastable run: the solution, the cluster count and the energy at each saved time."""

    solution: Solution
    clusters: Tensor  # (saved,) clusters at each saved time
    energy: Tensor  # (saved,) E_β at each saved time
    beta: float


def metastability(*, n: int = 5, beta: float = 4.0, t1: float = 400.0, dt: float = 0.1, d: int = 2, seed: int = 0,
                  tol: float = 1e-2, save_every: int = 10) -> Metastability:
    """n tokens uniform on S^{d−1} under SA (softmax, A = β I, V = I) with the "step then renormalise" scheme."""
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(n, d, dtype=torch.float64, generator=g), dim=-1)
    field = Field(Softmax(beta), manifold=Sphere())
    sol = solve(field, Renormalised(dt), x, t1=t1, save=Save(every=save_every))
    return Metastability(sol, cluster_counts(sol.tokens, tol), energy(sol.tokens, beta), beta)


@dataclass(frozen=True)
class PhaseDiagram:
    """P(one cluster) over (t, β): `single[b, k]` is the fraction of starts in one cluster at times[k], β = betas[b]."""

    betas: Tensor  # (B,)
    times: Tensor  # (saved,)
    single: Tensor  # (B, saved) float64
    mean_clusters: Tensor  # (B, saved) float64
    starts: int
    n: int
    d: int
    seconds: float  # the whole diagram: solving and counting
    solve_seconds: float = math.nan  # solving only


def phase_diagram(betas, *, starts: int = 1000, n: int = 32, d: int = 3, steps: int = 300, dt: float = 0.1,
                  save_every: int = 10, seed: int = 0, dtype: torch.dtype = torch.float32, device=None,
                  tol: float = 1e-2, block: tuple[int, int] = (0, 1)) -> PhaseDiagram:
    """The phase diagram of a single cluster for SA on S^{d−1}: every (β, start) pair in one batch.

    Tokens start uniform on the sphere (Gaussian, normalised); β enters as the scores A = β I, one per sequence,
    so that all β values run together; RK4 with step dt; clusters are counted at every saved step (tokens
    within chord distance `tol`) for the whole batch at once.

    Args:
        betas: the β values (≥ 0). starts: random starts per β. n, d: tokens and dimension (d ≥ 2).
        steps, dt: RK4 steps and their size (t1 = steps · dt). dtype, device: of the run.
        block: (i, blocks): these β are block i of a diagram of `blocks` blocks of as many β, and get the starts that
            block gets there (the same seed): a sweep cell per β reproduces the one-batch diagram exactly.
    """
    import time

    from hardmax.training.device import resolve_device

    betas = torch.as_tensor(betas, dtype=torch.float64).reshape(-1)
    if betas.numel() == 0 or not bool(torch.isfinite(betas).all()) or bool((betas < 0).any()):
        raise ValueError("betas must be finite numbers ≥ 0")
    for name, value in (("starts", starts), ("n", n), ("d", d), ("steps", steps), ("save_every", save_every)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"phase_diagram: {name} must be an integer, got {value!r}")
    if starts < 1 or n < 1 or d < 2:
        raise ValueError(f"phase_diagram needs starts ≥ 1, n ≥ 1 and d ≥ 2, got {starts}, {n}, {d}")
    index, blocks = block
    if not (isinstance(index, int) and isinstance(blocks, int) and 0 <= index < blocks):
        raise ValueError(f"phase_diagram: block must be (i, blocks) with 0 ≤ i < blocks, got {block!r}")
    device = None if device is None else resolve_device(device)  # a device this machine has, or one line
    require_memory(float(betas.numel()) * starts * n * d * 8 * (4 + steps // max(save_every, 1)),
                   f"phase_diagram of {betas.numel()} β × {starts:,} starts × {n} tokens", device=device)
    draw = _drawn if blocks > 1 else _draw
    x = draw(seed, blocks * betas.numel() * starts, n, d)[index * betas.numel() * starts:
                                                          (index + 1) * betas.numel() * starts]
    x = torch.nn.functional.normalize(x, dim=-1).to(dtype=dtype, device=device)
    A = betas.repeat_interleave(starts).reshape(-1, 1, 1) * torch.eye(d, dtype=torch.float64)
    field = Field(Softmax(1.0), scores=Bilinear(A.to(dtype=dtype, device=device)), manifold=Sphere())
    start = time.perf_counter()
    sol = solve(field, RK4(dt), x, steps=steps, save=Save(every=save_every))
    if x.is_cuda:
        torch.cuda.synchronize()
    solved = time.perf_counter() - start
    # counted one saved time and one β at a time (`starts` sequences): the blocks a sweep cell of one β counts too, so
    # that the diagram costs the same in one batch or in cells; and a cache's worth each (the whole batch at once, in
    # blocks of 4,096 sequences that mix saved times, took 30-45 % longer at 20 β × 1,000 starts, n = 32)
    tokens = sol.tokens.reshape(len(sol.times), betas.numel(), starts, n, d)
    counts = torch.stack([torch.stack([cluster_counts(per_beta, tol) for per_beta in saved]) for saved in tokens])
    if x.is_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return PhaseDiagram(betas=betas, times=sol.times.cpu().to(torch.float64),
                        single=(counts == 1).double().mean(-1).T.cpu(),
                        mean_clusters=counts.double().mean(-1).T.cpu(), starts=starts, n=n, d=d, seconds=seconds,
                        solve_seconds=solved)


def _draw(seed: int, count: int, n: int, d: int) -> Tensor:
    """`count` starts of n standard normal tokens in R^d from `seed` (float64), in the one-batch diagram's order."""
    return torch.randn(count, n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# The blocks of one diagram (sweep cells, `phase_diagram(block=...)`) that a worker runs one after another draw its
# starts once, as the one-batch run does (each drawing all of them cost 20-30 ms a cell at 20 × 1,000 starts, n = 32);
# the last draw is kept, and never written to.
_drawn = functools.lru_cache(maxsize=1)(_draw)


def phase_table(diagram: PhaseDiagram, columns: int = 6) -> str:
    """A markdown table of P(one cluster) at a few times (rows: β)."""
    from hardmax.tables import markdown_table

    picks = np.unique(np.linspace(0, len(diagram.times) - 1, columns).round().astype(int))
    head = ("β \\ t", *(f"{float(diagram.times[k]):g}" for k in picks))
    rows = [(f"{float(b):g}", *(f"{float(diagram.single[i, k]):.2f}" for k in picks))
            for i, b in enumerate(diagram.betas)]
    return "\n".join(markdown_table(head, rows))


@dataclass(frozen=True)
class Reproduction:
    """What `reproduce` wrote and measured."""

    files: tuple[Path, ...]
    tables: dict[str, str]


def reproduce(out, *, quick: bool = False, gifs: bool = True, seed: int = 0, progress=None,
              diagram=None) -> Reproduction:
    """Write the particle-system papers' pictures into `out`: the 2023 clustering pictures (PNG and GIF), the
    metastability picture, and the phase diagrams on S¹ and S² (n = 32, 20 β values, 1,000 starts per β;
    `quick`: 50 starts), with `check_flow` tables of each clustering picture. `seed` draws the clustering pictures'
    tokens and the phase diagrams' starts; the metastability picture keeps METASTABLE_SEED.

    progress: called with a line of text per step (None: silent).
    diagram: computes a phase diagram, ``diagram(betas, starts=..., d=..., seed=...)``, returning the
        `PhaseDiagram` or a `concurrent.futures.Future` of it (None: `phase_diagram` in this process, after the
        pictures). Given, it is asked for both diagrams before anything is drawn, so that diagrams computed elsewhere
        run while the pictures are drawn (`hardmax particles --scheduler` passes one that submits a sweep).
    """
    from hardmax.plots.flows import animate_flow, flow_figure, metastability_figure, phase_figure
    from hardmax.plots.save import save_figure
    from hardmax.theory import check_flow

    say = progress or (lambda line: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    tables: dict[str, str] = {}
    betas = torch.linspace(0.0, 9.5, 20)
    asked = {d: dict(starts=50 if quick else 1000, d=d, seed=seed) for d in (2, 3)}
    early = {} if diagram is None else {d: diagram(betas, **kwargs) for d, kwargs in asked.items()}
    for kind in KINDS_2023:
        sol = clustering_2023(kind, seed=seed)
        name = "clusters_2023_" + kind.replace(" x ", "_x_")
        title = f"2023, {kind}"
        files += save_figure(flow_figure(sol, (0, len(sol.times) // 5, -1), title=title), out / name, ("png",))
        if gifs:
            files.append(animate_flow(sol, out / f"{name}.gif", title=title))
        tables[kind] = check_flow(sol).table()
        say(f"2023 {kind}: {check_flow(sol).passed and 'claims hold' or 'a claim FAILED'}")
    meta = metastability(seed=METASTABLE_SEED)
    files += save_figure(metastability_figure(meta), out / "metastability", ("png",))
    say(f"metastability: clusters {meta.clusters[0]} -> {meta.clusters[-1]} by t = {float(meta.solution.times[-1]):g}")
    for d, kwargs in asked.items():
        diagram = early[d] if d in early else phase_diagram(betas, **kwargs)
        if isinstance(diagram, concurrent.futures.Future):
            diagram = diagram.result()
        files += save_figure(phase_figure(diagram), out / f"phase_diagram_S{d - 1}", ("png",))
        tables[f"phase S{d - 1}"] = phase_table(diagram)
        say(f"phase diagram on S^{d - 1}: {diagram.starts} starts x {len(betas)} β in {diagram.seconds:.1f} s")
    return Reproduction(tuple(files), tables)
