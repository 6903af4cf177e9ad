"""Tests of `hardmax.inputs`: the one reader of the arrays users give (tokens, A) — BOMs, headers said aloud,
no row dropped without a word, .npy headers checked against the file before anything is allocated."""

from __future__ import annotations

import codecs

import numpy as np
import pytest

from hardmax.inputs import parse_matrix, read_array, read_matrix
from hardmax.memory import MemoryBudgetError

ROWS = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])


@pytest.mark.parametrize("bom, encoding", [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                                           (codecs.BOM_UTF16_BE, "utf-16-be")])
def test_a_byte_order_mark_keeps_every_row_and_is_said(tmp_path, bom, encoding):
    # The reliability pass: Excel's UTF-8 BOM made the first row unparsable, and it was dropped as a "header".
    path = tmp_path / "t.csv"
    path.write_bytes(bom + "1,0\n0,1\n-1,-1\n".encode(encoding))
    result = read_array(path, "tokens")
    np.testing.assert_array_equal(result.array, ROWS)
    assert result.header is None
    assert result.encoding == f"{encoding} with BOM"
    assert result.notes() == [f"{path}: read as {encoding} with BOM"]


def test_a_header_is_skipped_only_when_no_cell_is_a_number_and_said_aloud(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("x, y\n1,0\n0,1\n-1,-1\n")
    result = read_array(path)
    np.testing.assert_array_equal(result.array, ROWS)
    assert result.header == ("x", "y")
    assert "line 1 (x, y) is a header" in result.notes()[0]


@pytest.mark.parametrize("text, line, cell", [("1,O\n0,1\n", 1, "O"), ("1,0\n0,one\n", 2, "one"),
                                              ("x,1\n1,0\n", 1, "x"), ("1,0\n\n# c\n2,z\n", 4, "z")])
def test_a_line_that_is_not_numbers_is_an_error_naming_it_never_a_dropped_row(tmp_path, text, line, cell):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"line {line}: '{cell}' is not a number"):
        read_array(path)


@pytest.mark.parametrize("delimiter", [",", ";", "\t", " ", "  "])
def test_delimiters(tmp_path, delimiter):
    path = tmp_path / "t.txt"
    path.write_text("\n".join(delimiter.join(f"{v:g}" for v in row) for row in ROWS) + "\n")
    np.testing.assert_array_equal(read_array(path).array, ROWS)


def test_text_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"1,0\n0,1\n\xff\xfe1,2\n")
    with pytest.raises(ValueError, match="line 3 is not UTF-8"):
        read_array(path)


def test_an_npy_header_claiming_more_than_the_file_holds_is_refused_before_allocating(tmp_path):
    # The reliability pass: a 120-byte .npy whose header claims 10^10 elements made NumPy try 74.5 GiB.
    path = tmp_path / "big.npy"
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                                 "shape": (100_000, 100_000)})
        f.write(b"\0" * 16)
    assert path.stat().st_size < 200
    with pytest.raises(ValueError, match="describes 10,000,000,000 elements .* holds 16 bytes"):
        read_array(path, "tokens")


def test_a_cut_npy_is_refused(tmp_path):
    path = tmp_path / "cut.npy"
    np.save(path, ROWS)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ValueError, match="damaged or cut"):
        read_array(path)


def test_an_npy_beyond_the_memory_budget_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "t.npy"
    np.save(path, np.zeros((1000, 200)))
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1M")
    with pytest.raises(MemoryBudgetError, match="tokens file .* needs about 1.53 MiB"):
        read_array(path, "tokens")


@pytest.mark.parametrize("array, message", [(np.array([[True, False]]), "real numbers"),
                                            (np.array([[1 + 2j]]), "real numbers"),
                                            (np.zeros((2, 0)), "2-D array with at least one")])
def test_npy_that_are_not_real_matrices(tmp_path, array, message):
    path = tmp_path / "t.npy"
    np.save(path, array)
    with pytest.raises(ValueError, match=message):
        read_array(path)


def test_matrix_literals_and_files(tmp_path):
    np.testing.assert_array_equal(parse_matrix("2,0;0,1"), [[2, 0], [0, 1]])
    np.testing.assert_array_equal(parse_matrix("2 0; 0 1"), [[2, 0], [0, 1]])
    assert read_matrix("2,0;0,1").source == "literal"
    (tmp_path / "A.csv").write_bytes(codecs.BOM_UTF8 + b"2,0\n0,1\n")
    np.testing.assert_array_equal(read_matrix(str(tmp_path / "A.csv")).array, [[2, 0], [0, 1]])
    for bad, message in (("two", "cannot read A"), ("1,2;3", "rows of equal length"), ("", "cannot read A")):
        with pytest.raises(ValueError, match=message):
            read_matrix(bad, "A")
