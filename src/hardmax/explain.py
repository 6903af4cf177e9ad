"""Measurements on trained classifiers: leaders per review, leader words, explanations.

Everything here consumes a `HardmaxClassifier` and word ids and returns small dataclasses; nothing
trains and nothing plots. Leaders are counted on *distinct words* of a review: a repeated word is
one token of multiplicity w (see `hardmax.dynamics`), and it is a leader when its attention set
holds only itself (C_i = {i} up to its own copies), so it never moves.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.dynamics import attention_weights
from hardmax.models import HardmaxClassifier, ModelTrace
from hardmax.theory import find_leaders

__all__ = [
    "Explanation",
    "LeaderStats",
    "explain_ids",
    "leader_masks",
    "leader_statistics",
    "leader_word_counts",
]


def leader_masks(trace: ModelTrace, *, layers: tuple[int, ...] | None = None,
                 tie_rtol: float | None = None) -> Tensor:
    """Bool (len(layers), batch, m): distinct token i is a leader at layer k (C_i = {i}).

    The one leader rule of the library, `hardmax.theory.find_leaders`, with exact identity (atol = 0):
    the trace's tokens are already distinct words (copies merged with a multiplicity), so a leader
    is a token whose attention set holds only itself. `layers`: which layers (default all, 0..K).
    """
    chosen = range(trace.tokens.shape[0]) if layers is None else layers
    present = trace.weights > 0
    A = None if trace.A is None else trace.A.detach()
    return torch.stack([find_leaders(trace.tokens[k], A=A, mask=present, tie_rtol=tie_rtol, atol=0.0)
                        for k in chosen])


@dataclass(frozen=True)
class LeaderStats:
    """Leaders per review at the last layer (the paper's Table of leader counts)."""

    n_reviews: int
    mean: float
    std: float
    min: int
    max: int
    fraction_initial: float  # share of final leaders that were already leaders at layer 0
    per_review: Tensor  # (n_reviews,) int64 number of leaders of each review


@torch.no_grad()
def leader_statistics(model: HardmaxClassifier, ids: Tensor, mask: Tensor, *, batch_size: int = 512) -> LeaderStats:
    """Count hardmax leaders at the last layer of every review, and how many were leaders at layer 0.

    Args:
        model: a trained classifier. ids, mask: (N, n) word ids and real-token mask.
    """
    device = next(model.parameters()).device
    counts, initial = [], 0
    total = 0
    for rows in torch.split(torch.arange(ids.shape[0]), batch_size):
        trace = _trace(model, ids[rows].to(device), mask[rows].to(device))
        first, final = leader_masks(trace, layers=(0, -1))
        counts.append(final.sum(-1).cpu())
        initial += int((final & first).sum())
        total += int(final.sum())
    per_review = torch.cat(counts)
    as_float = per_review.double()
    return LeaderStats(
        n_reviews=int(per_review.numel()),
        mean=float(as_float.mean()),
        std=float(as_float.std()) if per_review.numel() > 1 else 0.0,
        min=int(per_review.min()),
        max=int(per_review.max()),
        fraction_initial=initial / total if total else float("nan"),
        per_review=per_review,
    )


def _trace(model: HardmaxClassifier, ids: Tensor, mask: Tensor) -> ModelTrace:
    return model.trace(ids, mask, attention="hardmax")


@torch.no_grad()
def leader_word_counts(model: HardmaxClassifier, ids: Tensor, mask: Tensor, labels: Tensor, *,
                       confidence: float = 0.95, decisive: float | None = 2.0,
                       batch_size: int = 512) -> dict[str, Counter]:
    """How often each word is a decisive final-layer leader in confidently and correctly classified reviews.

    The paper's histogram (the authors' code): a review counts when its hardmax prediction is correct
    and max(p, 1 − p) > `confidence`; a leader counts when its own decoder logit is decisive,
    |v·z_i + b| > `decisive` (its final position alone would classify the review firmly), so the
    histogram shows sentiment words rather than the most frequent words. decisive=None counts every
    leader. Returns {"positive": Counter(word id → reviews), "negative": Counter(...)}, by true label.
    """
    device = next(model.parameters()).device
    out = {"positive": Counter(), "negative": Counter()}
    vocab_size = model.config.vocab_size
    for rows in torch.split(torch.arange(ids.shape[0]), batch_size):
        trace = _trace(model, ids[rows].to(device), mask[rows].to(device))
        prob = torch.sigmoid(trace.logits).cpu()
        truth = labels[rows].cpu() > 0.5
        keep = ((prob > 0.5) == truth) & (torch.maximum(prob, 1 - prob) > confidence)
        final = leader_masks(trace, layers=(-1,))[0]
        if decisive is not None:
            final &= model.decoder(trace.tokens[-1]).squeeze(-1).abs() > decisive
        final = final.cpu()
        for name, side in (("positive", truth), ("negative", ~truth)):
            sel = keep & side
            word_ids = trace.ids.cpu()[sel][final[sel]]
            hist = torch.bincount(word_ids, minlength=vocab_size)
            nz = hist.nonzero().squeeze(-1)
            out[name].update(dict(zip(nz.tolist(), hist[nz].tolist(), strict=True)))
    return out


@dataclass(frozen=True)
class Explanation:
    """Why the classifier decided what it did on one review (hardmax)."""

    probability: float  # P(positive)
    label: str  # "positive" or "negative"
    words: list[str]  # the review's distinct words (index = distinct token)
    multiplicity: list[int]  # how often each distinct word occurs
    leaders: list[int]  # indices (into `words`) of the final-layer leaders
    initial_leaders: list[int]  # leaders at layer 0
    follows: dict[int, list[int]]  # leader index -> indices of the words whose final attention set holds it
    trace: ModelTrace = None  # the full per-layer trace (for figures)

    def summary(self) -> str:
        lines = [f"prediction: {self.label}  (P(positive) = {self.probability:.3f})",
                 f"{len(self.leaders)} leader(s) among {len(self.words)} distinct words:"]
        for i in sorted(self.leaders, key=lambda i: -len(self.follows.get(i, []))):
            followers = [self.words[j] for j in self.follows.get(i, []) if j != i]
            star = "" if i in self.initial_leaders else " (emerged)"
            shown = ", ".join(followers[:20]) + (" …" if len(followers) > 20 else "")
            lines.append(f"  ★ {self.words[i]}{star}: {len(followers)} follower(s){': ' + shown if followers else ''}")
        return "\n".join(lines)


@torch.no_grad()
def explain_ids(model: HardmaxClassifier, ids: Tensor, words: list[str]) -> Explanation:
    """Explain one review given as word ids (n,) (real tokens only) and the vocabulary `words`.

    `follows` uses the last layer's attention sets: follower i is listed under every leader in C_i
    (a token tied between two leaders follows both).
    """
    device = next(model.parameters()).device
    ids = ids.reshape(1, -1).to(device)
    trace = _trace(model, ids, torch.ones_like(ids, dtype=torch.bool))
    present = trace.weights[0] > 0
    leaders = leader_masks(trace)
    p_last = attention_weights(trace.tokens[-1], trace.weights, A=trace.A, attention="hardmax")[0]
    final_leaders = leaders[-1, 0].nonzero().squeeze(-1).tolist()
    # follower i of leader j: j ∈ C_i at the last layer, i ≠ j, i a real word.
    attends = (p_last > 0) & present.unsqueeze(-1)
    attends.fill_diagonal_(False)
    follows = {j: attends[:, j].nonzero().squeeze(-1).tolist() for j in final_leaders}
    prob = float(torch.sigmoid(trace.logits[0]))
    return Explanation(
        probability=prob,
        label="positive" if prob > 0.5 else "negative",
        words=[words[int(k)] for k in trace.ids[0].tolist()],
        multiplicity=[int(w) for w in trace.weights[0].tolist()],
        leaders=final_leaders,
        initial_leaders=leaders[0, 0].nonzero().squeeze(-1).tolist(),
        follows=follows,
        trace=trace,
    )
