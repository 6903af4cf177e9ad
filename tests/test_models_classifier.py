"""Tests of `hardmax.models.classifier`: `HardmaxClassifier` against a per-token reference loop (with and
without the authors' padding), the trained layer as `simulate`, masks, word order and batch company, shapes
and the trace, α (initial value, positivity, gradient, freezing) and the learned SPD matrix A.
"""

from __future__ import annotations

import math

import pytest
import torch
from corpus import PAD, sentiment_corpus
from models_cases import ATTENTION, VOCAB, make_model, random_batch

from hardmax import HardmaxClassifier, simulate
from hardmax.dynamics import Hardmax


def reference_logits(model: HardmaxClassifier, ids: torch.Tensor, mask: torch.Tensor, attention: str) -> torch.Tensor:
    """The classifier written out token by token, WITHOUT merging repeated words.

    z_i ← z_i + α/(1+α) (Σ_j P_ij z_j − z_i) over the real positions j (all positions with the
    paper's padding); hardmax P spreads evenly over the argmax set (every copy counted), softmax
    P_ij ∝ exp(β ⟨A z_i, z_j⟩). Then the mean over real tokens and the linear decoder.
    """
    config = model.config
    A = model.A_matrix().detach()
    alpha = float(model.alpha.detach())
    gamma = alpha / (1 + alpha)
    out = []
    for b in range(ids.shape[0]):
        real = torch.ones_like(mask[b]) if config.paper_padding else mask[b]
        z = model.embedding.weight.detach()[ids[b]].clone()
        n = z.shape[0]
        for _ in range(config.layers):
            new = z.clone()
            for i in range(n):
                if not real[i]:
                    continue  # padding neither attends nor moves
                keys = [j for j in range(n) if real[j]]
                s = torch.stack([z[i] @ A @ z[j] for j in keys])
                if attention == "hardmax":
                    # Copies of a word give bitwise-equal scores; the tolerance only guards rounding.
                    top = s.max()
                    chosen = [j for j, sj in zip(keys, s.tolist(), strict=True) if sj >= top - 1e-12 * abs(top)]
                    target = torch.stack([z[j] for j in chosen]).mean(0)
                else:
                    p = torch.softmax(config.beta * s, dim=0)
                    target = (p.unsqueeze(-1) * torch.stack([z[j] for j in keys])).sum(0)
                new[i] = z[i] + gamma * (target - z[i])
            z = new
        pooled = z[real].mean(0)
        out.append(model.decoder(pooled).squeeze(-1).detach())
    return torch.stack(out)


@pytest.mark.parametrize("attention, beta", [("hardmax", 1000.0), ("softmax", 1000.0), ("softmax", 0.5)])
@pytest.mark.parametrize("few_words", [False, True], ids=["varied", "repeats"])
@pytest.mark.parametrize("learn_A", [False, True], ids=["A=I", "A learned"])
def test_matches_per_token_reference(generator, attention, beta, few_words, learn_A):
    model = make_model(beta=beta, learn_A=learn_A, randomize_A=learn_A)
    ids, mask = random_batch(generator, few_words=few_words)
    got = model(ids, mask, rule=ATTENTION[attention])
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.detach(), reference_logits(model, ids, mask, attention), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_matches_reference_with_paper_padding(generator, attention):
    model = make_model(beta=2.0, paper_padding=True)
    ids, mask = random_batch(generator, few_words=True)
    got = model(ids, mask, rule=ATTENTION[attention])
    torch.testing.assert_close(got.detach(), reference_logits(model, ids, mask, attention), rtol=1e-10, atol=1e-10)


