"""What the explorer's pages show, as JSON-ready dicts computed by library calls only.

    playground_view(request)      simulate -> leaders, clusters, K, S (`plots.scene.make_scene`) + check_theorem
    trajectory_view(trajectory)   the same for any single-sequence `Solution` (export, notebooks)
    attention_view(request)       C_i (hardmax, the engine's tie rule) or the largest P_ij (other rules) of one layer
    review_view(run, text)        a trained run on one text: `explain_text`, `project_review`, the softmax
                                  probability, attention sets per layer, R per layer, the Att-SVM token;
                                  CRATE runs: compression and sparsity per block
    presets()                     the paper's Figure 2 configurations and the library's dyadic ones

Positions travel as `hardmax.explore.frames` records (exact float64: base64 in JSON, raw bytes in a binary frame);
a path stops at the last layer where anything moved (`frames.encode_path`: the rest repeats it).
Nothing here reimplements the dynamics; the page draws what these return.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from hardmax.explore.frames import decode_array, encode_array, encode_path
from hardmax.explore.requests import AttentionRequest, PlaygroundRequest

if TYPE_CHECKING:
    from hardmax.dynamics import Solution
    from hardmax.training import Run

__all__ = ["attention_view", "playground_view", "presets", "review_view", "trajectory_view"]

RATE_EPS = 0.5  # the distortion ε of the coding rates shown (hardmax.experiments.rate.RateConfig's default)


def _hex(rgba) -> str:
    return "#" + "".join(f"{round(255 * float(c)):02x}" for c in rgba[:3])


def presets() -> dict:
    """name -> {"tokens": (n, 2) list, "title": str}: the square with one follower, the paper's Figure 2 and the
    library's dyadic variants."""
    from hardmax.theory import figure2_configurations, paper_figure2_configurations

    out = {"square_with_a_follower": {"tokens": [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [0.5, 0.25]],
                                      "title": "the square with a follower"}}
    for name, Z in paper_figure2_configurations().items():
        out[f"paper_{name}"] = {"tokens": Z.tolist(), "title": f"Figure 2, {name.replace('_', ' ')} (paper)"}
    for name, Z in figure2_configurations().items():
        out[f"dyadic_{name}"] = {"tokens": Z.tolist(), "title": f"{name.replace('_', ' ')} (dyadic, exact ties)"}
    return out


EMBEDDED_ATTENTION = 50_000  # tokens × stored layers up to which an export carries every layer's attention
_ATTENTION_ENTRIES = 1 << 21  # attention weights computed at once for an export (16 MiB in float64)


