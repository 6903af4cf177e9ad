"""hardmax.pretrained.measures: the three views (clustering, selection, coding) against direct computations, text
by text, from output_hidden_states, output_attentions and the weights, on conftest.py's `pretrained_model` (BERT, GPT-2,
ALBERT). Streaming over batches is test_pretrained_inspection.py's, a head's Att-SVM test_pretrained_svm.py's."""

from __future__ import annotations

import math

import torch
from pretrained_models import TEXTS

from hardmax.measures import coding_rate
from hardmax.pretrained import (
    ViewConfig,
    clustering,
    coding,
    record,
    selection,
    value_subspaces,
)
from hardmax.theory import cluster_counts


def _direct(p, texts):
    """Per text, from the model's own outputs: hidden states, attentions, attention inputs (no hooks)."""
    out = []
    for text in texts:
        enc = p.tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            o = p.model(**enc, output_hidden_states=True, output_attentions=True)
        layers = p.family.layers(p.model)
        inputs = [layer.ln_1(h) if p.family.name == "gpt2" else h for layer, h in zip(layers, o.hidden_states,
                                                                                         strict=False)]
        out.append((enc["input_ids"][0], [h[0] for h in o.hidden_states], [a[0] for a in o.attentions],
                    [x[0] for x in inputs]))
    return out


def test_clustering_and_selection_equal_a_direct_computation_text_by_text(pretrained_model):
    p = pretrained_model
    config = ViewConfig(bins=10, threshold=0.5)
    r = record(p, TEXTS)
    c = clustering(r, config, vocabulary=len(p.tokenizer))
    s = selection(r)
    weights = [p.family.weights(layer, p.heads) for layer in p.family.layers(p.model)]
    hist = torch.zeros_like(c.histogram)
    cosine = torch.zeros(p.layers + 1, dtype=torch.float64)
    rank = torch.zeros_like(cosine)
    clusters = torch.zeros_like(cosine)
    leaders = torch.zeros(p.layers, p.heads, dtype=torch.float64)
    mass, entropy, margin, rows = (torch.zeros_like(leaders) for _ in range(4))
    selected = torch.zeros_like(c.selected)
    for ids, hidden, attentions, inputs in _direct(p, TEXTS):
        n = len(ids)
        for layer, h in enumerate(hidden):
            u = torch.nn.functional.normalize(h, dim=-1)
            cos = u @ u.T
            off = cos[~torch.eye(n, dtype=torch.bool)]
            hist[layer] += torch.histc(off.clamp(-1, 1 - 1e-12), bins=10, min=-1, max=1).long()
            cosine[layer] += off.mean()
            sv = torch.linalg.svdvals(u)
            q = sv / sv.sum()
            rank[layer] += torch.exp(-(q * torch.log(q)).sum())
            clusters[layer] += cluster_counts(u, math.sqrt(2 - 2 * config.threshold))  # groups within the chord
        for layer in range(p.layers):
            w = weights[layer]
            x = inputs[layer]
            for h in range(p.heads):
                qh, kh = x @ w.Wq[h].T + w.bq[h], x @ w.Wk[h].T + w.bk[h]
                S = qh @ kh.T * w.scaling
                if p.family.causal:
                    S = S.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), -math.inf)
                P = attentions[layer][h]
                assert torch.allclose(torch.softmax(S, -1), P, atol=1e-12)
                for i in range(n):
                    top = S[i].max()
                    C = S[i] == top
                    leaders[layer, h] += float(C.sum() == 1 and C[i])
                    mass[layer, h] += P[i][C].sum()
                    entropy[layer, h] -= (P[i][P[i] > 0] * P[i][P[i] > 0].log()).sum()
                    selected[layer, h, ids[int(C.nonzero()[0])]] += 1
                    finite = S[i][torch.isfinite(S[i])].sort(descending=True).values
                    if len(finite) >= 2:
                        margin[layer, h] += finite[0] - finite[1]
                        rows[layer, h] += 1
    assert torch.equal(c.histogram, hist)
    assert torch.allclose(c.cosine, cosine, atol=1e-10)
    assert torch.allclose(c.rank, rank, atol=1e-8) and torch.equal(c.clusters, clusters)
    assert torch.allclose(c.leaders, leaders) and torch.allclose(c.mass, mass, atol=1e-12)
    assert torch.allclose(c.entropy, entropy, atol=1e-10)
    assert torch.equal(c.selected, selected)
    assert torch.allclose(s.margin, margin, atol=1e-10) and torch.equal(s.rows, rows)
    assert c.texts == len(TEXTS) and float(c.rows.sum()) == float(r.mask.sum()) * p.layers * p.heads


def test_coding_rates_and_mlp_sparsity_equal_a_direct_computation(pretrained_model):
    p = pretrained_model
    eps = 0.7
    r = record(p, TEXTS)
    weights = [p.family.weights(layer, p.heads) for layer in p.family.layers(p.model)]
    U = value_subspaces(weights)
    k = coding(r, U, ViewConfig(eps=eps))
    rate = torch.zeros(p.layers, dtype=torch.float64)
    comp = torch.zeros_like(rate)
    for *_, inputs in _direct(p, TEXTS):
        for layer in range(p.layers):
            u = torch.nn.functional.normalize(inputs[layer], dim=-1)
            n, d = u.shape
            rate[layer] += 0.5 * torch.logdet(torch.eye(d, dtype=u.dtype) + d / (n * eps**2) * u.T @ u)
            for h in range(p.heads):
                basis = U[layer, h]
                assert torch.allclose(basis.T @ basis, torch.eye(p.head_dim, dtype=basis.dtype), atol=1e-12)
                # the basis spans the rows of W_V^h
                Wv = weights[layer].Wv[h]
                assert torch.allclose(Wv @ basis @ basis.T, Wv, atol=1e-10)
                z = u @ basis
                comp[layer] += 0.5 * torch.logdet(torch.eye(p.head_dim, dtype=u.dtype)
                                                  + p.head_dim / (n * eps**2) * z.T @ z)
    assert torch.allclose(k.rate, rate, atol=1e-9) and torch.allclose(k.compression, comp, atol=1e-9)
    assert torch.allclose(coding_rate(torch.nn.functional.normalize(r.inputs[0], dim=-1), eps, mask=r.mask).sum(),
                          k.rate[0])
    # MLP activations recomputed from the layer's modules (BERT: intermediate(attention(x)); GPT-2: act(c_fc(ln_2));
    # ALBERT: activation(ffn(attention(x))))
    inactive = torch.zeros(p.layers, dtype=torch.float64)
    for layer, module in enumerate(p.family.layers(p.model)):
        for _, hidden, *_ in _direct(p, TEXTS):
            h = hidden[layer][None]
            with torch.no_grad():
                if p.family.name == "gpt2":
                    a = h + module.attn(module.ln_1(h))[0]
                    act = module.mlp.act(module.mlp.c_fc(module.ln_2(a)))
                elif p.family.name == "albert":  # the one shared layer: activation(ffn(attention(h)))
                    act = module.activation(module.ffn(module.attention(h)[0]))
                else:
                    act = module.intermediate(module.attention(h)[0])
            inactive[layer] += (act <= 0).double().mean(-1).sum()
    assert torch.allclose(k.inactive, inactive, atol=1e-9)
    assert k.tokens == int(r.mask.sum())