def test_long_review_of_few_words_matches_reference(generator):
    """A 40-token review made of 3 words: 3 merged tokens of multiplicities summing to 40."""
    model = make_model(beta=1.5)
    ids = torch.randint(2, 5, (2, 40), generator=generator)
    mask = torch.ones_like(ids, dtype=torch.bool)
    trace = model.trace(ids, mask, rule=None)
    assert trace.multiplicity.sum(-1).tolist() == [40.0, 40.0]
    assert int((trace.multiplicity > 0).sum(-1).max()) <= 3
    for attention in ("hardmax", "softmax"):
        torch.testing.assert_close(model(ids, mask, rule=ATTENTION[attention]).detach(),
                                   reference_logits(model, ids, mask, attention), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
@pytest.mark.parametrize("learn_A", [False, True], ids=["A=I", "A learned"])
@pytest.mark.parametrize("double", [True, False], ids=["float64", "float32"])
def test_trained_layer_is_simulate(generator, attention, learn_A, double):
    model = make_model(double=double, beta=3.0, learn_A=learn_A, randomize_A=learn_A, layers=6)
    corpus = sentiment_corpus(4, n_neutral=12, min_length=6, max_length=16, seed=3)
    trace = model.trace(corpus.ids, corpus.mask, rule=ATTENTION[attention])
    tol = {"rtol": 1e-10, "atol": 1e-10} if double else {"rtol": 1e-5, "atol": 1e-5}
    for b in range(len(corpus)):
        with torch.no_grad():
            tokens = model.embedding(corpus.ids[b][corpus.mask[b]])  # (n_real, d)
            traj = simulate(tokens, model.rule_named(attention), alpha=float(model.alpha.detach()),
                            layers=model.config.layers,
                            A=model.A_matrix())
        assert traj.final.dtype == tokens.dtype
        torch.testing.assert_close(trace.pooled[b].detach(), traj.final.mean(0), **tol)
        # Every layer, not only the last: expand the merged tokens back to positions.
        layer_means = (trace.multiplicity[b, None, :, None] * trace.tokens[:, b]).sum(1) / trace.multiplicity[b].sum()
        torch.testing.assert_close(layer_means.detach(), traj.tokens.mean(1), **tol)


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_ids_under_the_mask_are_ignored(generator, attention):
    model = make_model(beta=2.0)
    ids, mask = random_batch(generator, batch=6)
    other = ids.clone()
    other[~mask] = torch.randint(2, VOCAB, (int((~mask).sum()),), generator=generator)
    assert not torch.equal(other, ids)
    rule = ATTENTION[attention]
    torch.testing.assert_close(model(other, mask, rule=rule), model(ids, mask, rule=rule), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_paper_padding_lets_padded_positions_count(generator, attention):
    model = make_model(beta=2.0, paper_padding=True)
    ids, mask = random_batch(generator, batch=6)
    other = ids.clone()
    other[~mask] = torch.randint(2, VOCAB, (int((~mask).sum()),), generator=generator)
    changed = (other != ids).any(-1)
    assert changed.any()
    differs = ~torch.isclose(model(other, mask, rule=ATTENTION[attention]), model(ids, mask, rule=ATTENTION[attention]),
                             rtol=1e-9, atol=1e-12)
    assert torch.equal(differs, changed)


def test_paper_padding_pools_pad_tokens():
    """With the authors' padding, appending PAD tokens changes the logit; by default it does not."""
    real = torch.tensor([[3, 4, 5, 4]])
    padded = torch.tensor([[3, 4, 5, 4, PAD, PAD, PAD]])
    for paper_padding in (False, True):
        model = make_model(beta=2.0, paper_padding=paper_padding)
        a, b = model(real, rule=None), model(padded, rule=None)
        assert torch.isclose(a, b, rtol=1e-12, atol=1e-12).item() is (not paper_padding)


@pytest.mark.parametrize("attention", ["hardmax", "softmax"])
def test_word_order_and_batch_company_do_not_matter(generator, attention):
    """Pure attention with mean pooling is permutation invariant; a review's logit does not depend on
    which other reviews share its batch (nor on how much padding they force on it)."""
    model = make_model(beta=2.0)
    ids, mask = random_batch(generator, batch=4, n=10)
    logits = model(ids, mask, rule=ATTENTION[attention])
    perm = torch.randperm(10, generator=generator)
    torch.testing.assert_close(model(ids[:, perm], mask[:, perm], rule=ATTENTION[attention]), logits,
                               rtol=1e-12, atol=1e-12)
    for b in range(4):
        alone = ids[b : b + 1, mask[b]]
        torch.testing.assert_close(model(alone, rule=ATTENTION[attention]), logits[b : b + 1], rtol=1e-12, atol=1e-12)


def test_shapes_and_trace(generator):
    model = make_model(double=False, d=5, layers=3)
    ids, mask = random_batch(generator, batch=4, n=9)
    logits = model(ids, mask)
    assert logits.shape == (4,) and logits.dtype == torch.float32
    trace = model.trace(ids, mask, rule=Hardmax())
    m = trace.ids.shape[1]
    assert trace.multiplicity.shape == (4, m) and trace.index.shape == (4, 9)
    assert trace.tokens.shape == (4, 4, m, 5)  # (layers + 1, batch, m, d)
    assert trace.pooled.shape == (4, 5) and trace.logits.shape == (4,)
    assert trace.A is None
    # Multiplicities count real tokens only; each real position points at a token of its own word.
    assert torch.equal(trace.multiplicity.sum(-1), mask.sum(-1).float())
    assert torch.equal(torch.gather(trace.ids, 1, trace.index)[mask], ids[mask])
    assert torch.equal(trace.tokens[0], model.embedding(trace.ids))
    torch.testing.assert_close(trace.logits, model(ids, mask, rule=Hardmax()), rtol=0, atol=0)


def test_zero_layers_is_mean_embedding(generator):
    model = make_model(layers=0)
    ids, mask = random_batch(generator)
    pooled = model.trace(ids, mask).pooled
    expected = torch.stack([model.embedding.weight[ids[b][mask[b]]].mean(0) for b in range(ids.shape[0])])
    torch.testing.assert_close(pooled, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("alpha_init", [1e-6, 0.3, 1.0, 50.0])
def test_alpha_init_is_respected(alpha_init):
    model = make_model(alpha_init=alpha_init)
    assert math.isclose(float(model.alpha.detach()), alpha_init, rel_tol=1e-6)  # raw is stored in float32


@pytest.mark.parametrize("raw", [-30.0, -80.0, 40.0])
def test_alpha_stays_positive_and_has_a_gradient(generator, raw):
    model = make_model(beta=2.0)
    with torch.no_grad():
        model.alpha_raw.fill_(raw)
    assert float(model.alpha.detach()) > 0
    ids, mask = random_batch(generator)
    for attention in ("hardmax", "softmax"):
        model.zero_grad()
        model(ids, mask, rule=ATTENTION[attention]).sum().backward()
        grad = model.alpha_raw.grad
        assert grad is not None and torch.isfinite(grad) and grad != 0, (attention, grad)


def test_extreme_raw_alpha_stays_finite(generator):
    """float32 softplus underflows to 0 far below any value training reaches; nothing turns NaN."""
    model = make_model(double=False, beta=2.0)
    with torch.no_grad():
        model.alpha_raw.fill_(-1000.0)
    assert float(model.alpha.detach()) >= 0
    ids, mask = random_batch(generator)
    model(ids, mask, rule=None).sum().backward()
    assert torch.isfinite(model.alpha_raw.grad)


def test_alpha_can_be_frozen():
    model = make_model(learn_alpha=False)
    assert not model.alpha_raw.requires_grad
    assert all(p is not model.alpha_raw for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("factor", ["random", "zero", "rank one"])
def test_learned_A_is_spd(generator, factor):
    d = 4
    model = make_model(d=d, learn_A=True, A_eps=1e-3)
    with torch.no_grad():
        if factor == "random":
            model.A_factor.copy_(torch.randn(d, d, generator=generator, dtype=torch.float64))
        elif factor == "zero":
            model.A_factor.zero_()
        else:
            model.A_factor.copy_(torch.outer(torch.ones(d), torch.arange(1.0, d + 1)).double())
    A = model.A
    assert A.shape == (d, d)
    torch.testing.assert_close(A, A.T, rtol=0, atol=1e-12)
    assert torch.linalg.eigvalsh(A).min() >= 1e-3 * (1 - 1e-9)
    assert torch.equal(model.A_matrix(), A)


def test_learned_A_gets_a_gradient(generator):
    model = make_model(learn_A=True, randomize_A=True, beta=2.0)
    ids, mask = random_batch(generator)
    model(ids, mask, rule=None).sum().backward()
    assert model.A_factor.grad is not None and model.A_factor.grad.abs().sum() > 0


def test_identity_A_when_not_learned():
    model = make_model(d=3)
    assert model.A is None and model.A_factor is None
    assert torch.equal(model.A_matrix(), torch.eye(3, dtype=torch.float64))
