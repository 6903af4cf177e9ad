"""The Att-SVM of one real head (Tarzanagh, Li, Thrampoulidis, Oymak, "Transformers as Support Vector Machines"):
the max-margin W that puts each query's selected token ahead, built from the head's own selections and solved with
`hardmax.svm.att_svm`, beside the head's own W.

For a head the score of key x_j for query x_i is s_ij = scaling · (W_Q x_i + b_Q)ᵀ(W_K x_j + b_K) = x̃_jᵀ W x̃_i with
x̃ = (x, 1) and W = scaling · K̃ᵀQ̃, K̃ = [W_K | b_K], Q̃ = [W_Q | b_Q] ((d+1) × (d+1)): the solver's convention
(x_{i,α_i} − x_{i,t})ᵀ W z_i. The selections α_i = argmax_j s_ij are separated by the head's own W whenever they are
unique, so the program is feasible; "infeasible" is reported only with the solver's Farkas certificate (ties).
The last row of W multiplies the keys' constant coordinate, the same for every key: no selection sees it, and the
correlation leaves it out.

Two spaces (`space=`): "model", the program above in R^{(d+1)×(d+1)} (the paper's, but its size grows as
(d+1)·queries: minutes for 200 queries of MiniLM); "head" (default), the same program on the head's own coordinates,
keys k̃_j = K̃ x̃_j and queries q̃_i = Q̃ x̃_i in R^{d_h}: the max-margin M over W = K̃ᵀ M Q̃, whose head value is
M = scaling · I (the selections are the same; the correlation is then ⟨M^mm, I⟩ / (‖M^mm‖ √d_h)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from hardmax.pretrained.loader import Pretrained
from hardmax.pretrained.recording import Record
from hardmax.svm import AttSVM, InfeasibleError, att_svm, correlation

__all__ = ["HeadSVM", "head_svm"]


@dataclass(frozen=True, eq=False)
class HeadSVM:
    """The Att-SVM of one head from its own selections.

    Attributes:
        layer (1-based), head, queries: how many query rows entered. tokens: the most keys of a query.
        W: the head's own matrix in the program's space: scaling · K̃ᵀQ̃ ((d+1) × (d+1), space "model") or
        scaling · I (d_h × d_h, space "head"). own_margin: the smallest score gap s_{i,α_i} − s_{i,t} over the
        constraints (> 0: the head separates its own selections). space: "head" or "model".
        svm: the solver's `AttSVM` (W^mm, margins, support, duality gap: its certificate), None if infeasible.
        infeasible: the solver certified infeasibility (Farkas multipliers checked); message: its line.
        correlation: ⟨W, W^mm⟩ / (‖W‖ ‖W^mm‖) over the rows the selections see (None if infeasible).
    """

    layer: int
    head: int
    space: str
    queries: int
    tokens: int
    W: torch.Tensor
    own_margin: float
    svm: AttSVM | None
    infeasible: bool
    message: str
    correlation: float | None

    def to_dict(self) -> dict:
        """Plain JSON values (no matrices)."""
        s = self.svm
        return {"layer": self.layer, "head": self.head, "space": self.space, "queries": self.queries,
                "tokens": self.tokens, "own_margin": self.own_margin, "infeasible": self.infeasible,
                "message": self.message,
                "correlation": self.correlation,
                "svm": None if s is None else {"status": s.status, "gap": s.gap, "objective": s.objective,
                                               "rank": s.rank, "support": int(s.support.sum()),
                                               "solve_time": s.solve_time}}


def head_svm(pretrained: Pretrained, record: Record, layer: int, head: int, *, queries: int = 200,
             norm: str = "fro", space: str = "head") -> HeadSVM:
    """Solve the Att-SVM of head `head` of layer `layer` (1-based) on the first `queries` real query rows of the
    record (texts in order), each with its text's keys (those it may attend to) and its own selection argmax_j s_ij.

    Returns:
        `HeadSVM`; the solver's certificates are in `svm` (duality gap) or `infeasible` (Farkas).
    """
    if not 1 <= layer <= pretrained.layers:
        raise ValueError(f"layer must be from 1 to {pretrained.layers}, got {layer}")
    if not 0 <= head < pretrained.heads:
        raise ValueError(f"head must be from 0 to {pretrained.heads - 1}, got {head}")
    if space not in ("head", "model"):
        raise ValueError(f"space must be 'head' or 'model', got {space!r}")
    if queries < 1:
        raise ValueError(f"queries must be ≥ 1, got {queries}")
    w = pretrained.family.weights(pretrained.family.layers(pretrained.model)[layer - 1], pretrained.heads)
    Qt = torch.cat([w.Wq[head], w.bq[head, :, None]], -1).double().cpu()
    Kt = torch.cat([w.Wk[head], w.bk[head, :, None]], -1).double().cpu()
    W = w.scaling * Kt.T @ Qt
    x = record.inputs[layer - 1].double().cpu()
    X = torch.cat([x, torch.ones_like(x[..., :1])], -1)  # (B, n, d+1)
    allowed = record.allowed[:, 0].cpu()  # (B, n, n)
    b, i = record.mask.cpu().nonzero(as_tuple=True)
    b, i = b[:queries], i[:queries]
    keys = allowed[b, i]  # (m, n)
    T = int(keys.sum(1).max())
    Xq, zq = X[b], X[b, i]  # (m, n, d+1), (m, d+1)
    scores = torch.einsum("mtd,de,me->mt", Xq, W, zq).masked_fill(~keys, float("-inf"))
    selection = scores.argmax(1)
    keep = keys.sum(1) >= 2  # a query with one key has nothing to separate (GPT-2's first token)
    Xq, zq, keys, selection, scores = Xq[keep], zq[keep], keys[keep], selection[keep], scores[keep]
    top = scores.gather(1, selection[:, None])
    others = scores.masked_fill(torch.nn.functional.one_hot(selection, scores.shape[1]).bool(), float("-inf"))
    own = float((top[:, 0] - others.amax(1)).min())
    if space == "head":  # keys and queries in the head's coordinates: W = K̃ᵀ M Q̃, the head's M = scaling · I
        Xq, zq = Xq @ Kt.T, zq @ Qt.T
        W = w.scaling * torch.eye(Qt.shape[0], dtype=torch.float64)
    try:
        svm = att_svm(Xq, zq, selection, norm=norm, mask=keys)
    except InfeasibleError as e:
        return HeadSVM(layer=layer, head=head, space=space, queries=int(keep.sum()), tokens=T, W=W, own_margin=own,
                       svm=None, infeasible=True, message=" ".join(str(e).split()), correlation=None)
    seen = slice(0, W.shape[0] - (space == "model"))  # rows the selections see (a constant key coordinate cancels)
    corr = float(correlation(W[seen], svm.W[seen]))
    return HeadSVM(layer=layer, head=head, space=space, queries=int(keep.sum()), tokens=T, W=W, own_margin=own,
                   svm=svm, infeasible=False, message=f"solved ({svm.status}), certified duality gap {svm.gap:.1e}",
                   correlation=corr)
