"""Tests of `hardmax.dynamics.save`: which steps a `Save` keeps (closed forms of `indices`), that a run keeps exactly
those states (and P at each when asked), and a one-line ValueError for every bad choice."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokens import gaussian

from hardmax.dynamics import Save, Softmax, simulate


def test_simulate_saves_what_save_says():
    z = gaussian((3, 6, 2), 19)
    every = simulate(z, alpha=0.5, layers=9).tokens
    for save, steps in ((Save(), range(10)), (Save(every=4), (0, 4, 8, 9)), (Save.final(), (0, 9))):
        run = simulate(z, alpha=0.5, layers=9, save=save)
        assert run.steps == tuple(steps) and torch.equal(run.tokens, every[list(steps)])
    with_p = simulate(z, Softmax(1.0), alpha=0.5, layers=3, save=Save(every=2, attention=True))
    full = simulate(z, Softmax(1.0), alpha=0.5, layers=3, save=Save(attention=True))
    assert torch.equal(with_p.attention, full.attention[[0, 2, 3]]) and full.attention.shape[0] == 4
    with pytest.raises(ValueError, match="adaptive"):
        simulate(z, alpha=0.5, layers=3, save=Save(times=(1.0,)))


@pytest.mark.parametrize(("save", "steps", "indices"), [
    (Save(), 3, (0, 1, 2, 3)),
    (Save(every=4), 9, (0, 4, 8, 9)),  # every 4th step, and the last
    (Save(every=3), 9, (0, 3, 6, 9)),  # the last is a multiple: kept once
    (Save(every=20), 9, (0, 9)),
    (Save.final(), 9, (0, 9)),
    (Save.final(), 0, (0,)),  # no step: the start is the end
    (Save(every=np.int64(2)), 4, (0, 2, 4)),  # NumPy integers, as a sweep's grid gives them
])
def test_the_saved_steps_are_every_kth_and_the_last(save, steps, indices):
    assert save.indices(steps) == indices


def test_times_are_kept_as_a_tuple_of_floats_and_final_keeps_attention():
    assert Save(times=np.array([0, 0.5, 2])).times == (0.0, 0.5, 2.0)
    assert Save.final(attention=True) == Save(every=None, attention=True)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Save(every=0), "every=k"),
    (lambda: Save(every=True), "every=k"),
    (lambda: Save(every=2.5), r"Save\(every=k\) needs an integer k ≥ 1 \(or Save.final\(\)\), got 2.5"),
    (lambda: Save(times=(1.0, 0.5)), "increasing"),
    (lambda: Save(times=()), "increasing finite times ≥ 0"),
    (lambda: Save(times=(-1.0, 1.0)), "increasing finite times ≥ 0"),
    (lambda: Save(times=(0.5, math.inf)), "increasing finite times ≥ 0"),
])
def test_a_bad_choice_gets_a_one_line_error(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)
