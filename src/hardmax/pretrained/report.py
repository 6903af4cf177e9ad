"""What `hardmax inspect` writes: the per-layer table (Markdown + JSON), the figures of the three views, the heads'
selections, the cosine histograms through the layers, and a real head's particle run as a GIF.

    inspect_model(texts, out, model=None, ...) -> InspectReport (paths, the Inspection, the head run)

Every file is written atomically (`hardmax.io`, `hardmax.plots.save`): an interrupted run leaves no half-written file.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from matplotlib.figure import Figure

from hardmax.io import write_json, write_text
from hardmax.plots.save import save_figure, save_gif
from hardmax.pretrained.field import HeadRun, head_field, run_head
from hardmax.pretrained.inspection import Inspection, inspect
from hardmax.pretrained.loader import load
from hardmax.pretrained.recording import TruncationWarning, record
from hardmax.pretrained.svm import HeadSVM, head_svm

__all__ = ["InspectReport", "inspect_model", "read_texts"]


@dataclass(frozen=True, eq=False)
class InspectReport:
    """What `inspect_model` wrote: `files` (name -> path), the `inspection`, the real head's `run`, the `svm` (None
    unless asked)."""

    files: dict[str, Path]
    inspection: Inspection
    run: HeadRun
    svm: HeadSVM | None


def read_texts(source: str) -> list[str]:
    """A text given on the command line, or a file of texts (one per non-blank line) when `source` names a file."""
    path = Path(source)
    try:
        is_file = path.is_file()
    except OSError:  # a long text is not a path
        is_file = False
    if is_file:
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not texts:
            raise ValueError(f"{path} holds no text (only blank lines)")
        return texts
    if not source.strip():
        raise ValueError("the text is empty")
    return [source]


def _views_figure(inspection: Inspection) -> Figure:
    rows = inspection.layer_rows()
    layers = [r["layer"] for r in rows]
    fig = Figure(figsize=(13, 3.6))
    a, b, c = fig.subplots(1, 3)
    a.plot(layers, [r["mean_cosine"] for r in rows], "o-", label="mean cosine")
    a2 = a.twinx()
    a2.plot(layers, [r["effective_rank"] for r in rows], "s--", color="C1", label="effective rank")
    a.set(title="clustering", xlabel="layer", ylabel="mean pairwise cosine")
    a2.set_ylabel("effective rank")
    later = rows[1:]
    x = [r["layer"] for r in later]
    for key, label in (("leaders", "leaders (C_i = {i})"), ("mass_on_C", "softmax mass on C_i")):
        b.plot(x, [r[key] for r in later], "o-", label=label)
    b2 = b.twinx()
    b2.plot(x, [r["margin"] for r in later], "^--", color="C3", label="score margin")
    b.set(title="selection", xlabel="layer", ylabel="fraction (mean over heads)")
    b2.set_ylabel("margin")
    b.legend(fontsize=7, loc="upper left")
    for key, label in (("rate", "R(X)"), ("compression", "R^c(X | U)"), ("delta_rate", "ΔR")):
        c.plot(x, [r[key] for r in later], "o-", label=label)
    c.set(title="coding rate", xlabel="layer", ylabel="nats")
    c.legend(fontsize=7)
    fig.suptitle(f"{inspection.model['name']}: the three views through the layers ({inspection.texts} texts)")
    fig.tight_layout()
    return fig


def _histogram_figure(inspection: Inspection) -> Figure:
    h = inspection.histogram()
    fractions = torch.tensor(h["fractions"])
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    image = ax.imshow(fractions.T.numpy(), origin="lower", aspect="auto", cmap="viridis",
                      extent=(-0.5, fractions.shape[0] - 0.5, -1, 1))
    ax.set(xlabel="layer (0: embeddings)", ylabel="pairwise cosine", title="cosine histogram through the layers")
    fig.colorbar(image, ax=ax, label="fraction of pairs")
    fig.tight_layout()
    return fig


def _selections_figure(inspection: Inspection) -> Figure:
    words = inspection.top_words
    L, H = len(words), len(words[0])
    fig = Figure(figsize=(1.1 * H + 1, 0.55 * L + 1.2))
    ax = fig.subplots()
    share = torch.zeros(L, H)
    rows = inspection.clustering.rows
    for a in range(L):
        for h in range(H):
            if words[a][h]:
                share[a, h] = words[a][h][0][1] / float(rows[a, h])
                ax.text(h, a, words[a][h][0][0], ha="center", va="center", fontsize=7)
    ax.imshow(share.numpy(), cmap="Oranges", aspect="auto", vmin=0)
    ax.set(xticks=range(H), yticks=range(L), yticklabels=[str(a + 1) for a in range(L)], xlabel="head",
           ylabel="layer", title="each head's most selected word (argmax of its scores; special tokens left out)")
    fig.tight_layout()
    return fig


def _particles_gif(run: HeadRun, path: Path, fps: int = 8) -> Path:
    tokens = run.solution.tokens[:, 0, :, :-1]
    mask = run.head.mask
    x = tokens[:, mask]
    start = x[0] - x[0].mean(0)
    basis = torch.linalg.svd(start, full_matrices=False).Vh[:3].T  # the first three principal directions at the start
    proj = (x @ basis).numpy()
    words = [w for w, m in zip(run.head.words, mask.tolist(), strict=True) if m]
    fig = Figure(figsize=(5.5, 5))
    ax = fig.add_subplot(projection="3d")
    label = "all heads" if run.head.head is None else f"head {run.head.head}"

    def draw(k: int) -> None:
        ax.clear()
        ax.scatter(proj[k, :, 0], proj[k, :, 1], proj[k, :, 2], s=12)
        for i, w in enumerate(words[:40]):
            ax.text(proj[k, i, 0], proj[k, i, 1], proj[k, i, 2], w, fontsize=6)
        ax.set_title(f"layer {run.head.layer} {label} as a particle system, step {int(run.solution.steps[k])}",
                     fontsize=8)

    return save_gif(fig, draw, proj.shape[0], path, fps=fps)


def inspect_model(texts: list[str], out: str | os.PathLike, *, model: str | None = None, download: bool = False,
                  batch_size: int = 32, max_length: int | None = 128, layer: int | None = None, head: int | None = 0,
                  steps: int = 60, svm_queries: int = 0, progress: bool = False) -> InspectReport:
    """Inspect `model` on `texts` and write the table and the figures into `out` (created).

    Args:
        texts: the texts (the head's particle run and the SVM use the first ones). out: the output folder.
        model: a directory or cached hub name (None: all-MiniLM-L6-v2 from its wheel). download: allow the network.
        batch_size, max_length: as `inspect`. layer, head: the real head run as a particle system (layer None: the
            middle layer; head None: all heads summed). steps: its layers. svm_queries: > 0 solves that head's
            Att-SVM on that many queries. progress: progress lines on stderr.
    """
    pretrained = load(model, download=download)
    inspection = inspect(pretrained, texts, batch_size=batch_size, max_length=max_length, progress=progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    layer = max(1, pretrained.layers // 2) if layer is None else layer
    with warnings.catch_warnings():  # the truncated texts were counted by `inspect`
        warnings.simplefilter("ignore", TruncationWarning)
        first = record(pretrained, texts[:max(1, min(len(texts), 16))], max_length=max_length)
    run = run_head(head_field(pretrained, first, layer, head), steps=steps, save_every=max(1, steps // 30))
    svm = head_svm(pretrained, first, layer, head or 0, queries=svm_queries) if svm_queries > 0 else None
    files = {"table.md": write_text(out / "table.md", inspection.markdown()),
             "table.json": write_json(out / "table.json", inspection.to_dict() | {
                 "head_run": run.to_dict(), "svm": None if svm is None else svm.to_dict()})}
    for name, fig in (("views", _views_figure(inspection)), ("cosine_histogram", _histogram_figure(inspection)),
                      ("selections", _selections_figure(inspection))):
        files[f"{name}.png"] = save_figure(fig, out / name, formats=("png",))[0]
    files["particles.gif"] = _particles_gif(run, out / "particles.gif")
    return InspectReport(files=files, inspection=inspection, run=run, svm=svm)
