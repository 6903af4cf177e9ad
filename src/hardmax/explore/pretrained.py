"""The explorer's page for a pretrained transformer: a text in, its layers and heads out (`hardmax.pretrained`).

    POST /api/pretrained  {text, layer?, head?} -> pretrained_view: the model, the text's tokens, the per-layer table,
                          each head's selections (argmax key of every token) and softmax mass on them, the cosine
                          histogram per layer, and one real head run as a particle system (its clusters)

The model (a directory, a cached hub name, or all-MiniLM-L6-v2 from its wheel) is loaded once, on the first request,
offline; a model that cannot be loaded is the request's one-line error. The page draws what it gets.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import torch

from hardmax.explore.requests import Limits, RequestError, TooLarge

__all__ = ["PretrainedModel", "PretrainedRequest", "pretrained_view"]

_KEYS = frozenset({"text", "layer", "head"})
MAX_TOKENS = 256  #: tokens of the text the page's view reads (longer texts are truncated, and said)


@dataclass(frozen=True)
class PretrainedRequest:
    """A text to inspect; `layer` (1-based, None: the middle one) and `head` (None: 0) of the particle run."""

    text: str
    layer: int | None = None
    head: int | None = None

    @classmethod
    def from_json(cls, body, limits: Limits) -> PretrainedRequest:
        """The request in the JSON object `body`; RequestError (one line) if not, TooLarge beyond `limits.text`."""
        if not isinstance(body, dict):
            raise RequestError(f"a pretrained request is a JSON object, got {type(body).__name__}")
        unknown = sorted(set(body) - _KEYS)
        if unknown:
            raise RequestError(f"unknown key(s) {', '.join(ascii(k)[:40] for k in unknown[:5])} in a pretrained "
                               "request (it takes text, layer, head)")
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("type or paste a text: the text is empty")
        if len(text) > limits.text:
            raise TooLarge(f"the text has {len(text):,} characters: this server reads at most {limits.text:,}")
        values = {}
        for name in ("layer", "head"):
            value = body.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1000):
                raise RequestError(f"{name} must be a small integer ≥ 0, got {ascii(value)[:40]}")
            values[name] = value
        return cls(text=text, **values)


class PretrainedModel:
    """The model the page inspects, loaded on first use (thread-safe), kept for the server's life."""

    def __init__(self, model: str | None = None):
        self.model, self._loaded, self._lock = model, None, threading.Lock()

    def get(self):
        """The loaded `hardmax.pretrained.Pretrained` (ValueError, one line, when it cannot be loaded)."""
        with self._lock:
            if self._loaded is None:
                from hardmax.pretrained import load

                self._loaded = load(self.model)
            return self._loaded


def pretrained_view(pretrained, request: PretrainedRequest, *, steps: int = 40) -> dict:
    """What the page shows for `request.text` (plain JSON values; see the module's docstring)."""
    from hardmax.pretrained import TruncationWarning, head_field, inspect, record, run_head

    L, H = pretrained.layers, pretrained.heads
    layer = max(1, L // 2) if request.layer is None else request.layer
    head = 0 if request.head is None else request.head
    if not 1 <= layer <= L:
        raise RequestError(f"layer must be from 1 to {L}, got {layer}")
    if not 0 <= head < H:
        raise RequestError(f"head must be from 0 to {H - 1}, got {head}")
    limit = min(MAX_TOKENS, pretrained.max_positions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        views = inspect(pretrained, [request.text], max_length=limit)
        r = record(pretrained, [request.text], max_length=limit)
    n = int(r.mask[0].sum())
    chosen = torch.stack([r.scores(a)[0].argmax(-1) for a in range(L)])[:, :, :n]  # (L, H, n) first argmax
    run = run_head(head_field(pretrained, r, layer, head), steps=steps, save_every=max(1, steps // 20))
    table = views.to_dict()
    return {"model": table["model"], "tokens": r.tokens[0], "truncated": bool(r.truncated[0]), "max_length": limit,
            "layers": table["layers"], "heads": table["heads"], "histogram": table["histogram"],
            "selections": chosen.tolist(), "head_run": run.to_dict()}
