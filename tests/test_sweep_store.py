"""Tests of `hardmax.sweep.store`: part files written whole, read back one row per key (the first recorded) in key
order, the cells' outcomes, and a folder that holds no sweep refused in one line."""

from __future__ import annotations

import pytest

from hardmax.sweep.store import outcomes, read_table, write_part


def test_parts_read_back_one_row_per_key_in_key_order_with_their_outcomes(tmp_path):
    assert read_table(tmp_path).to_pylist() == [] and outcomes(tmp_path) == {}
    first = write_part(tmp_path, [{"key": "b", "x": 2.0, "error": None}, {"key": "a", "x": None, "error": "E: no"}])
    assert first.name == "part-b-2.parquet" and first.exists()
    write_part(tmp_path, [{"key": "c", "x": 3.0, "error": None}])
    write_part(tmp_path, [{"key": "ca", "x": 9.0, "error": None}, {"key": "b", "x": 7.0, "error": None}])  # b again
    rows = read_table(tmp_path).to_pylist()
    assert [r["key"] for r in rows] == ["a", "b", "c", "ca"] and rows[1]["x"] == 2.0  # the first record of b kept
    assert outcomes(tmp_path) == {"a": "E: no", "b": None, "c": None, "ca": None}
    with pytest.raises(ValueError, match="is not a sweep folder"):
        read_table(tmp_path / "nothing")
