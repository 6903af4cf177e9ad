"""What one forward pass of a batch of texts records, through the model's own modules.

    record(pretrained, texts) -> Record: hidden states (L+1, B, n, d), per layer the attention's input x (L, B, n, d),
        queries, keys, values (B, H, n, d_h), attention weights (B, H, n, n), MLP activations (B, n, d_ff),
        the padding mask (B, n) and the token strings; scores(l) = scaling · q kᵀ (−inf off the mask) on demand.

The queries, keys and values are the outputs of the model's projection modules (forward hooks on the q/k/v `Linear`
layers, GPT-2's fused `Conv1D`), the attention weights are the model's own (`output_attentions` with eager
attention), the MLP activation the input of the MLP's second projection (a forward pre-hook). Texts longer than the
model's positions are truncated, and the record says which (`truncated`). Reductions over many texts stream one
`Record` at a time (`hardmax.pretrained.measures`): nothing here keeps more than one batch.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from hardmax.pretrained.loader import Pretrained

__all__ = ["Record", "TruncationWarning", "record"]


class TruncationWarning(UserWarning):
    """Texts were longer than the model's positions (or the `max_length` asked) and were truncated."""


class _Stacked:
    """A `Record` attribute that stacks one of its per-layer tuples, (L, ...), on first use, then keeps it."""

    def __init__(self, key: str, doc: str):
        self.key, self.__doc__ = key, doc

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, record, owner=None):
        if record is None:
            return self
        stacked = torch.stack(record.per_layer[self.key])
        record.__dict__[self.name] = stacked  # the instance's own attribute from now on (a frozen dataclass's too)
        return stacked


@dataclass(frozen=True, eq=False)
class Record:
    """One batch through a pretrained model (tensors on the model's device, its dtype).

    Attributes:
        ids: (B, n) int64 token ids. mask: (B, n) bool, True for real tokens. tokens: the token strings, one list
        per text (real tokens only). truncated: (B,) bool, the texts cut at `max_length`.
        hidden: (L+1, B, n, d) hidden states (embeddings, then each layer's output).
        inputs: (L, B, n, d) each layer's attention input x (BERT: the layer's input; GPT-2: ln_1 of it).
        per_layer: {"queries", "keys", "values": L × (B, H, n, d_h), "attention": L × (B, H, n, n) the model's
        attention weights, "mlp": L × (B, n, d_ff) the MLP's activations}, as the model made them (one layer at a
        time: the views read them so, and stacking them would copy half a gigabyte per MiniLM batch);
        `queries`, `keys`, `values`, `attention`, `mlp` are those stacked (L, ...), made on first use.
        scaling: (L,) each layer's score factor. causal: decoder attention (GPT-2).
    """

    ids: Tensor
    mask: Tensor
    tokens: list[list[str]]
    truncated: Tensor
    hidden: Tensor
    inputs: Tensor
    per_layer: dict[str, tuple[Tensor, ...]]
    scaling: tuple[float, ...]
    causal: bool

    @property
    def layers(self) -> int:
        """L, the layers recorded."""
        return len(self.scaling)

    @property
    def heads(self) -> int:
        """H, the heads of a layer."""
        return self.per_layer["queries"][0].shape[1]

    queries = _Stacked("queries", "(L, B, H, n, d_h) the queries, stacked")
    keys = _Stacked("keys", "(L, B, H, n, d_h) the keys, stacked")
    values = _Stacked("values", "(L, B, H, n, d_h) the values, stacked")
    attention = _Stacked("attention", "(L, B, H, n, n) the model's attention weights, stacked")
    mlp = _Stacked("mlp", "(L, B, n, d_ff) the MLP's activations, stacked")

    @functools.cached_property
    def allowed(self) -> Tensor:
        """(B, 1, n, n) bool: query i may attend to key j (both real; j ≤ i when causal); made once."""
        m = self.mask[:, None, None, :] & self.mask[:, None, :, None]
        if self.causal:
            n = self.mask.shape[1]
            m = m & torch.ones(n, n, dtype=torch.bool, device=m.device).tril()
        return m

    def scores(self, layer: int) -> Tensor:
        """(B, H, n, n) the scores s_ij = scaling · ⟨q_i, k_j⟩ of layer `layer` (0-based), −inf where not allowed
        (the model's own order of operations: q kᵀ, then the scaling)."""
        s = torch.matmul(self.per_layer["queries"][layer], self.per_layer["keys"][layer].transpose(-1, -2))
        return s.mul_(self.scaling[layer]).masked_fill_(~self.allowed, -math.inf)


