"""Tests of `hardmax.tables`: `markdown_table`, the one renderer of the library's tables."""

from __future__ import annotations

import pytest

from hardmax.tables import markdown_table


def test_the_docstrings_example():
    assert markdown_table(["d", "accuracy"], [(2, "0.833"), (16, "0.862")]) == [
        "| d | accuracy |", "|---|---|", "| 2 | 0.833 |", "| 16 | 0.862 |"]


def test_cells_are_str_of_anything_and_rows_may_be_any_iterable():
    rows = (row for row in [(None, 1.5, True)])
    assert markdown_table(["a", "b", "c"], rows)[2] == "| None | 1.5 | True |"


def test_a_table_without_rows_is_its_header_and_rule():
    assert markdown_table(["only"], []) == ["| only |", "|---|"]


@pytest.mark.parametrize("row", [(1,), (1, 2, 3)])
def test_a_row_of_another_length_is_one_line_naming_both_lengths(row):
    with pytest.raises(ValueError, match=rf"^a table row has {len(row)} cells, the header 2: ") as info:
        markdown_table(["a", "b"], [(1, 2), row])
    assert "\n" not in str(info.value)
