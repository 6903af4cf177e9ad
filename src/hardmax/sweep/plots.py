"""Pictures of a sweep's table: the field's heat maps and curves, from the rows as they are on disk.

    phase_heatmap(table)       P(one cluster) over (t, β) from `phase_cell` rows (columns single_t<time>)
    critical_gamma(table)      n -> γ_c = β_c / log n, β_c where P(one cluster) falls through 1/2 (phase_cell rows)
    critical_curve(table)      that γ_c against n: the critical temperature β_n = γ log n of the field
    curve(table, x, y, by)     y against x, one line per value of `by`
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.figure import Figure

__all__ = ["critical_curve", "critical_gamma", "curve", "phase_diagram_of", "phase_heatmap"]


def _rows(table) -> list[dict]:
    rows = table.to_pylist() if hasattr(table, "to_pylist") else list(table)
    return [r for r in rows if r.get("error") is None]


def phase_heatmap(table, *, title: str | None = None) -> Figure:
    """P(one cluster) over (t, β): one row of the table per β (`phase_cell`, several starts each), its columns
    single_t<time> the fraction of starts in one cluster at that time. ValueError when the table holds no such rows."""
    rows = [r for r in _rows(table) if r.get("task") == "phase_cell"]
    if not rows:
        raise ValueError("the table holds no phase_cell rows (a sweep of task phase_cell draws a phase diagram)")
    times = sorted({float(m.group(1)) for k in rows[0] for m in [re.fullmatch(r"single_t(.+)", k)] if m},)
    rows.sort(key=lambda r: r["beta"])
    betas = np.array([r["beta"] for r in rows])
    P = np.array([[r.get(f"single_t{t:g}", np.nan) for t in times] for r in rows])
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    mesh = ax.pcolormesh(np.array(times), betas, P, shading="nearest", vmin=0, vmax=1, cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="P(one cluster)")
    ax.set_xlabel("time t")
    ax.set_ylabel("β")
    ax.set_title(title or f"{rows[0]['starts']} starts per β, n = {rows[0]['n']}, d = {rows[0]['d']}")
    return fig


def phase_diagram_of(table):
    """The `hardmax.experiments.particles.PhaseDiagram` a table of `phase_cell` rows holds (rows sorted by β; one
    starts, n and d among them): what `hardmax particles` draws and tabulates, from a sweep."""
    import torch

    from hardmax.experiments.particles import PhaseDiagram

    rows = sorted((r for r in _rows(table) if r.get("task") == "phase_cell"), key=lambda r: r["beta"])
    if not rows:
        raise ValueError("the table holds no phase_cell rows")
    for name in ("starts", "n", "d"):
        if len({r[name] for r in rows}) != 1:
            raise ValueError(f"the table's phase_cell rows have several values of {name}: one diagram needs one")
    times = sorted(float(m.group(1)) for k in rows[0] for m in [re.fullmatch(r"single_t(.+)", k)] if m)
    single = torch.tensor([[r[f"single_t{t:g}"] for t in times] for r in rows], dtype=torch.float64)
    clusters = torch.tensor([[r.get(f"clusters_t{t:g}", float("nan")) for t in times] for r in rows],
                            dtype=torch.float64)
    return PhaseDiagram(betas=torch.tensor([r["beta"] for r in rows], dtype=torch.float64),
                        times=torch.tensor(times, dtype=torch.float64), single=single, mean_clusters=clusters,
                        starts=rows[0]["starts"], n=rows[0]["n"], d=rows[0]["d"],
                        seconds=sum(r["seconds"] for r in rows), solve_seconds=sum(r["solve_seconds"] for r in rows))


def curve(table, x: str, y: str, *, by: str | None = None, title: str | None = None) -> Figure:
    """y against x from the rows of a sweep table, one line per value of `by` (None: one line), points sorted by x;
    ValueError naming a column the table lacks."""
    rows = _rows(table)
    for column in (x, y) + ((by,) if by else ()):
        if not rows or column not in rows[0]:
            raise ValueError(f"the table has no column {column!r}")
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    groups = sorted({r[by] for r in rows}) if by else [None]
    for g in groups:
        part = sorted((r for r in rows if by is None or r[by] == g), key=lambda r: r[x])
        ax.plot([r[x] for r in part], [r[y] for r in part], marker="o", label=None if by is None else f"{by} = {g}")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if by:
        ax.legend()
    if title:
        ax.set_title(title)
    return fig


def critical_gamma(table, *, level: float = 0.5, column: str = "single_final") -> dict[int, float]:
    """n -> γ_c = β_c / log n from `phase_cell` rows over β and n (one row per (n, β); several seeds of a cell are
    averaged): β_c is where P(one cluster) (`column`: at the end, or single_t<time>) first falls through `level` as β
    grows, linearly interpolated between the two β around it; NaN when it never does in the grid's range.

    The question is the field's critical temperature β_n = γ log n: γ_c roughly constant over n says that the
    temperature at which one cluster stops forming within the time looked at grows like log n."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    rows = [r for r in _rows(table) if r.get("task") == "phase_cell"]
    if not rows:
        raise ValueError("the table holds no phase_cell rows (a sweep of task phase_cell over beta and n)")
    if column not in rows[0]:
        raise ValueError(f"the table has no column {column!r}")
    out = {}
    for n in sorted({r["n"] for r in rows}):
        means: dict[float, list[float]] = {}
        for r in rows:
            if r["n"] == n:
                means.setdefault(r["beta"], []).append(r[column])
        betas = np.array(sorted(means))
        P = np.array([np.mean(means[b]) for b in betas])
        below = np.nonzero((P[1:] < level) & (P[:-1] >= level))[0]
        if len(below) == 0 or n < 2:
            out[n] = float("nan")
            continue
        i = below[0]
        beta_c = betas[i] + (P[i] - level) / (P[i] - P[i + 1]) * (betas[i + 1] - betas[i])
        out[n] = float(beta_c / np.log(n))
    return out


def critical_curve(table, *, level: float = 0.5, column: str = "single_final", title: str | None = None) -> Figure:
    """γ_c = β_c / log n against n (log scale) from `phase_cell` rows over β and n (`critical_gamma`)."""
    gamma = critical_gamma(table, level=level, column=column)
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ns = list(gamma)
    ax.plot(ns, [gamma[n] for n in ns], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens n")
    ax.set_ylabel(f"γ_c = β_c / log n  (P(one cluster) = {level:g})")
    ax.set_title(title or "critical inverse temperature over n")
    return fig
