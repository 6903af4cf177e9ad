"""Tests of `hardmax.data.config`: the stop-word lists, `DataConfig`'s refusals and its reading of old run
records.
"""

from __future__ import annotations

import dataclasses

import pytest

from hardmax import data
from hardmax.data import DataConfig, clean_text

pytestmark = pytest.mark.usefixtures("no_global_paths")


def test_stop_word_lists() -> None:
    # NLTK's list (the paper's, the default) keeps "never", "nothing", "well" and "show", which
    # scikit-learn's longer list drops; both drop "not" and "no", and contractions lose their
    # apostrophe before the check.
    text = "I never liked the show, nothing works well. Not good, no. Don't!"
    assert clean_text(text) == ["never", "like", "show", "nothing", "work", "well", "good"]
    assert clean_text(text, stopwords="sklearn") == ["like", "work", "good"]
    assert clean_text(text, stopwords="none")[:3] == ["never", "like", "the"]
    assert clean_text(text, stopwords="nltk_keep_negations") == [
        "never", "like", "show", "nothing", "work", "well", "not", "good", "no", "dont"]
    nltk, sklearn = data.STOP_LISTS["nltk"], data.STOP_LISTS["sklearn"]
    kept = nltk - data.STOP_LISTS["nltk_keep_negations"]
    assert data.STOP_LISTS["nltk_keep_negations"] < nltk and {"not", "no", "nor", "dont", "isnt", "wasnt"} <= kept
    assert all(word in {"no", "nor", "not", "ain", "won", "wont", "shan", "shant"} or word.endswith(("n", "nt"))
               for word in kept)  # only negations are given back
    assert {"not", "no", "the", "very"} <= nltk & sklearn and {"dont", "wouldnt", "youre"} <= nltk
    assert {"never", "nothing", "well", "show"} <= sklearn - nltk and not data.STOP_LISTS["none"]
    with pytest.raises(ValueError, match="stopwords must be one of"):
        clean_text(text, stopwords="spacy")
    with pytest.raises(ValueError, match="stopwords must be one of"):
        data.DataConfig(stopwords="nltk179")


def test_config_from_a_run_record_reads_old_records() -> None:
    current = data.DataConfig(min_count=3, stopwords="sklearn", truncation="head_tail")
    record = {**dataclasses.asdict(current), "vocab_size": 120, "train": 10}
    assert data.DataConfig.from_record(record) == current
    assert data.DataConfig.from_record(record, path="x").path == "x"
    # Before the options existed: the first 128 tokens, scikit-learn's list (or none), a random hold-out.
    old = {k: v for k, v in record.items() if k not in ("stopwords", "truncation", "val_split")}
    assert data.DataConfig.from_record({**old, "remove_stopwords": True}) == dataclasses.replace(
        current, truncation="head", val_split="random")
    assert data.DataConfig.from_record({**old, "remove_stopwords": False}).stopwords == "none"


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="split"):
        DataConfig(split="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="val_fraction"):
        DataConfig(val_fraction=1.0)
    with pytest.raises(ValueError, match="max_len"):
        DataConfig(max_len=0)
    with pytest.raises(ValueError, match="truncation must be 'head' or 'head_tail'"):
        DataConfig(truncation="tail")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_vocab"):
        DataConfig(max_vocab=1)
    with pytest.raises(ValueError, match="min_count"):
        DataConfig(min_count=0)
    with pytest.raises(ValueError, match="limit"):
        DataConfig(limit=1)
