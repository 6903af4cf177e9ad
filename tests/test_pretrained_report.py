"""hardmax.pretrained.report: `read_texts` (a text, or a file of texts one per non-blank line, and its one-line
refusals) and `inspect_model` on a tiny BERT of conftest.py's `pretrained_dirs` writing its table and figures.
The command line around it (`hardmax inspect`) is test_cli_inspect.py's."""

from __future__ import annotations

import json

import pytest
from pretrained_models import TEXTS

from hardmax.pretrained.report import inspect_model, read_texts


def test_read_texts_reads_a_text_or_a_file_of_texts(tmp_path):
    assert read_texts("i loved it") == ["i loved it"]
    long = "a very long review " * 400  # too long for a path: still a text
    assert read_texts(long) == [long]
    path = tmp_path / "texts.txt"
    path.write_text("  first text \n\n   \nsecond text\n", encoding="utf-8")
    assert read_texts(str(path)) == ["first text", "second text"]


def test_read_texts_refuses_nothing_to_read_in_one_line(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    for source, message in ((str(blank), "holds no text"), ("   ", "the text is empty")):
        with pytest.raises(ValueError, match=message) as e:
            read_texts(source)
        assert "\n" not in str(e.value)


def test_inspect_model_writes_the_table_and_the_figures(pretrained_dirs, tmp_path):
    report = inspect_model(TEXTS, tmp_path / "out", model=str(pretrained_dirs["bert"]), steps=3, max_length=32)
    assert set(report.files) == {"table.md", "table.json", "views.png", "cosine_histogram.png", "selections.png",
                                 "particles.gif"}
    for name, path in report.files.items():
        assert path.parent == tmp_path / "out" and path.stat().st_size > 0, name
    assert report.svm is None and (report.inspection.texts, report.inspection.truncated) == (len(TEXTS), 0)
    assert report.run.head.layer == 1 and report.run.head.head == 0  # the middle of 2 layers, head 0
    table = json.loads(report.files["table.json"].read_text())
    assert table["svm"] is None and table["texts"] == len(TEXTS) and len(table["layers"]) == 3
    assert "| layer | mean_cosine |" in report.files["table.md"].read_text()
