"""Tests of `hardmax.dynamics.dedup`: identical tokens merged into one with a multiplicity, exactly (value equality,
-0.0 == 0.0), in blocks as in one pass, and through hash collisions."""

from __future__ import annotations

import torch

from hardmax.dynamics import deduplicate


def test_deduplicate_groups_equal_rows_exactly():
    z = torch.tensor([[[1.0, 2.0], [0.0, -0.0], [1.0, 2.0], [0.0, 0.0], [1.0, 2.0], [1.0, 2.0 + 2**-20]]])
    mask = torch.tensor([[True, True, True, True, False, True]])
    dedup = deduplicate(z, mask)
    assert torch.equal(dedup.expand(dedup.tokens), z)  # every token is recovered from its group
    index = dedup.index[0].tolist()
    assert index[0] == index[2] and index[1] == index[3]  # equal rows, and -0.0 == 0.0
    assert len({index[0], index[4], index[5]}) == 3  # a padding copy and a 1-ulp neighbour stay apart
    assert dedup.multiplicity[0, index].tolist() == [2, 2, 2, 2, 0, 1]


def test_deduplicate_in_blocks_matches_one_pass():
    """Large batches are grouped `block` sequences at a time and reassembled: the same groups, the
    same distinct tokens (zero-padded to the widest block) and weights as one pass."""
    g = torch.Generator().manual_seed(7)
    z = torch.randn(10, 12, 3, generator=g)
    z[:, 6:] = z[:, :6]  # duplicates
    z[:4, 1:] = z[:4, :1]  # four sequences with few distinct tokens: blocks of different widths
    mask = torch.rand(10, 12, generator=g) > 0.2
    whole, blocks = deduplicate(z, mask), deduplicate(z, mask, block=3)
    assert torch.equal(blocks.index, whole.index)
    assert torch.equal(blocks.tokens, whole.tokens) and torch.equal(blocks.multiplicity, whole.multiplicity)


def test_deduplicate_survives_hash_collisions(monkeypatch):
    """Tokens are grouped by a hash; when different tokens collide, the grouping must still be exact.
    A hash that sends everything to 0 (every pair collides, interleaved) forces the exact fallback."""
    import hardmax.dynamics.dedup as dedup_module

    g = torch.Generator().manual_seed(5)
    z = torch.randn(6, 20, 3, generator=g, dtype=torch.float64)
    z[:, 10:] = z[:, torch.randperm(10, generator=g)]  # every token twice, in interleaved order
    z[:, 3] = -z[:, 4]  # sign flips and swapped coordinates: structured near-collisions
    z[:, 5] = z[:, 6].flip(-1)
    mask = torch.rand(6, 20, generator=g) > 0.2
    honest = deduplicate(z, mask)
    monkeypatch.setattr(dedup_module, "hash_rows", lambda keys: torch.zeros(keys.shape[:2], dtype=torch.long))
    collided = deduplicate(z, mask)
    for dedup in (honest, collided):
        assert torch.equal(dedup.expand(dedup.tokens), z)
        same = (z.unsqueeze(2) == z.unsqueeze(1)).all(-1) & (mask.unsqueeze(2) == mask.unsqueeze(1))
        assert torch.equal(dedup.index.unsqueeze(2) == dedup.index.unsqueeze(1), same)  # groups = equal rows
    assert torch.equal(honest.multiplicity.sum(1), collided.multiplicity.sum(1))
