"""`inspect`: the three views of a pretrained model over any number of texts, streamed batch by batch.

    inspect(pretrained, texts, batch_size=32, max_length=None) -> Inspection
        per layer: mean pairwise cosine, clusters, effective rank, R, R^c, ΔR, MLP sparsity (`layer_rows`)
        per head: leaders, |C_i|, softmax mass on C_i, entropy, margin, most selected tokens (`head_rows`)

Memory is the model plus one batch: each batch's `Record` is reduced to sums (`hardmax.pretrained.measures`) and
dropped before the next one is recorded.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from hardmax.io import to_jsonable
from hardmax.pretrained.loader import Pretrained
from hardmax.pretrained.measures import (
    Clustering,
    Coding,
    Selection,
    ViewConfig,
    clustering,
    coding,
    selection,
    value_subspaces,
)
from hardmax.pretrained.recording import TruncationWarning, record
from hardmax.progress import progress as progress_bar
from hardmax.tables import markdown_table

__all__ = ["Inspection", "inspect"]


@dataclass(frozen=True, eq=False)
class Inspection:
    """The three views of a model over a set of texts (sums over the texts; means in `layer_rows`/`head_rows`).

    Attributes:
        model: what was loaded (`Pretrained.describe`). config: the views' `ViewConfig`. texts: how many.
        truncated: how many were cut at `max_length` tokens. max_length: the limit used.
        clustering, selection, coding: the summed views. top_tokens: (L, H) lists of the `top` most selected
        tokens (token, count), special tokens included; top_words: the same without the special tokens.
    """

    model: dict
    config: ViewConfig
    texts: int
    truncated: int
    max_length: int
    clustering: Clustering
    selection: Selection
    coding: Coding
    top_tokens: list
    top_words: list

    def layer_rows(self) -> list[dict]:
        """One dict per layer ℓ = 0..L (0: the embeddings; the attention and MLP columns start at layer 1)."""
        c, k = self.clustering, self.coding
        rows = []
        for layer in range(c.cosine.shape[0]):
            row = {"layer": layer, "mean_cosine": float(c.cosine[layer] / c.texts),
                   "clusters": float(c.clusters[layer] / c.texts), "effective_rank": float(c.rank[layer] / c.texts)}
            if layer:
                a = layer - 1
                rate, comp = float(k.rate[a] / k.texts), float(k.compression[a] / k.texts)
                row |= {"rate": rate, "compression": comp, "delta_rate": rate - comp,
                        "leaders": float((c.leaders[a] / c.rows[a]).mean()),
                        "mass_on_C": float((c.mass[a] / c.rows[a]).mean()),
                        "entropy": float((c.entropy[a] / c.rows[a]).mean()),
                        "margin": float((self.selection.margin[a] / self.selection.rows[a]).mean()),
                        "mlp_inactive": float(k.inactive[a] / k.tokens), "mlp_zero": float(k.zero[a] / k.tokens)}
            rows.append(row)
        return rows

    def head_rows(self) -> list[dict]:
        """One dict per (layer, head), layers from 1."""
        c, s = self.clustering, self.selection
        L, H = c.rows.shape
        return [{"layer": a + 1, "head": h, "leaders": float(c.leaders[a, h] / c.rows[a, h]),
                 "set_size": float(c.set_size[a, h] / c.rows[a, h]), "mass_on_C": float(c.mass[a, h] / c.rows[a, h]),
                 "entropy": float(c.entropy[a, h] / c.rows[a, h]),
                 "margin": float(s.margin[a, h] / s.rows[a, h]) if s.rows[a, h] else None,
                 "smallest_margin": float(s.smallest[a, h]) if s.rows[a, h] else None,
                 "top_tokens": self.top_tokens[a][h], "top_words": self.top_words[a][h]}
                for a in range(L) for h in range(H)]

    def histogram(self) -> dict:
        """The pairwise-cosine histogram per layer: bin edges on [−1, 1] and (L+1, bins) fractions of the pairs."""
        counts = self.clustering.histogram.double()
        bins = counts.shape[1]
        return {"edges": torch.linspace(-1, 1, bins + 1).tolist(),
                "fractions": (counts / counts.sum(1, keepdim=True).clamp_min(1)).tolist()}

    def to_dict(self) -> dict:
        """Plain JSON values: the model, the settings, the layer and head tables, the histogram."""
        config = {"bins": self.config.bins, "threshold": self.config.threshold, "eps": self.config.eps}
        return to_jsonable({"model": self.model, "config": config,
                            "texts": self.texts, "truncated": self.truncated, "max_length": self.max_length,
                            "layers": self.layer_rows(), "heads": self.head_rows(), "histogram": self.histogram()})

    def markdown(self) -> str:
        """The per-layer table (and the most selected words per layer) as Markdown."""
        columns = ("layer", "mean_cosine", "clusters", "effective_rank", "rate", "compression", "delta_rate",
                   "leaders", "mass_on_C", "entropy", "margin", "mlp_inactive")

        def cell(v):
            return "" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

        lines = [f"# {self.model['name']}: the three views per layer", "",
                 f"{self.texts} texts ({self.truncated} truncated at {self.max_length} tokens); "
                 f"clusters at cosine ≥ {self.config.threshold}, coding rates at ε = {self.config.eps} of the "
                 "normalised tokens; per-layer head columns are means over the heads.", ""]
        lines += markdown_table(columns, [[cell(r.get(c)) for c in columns] for r in self.layer_rows()])
        lines += ["", "Most selected words per head (argmax of the scores, special tokens left out):", ""]
        lines += markdown_table(("layer", "head", "words"),
                                [[a + 1, h, ", ".join(f"{w} ({n})" for w, n in words)]
                                 for a, row in enumerate(self.top_words) for h, words in enumerate(row)])
        return "\n".join(lines) + "\n"


def _top(pretrained: Pretrained, selected: torch.Tensor, top: int, skip_special: bool) -> list:
    counts = selected.clone()
    if skip_special:
        special = torch.tensor(sorted(set(pretrained.tokenizer.all_special_ids)), dtype=torch.long)
        special = special[special < counts.shape[-1]]
        counts[..., special.to(counts.device)] = 0
    values, ids = counts.topk(min(top, counts.shape[-1]), dim=-1)
    words = pretrained.tokenizer.convert_ids_to_tokens(ids.flatten().tolist())
    flat = [(w, int(v)) for w, v in zip(words, values.flatten().tolist(), strict=True)]
    L, H = counts.shape[:2]
    k = values.shape[-1]
    return [[[x for x in flat[(a * H + h) * k:(a * H + h + 1) * k] if x[1] > 0] for h in range(H)] for a in range(L)]


def inspect(pretrained: Pretrained, texts: Sequence[str], *, batch_size: int = 32, max_length: int | None = None,
            config: ViewConfig | None = None, top: int = 5, progress: bool = False) -> Inspection:
    """The three views of `pretrained` over `texts`, one batch at a time (memory: the model plus one batch).

    Args:
        pretrained: from `load`. texts: strings. batch_size: texts per forward pass. max_length: tokens per text
            (None: the model's positions); longer texts are truncated and counted (`Inspection.truncated`).
        config: `ViewConfig` (histogram bins, cluster threshold, ε). top: most selected tokens kept per head.
        progress: a progress line per batch on stderr (`hardmax.progress`).

    Returns:
        `Inspection`.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to inspect")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer ≥ 1, got {batch_size!r}")
    config = ViewConfig() if config is None else config
    family = pretrained.family
    weights = [family.weights(layer, pretrained.heads) for layer in family.layers(pretrained.model)]
    U = value_subspaces(weights).to(pretrained.device)
    vocabulary = len(pretrained.tokenizer)
    views: list = [None, None, None]
    truncated = 0
    starts = range(0, len(texts), batch_size)
    bar = progress_bar(starts, desc="inspect", unit="batch", disable=not progress)
    limit = pretrained.max_positions if max_length is None else int(max_length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)  # counted here, said once below
        for s in bar:
            r = record(pretrained, texts[s:s + batch_size], max_length=max_length)
            truncated += int(r.truncated.sum())
            views[0] = clustering(r, config, vocabulary) + views[0]
            views[1] = selection(r) + views[1]
            views[2] = coding(r, U, config) + views[2]
            del r
    if truncated:
        warnings.warn(f"{truncated} of {len(texts)} texts were longer than {limit} tokens and were truncated",
                      TruncationWarning, stacklevel=2)
    c = views[0]
    return Inspection(model=pretrained.describe(), config=config, texts=len(texts), truncated=truncated,
                      max_length=limit, clustering=c, selection=views[1], coding=views[2],
                      top_tokens=_top(pretrained, c.selected, top, False), top_words=_top(pretrained, c.selected, top,
                                                                                          True))
