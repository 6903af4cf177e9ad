"""A real head as a particle system: its first step equals what the head contributes in the model's own forward pass
(captured by a hook on the output projection), with the biases; definiteness is said; the run clusters."""

from __future__ import annotations

import pytest
import torch
from pretrained_models import TEXTS, build

from hardmax.dynamics import Renormalised, Save, solve
from hardmax.pretrained import head_contribution, head_field, load, record, run_head


@pytest.fixture(scope="module", params=["bert", "gpt2", "distilbert", "albert"])
def model(request, tmp_path_factory):
    return load(build(request.param, tmp_path_factory.mktemp("f")), dtype=torch.float64)


def _forward_contributions(p, texts, layer):
    """(B, H, n, d) each head's contribution to the residual stream, from the model's forward pass: the output
    projection's input (the heads' contexts) captured by a hook, times that head's columns of the projection."""
    module = p.family.modules(p.family.layers(p.model)[layer - 1])[2]
    got = []
    handle = module.register_forward_pre_hook(lambda m, args: got.append(args[0]))
    try:
        enc = p.tokenizer(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            p.model(**enc)
    finally:
        handle.remove()
    context = got[layer - 1] if len(got) == p.layers else got[0]  # ALBERT: one module, called once per layer
    B, n, _ = context.shape
    context = context.view(B, n, p.heads, p.head_dim)
    w = p.family.weights(p.family.layers(p.model)[layer - 1], p.heads)
    return torch.einsum("hdk,bnhk->bhnd", w.Wo, context), w.bo


@pytest.mark.parametrize("layer", [1, 2])
def test_first_step_equals_the_heads_contribution_in_the_forward_pass(model, layer):
    p = model
    r = record(p, TEXTS)
    forward, bo = _forward_contributions(p, TEXTS, layer)
    assert torch.allclose(head_contribution(p, r, layer, 1), forward[:, 1], atol=1e-12)
    assert torch.allclose(head_contribution(p, r, layer, None), forward.sum(1) + bo, atol=1e-12)
    for text in (0, 3):
        for head in (0, 2, None):
            hf = head_field(p, r, layer, head, text=text)
            if p.family.name == "albert" and layer == 1:
                # ALBERT's first layer reads a linear map of the normalised embeddings, not a layer norm's output:
                # the tokens' norms differ, the field is not exact there, and it says so
                assert hf.norm_spread > 1e-6
                continue
            # a fresh model's layer norms have unit gain and no bias: every token has norm ρ
            assert hf.norm_spread < 1e-9
            m = hf.mask
            c = (forward[text, head] if head is not None else forward[text].sum(0) + bo)[m]
            z = hf.tokens.unsqueeze(0)
            n = z.shape[1]
            field = hf.field.restricted(torch.ones(1, n, n, dtype=torch.bool).tril()) if hf.causal else hf.field
            drift = field.targets(0.0, z, m.to(z.dtype).unsqueeze(0))
            if hf.field.value is not None:
                drift = drift @ hf.field.value.T
            assert torch.allclose(drift[0, m, :-1] * hf.radius, c, atol=1e-10)
            # the first step of solve: the residual connection, then back to the sphere
            if hf.causal:
                sol = run_head(hf, steps=1).solution
            else:
                sol = solve(hf.field, Renormalised(1.0), z, steps=1, save=Save(), mask=m.unsqueeze(0))
            x = hf.tokens[m, :-1] + c / hf.radius
            expected = x / x.norm(dim=-1, keepdim=True)
            assert torch.allclose(sol.tokens[1, 0, m, :-1], expected, atol=1e-10)
            assert torch.all(sol.tokens[1, 0, :, -1] == 1)


def test_the_head_is_not_positive_definite_and_says_so(model):
    r = record(model, TEXTS)
    hf = head_field(model, r, 1, 0)
    pos, neg, zero = hf.signature
    assert pos + neg + zero == model.width + 1 and not hf.definite
    assert zero >= model.width + 1 - 2 * (model.head_dim + 1)  # rank of sym(Q̃ᵀK̃) ≤ 2 (d_h + 1)
    run = run_head(hf, steps=30)
    d = run.to_dict()
    assert "not positive definite" in d["note"] and d["positive_definite"] is False
    assert sum(c["size"] for c in run.clusters) == int(hf.mask.sum())
    assert sum(n for _, n in run.selections) == int(hf.mask.sum())
    norms = run.solution.tokens[:, 0, hf.mask, :-1].norm(dim=-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-12)


def test_bad_layer_head_or_text_is_one_line(model):
    r = record(model, TEXTS)
    for kwargs, message in (({"layer": 0}, "layer must be from 1 to 2"), ({"layer": 1, "head": 9}, "head must be"),
                            ({"layer": 1, "text": 7}, "text must be from 0 to 3")):
        with pytest.raises(ValueError, match=message):
            head_field(model, r, **kwargs)
