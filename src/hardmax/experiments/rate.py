"""Coding rate through the layers: does hardmax clustering compress, and does it separate the classes?

For a trajectory (of `simulate`, or of a classifier's trace) and every stored layer k:

    R_k(review)  = R(z_1^k … z_n^k, ε)      the coding rate of the review's tokens (repeated words counted)
    ΔR_k         = ΔR(z̄^k(review) : reviews, labels, ε)   the rate reduction between the two sentiment
                   classes, each review represented by its mean token z̄^k (layer K: the decoder input)

and at the end of a long hardmax run the number of leaders of each review against its final R: the
limit configuration has as many distinct points as clusters (Theorem 2.1), so its Gram matrix has rank
at most min(#clusters, d) and R of the limit is ½ Σ_{i ≤ rank} ln(1 + d μ_i/(N ε²)), μ_i the eigenvalues
of Σ_c N_c v_c v_cᵀ over the cluster points v_c with N_c tokens each.

`measure_classifier` runs all of it on a trained `HardmaxClassifier` and reviews; `hardmax rate` is its
command. Measures come from `hardmax.measures`, dynamics from `hardmax.dynamics`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from torch import Tensor

from hardmax.dynamics import Hardmax, Solution, simulate
from hardmax.measures import coding_rate, rate_reduction, subspace_coding_rate, zero_fraction
from hardmax.memory import require_memory
from hardmax.tables import markdown_table
from hardmax.theory import leader_layers

__all__ = ["CrateReport", "LayerRates", "LeaderRates", "RateConfig", "RateReport", "crate_measures", "layer_rates",
           "leader_rates", "long_run_memory", "measure_classifier", "measure_crate"]

# Memory of the long `simulate` runs, per review and stored layer, in float64 trajectories: the trajectory,
# and the leader history of the hardmax run (`theory.leader_history` holds the attention targets of every
# layer, the layers that moved, their snapshot and its deduplication: about five more; measured: 7.2), and the
# rates' temporaries.
_LONG_RUN_COPIES = 8
# Reviews per long run are chosen so that one batch's trajectories stay about this size.
_LONG_BATCH_BYTES = 256 * 2**20
# float64 values per block of layers whose rates are measured at once (bounds the temporaries).
_RATE_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True, kw_only=True)
class RateConfig:
    """What `hardmax rate` measures."""

    eps: float = 0.5  # distortion ε of every rate (ε, not ε²); tokens of the trained models have norms ~1-5
    reviews: int = 2000  # reviews measured (a seeded random subset of the split); 0 = all
    split: Literal["test", "val"] = "test"  # split of the run's data
    seed: int = 0  # seed of the subset
    long_layers: int = 64  # depth of the `simulate` runs started from the embeddings (limit configurations)
    batch_size: int = 500  # reviews per classifier pass

    def __post_init__(self):
        eps = self.eps
        try:
            ok = not isinstance(eps, bool) and isinstance(eps, numbers.Real) and math.isfinite(eps) and eps > 0
        except OverflowError:  # an integer too large for a float
            ok = False
        if not ok:
            raise ValueError(f"eps (the distortion ε) must be a finite number > 0, got {repr(eps)[:40]}")
        for name, low in (("reviews", 0), ("seed", 0), ("long_layers", 1), ("batch_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
        if self.split not in ("test", "val"):
            raise ValueError(f"split must be 'test' or 'val', got {self.split!r}")


def long_run_memory(long_layers: int, reviews: int, tokens: int, d: int, batch_size: int) -> tuple[int, float]:
    """(reviews per long run, bytes) of the long `simulate` runs of `measure_classifier`.

    The hardmax run keeps every layer of its batch of reviews (the leader history needs them all), so a
    batch costs about `_LONG_RUN_COPIES` float64 trajectories of (long_layers + 1) × tokens × d per review;
    the batch is at most `batch_size` reviews and as many as fit `_LONG_BATCH_BYTES` (at least one). The
    per-layer results of every review (R, R̂, the mean token, for both runs) come on top.
    """
    per_review = float(long_layers + 1) * tokens * d * 8 * _LONG_RUN_COPIES
    batch = int(max(1, min(batch_size, reviews, _LONG_BATCH_BYTES // per_review)))
    results = 2.0 * (long_layers + 1) * reviews * (d + 2) * 8
    return batch, batch * per_review + results


def long_run_text(long_layers: int, reviews: int | None, tokens: int, d: int, batch: int) -> str:
    """What `long_run_memory` counts, for `require_memory` messages (reviews None: not known yet)."""
    each = "each review" if reviews is None else f"each of the {reviews:,} reviews"
    return (f"the long simulate runs keep every layer for the leader history: {long_layers + 1:,} layers × "
            f"{tokens} tokens × {d} float64 per review, {batch} review(s) at a time, and R, R̂ and the mean token "
            f"of {each} at every layer")


@dataclass(frozen=True)
class LayerRates:
    """Rates of one trajectory, one entry per stored layer.

    Attributes:
        layers: the layer of each entry.
        rate: (layers, reviews) float64, R of each review's tokens.
        rate_scaled: (layers, reviews) float64, R of each review's tokens divided by their RMS norm (scale-free:
            hardmax moves tokens out to the vertices of their hull, which alone raises R; at most
            (d/2) ln(1 + 1/ε²), reached by an isotropic set).
        reduction, rate_of_means, class_rate: (layers,) ΔR, R and Rc of the reviews' mean tokens between
            the classes (None without labels).
    """

    layers: tuple[int, ...]
    rate: Tensor = field(repr=False)
    rate_scaled: Tensor = field(repr=False)
    reduction: list[float] | None = None
    rate_of_means: list[float] | None = None
    class_rate: list[float] | None = None

    @property
    def rate_mean(self) -> list[float]:
        """Mean R over reviews at each layer."""
        return self.rate.mean(-1).tolist()

    @property
    def rate_scaled_mean(self) -> list[float]:
        """Mean scale-free R over reviews at each layer."""
        return self.rate_scaled.mean(-1).tolist()

    @property
    def compression(self) -> list[float]:
        """Mean scale-free R at each layer relative to layer 0 (< 1: the layers compress)."""
        return (self.rate_scaled.mean(-1) / self.rate_scaled[0].mean()).tolist()

    def to_dict(self) -> dict:
        """JSON values: the layers, mean and median R, mean scale-free R, compression and the class measures."""
        return {"layers": list(self.layers), "rate_mean": self.rate_mean, "rate_scaled_mean": self.rate_scaled_mean,
                "rate_median": self.rate.median(-1).values.tolist(), "compression": self.compression,
                "reduction": self.reduction, "rate_of_means": self.rate_of_means, "class_rate": self.class_rate}


def layer_rates(trajectory: Solution, eps: float, *, labels: Tensor | None = None) -> LayerRates:
    """R of every review's tokens and ΔR between the classes of the mean tokens, at each stored layer.

    Args:
        trajectory: a `Solution` of (batch, n, d) token sets (`simulate`, or a classifier's trace);
            repeated words count with their multiplicity.
        eps: the distortion ε. labels: (batch,) integer class of each review, or None (no ΔR).
    Returns:
        `LayerRates`.
    """
    tokens = trajectory.tokens.detach()
    if tokens.dim() != 4:
        raise ValueError(f"layer_rates needs a batch of token sets, (layers, batch, n, d); got {tuple(tokens.shape)}")
    counts = trajectory.counts.to(tokens.dtype)
    rate, scaled, means = _set_rates(tokens, counts, eps)
    if labels is None:
        return LayerRates(layers=tuple(trajectory.steps), rate=rate, rate_scaled=scaled)
    return _with_reduction(tuple(trajectory.steps), rate, scaled, means, labels, eps)


def _set_rates(tokens: Tensor, counts: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """R and scale-free R (layers, batch) of (layers, batch, n, d) token sets, and their mean tokens, measured
    a block of layers at a time (the scaled copy of the tokens stays a block)."""
    step = max(1, _RATE_BLOCK_ELEMENTS // max(1, tokens[0].numel()))
    parts = [_block_rates(tokens[k:k + step], counts, eps) for k in range(0, tokens.shape[0], step)]
    return tuple(torch.cat(p) for p in zip(*parts, strict=True)) if len(parts) > 1 else parts[0]


def _block_rates(tokens: Tensor, counts: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    weights = counts.expand(tokens.shape[:-1])
    rate = coding_rate(tokens, eps, weights=weights)
    total = counts.sum(-1, keepdim=True)
    squares = torch.linalg.vector_norm(tokens.double(), dim=-1).pow(2)
    rms = ((weights * squares).sum(-1, keepdim=True) / total).sqrt().clamp(min=1e-300)
    scaled = coding_rate(tokens.double() / rms.unsqueeze(-1), eps, weights=weights)
    means = (counts.unsqueeze(-1) * tokens).sum(-2) / total
    return rate, scaled, means


def _with_reduction(layers: tuple[int, ...], rate: Tensor, scaled: Tensor, means: Tensor, labels: Tensor,
                    eps: float) -> LayerRates:
    parts = [rate_reduction(means[k], labels, eps) for k in range(means.shape[0])]  # one per layer
    return LayerRates(layers=layers, rate=rate, rate_scaled=scaled, reduction=[float(p.reduction) for p in parts],
                      rate_of_means=[float(p.rate) for p in parts], class_rate=[float(p.class_rate) for p in parts])


@dataclass(frozen=True)
class LeaderRates:
    """Final R of reviews against their number of leaders (end of a long hardmax run).

    Attributes:
        leaders: (reviews,) int64 number of leaders (distinct words that attend only to themselves).
        rate: (reviews,) final R. table: {number of leaders: (reviews, mean R, mean R / ℓ)}.
        correlation: Spearman rank correlation of R and the number of leaders.
        clusters_mean: mean number of distinct final points (clusters) per review.
        rank_at_most_clusters: share of reviews whose final tokens have numerical rank ≤ min(#clusters, d).
        scaled_bound_holds: share of reviews whose final scale-free rate R̂ is at most (r/2) ln(1 + d/(r ε²)),
            r = min(#clusters, d): the most a set of unit RMS norm and rank r can have (AM-GM on the r
            non-zero eigenvalues of c·ZᵀZ, whose sum is d/ε²).
    """

    leaders: Tensor = field(repr=False)
    rate: Tensor = field(repr=False)
    table: dict[int, tuple[int, float, float]]
    correlation: float
    clusters_mean: float
    rank_at_most_clusters: float
    scaled_bound_holds: float

    def to_dict(self) -> dict:
        """JSON values: the table, the correlation, the cluster measures and the mean number of leaders."""
        return {"table": {str(k): list(v) for k, v in self.table.items()}, "correlation": self.correlation,
                "clusters_mean": self.clusters_mean, "rank_at_most_clusters": self.rank_at_most_clusters,
                "scaled_bound_holds": self.scaled_bound_holds,
                "leaders_mean": float(self.leaders.double().mean())}


def _ranks(x: Tensor) -> Tensor:
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[order] = torch.arange(x.numel(), dtype=torch.float64)
    # ties share their mean rank
    values, inverse = torch.unique(x, return_inverse=True)
    sums = torch.zeros(values.numel(), dtype=torch.float64).index_add_(0, inverse, ranks)
    sizes = torch.bincount(inverse, minlength=values.numel()).double()
    return (sums / sizes)[inverse]


def _spearman(a: Tensor, b: Tensor) -> float:
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = float(ra.norm() * rb.norm())
    return float((ra * rb).sum()) / denominator if denominator > 0 else float("nan")


def leader_rates(trajectory: Solution, eps: float, *, same: float = 1e-5) -> LeaderRates:
    """Final R against the number of leaders of each review, and the rank bound of the limit.

    Args:
        trajectory: a long hardmax `Solution` of (batch, n, d) sets, every layer stored. eps: the distortion ε.
        same: relative distance under which two final tokens count as one cluster point.
    """
    return _leader_summary([_leader_parts(trajectory, eps, same)])


def _leader_parts(trajectory: Solution, eps: float, same: float = 1e-5) -> dict[str, Tensor]:
    """Per-review parts of `leader_rates` (batches of reviews are measured apart and joined by `_leader_summary`)."""
    final = trajectory.final.detach()
    mask = trajectory.mask
    counts = trajectory.counts.to(final.dtype)
    rate = coding_rate(final, eps, weights=counts)
    # leaders from the history (a follower converged onto its leader is a copy of it in the last snapshot)
    leaders = ((leader_layers(trajectory) >= 0) & mask).sum(-1)
    # distinct final points: tokens farther than `same`·scale from every earlier token
    scale = final.abs().amax((-2, -1), keepdim=True).clamp(min=1e-30)
    distance = torch.cdist(final / scale, final / scale)
    earlier = torch.ones(final.shape[-2], final.shape[-2], dtype=torch.bool).tril(-1)
    duplicate = ((distance <= same) & earlier & mask.unsqueeze(-2) & mask.unsqueeze(-1)).any(-1)
    clusters = (mask & ~duplicate).sum(-1)
    # numerical rank of Σ w_i z_i z_iᵀ
    weighted = final.double() * counts.double().sqrt().unsqueeze(-1)
    singular = torch.linalg.svdvals(weighted)
    rank = (singular > same * singular[..., :1].clamp(min=1e-300)).sum(-1)
    d = final.shape[-1]
    r = torch.clamp(clusters, max=d).double()
    _, scaled, _ = _set_rates(final.unsqueeze(0), counts, eps)
    x = math.log(d) - torch.log(r) - 2 * math.log(eps)  # ln(d/(r ε²)): no overflow for any ε
    bound = r / 2 * torch.logaddexp(x, torch.zeros_like(x))  # (r/2) ln(1 + d/(r ε²))
    return {"leaders": leaders, "rate": rate, "clusters": clusters,
            "rank_ok": rank <= torch.clamp(clusters, max=d), "scaled_ok": scaled[0] <= bound * (1 + 1e-9)}


def _leader_summary(parts: list[dict[str, Tensor]]) -> LeaderRates:
    joined = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    leaders, rate = joined["leaders"], joined["rate"]
    table = {}
    for ell in torch.unique(leaders).tolist():  # a loop over distinct leader counts, not reviews
        chosen = leaders == ell
        r = rate[chosen]
        table[int(ell)] = (int(chosen.sum()), float(r.mean()), float(r.mean()) / max(int(ell), 1))
    return LeaderRates(leaders=leaders, rate=rate, table=table, correlation=_spearman(rate, leaders.double()),
                       clusters_mean=float(joined["clusters"].double().mean()),
                       rank_at_most_clusters=float(joined["rank_ok"].double().mean()),
                       scaled_bound_holds=float(joined["scaled_ok"].double().mean()))


@dataclass(frozen=True)
class RateReport:
    """Everything `measure_classifier` measured on one model.

    Attributes:
        d, layers, alpha, beta: the model. reviews: number measured. eps: the distortion used.
        classifier: {"hardmax", "softmax"} `LayerRates` through the model's K layers.
        simulated: {"hardmax", "softmax"} `LayerRates` of `simulate` from the embeddings, `long_layers` deep.
        leaders: `LeaderRates` at the end of the long hardmax run.
    """

    d: int
    layers: int
    alpha: float
    beta: float
    reviews: int
    eps: float
    classifier: dict[str, LayerRates]
    simulated: dict[str, LayerRates]
    leaders: LeaderRates

    def to_dict(self) -> dict:
        """JSON values: the settings, every trajectory's `LayerRates.to_dict` and the leaders' `LeaderRates.to_dict`."""
        return {"d": self.d, "layers": self.layers, "alpha": self.alpha, "beta": self.beta, "reviews": self.reviews,
                "eps": self.eps, "classifier": {k: v.to_dict() for k, v in self.classifier.items()},
                "simulated": {k: v.to_dict() for k, v in self.simulated.items()}, "leaders": self.leaders.to_dict()}

    def table(self) -> str:
        """Markdown: mean R per layer and ΔR per layer, through the classifier (hardmax and softmax)."""
        hard, soft = self.classifier["hardmax"], self.classifier["softmax"]
        lines = [f"d = {self.d}, {self.reviews} reviews, ε = {self.eps:g}, α = {self.alpha:.3g}; R: mean over reviews "
                 "of the rate of their tokens, R̂: the same for tokens scaled to unit RMS norm, ΔR: between the "
                 "classes of the reviews' mean tokens", ""]
        lines += markdown_table(
            ("layer", "R hardmax", "R softmax", "R̂ hardmax", "R̂ softmax", "R̂ / R̂₀ hardmax", "ΔR hardmax", "ΔR softmax"),
            ((k, f"{hard.rate_mean[i]:.3f}", f"{soft.rate_mean[i]:.3f}", f"{hard.rate_scaled_mean[i]:.3f}",
              f"{soft.rate_scaled_mean[i]:.3f}", f"{hard.compression[i]:.3f}", f"{hard.reduction[i]:.4f}",
              f"{soft.reduction[i]:.4f}") for i, k in enumerate(hard.layers)))
        long, soft_long = self.simulated["hardmax"], self.simulated["softmax"]
        lines += ["", f"simulate, {long.layers[-1]} layers from the embeddings: R {long.rate_mean[0]:.3f} → "
                  f"{long.rate_mean[-1]:.3f} (hardmax), {soft_long.rate_mean[-1]:.3f} (softmax); R̂ "
                  f"{long.rate_scaled_mean[0]:.3f} → {long.rate_scaled_mean[-1]:.3f} (hardmax), "
                  f"{soft_long.rate_scaled_mean[-1]:.3f} (softmax); ΔR {long.reduction[0]:.4f} → "
                  f"{long.reduction[-1]:.4f} (hardmax), {soft_long.reduction[-1]:.4f} (softmax)",
                  f"final R vs number of leaders ℓ: Spearman {self.leaders.correlation:.3f}; "
                  f"rank(final tokens) ≤ r = min(#clusters, d) for {100 * self.leaders.rank_at_most_clusters:.1f} % "
                  f"of reviews, R̂ ≤ (r/2) ln(1 + d/(r ε²)) for {100 * self.leaders.scaled_bound_holds:.1f} %; "
                  f"{self.leaders.clusters_mean:.2f} clusters per review on average", ""]
        rows = sorted(self.leaders.table.items())
        lines += markdown_table(("leaders ℓ", "reviews", "mean final R", "R / ℓ"),
                                ((ell, n, f"{r:.3f}", f"{per:.3f}") for ell, (n, r, per) in rows))
        return "\n".join(lines)


@torch.no_grad()
def measure_classifier(model, ids: Tensor, mask: Tensor, labels: Tensor,
                       config: RateConfig = RateConfig()) -> RateReport:
    """Rates through a trained `HardmaxClassifier` and along `simulate` runs from its embeddings.

    Args:
        model: a `HardmaxClassifier` (`trace`, `embedding`, `alpha`, `A`, `config.beta`).
        ids, mask: (reviews, n) word ids and real-token mask. labels: (reviews,) 0/1.
        config: `RateConfig` (ε, depth of the long runs, batch size).
    Returns:
        `RateReport`.
    Raises:
        ValueError: no reviews, a CRATE model; `MemoryBudgetError` (naming `long_layers`) when the long runs
            need more memory than is available (`long_run_memory`).

    The long runs go through the reviews in batches (`long_run_memory`): each batch's trajectories are
    measured and dropped before the next, so memory follows one batch, not every review.
    """
    if ids.shape[0] == 0:
        raise ValueError("no reviews to measure")
    if not hasattr(model, "A"):
        raise ValueError("measure_classifier needs a HardmaxClassifier run; for a CRATE run (--layer crate) use "
                         "hardmax.experiments.rate.measure_crate")
    reviews, n = ids.shape
    d = model.config.d
    batch, nbytes = long_run_memory(config.long_layers, reviews, n, d, config.batch_size)
    require_memory(nbytes, f"long_layers={config.long_layers} "
                           f"({long_run_text(config.long_layers, reviews, n, d, batch)})")
    labels = labels.long()
    # The classifier's traces of every review are kept for both rules until their rates are taken: the
    # (layers + 1) positions of each review's distinct words, and their concatenation, in float32.
    depth = model.config.layers
    require_memory(2 * 2 * 4.0 * reviews * (depth + 1) * n * (d + 1),
                   f"{reviews:,} reviews through the classifier's {depth} layers (their traces, n = {n}, d = {d}, "
                   "kept for both rules)")
    traces = {}
    for name in ("hardmax", "softmax"):
        rule = model.rule_named(name)
        parts = [model.trace(ids[s:s + config.batch_size], mask[s:s + config.batch_size], rule)
                 for s in range(0, reviews, config.batch_size)]
        traces[name] = _concat_rates(parts, config.eps, labels)
    alpha = float(model.alpha)
    A = None if model.A is None else model.A.double()
    rules = (("hardmax", Hardmax()), ("softmax", model.softmax))
    rates: dict[str, list] = {name: [] for name, _ in rules}
    leader_parts, layers = [], ()
    for s in range(0, reviews, batch):  # batches of reviews: memory is one batch's trajectories
        tokens = model.embedding(ids[s:s + batch]).double()
        for name, rule in rules:
            run = simulate(tokens, rule, alpha=alpha, layers=config.long_layers, A=A, mask=mask[s:s + batch])
            layers = tuple(run.steps)
            rates[name].append(_set_rates(run.tokens, run.counts, config.eps))
            if name == "hardmax":
                leader_parts.append(_leader_parts(run, config.eps))
            del run
    simulated = {name: _joined_rates(layers, parts, labels, config.eps) for name, parts in rates.items()}
    return RateReport(d=d, layers=model.config.layers, alpha=alpha, beta=float(model.config.beta),
                      reviews=int(reviews), eps=config.eps, classifier=traces, simulated=simulated,
                      leaders=_leader_summary(leader_parts))


def _joined_rates(layers: tuple[int, ...], parts: list, labels: Tensor, eps: float) -> LayerRates:
    """`LayerRates` of batches of reviews measured apart by `_set_rates` (ΔR on all reviews at once)."""
    rate, scaled, means = (torch.cat([p[i] for p in parts], 1) for i in range(3))
    return _with_reduction(layers, rate, scaled, means, labels, eps)


def _concat_rates(traces, eps: float, labels: Tensor) -> LayerRates:
    """`layer_rates` of batches of classifier traces, joined (ΔR on all reviews at once)."""
    parts = [_set_rates(t.trajectory.tokens.detach(), t.trajectory.counts, eps) for t in traces]
    return _joined_rates(tuple(traces[0].trajectory.steps), parts, labels, eps)


@dataclass(frozen=True)
class CrateMeasures:
    """Per-layer measures of a `CrateClassifier` on reviews (means over reviews).

    Attributes:
        compression: (layers,) mean R^c(Z^ℓ | U^ℓ) of each block's input against its subspaces.
        compression_after: (layers,) mean R^c of each block's MSSA output against the same subspaces.
        sparsity: (layers,) mean fraction of exact zeros after each block's ISTA step.
        rate: (layers + 1,) mean R of the tokens.
    """

    compression: list[float]
    compression_after: list[float]
    sparsity: list[float]
    rate: list[float]


@torch.no_grad()
def crate_measures(model, ids: Tensor, mask: Tensor, *, eps: float = 0.5, batch_size: int = 500) -> CrateMeasures:
    """Compression R^c(Z | U), sparsity and R through the blocks of a `CrateClassifier` (softmax pass)."""
    sums = None
    for s in range(0, ids.shape[0], batch_size):
        trace = model.trace(ids[s:s + batch_size], mask[s:s + batch_size])
        w = trace.multiplicity
        present = w > 0
        rows = []
        for layer, block in enumerate(model.blocks):  # a loop over layers
            U = block.subspaces.detach()
            rows.append(torch.stack([
                subspace_coding_rate(trace.tokens[layer], U, eps, weights=w).sum(),
                subspace_coding_rate(trace.compressed[layer], U, eps, weights=w).sum(),
                zero_fraction(trace.tokens[layer + 1], mask=present).sum(),
            ]))
        rate = coding_rate(trace.tokens, eps, weights=w.expand(trace.tokens.shape[:-1])).sum(-1)
        part = (torch.stack(rows) if rows else torch.zeros(0, 3, dtype=torch.float64), rate)
        sums = part if sums is None else (sums[0] + part[0], sums[1] + part[1])
    n = ids.shape[0]
    table, rate = sums[0] / n, sums[1] / n
    return CrateMeasures(compression=table[:, 0].tolist(), compression_after=table[:, 1].tolist(),
                         sparsity=table[:, 2].tolist(), rate=rate.tolist())


@dataclass(frozen=True)
class CrateReport:
    """What `hardmax rate` measures on a CRATE run: `CrateMeasures` at the run's initialisation and trained.

    Attributes:
        d, heads, layers: the model. reviews: number measured. eps: the distortion used.
        initial, trained: `CrateMeasures` of the weights `hardmax train` started from (same seed) and of the run's.
    """

    d: int
    heads: int
    layers: int
    reviews: int
    eps: float
    initial: CrateMeasures
    trained: CrateMeasures

    def to_dict(self) -> dict:
        """The report as nested dicts of its fields (`dataclasses.asdict`), for JSON."""
        return asdict(self)

    def table(self) -> str:
        """Markdown: per block, compression R^c(Z | U) at its input and after MSSA, non-zero fraction after
        ISTA and R of its input, at initialisation and trained."""
        i, t = self.initial, self.trained
        lines = [f"CRATE, d = {self.d}, {self.heads} head(s), {self.reviews} reviews, ε = {self.eps:g}; R^c(Z | U): "
                 "compression against the block's subspaces, mean over reviews (initialisation / trained)", ""]
        lines += markdown_table(
            ("block", "R^c input", "R^c after MSSA", "non-zero after ISTA", "R input"),
            ((k + 1, f"{i.compression[k]:.3f} / {t.compression[k]:.3f}",
              f"{i.compression_after[k]:.3f} / {t.compression_after[k]:.3f}",
              f"{1 - i.sparsity[k]:.3f} / {1 - t.sparsity[k]:.3f}", f"{i.rate[k]:.3f} / {t.rate[k]:.3f}")
             for k in range(len(t.compression))))
        return "\n".join(lines)


def measure_crate(model, initial, ids: Tensor, mask: Tensor, config: RateConfig) -> CrateReport:
    """`crate_measures` of a trained `CrateClassifier` and of `initial` (the weights training started from)."""
    if ids.shape[0] == 0:
        raise ValueError("no reviews to measure")
    measured = [crate_measures(m, ids, mask, eps=config.eps, batch_size=config.batch_size) for m in (initial, model)]
    return CrateReport(d=model.config.d, heads=model.config.blocks.heads, layers=model.config.layers,
                       reviews=int(ids.shape[0]), eps=config.eps, initial=measured[0], trained=measured[1])