@contextmanager
def _hooks(pretrained: Pretrained):
    """Forward hooks on every layer's projections and MLP; yields the dict of captured lists (per module)."""
    captured: dict[int, list] = {}
    handles = []
    seen = set()

    def keep_output(module, args, output):
        captured.setdefault(id(module), []).append((args[0], output))

    def keep_input(module, args):
        captured.setdefault(id(module), []).append(args[0])

    try:
        for layer in pretrained.family.layers(pretrained.model):
            _, projections, _, mlp = pretrained.family.modules(layer)
            for m in projections:
                if id(m) not in seen:
                    handles.append(m.register_forward_hook(keep_output))
                    seen.add(id(m))
            if id(mlp) not in seen:
                handles.append(mlp.register_forward_pre_hook(keep_input))
                seen.add(id(mlp))
        yield captured
    finally:
        for h in handles:
            h.remove()


def _tokenise(pretrained: Pretrained, texts: Sequence[str], max_length: int | None):
    limit = pretrained.max_positions if max_length is None else int(max_length)
    if not 2 <= limit <= pretrained.max_positions:
        raise ValueError(f"max_length must be from 2 to the model's {pretrained.max_positions} positions, got {limit}")
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a list of strings")
    if not texts:
        raise ValueError("no texts to record")
    enc = pretrained.tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=limit,
                               padding=True, return_tensors="pt")
    if not bool(enc["attention_mask"].any(1).all()):
        raise ValueError("a text gives no tokens at all (an empty text for a model without special tokens)")
    # one tokenisation: the fast tokenizer keeps what truncation cut off in each encoding's `overflowing`
    truncated = torch.tensor([bool(e.overflowing) for e in enc.encodings], dtype=torch.bool)
    return enc, truncated, limit


def record(pretrained: Pretrained, texts: Sequence[str], *, max_length: int | None = None) -> Record:
    """Run a batch of texts through the model and record what the three views need (see `Record`).

    Args:
        pretrained: from `hardmax.pretrained.loader`. texts: B strings.
        max_length: the most tokens per text (special tokens included); None: the model's positions. Longer texts
            are truncated: `Record.truncated` says which, and a `TruncationWarning` says how many.

    Returns:
        `Record` of the batch (one forward pass, no gradients).
    """
    enc, truncated, limit = _tokenise(pretrained, texts, max_length)
    if bool(truncated.any()):
        warnings.warn(f"{int(truncated.sum())} of {len(texts)} texts were longer than {limit} tokens and were "
                      "truncated", TruncationWarning, stacklevel=2)
    device = pretrained.device
    ids = enc["input_ids"].to(device)
    mask = enc["attention_mask"].to(device).bool()
    family = pretrained.family
    layers = family.layers(pretrained.model)
    with torch.no_grad(), _hooks(pretrained) as captured:
        out = pretrained.model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True,
                               output_attentions=True)
    calls: dict[int, int] = {}
    inputs, queries, keys, values, mlp, scaling = [], [], [], [], [], []
    for layer in layers:
        attention, projections, _, mlp_module = family.modules(layer)
        k = calls.get(id(layer), 0)
        calls[id(layer)] = k + 1
        got = [captured[id(m)][k] for m in projections]
        inputs.append(got[0][0])
        q, kk, v = family.split([o for _, o in got], pretrained.heads)
        queries.append(q)
        keys.append(kk)
        values.append(v)
        mlp.append(captured[id(mlp_module)][k])
        scaling.append(float(attention.scaling))
    convert = pretrained.tokenizer.convert_ids_to_tokens
    tokens = [convert(row[m].tolist()) for row, m in zip(ids.cpu(), mask.cpu(), strict=True)]
    per_layer = {"queries": tuple(queries), "keys": tuple(keys), "values": tuple(values),
                 "attention": tuple(out.attentions), "mlp": tuple(mlp)}
    return Record(ids=ids, mask=mask, tokens=tokens, truncated=truncated, hidden=torch.stack(out.hidden_states),
                  inputs=torch.stack(inputs), per_layer=per_layer, scaling=tuple(scaling), causal=family.causal)