def _attention_layers(path: np.ndarray, A, rule, *, top: int = 6, share: float = 0.05) -> list:
    """`attention_view` of every layer of a (layers, n, d) path, batched: the arrows of an exported view."""
    from hardmax.dynamics import Hardmax, attention_matrix
    from hardmax.theory import attention_sets

    Z = torch.as_tensor(path, dtype=torch.float64)
    n = Z.shape[1]
    out = []
    for part in torch.split(Z, max(1, _ATTENTION_ENTRIES // (n * n))):  # (chunk, n, n) at a time: bounded memory
        if isinstance(rule, Hardmax):
            out += [{"sets": [np.nonzero(row)[0].tolist() for row in layer]}
                    for layer in attention_sets(part, A=A).numpy()]
            continue
        P = attention_matrix(part, rule=rule, A=A)
        weights, index = P.topk(min(top, n), dim=-1)
        keep = weights >= share * weights[..., :1]
        out += [{"weights": [[[int(j), float(w)] for j, w, k in zip(js, ws, ks, strict=True) if k]
                             for js, ws, ks in zip(index[layer].tolist(), weights[layer].tolist(),
                                                   keep[layer].tolist(), strict=True)]}
                for layer in range(P.shape[0])]
    return out


def trajectory_view(trajectory: Solution, *, python: str = "", attention: bool = False,
                    encode: Callable[[np.ndarray], object] = encode_array) -> dict:
    """Everything the playground draws for one sequence (d = 2 drawn as is, d = 3 in 3-D, d > 3 projected).

    Keys: d, n, layers, rule, beta, alpha, A, path (layers + 1, n, p) encoded, labels (cluster of each token),
    leader_since (first layer of lasting leadership, −1 for followers), vertices / edges of K, limit (points
    of S reached that are not vertices), k_dim, colours, theorem (`TheoremReport.to_dict()` with its table),
    note, python, seconds. `encode`: how the path travels, `frames.encode_array` (JSON) or `frames.raw_array` (a
    binary frame only).
    """
    from hardmax.dynamics import Hardmax
    from hardmax.dynamics.rules import RULES
    from hardmax.plots.scene import PALETTE, make_scene, projection
    from hardmax.theory import check_theorem

    if trajectory.tokens.dim() != 3:
        raise ValueError("the explorer shows one sequence: simulate tokens of shape (n, d), not a batch")
    if not trajectory.complete:
        raise ValueError("the explorer plays every layer back: simulate with save=Save() (every layer)")
    d = trajectory.tokens.shape[-1]
    p = 2 if d <= 2 else 3
    seconds = {}
    start = time.perf_counter()
    causal = trajectory.pairs is not None  # who attends to whom restricted: Theorem 2.1's scene does not apply
    other = causal or not isinstance(trajectory.rule, Hardmax)  # its path, without hardmax's scene
    name = next((n for n, cls in RULES.items() if type(trajectory.rule) is cls), type(trajectory.rule).__name__)
    beta = getattr(trajectory.rule, "beta", None)
    record = {"d": d, "shown": p, "n": int(trajectory.mask.sum()), "layers": trajectory.layers,
              "rule": name, "causal": trajectory.pairs is not None, "beta": None if beta is None else float(beta),
              "alpha": trajectory.alpha.detach().cpu().double().tolist()[:1],
              "A": trajectory.A.detach().cpu().double().tolist(), "python": python, "palette":
              [_hex(c) for c in PALETTE]}
    if other:  # leaders, K, S and Theorem 2.1 are about hardmax attention
        real = trajectory.mask.detach().cpu().numpy().astype(bool)
        path = trajectory.tokens.detach().cpu().double().numpy()
        path = path if real.all() else path[:, real]  # (no copy when every token is real)
        project, shown = projection(path.reshape(-1, d), p)  # (as the hardmax scene: d < p padded, d > p PCA)
        path = project(path).reshape(path.shape[0], path.shape[1], p)
        n = path.shape[1]
        note = ("causal attention (token i sees the tokens j ≤ i; the first never moves): leaders, K, S and the "
                "Theorem 2.1 check are about full attention; switch causal off to see them" if causal else
                f"{name}: leaders, K, S and the Theorem 2.1 check are about hardmax; switch the rule to Hardmax to "
                "see them")
        record.update(path=encode_path(path, encode), labels=[0] * n, leader_since=[-1] * n,
                      vertices=[], edges=[], limit=[], k_dim=-1, theorem=None,
                      note="; ".join([shown, note]) if shown else note)
        seconds["scene"] = time.perf_counter() - start
    else:
        scene = make_scene(trajectory, p)
        seconds["scene"] = time.perf_counter() - start
        start = time.perf_counter()
        report = check_theorem(trajectory)
        seconds["theorem"] = time.perf_counter() - start
        theorem = report.to_dict()
        theorem["table"] = report.table()
        record.update(path=encode_path(scene.path, encode), labels=scene.labels.tolist(),
                      leader_since=scene.leader_since.tolist(), vertices=scene.vertices.tolist(),
                      edges=scene.edges.tolist(), limit=scene.limit.tolist(), k_dim=scene.k_dim, theorem=theorem,
                      note=scene.note)
    if attention and d in (2, 3):  # every stored layer's attention, for a view that has no server to ask
        kept = decode_array(record["path"]).copy()  # frombuffer is read-only
        if kept.shape[0] * kept.shape[1] <= EMBEDDED_ATTENTION:
            record["attention"] = _attention_layers(kept, trajectory.A.detach().cpu().double(), trajectory.rule)
    record["seconds"] = seconds
    return record


def playground_view(request: PlaygroundRequest, *, attention: bool = False,
                    encode: Callable[[np.ndarray], object] = encode_array) -> dict:
    """Run the playground's request (`hardmax.simulate`) and return its `trajectory_view` (`attention`: with
    every layer's attention sets, as an exported view carries them; `encode`: as `trajectory_view`'s)."""
    from hardmax.dynamics import Causal, simulate

    start = time.perf_counter()
    trajectory = simulate(request.tokens, request.rule, alpha=request.alpha, layers=request.layers, A=request.A,
                          mask=Causal() if request.causal else None)
    simulated = time.perf_counter() - start
    view = trajectory_view(trajectory, python=request.python(), attention=attention, encode=encode)
    view["seconds"]["simulate"] = simulated
    view["alpha"] = [request.alpha]
    return view


def attention_view(request: AttentionRequest, *, top: int = 6, share: float = 0.05) -> dict:
    """Who each token attends to at one layer.

    Hardmax: {"sets": C_i as index lists} with the engine's tie rule (`hardmax.theory.attention_sets`).
    Any other rule: {"weights": per token, up to `top` pairs [j, P_ij] with P_ij ≥ share · max_j P_ij}.
    """
    from hardmax.dynamics import Causal, Hardmax, attention_matrix
    from hardmax.theory import attention_sets

    Z = torch.as_tensor(request.tokens, dtype=torch.float64)
    A = torch.as_tensor(request.A, dtype=torch.float64)
    allowed = Causal().pair_mask(Z[None].shape) if request.causal else None  # token i sees the tokens j ≤ i
    if isinstance(request.rule, Hardmax):
        sets = (attention_sets(Z, A=A) if allowed is None
                else attention_matrix(Z[None], rule=request.rule, A=A, allowed=allowed)[0] > 0).numpy()
        return {"sets": [np.nonzero(row)[0].tolist() for row in sets]}
    P = attention_matrix(Z[None], rule=request.rule, A=A, allowed=allowed)[0].numpy()
    order = np.argsort(-P, axis=1, kind="stable")[:, :top]
    weights = []
    for i, row in enumerate(order):
        peak = P[i, row[0]]
        weights.append([[int(j), float(P[i, j])] for j in row if P[i, j] >= share * peak])
    return {"weights": weights}


def _probability(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0


def review_view(run: Run, text: str, *, decisive: float = 2.0) -> dict:
    """A trained run on one text: what the classifier page draws.

    Hardmax runs: the `Explanation` (prediction, leaders, followers, decisive leaders, each word's logit), the
    2-D coordinates of `project_review` with the decision line, P(positive) under hardmax and under the
    training softmax, C_i of every word at every layer, the coding rate R of the review's tokens per layer,
    and the word the Att-SVM view selects (argmax_t y vᵀx_t at the embedding, y = ±1 the predicted class).
    CRATE runs: the prediction and the compression, sparsity and rate of each block.
    """
    from hardmax.models import CrateClassifier
    from hardmax.training import predict
    from hardmax.training.loop import class_probabilities

    start = time.perf_counter()
    model = run.model
    if isinstance(model, CrateClassifier):
        return _crate_view(run, text, start)
    from hardmax.experiments.rate import layer_rates
    from hardmax.explain import explain_text, project_review
    from hardmax.svm import optimal_selection
    from hardmax.theory import attention_sets

    explanation = explain_text(run, text)
    projection = project_review(explanation, model)
    encoded = run.encode([text])
    soft = predict(model, encoded.ids, encoded.mask, rule=None)[0]
    W, bias = model.decoder.weight.detach().double(), model.decoder.bias.detach().double()
    if len(W) == 1:  # two classes: P(positive), the decoder direction v and its bias
        soft_probability, v, offset = _probability(float(soft)), W[0], float(bias[0])
    else:  # k classes: P(predicted class); the direction between the predicted class c and the runner-up r
        c, r = np.argsort(-np.asarray(explanation.probabilities))[:2]
        shown = explanation.classes.index(explanation.label)
        soft_probability = float(class_probabilities(soft.double()[None])[0, shown])
        v, offset = W[c] - W[r], float(bias[c] - bias[r])
    trace = explanation.trace
    tokens = trace.tokens[:, 0].detach()  # (layers + 1, m, d)
    mask = trace.trajectory.mask[0]
    sets = attention_sets(tokens.double(), A=None if model.A is None else model.A.detach().double(),
                          mask=mask.expand(tokens.shape[0], -1))
    rates = layer_rates(trace.trajectory, RATE_EPS)
    sign = (1.0 if explanation.label == explanation.classes[1] else -1.0) if len(W) == 1 else 1.0
    svm = None  # the Att-SVM view selects one token among several: none to select from in a one-word review
    if len(explanation.words) >= 2:
        selected = int(optimal_selection(tokens[:1].double(), torch.tensor([sign], dtype=torch.float64), v,
                                         mask[None])[0])
        svm = {"selected": selected, "word": explanation.words[selected],
               "rule": "argmax_t y vᵀx_t over the embedded words, y = ±1 the predicted class"}
    record = {
        "kind": "hardmax", "run": run.path.name, "d": explanation.d, "layers": tokens.shape[0] - 1,
        "label": explanation.label, "probability": {"hardmax": explanation.probability,
                                                    "softmax": soft_probability},
        "classes": explanation.classes,
        "beta": float(model.inverse_temperature),
        "words": explanation.words, "multiplicity": explanation.multiplicity, "leaders": explanation.leaders,
        "initial_leaders": explanation.initial_leaders,
        "follows": {str(k): v for k, v in explanation.follows.items()},
        "decisive": explanation.decisive_leaders(decisive), "word_logits": explanation.word_logits,
        # each word's own decoder logit v·z_i^k + b at every layer (the colour it is drawn in at that layer)
        "layer_logits": (tokens.double() @ v + offset).tolist(),
        "summary": explanation.summary(decisive=decisive),
        "points": encode_array(projection.points), "normal": projection.normal.tolist(),
        "offset": projection.offset, "axes": projection.axes,
        "sets": [[np.nonzero(row)[0].tolist() for row in layer] for layer in sets.numpy()],
        "rate": {"eps": RATE_EPS, "rate": rates.rate[:, 0].tolist(), "rate_scaled": rates.rate_scaled[:, 0].tolist()},
        "svm": svm,
    }
    record["seconds"] = time.perf_counter() - start
    return record


def _crate_view(run: Run, text: str, start: float) -> dict:
    from hardmax.dynamics import Hardmax
    from hardmax.experiments.rate import crate_measures
    from hardmax.training import predict
    from hardmax.training.loop import class_probabilities, predicted_classes

    encoded = run.encode([text])
    hard = predict(run.model, encoded.ids, encoded.mask, rule=Hardmax())[0].double()
    soft = predict(run.model, encoded.ids, encoded.mask, rule=None)[0].double()
    measures = crate_measures(run.model, encoded.ids, encoded.mask, eps=RATE_EPS)
    words = [run.vocab.words[int(i)] for i in encoded.ids[0][encoded.mask[0]]]
    names = run.class_names
    c = int(predicted_classes(hard[None])[0])
    shown = 1 if len(names) == 2 else c  # P(class 1) for two classes (as before), else P(the predicted class)
    probability = {"hardmax": float(class_probabilities(hard[None])[0, shown]),
                   "softmax": float(class_probabilities(soft[None])[0, shown])}
    return {"kind": "crate", "run": run.path.name, "d": run.model.config.d, "layers": len(measures.sparsity),
            "label": names[c], "classes": names,
            "probability": probability, "words": words,
            "crate": {"eps": RATE_EPS, "compression": measures.compression,
                      "compression_after": measures.compression_after, "sparsity": measures.sparsity,
                      "rate": measures.rate},
            "seconds": time.perf_counter() - start}
