"""Tests of `hardmax.sweep.grid`: cells as typed, keyed and seeded data, and bad grids and specs refused in one
line before any work.
"""

from __future__ import annotations

import pytest
from sweep_cases import GRID, serial_executor

from hardmax.sweep import TASKS, cells, key, load_spec, sweep


def test_cells_are_typed_keyed_and_seeded_by_their_parameters():
    task = TASKS["simulate"]
    grid = cells(task, GRID)
    assert len(grid) == 8 and all(set(c) == set(task.parameters) for c in grid)
    again = cells(task, list(reversed([{k: c[k] for k in GRID} for c in grid])))
    assert {key(task, c): c["seed"] for c in grid} == {key(task, c): c["seed"] for c in again}  # not the order
    assert len({c["seed"] for c in grid}) == 8
    assert cells(task, [{"n": 4, "seed": 5}])[0]["seed"] == 5  # a seed given is kept


@pytest.mark.parametrize("grid, message", [
    ({"n": [4], "zz": [1]}, "takes no parameter 'zz'"),
    ({"layers": [3]}, "needs a value for 'n'"),
    ({"n": [4.5]}, "simulate.n must be an integer"),
    ({"n": [4], "causal": ["yes"]}, "simulate.causal must be true or false"),
    ({"n": []}, "grid parameter 'n' has no values"),
    ([{"n": 4}, {"n": 4}], "the same cell twice"),
    ("n=4", "a grid is a mapping"),
])
def test_a_bad_grid_is_refused_in_one_line_before_any_work(tmp_path, grid, message):
    with pytest.raises(ValueError, match=message):
        sweep("simulate", grid, out=tmp_path / "never", executor=serial_executor(), progress=False)
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        sweep("nope", {}, out=tmp_path, executor=serial_executor())


def test_a_spec_is_read_and_checked(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('task = "noop"\n[grid]\nx = [1, 2.5]\n[options]\nworkers = 2\n')
    task, grid, options = load_spec(spec)
    assert task.name == "noop" and [c["x"] for c in grid] == [1.0, 2.5] and options == {"workers": 2}
    for text, message in (('task = "noop"\n', "give either \\[grid\\]"), ('task = "noop"\n[grid\n', "not a TOML"),
                          ('task = "noop"\nwhat = 1\n[grid]\nx = [1]\n', "unknown key 'what'")):
        spec.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_spec(spec)
