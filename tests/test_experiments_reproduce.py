"""Tests of `hardmax.experiments.reproduce`: the quick preset, overrides and `ReproduceConfig`'s refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hardmax.experiments.reproduce import ReproduceConfig, quick


def test_quick_preset_and_overrides():
    config = quick()
    assert config.label == "quick" and config.out_dir == config.report_dir == "runs/quick"
    assert config.data.limit == 5000 and config.train.epochs == 4 and config.dims == (2, 4, 8, 16)
    assert config.lrs == (0.01,) and ReproduceConfig().lrs == (0.01, 0.003)
    assert config.stopwords == ("nltk",) and ReproduceConfig().stopwords == ("nltk", "sklearn")
    assert quick(dims=(2,), progress=False).dims == (2,)
    full = ReproduceConfig()
    # The full run writes beside its runs; the repository's tracked results/ only when asked (--report-dir).
    assert full.label == "full" and full.report_dir == full.out_dir == "runs/reproduce" and full.data.limit is None


@pytest.mark.parametrize("changes, match", [({"dims": ()}, "dims"), ({"dims": (2, 0)}, "dims"),
                                            ({"confidence": 1.0}, "confidence"), ({"confidence": 0.4}, "confidence"),
                                            ({"lrs": ()}, "lrs"), ({"lrs": (0.01, 0.01)}, "lrs"),
                                            ({"lrs": (0.01, -1.0)}, "lrs"), ({"lrs": (float("nan"),)}, "lrs"),
                                            ({"lrs": (float("inf"),)}, "lrs"), ({"stopwords": ()}, "stopwords"),
                                            ({"stopwords": ("nltk", "spacy")}, "stopwords")])
def test_config_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        ReproduceConfig(**changes)
    with pytest.raises(ValueError, match=match):
        replace(quick(), **changes)  # variants derived from a preset are validated too
