"""Why a trained classifier decided: leaders per review, decisive leader words, explanations of texts.

Everything here consumes a `HardmaxClassifier` and word ids and returns small dataclasses; nothing
trains and nothing plots. Leaders are counted on *distinct words* of a review: a repeated word is
one token of multiplicity w (see `hardmax.dynamics`), and it is a leader when its attention set
holds only itself (C_i = {i} up to its own copies), so it never moves.

The statistics over a whole test set need only layers 0 and K: they run the compiled engine
(`hardmax.simulate(..., save=Save.final())`) on the reviews, and decide leaders with the one leader rule
(`hardmax.theory.find_leaders` with exact identity, whose margin screen sends only near-ties through the
tie rule).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from hardmax.dynamics import Hardmax, Save, attention_matrix, simulate
from hardmax.models import HardmaxClassifier, ModelTrace
from hardmax.theory import find_leaders

if TYPE_CHECKING:
    from hardmax.training import Run
    from hardmax.training.loop import Evaluation

__all__ = [
    "Explanation",
    "FinalLayer",
    "LeaderStats",
    "Prediction",
    "ReviewProjection",
    "evaluate_with_leaders",
    "explain_batch",
    "explain_ids",
    "explain_text",
    "explain_texts",
    "final_layer",
    "leader_masks",
    "leader_statistics",
    "leader_word_counts",
    "predict_texts",
    "project_review",
]


def leader_masks(trace: ModelTrace, *, layers: tuple[int, ...] | None = None,
                 tie_rtol: float | None = None) -> Tensor:
    """Bool (len(layers), batch, m): distinct token i is a leader at layer k (C_i = {i}).

    The one leader rule of the library, `hardmax.theory.find_leaders`, with exact identity (atol = 0):
    the trace's tokens are already distinct words (copies merged with a multiplicity), so a leader
    is a token whose attention set holds only itself. `layers`: which layers (default all, 0..K).
    """
    chosen = range(trace.tokens.shape[0]) if layers is None else layers
    present = trace.multiplicity > 0
    A = None if trace.A is None else trace.A.detach()
    return torch.stack([find_leaders(trace.tokens[k], A=A, mask=present, tie_rtol=tie_rtol, atol=0.0)
                        for k in chosen])


@dataclass(frozen=True)
class FinalLayer:
    """Layers 0 and K of a batch of reviews on their distinct words, computed by the compiled engine.

    Attributes:
        ids: (batch, m) word id of each distinct word (PAD where unused). present: (batch, m) bool.
        first, last: (batch, m, d) the distinct words at layer 0 and at layer K.
        logits: (batch,) the classifier's hardmax logits. word_logits: (batch, m) each word's own decoder
            logit at layer K, v·z_i^K + b (how firmly its final position alone would classify).
    """

    ids: Tensor
    present: Tensor
    first: Tensor
    last: Tensor
    logits: Tensor
    word_logits: Tensor


@torch.no_grad()
def final_layer(model: HardmaxClassifier, ids: Tensor, mask: Tensor) -> FinalLayer:
    """Run the classifier's hardmax layers on (batch, n) reviews and keep layers 0 and K (see `FinalLayer`).

    The same dynamics as ``model.trace(ids, mask, Hardmax())``, run by `hardmax.simulate`
    (the compiled kernel on a CPU, one review per core), which stores only the two layers needed.
    """
    if model.config.paper_padding:  # the authors' padding attends, is attended and pooled
        mask = torch.ones_like(mask)
    weight = model.embedding.weight
    distinct, index = _distinct_ids(ids, mask)
    present = distinct >= 0
    distinct = distinct.clamp(min=0)
    z = model.embedding(ids)
    layers = model.config.layers
    if layers:
        A = model.A
        run = simulate(z, Hardmax(), alpha=float(model.alpha), layers=layers, A=None if A is None else A.detach(),
                       mask=mask, save=Save.final())
        end = run.tokens[-1]
    else:
        end = z
    # Copies of a word stay identical through every layer: any copy gives the word's position. Padding
    # goes to one extra slot, dropped.
    last = torch.zeros(distinct.shape[0], distinct.shape[1] + 1, weight.shape[1], dtype=end.dtype, device=end.device)
    last = last.scatter(1, index.unsqueeze(-1).expand_as(end), end)[:, :-1]
    real = mask.unsqueeze(-1).to(end.dtype)
    pooled = (real * end).sum(1) / real.sum(1)
    return FinalLayer(ids=distinct, present=present, first=model.embedding(distinct), last=last,
                      logits=model.decoder(pooled).squeeze(-1), word_logits=model.decoder(last).squeeze(-1))


def _distinct_ids(ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """(batch, m) the distinct word ids of each review (−1 where unused), and (batch, n) the slot of each
    real position among them (m, one past the end, for padding)."""
    keyed = torch.where(mask, ids, torch.full_like(ids, -1))
    ordered, order = keyed.sort(dim=-1)
    new = torch.ones_like(mask)
    new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    new &= ordered >= 0
    slot = new.cumsum(-1) - 1
    m = int(new.sum(-1).max()) if ids.numel() else 0
    distinct = torch.full((ids.shape[0], m), -1, dtype=ids.dtype, device=ids.device)
    rows = torch.arange(ids.shape[0], device=ids.device).unsqueeze(1).expand_as(slot)
    distinct[rows[new], slot[new]] = ordered[new]
    index = torch.empty_like(slot)
    index.scatter_(1, order, torch.where(ordered >= 0, slot, torch.full_like(slot, m)))
    return distinct, index


def _batches(n: int, batch_size: int, what: str, progress: bool):
    from hardmax.progress import progress as bar

    rows = torch.split(torch.arange(n), batch_size)
    return bar(rows, total=len(rows), desc=what, unit="batch", disable=not progress, leave=False)


@dataclass(frozen=True)
class LeaderStats:
    """Leaders per review at the last layer (the paper's Table of leader counts)."""

    n_reviews: int
    mean: float
    std: float
    min: int
    max: int
    fraction_initial: float  # share of final leaders that were already leaders at layer 0
    per_review: Tensor | None = field(default=None, repr=False)  # (n_reviews,) int64 leaders of each review
    # (n_reviews,) the classifier's exact-hardmax logits from the same pass, so that an evaluation needs no
    # second hardmax pass (`hardmax evaluate`, `reproduce`)
    logits: Tensor | None = field(default=None, repr=False)


@torch.no_grad()
def leader_statistics(model: HardmaxClassifier, ids: Tensor, mask: Tensor, *, batch_size: int = 2048,
                      progress: bool = False) -> LeaderStats:
    """Count hardmax leaders at the last layer of every review, and how many were leaders at layer 0.

    Args:
        model: a trained classifier. ids, mask: (N, n) word ids and real-token mask.
        batch_size: reviews per engine call. progress: report progress on stderr.
    """
    device = next(model.parameters()).device
    A = model.A
    counts, logits, initial, total = [], [], 0, 0
    for rows in _batches(ids.shape[0], batch_size, "leaders", progress):
        state = final_layer(model, ids[rows].to(device), mask[rows].to(device))
        logits.append(state.logits.float().cpu())
        first = find_leaders(state.first, A=A, mask=state.present, atol=0.0)
        final = find_leaders(state.last, A=A, mask=state.present, atol=0.0)
        counts.append(final.sum(-1).cpu())
        initial += int((final & first).sum())
        total += int(final.sum())
    per_review = torch.cat(counts) if counts else torch.zeros(0, dtype=torch.int64)
    as_float = per_review.double()
    if per_review.numel() == 0:
        raise ValueError("leader_statistics needs at least one review")
    return LeaderStats(
        n_reviews=int(per_review.numel()),
        mean=float(as_float.mean()),
        std=float(as_float.std()) if per_review.numel() > 1 else 0.0,
        min=int(per_review.min()),
        max=int(per_review.max()),
        fraction_initial=initial / total if total else float("nan"),
        per_review=per_review,
        logits=torch.cat(logits),
    )


@torch.no_grad()
def leader_word_counts(model: HardmaxClassifier, ids: Tensor, mask: Tensor, labels: Tensor, *,
                       confidence: float = 0.95, decisive: float | None = 2.0,
                       batch_size: int = 2048, progress: bool = False) -> dict[str, Counter]:
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
    A = model.A
    for rows in _batches(ids.shape[0], batch_size, "leader words", progress):
        state = final_layer(model, ids[rows].to(device), mask[rows].to(device))
        prob = torch.sigmoid(state.logits).cpu()
        truth = labels[rows].cpu() > 0.5
        keep = ((prob > 0.5) == truth) & (torch.maximum(prob, 1 - prob) > confidence)
        final = find_leaders(state.last, A=A, mask=state.present, atol=0.0)
        if decisive is not None:
            final &= state.word_logits.abs() > decisive
        final = final.cpu()
        for name, side in (("positive", truth), ("negative", ~truth)):
            sel = keep & side
            word_ids = state.ids.cpu()[sel][final[sel]]
            hist = torch.bincount(word_ids, minlength=vocab_size)
            nz = hist.nonzero().squeeze(-1)
            out[name].update(dict(zip(nz.tolist(), hist[nz].tolist(), strict=True)))
    return out


# Above this share of words leading, followers are too few for leaders to explain anything.
_MOSTLY_LEADERS = 0.8


@dataclass(frozen=True)
class Explanation:
    """Why the classifier decided what it did on one review (hardmax)."""

    probability: float  # two classes: P(class 1, positive); k classes: P(the predicted class)
    label: str  # the predicted class's name ("positive" or "negative" for IMDb)
    words: list[str]  # the review's distinct words (index = distinct token)
    multiplicity: list[int]  # how often each distinct word occurs
    leaders: list[int]  # indices (into `words`) of the final-layer leaders
    initial_leaders: list[int]  # leaders at layer 0
    follows: dict[int, list[int]]  # leader index -> indices of the words whose final attention set holds it
    # each word's decoder logit v·z_i^K + b at layer K (two classes); for k classes, the margin of the word's own
    # class (the argmax of W z_i^K + b) over the next: how firmly its final position alone would classify
    word_logits: list[float] = field(default_factory=list)
    d: int = 2  # the model's token dimension
    trace: ModelTrace = None  # the full per-layer trace (for figures)
    classes: list[str] = field(default_factory=lambda: ["negative", "positive"])  # the class names, in code order
    probabilities: list[float] = field(default_factory=list)  # P of each class
    word_classes: list[int] = field(default_factory=list)  # the class each word's final position pushes towards

    def to_dict(self) -> dict:
        """The explanation as plain JSON values, its trace included (`from_dict` reads it back)."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        record["follows"] = {str(k): v for k, v in self.follows.items()}
        record["trace"] = None if self.trace is None else self.trace.to_dict()
        return record

    @classmethod
    def from_dict(cls, record: dict) -> Explanation:
        """The explanation `to_dict` wrote, its trace included when recorded."""
        values = dict(record)
        values["follows"] = {int(k): list(v) for k, v in record["follows"].items()}
        values["trace"] = None if record.get("trace") is None else ModelTrace.from_dict(record["trace"])
        return cls(**values)

    @property
    def mostly_leaders(self) -> bool:
        """True when almost every word is its own leader (usual for d ≥ 8): followers explain little."""
        return len(self.words) > 2 and len(self.leaders) >= _MOSTLY_LEADERS * len(self.words)

    def decisive_leaders(self, decisive: float = 2.0) -> list[int]:
        """Leaders whose own decoder logit |v·z_i + b| exceeds `decisive`, most decisive first."""
        chosen = [i for i in self.leaders if abs(self.word_logits[i]) > decisive]
        return sorted(chosen, key=lambda i: -abs(self.word_logits[i]))

    def summary(self, decisive: float = 2.0) -> str:
        """The explanation as text: leaders and their followers, or, when almost every word leads, the
        decisive leaders."""
        binary = len(self.classes) == 2
        lines = [f"prediction: {self.label}  (P({self.classes[1] if binary else self.label}) = {self.probability:.3f})"]
        if self.mostly_leaders and self.word_logits:
            lines.append(f"{len(self.leaders)} leader(s) among {len(self.words)} distinct words: at d = {self.d} "
                         "almost every word is its own leader, so leaders and followers explain little here "
                         "(they do at d = 2). The decisive leaders, whose own decoder "
                         + ("logit |v·z + b|" if binary else "margin (their class's logit over the next)")
                         + f" > {decisive:g}, carry the prediction:")
            chosen = self.decisive_leaders(decisive)
            for i in chosen[:20]:
                side = self.classes[self.word_classes[i]] if self.word_classes else \
                    ("positive" if self.word_logits[i] > 0 else "negative")
                what = "logit" if binary else "margin"
                lines.append(f"  ★ {self.words[i]}: {what} {self.word_logits[i]:+.2f} ({side})")
            if not chosen:
                lines.append("  (none: no single word is decisive; the prediction comes from their mean)")
            return "\n".join(lines)
        lines.append(f"{len(self.leaders)} leader(s) among {len(self.words)} distinct words:")
        for i in sorted(self.leaders, key=lambda i: -len(self.follows.get(i, []))):
            followers = [self.words[j] for j in self.follows.get(i, []) if j != i]
            star = "" if i in self.initial_leaders else " (emerged)"
            shown = ", ".join(followers[:20]) + (" …" if len(followers) > 20 else "")
            lines.append(f"  ★ {self.words[i]}{star}: {len(followers)} follower(s){': ' + shown if followers else ''}")
        return "\n".join(lines)


def explain_ids(model: HardmaxClassifier, ids: Tensor, words: Sequence[str],
                classes: Sequence[str] | None = None) -> Explanation:
    """Explain one review given as word ids (n,) (real tokens only) and the vocabulary `words`
    (`explain_batch` of a batch of one).

    Raises:
        ValueError: a model other than `HardmaxClassifier` (CRATE blocks have no shared layer, so no leaders).
    """
    ids = ids.reshape(1, -1)
    return explain_batch(model, ids, torch.ones_like(ids, dtype=torch.bool), words, classes)[0]


@torch.no_grad()
def explain_batch(model: HardmaxClassifier, ids: Tensor, mask: Tensor, words: Sequence[str],
                  classes: Sequence[str] | None = None) -> list[Explanation]:
    """Explain a batch of reviews, ids (batch, n) with mask (batch, n) (True = real token), in one hardmax pass.

    Each `Explanation` is the one `explain_ids` gives for that review alone (its trace cut to the review's
    distinct words). `follows` uses the last layer's attention sets: follower i is listed under every
    leader in C_i (a token tied between two leaders follows both). `classes`: the class names (None: negative,
    positive for two classes, "0" … "k−1" otherwise).

    Raises:
        ValueError: a model other than `HardmaxClassifier` (CRATE blocks have no shared layer, so no leaders).
    """
    if not isinstance(model, HardmaxClassifier):
        raise ValueError(f"explaining needs a HardmaxClassifier (the paper's shared layer, whose leaders it lists), "
                         f"got {type(model).__name__}")
    device = next(model.parameters()).device
    trace = model.trace(ids.to(device), mask.to(device), Hardmax())
    leaders = leader_masks(trace)  # (layers + 1, batch, m)
    present = trace.multiplicity > 0  # (batch, m): real distinct words first
    attends = (attention_matrix(trace.tokens[-1], trace.multiplicity, rule=Hardmax(), A=trace.A) > 0) \
        & present.unsqueeze(-1)
    attends &= ~torch.eye(attends.shape[-1], dtype=torch.bool, device=attends.device)  # i ≠ j
    from hardmax.models.config import default_class_names
    from hardmax.training.loop import class_probabilities, predicted_classes

    k = model.config.classes
    names = list(classes) if classes is not None else default_class_names(k)
    if len(names) != k:
        raise ValueError(f"{len(names)} class names for a model of {k} classes")
    outputs = model.decoder(trace.tokens[-1])  # (batch, m, 1) or (batch, m, k)
    word_logits, word_classes = _word_pushes(outputs.squeeze(-1) if k == 2 else outputs)
    if k == 2:  # the word's own logit, signed, as before k classes
        word_logits = outputs.squeeze(-1)
    probabilities = class_probabilities(trace.logits)
    predicted = predicted_classes(trace.logits)  # as evaluate decides
    counts = present.sum(-1).tolist()
    explanations = []
    for b, m in enumerate(counts):  # Python objects per review: slicing only, the dynamics ran batched
        final_leaders = leaders[-1, b, :m].nonzero().squeeze(-1).tolist()
        c = int(predicted[b])
        explanations.append(Explanation(
            probability=float(probabilities[b, 1] if k == 2 else probabilities[b, c]),
            label=names[c],
            words=[words[int(k)] for k in trace.ids[b, :m].tolist()],
            multiplicity=[int(w) for w in trace.multiplicity[b, :m].tolist()],
            leaders=final_leaders,
            initial_leaders=leaders[0, b, :m].nonzero().squeeze(-1).tolist(),
            follows={j: attends[b, :m, j].nonzero().squeeze(-1).tolist() for j in final_leaders},
            word_logits=[float(v) for v in word_logits[b, :m].tolist()],
            d=model.config.d,
            trace=_review_trace(trace, b, m, mask[b].to(trace.index.device)),
            classes=names,
            probabilities=[float(v) for v in probabilities[b].tolist()],
            word_classes=[int(v) for v in word_classes[b, :m].tolist()],
        ))
    return explanations


def _review_trace(trace: ModelTrace, b: int, m: int, positions: Tensor) -> ModelTrace:
    """Review b of a batch trace, cut to its m distinct words and its real positions (bool (n,)): a batch of one,
    as `explain_ids` of the review's real words gives it."""
    t = trace.trajectory
    trajectory = replace(t, tokens=t.tokens[:, b:b + 1, :m], mask=t.mask[b:b + 1, :m],
                         multiplicity=t.multiplicity[b:b + 1, :m])
    return ModelTrace(trajectory=trajectory, ids=trace.ids[b:b + 1, :m], index=trace.index[b:b + 1, positions],
                      pooled=trace.pooled[b:b + 1], logits=trace.logits[b:b + 1])


@dataclass(frozen=True)
class ReviewProjection:
    """A review's distinct words at every layer in two dimensions, with the decision line in them.

    Attributes:
        points: (layers + 1, m, 2) coordinates. normal: (2,) the decoder direction in these coordinates and
            offset: its bias b (the review is positive where normal · x + b > 0). axes: the axes, in words.
    """

    points: np.ndarray
    normal: np.ndarray
    offset: float
    axes: str


def project_review(explanation: Explanation, model: HardmaxClassifier) -> ReviewProjection:
    """2-D coordinates of a review's tokens at every layer (what the review figures and the explorer draw).

    d = 2: the tokens themselves. d > 2: coordinates along the decoder direction w/|w| (the only direction
    the decision depends on, so the decision stays a line) and the top principal component of the tokens
    orthogonal to it. k > 2 classes: the decision drawn is the one between the predicted class c and the runner-up
    r, w = w_c − w_r and b = b_c − b_r (class c where w · x + b > 0).
    """
    z = explanation.trace.tokens[:, 0].detach().cpu().double().numpy()  # (layers + 1, m, d)
    W = model.decoder.weight.detach().cpu().double().numpy()
    bias = model.decoder.bias.detach().cpu().double().numpy()
    if len(W) == 1:
        w, b = W[0], float(bias[0])
    else:
        c, r = np.argsort(-np.asarray(explanation.probabilities))[:2]
        w, b = W[c] - W[r], float(bias[c] - bias[r])
    if z.shape[-1] == 2:
        return ReviewProjection(points=z, normal=w, offset=b, axes="token coordinates")
    e1 = w / np.linalg.norm(w)
    flat = z.reshape(-1, z.shape[-1])
    rest = flat - np.outer(flat @ e1, e1)
    rest = rest - rest.mean(0)
    e2 = np.linalg.svd(rest, full_matrices=False)[2][0]
    basis = np.stack([e1, e2], axis=1)  # (d, 2)
    return ReviewProjection(points=z @ basis, normal=np.array([np.linalg.norm(w), 0.0]), offset=b,
                            axes="decoder direction × principal component")


def _word_pushes(word_logits: Tensor) -> tuple[Tensor, Tensor]:
    """(strength, class) of each word's final position from its decoder output: (..., m) one logit (two classes:
    |logit| and its sign) or (..., m, k) (the margin of its top class over the next, and that class)."""
    if word_logits.dim() == 2:
        return word_logits.abs(), (word_logits > 0).long()
    top = word_logits.topk(2, dim=-1)
    return top.values[..., 0] - top.values[..., 1], top.indices[..., 0]


def explain_text(run: Run, text: str) -> Explanation:
    """Explain one text with a trained run: cleaned and encoded as its training reviews were, then
    `explain_batch`.

    Raises:
        ValueError: a run without a vocabulary, a CRATE run, or a text empty after cleaning (only stop
            words, digits or punctuation).
    """
    return explain_texts(run, [text])[0]


def _encode(run: Run, part: list[str], start: int, total: int):
    """`run.encode(part)`, or a one-line ValueError naming the first text (numbered from `start`) that cleaning
    leaves empty."""
    from hardmax.data import DataError, clean_text

    try:
        return run.encode(part)
    except DataError:
        data = run.data_config
        empty = next((i for i, text in enumerate(part) if not clean_text(text, **data.clean_options())), None)
        if empty is None:
            raise
        text = part[empty]
        shown = text if len(text) <= 60 else text[:57] + "..."
        which = "the review" if total == 1 else f"text {start + empty}"
        raise ValueError(f"{which} {shown!r} is empty after cleaning: it has only stop words "
                         f"({data.stopwords} list), digits or punctuation") from None


def _encode_some(run: Run, part: list[str]):
    """(`run.encode(part)`, set()) or, when some texts are empty after cleaning, (None, their positions)."""
    from hardmax.data import DataError, clean_text

    try:
        return run.encode(part), set()
    except DataError:
        options = run.data_config.clean_options()
        empty = {i for i, text in enumerate(part) if not clean_text(text, **options)}
        if not empty:
            raise
        return None, empty


def explain_texts(run: Run, texts: Sequence[str], *, batch_size: int = 256) -> list[Explanation]:
    """Explain many texts with a trained run (`explain_text` of each, `batch_size` texts per hardmax pass)."""
    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of texts; for one text use explain_text")
    if run.vocab is None:
        raise ValueError(f"{run.path} has no vocab.json (trained without a vocabulary): text cannot be encoded")
    if run.model_config.crate is not None:
        raise ValueError(f"{run.path} is a CRATE run (--layer crate): leaders and followers belong to the paper's "
                         "shared hardmax layer; `hardmax evaluate` and `hardmax rate` measure CRATE runs")
    words = list(run.vocab.words)
    classes = run.class_names
    # The authors' padding (paper_padding) makes padding a word of the review, so a batch's padding would change
    # each explanation: such runs explain each text alone on its real words (as `hardmax explain` always did).
    alone = bool(getattr(run.model.config, "paper_padding", False))
    explanations = []
    for start in range(0, len(texts), batch_size):  # batches of texts, each one hardmax pass
        part = list(texts[start:start + batch_size])
        encoded = _encode(run, part, start, len(texts))
        if alone:
            explanations += [explain_ids(run.model, ids[real], words, classes)
                             for ids, real in zip(encoded.ids, encoded.mask, strict=True)]
        else:
            explanations += explain_batch(run.model, encoded.ids, encoded.mask, words, classes)
    return explanations


def evaluate_with_leaders(model: HardmaxClassifier, split, *, batch_size: int = 256,
                          progress: bool = False) -> tuple[Evaluation, LeaderStats]:
    """`hardmax.training.evaluate` and `leader_statistics` of one labelled split with a single hardmax pass:
    the hardmax logits come from the pass that counts the leaders, then the softmax pass.

    Args:
        model: a trained classifier. split: a `LabelledSplit` (ids, mask, labels).
        batch_size: reviews per softmax batch. progress: report progress on stderr.
    """
    from hardmax.training.loop import Evaluation, predict

    start = time.perf_counter()
    stats = leader_statistics(model, split.ids, split.mask, progress=progress)
    middle = time.perf_counter()
    softmax = predict(model, split.ids, split.mask, rule=model.softmax, batch_size=batch_size)
    result = Evaluation.from_logits(split.labels, stats.logits, softmax, seconds_hardmax=middle - start,
                                    seconds_softmax=time.perf_counter() - middle)
    return result, stats


@dataclass(frozen=True)
class Prediction:
    """What `predict_texts` says of one text: the class, each class's probability under the attention the run was
    selected on, the leader words of its final layer and its decisive leaders (with the class they push towards)."""

    label: str
    probabilities: dict[str, float]
    leaders: list[str]
    decisive: list[tuple[str, str]]  # (word, the class its own final position pushes towards), most decisive first

    @classmethod
    def nothing(cls, names: Sequence[str]) -> Prediction:
        """The prediction of a text that is empty after cleaning: no class (""), NaN probabilities, no leaders."""
        return cls(label="", probabilities=dict.fromkeys(names, math.nan), leaders=[], decisive=[])

    @property
    def empty(self) -> bool:
        """Whether the text was empty after cleaning (no prediction: `nothing`)."""
        return self.label == ""

    def to_row(self) -> dict:
        """A flat record (one column per class probability; word lists joined by spaces) for CSV or JSON Lines;
        an empty text's probabilities are NaN (CSV "nan"; JSON Lines writers write them as null)."""
        return {"prediction": self.label, **{f"p_{name}": round(p, 6) for name, p in self.probabilities.items()},
                "leaders": " ".join(self.leaders),
                "decisive_leaders": " ".join(f"{w}({c})" for w, c in self.decisive)}


def predict_texts(run: Run, texts: Sequence[str], *, decisive: float = 2.0, batch_size: int = 2048,
                  first: int = 0) -> list[Prediction]:
    """Predictions for many texts with a trained run, each with its final-layer leaders and decisive leaders: what
    `explain_texts` says of them, computed from layers 0 and K only (`final_layer`: the compiled engine) and the one
    leader rule (`hardmax.theory.find_leaders`). Probabilities are those of the attention the run was selected on
    (exact hardmax, or the training softmax for runs selected with select_on="softmax"). Leaders are listed in
    the order of their first occurrence in the text; decisive leaders most decisive first. A CRATE run (blocks of
    their own, no shared layer whose leaders could be listed) gets its predictions with empty leader lists.

    `first`: the number of the first text in messages (when `texts` is a slice of a longer input).

    A text with nothing left after cleaning ("10/10", "!!!", stop words only, "") gets `Prediction.nothing`: no
    class, NaN probabilities (`Prediction.empty`); the others are predicted as if it were not there.

    Raises:
        ValueError: a run without a vocabulary.
    """
    from hardmax.training.loop import class_probabilities, predict, predicted_classes

    if isinstance(texts, str):
        raise ValueError("texts must be a sequence of texts, not one string")
    if run.vocab is None:
        raise ValueError(f"{run.path} has no vocab.json (trained without a vocabulary): text cannot be encoded")
    model = run.model
    paper_layer = isinstance(model, HardmaxClassifier)
    names = run.class_names
    words = run.vocab.words
    # The authors' padding (paper_padding) attends and is attended, but it is not a word of the text.
    pad_is_word, pad = bool(model.config.paper_padding), model.config.pad_id
    out: list[Prediction] = []
    for start in range(0, len(texts), batch_size):
        part = list(texts[start:start + batch_size])
        encoded, empty = _encode_some(run, part)
        if empty:  # the texts empty after cleaning get no prediction; the others are predicted in their order
            rest = predict_texts(run, [t for i, t in enumerate(part) if i not in empty], decisive=decisive,
                                 batch_size=batch_size, first=first + start) if len(empty) < len(part) else []
            filled = iter(rest)
            out += [Prediction.nothing(names) if i in empty else next(filled) for i in range(len(part))]
            continue
        rule = Hardmax() if run.train_config.select_on == "hardmax" else None
        if not paper_layer:  # CRATE: the prediction only
            logits = predict(model, encoded.ids, encoded.mask, rule=rule)
            probs, labels = class_probabilities(logits), predicted_classes(logits)
            out += [Prediction(label=names[int(c)], probabilities=dict(zip(names, p.tolist(), strict=True)),
                               leaders=[], decisive=[]) for c, p in zip(labels, probs, strict=True)]
            continue
        device = next(model.parameters()).device
        state = final_layer(model, encoded.ids.to(device), encoded.mask.to(device))
        leaders = find_leaders(state.last, A=model.A, mask=state.present, atol=0.0)
        logits = state.logits if rule is not None else predict(model, encoded.ids, encoded.mask, rule=None)
        logits = logits.cpu()
        probs, labels = class_probabilities(logits), predicted_classes(logits)  # the sign, as evaluate decides
        strength, word_class = _word_pushes(state.word_logits)
        firm = leaders & (strength > decisive)
        ids, present = state.ids.tolist(), state.present.tolist()
        leader_rows, firm_rows = leaders.tolist(), firm.tolist()
        strength_rows, class_rows = strength.tolist(), word_class.tolist()
        for b, row in enumerate(encoded.ids.tolist()):  # strings per text: the dynamics ran batched
            seen: dict[int, int] = {}  # each word's first position in the text
            for position, word in enumerate(row):
                seen.setdefault(word, position)
            slots = [j for j, here in enumerate(present[b]) if here and not (pad_is_word and ids[b][j] == pad)]
            led = sorted((j for j in slots if leader_rows[b][j]), key=lambda j: seen.get(ids[b][j], 0))
            strong = sorted((j for j in slots if firm_rows[b][j]), key=lambda j: -strength_rows[b][j])
            out.append(Prediction(label=names[int(labels[b])],
                                  probabilities=dict(zip(names, probs[b].tolist(), strict=True)),
                                  leaders=[words[ids[b][j]] for j in led],
                                  decisive=[(words[ids[b][j]], names[class_rows[b][j]]) for j in strong]))
    return out
