"""hardmax.pretrained.families: each supported family's layers and head weights read from a tiny model of
conftest.py's `pretrained_dirs` (shapes, a head's share of the output projection summing to the projection, ALBERT's
one shared layer), and `check_config`'s one-line refusals of configurations the measures cannot read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from hardmax.pretrained import SUPPORTED, load
from hardmax.pretrained.families import FAMILIES


def test_the_families_are_what_the_loader_supports():
    assert tuple(FAMILIES) == SUPPORTED
    assert all(family.name == name for name, family in FAMILIES.items())
    assert [name for name, family in FAMILIES.items() if family.causal] == ["gpt2"]


@pytest.mark.parametrize("kind", SUPPORTED)
def test_head_weights_split_the_projections_by_head(pretrained_dirs, kind):
    p = load(pretrained_dirs[kind], dtype=torch.float64)
    family = p.family
    layers = family.layers(p.model)
    assert len(layers) == family.depth(p.model.config) == p.layers == 2
    assert (layers[0] is layers[1]) == (kind == "albert")  # ALBERT applies its one layer at every depth
    H, dh, d = p.heads, p.head_dim, p.width
    for layer in layers:
        w = family.weights(layer, H)
        for W, b in ((w.Wq, w.bq), (w.Wk, w.bk), (w.Wv, w.bv)):
            assert W.shape == (H, dh, d) and b.shape == (H, dh)
        assert w.Wo.shape == (H, d, dh) and w.bo.shape == (d,)
        output = family.modules(layer)[2]
        contexts = torch.randn(H, dh, dtype=torch.float64)
        with torch.no_grad():  # the heads' shares of the output projection add up to the projection
            direct = output(contexts.reshape(1, H * dh))[0]
        assert torch.allclose(torch.einsum("hdk,hk->d", w.Wo, contexts) + w.bo, direct, atol=1e-12)
        x = torch.randn(3, d, dtype=torch.float64)
        with torch.no_grad():
            outputs = [m(x[None]) for m in family.modules(layer)[1]]
        q, k, v = family.split(outputs, H)
        assert torch.allclose(q[0], torch.einsum("hed,nd->hne", w.Wq, x) + w.bq[:, None], atol=1e-12)
        assert torch.allclose(v[0], torch.einsum("hed,nd->hne", w.Wv, x) + w.bv[:, None], atol=1e-12)
        assert w.scaling == pytest.approx(dh ** -0.5)


def _config(**fields):
    base = dict(hidden_size=16, num_attention_heads=4, num_hidden_groups=1, inner_group_num=1)
    return SimpleNamespace(**(base | fields))


@pytest.mark.parametrize(("kind", "fields", "message"), [
    ("bert", dict(hidden_size=10), "width 10 is not a multiple of the 4 heads"),
    ("albert", dict(num_hidden_groups=2), "ALBERT with more than one layer group or inner layer is not supported"),
    ("bert", dict(embedding_size=8), "an embedding size different from the hidden size is not supported"),
    ("roberta", dict(is_decoder=True), "roberta configured as a decoder is not supported"),
])
def test_unreadable_configurations_are_refused_in_one_line(kind, fields, message):
    with pytest.raises(ValueError, match=message) as e:
        FAMILIES[kind].check_config(_config(**fields))
    assert "\n" not in str(e.value)
    FAMILIES[kind].check_config(_config())  # the same family's plain configuration passes
