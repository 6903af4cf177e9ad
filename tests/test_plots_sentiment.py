"""Tests of hardmax.plots.sentiment: leader-word bars, a review's tokens layer by layer, GIFs, saving.

The explanations come from small untrained classifiers (d = 2, and d = 5 for the projection) on a
review of the synthetic corpus of `corpus.py`, through `measures.explain_ids`, as the CLI builds them.
Figures are checked through what they contain (bars, labels, titles, frames), not pixels.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from corpus import sentiment_corpus
from matplotlib.colors import to_rgba
from PIL import Image

from hardmax import HardmaxClassifier, ModelConfig
from hardmax.explain import Explanation, explain_ids, project_review
from hardmax.plots import save_figure
from hardmax.plots.sentiment import animate_review, plot_leader_words, plot_review, shown_leaders

LAYERS = 3


@pytest.fixture(scope="module")
def corpus():
    return sentiment_corpus(12, min_length=16, max_length=24, seed=1)


def explained(corpus, d: int) -> tuple[HardmaxClassifier, Explanation]:
    torch.manual_seed(d)
    model = HardmaxClassifier(ModelConfig(vocab_size=corpus.vocab_size, d=d, layers=LAYERS)).eval()
    ids = corpus.ids[0][corpus.mask[0]]
    return model, explain_ids(model, ids, corpus.words)


@pytest.fixture(scope="module", params=[2, 5], ids=["d2", "d5"])
def review(corpus, request) -> tuple[HardmaxClassifier, Explanation]:
    return explained(corpus, request.param)


def _files(folder) -> list[str]:
    return sorted(os.listdir(folder))


# --------------------------------------------------------------------------------------------
# Leader words.
# --------------------------------------------------------------------------------------------

WORDS = [f"word{i}" for i in range(12)]


def _bars(ax) -> tuple[list[str], list[float]]:
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return labels, [p.get_width() for p in ax.patches]


def test_plot_leader_words_bars():
    counts = {"positive": Counter({2: 5, 3: 2, 10: 7}), "negative": Counter({5: 1, 6: 4})}
    fig = plot_leader_words(counts, WORDS, title="leaders")
    positive, negative = fig.axes
    # The most frequent word at the top: barh draws the list bottom-up.
    assert _bars(positive) == (["word3", "word2", "word10"], [2, 5, 7])
    assert _bars(negative) == (["word5", "word6"], [1, 4])
    assert positive.get_title() == "positive reviews" and negative.get_title() == "negative reviews"
    assert fig.get_suptitle() == "leaders"
    plt.close(fig)


def test_plot_leader_words_keeps_the_top():
    counts = {"positive": Counter({k: k for k in range(2, 12)}), "negative": Counter({4: 1})}
    fig = plot_leader_words(counts, WORDS, top=3)
    assert _bars(fig.axes[0]) == (["word9", "word10", "word11"], [9, 10, 11])
    plt.close(fig)


@pytest.mark.parametrize("counts", [{"positive": Counter(), "negative": Counter()}, {},
                                    {"positive": Counter({3: 2})}], ids=["empty", "missing", "one side"])
def test_plot_leader_words_with_empty_counters(counts, tmp_path):
    fig = plot_leader_words(counts, WORDS)
    assert len(fig.axes) == 2 and _bars(fig.axes[1]) == ([], [])
    assert _files(tmp_path) == [] and len(save_figure(fig, tmp_path / "bars", close=True)) == 2
    assert _files(tmp_path) == ["bars.pdf", "bars.png"]


# --------------------------------------------------------------------------------------------
# A review's tokens.
# --------------------------------------------------------------------------------------------


def test_explanation_is_interesting(review):
    """The fixture review has several leaders and followers, so every element is drawn."""
    _, explanation = review
    assert len(explanation.leaders) >= 2 and len(explanation.leaders) < len(explanation.words)
    assert any(explanation.follows.values())


def test_project_review_keeps_the_decision(review):
    """Theory: the projection keeps w·z̄ + b, so the pooled point's side of the line is the prediction."""
    model, explanation = review
    view = project_review(explanation, model)
    points, normal, offset = view.points, view.normal, view.offset
    trace = explanation.trace
    m = len(explanation.words)
    assert points.shape == (LAYERS + 1, m, 2) and normal.shape == (2,)
    weights = np.asarray(explanation.multiplicity, dtype=float)
    mean = (weights[:, None] * points[-1]).sum(0) / weights.sum()
    assert normal @ mean + offset == pytest.approx(float(trace.logits[0]), abs=1e-5)
    d = model.config.d
    if d == 2:  # the tokens themselves
        np.testing.assert_allclose(points, trace.tokens[:, 0].double().numpy(), atol=1e-12)
        np.testing.assert_allclose(normal, model.decoder.weight[0].detach().double().numpy(), atol=1e-12)
    else:  # first axis: along w/|w|; second: orthogonal to it
        w = model.decoder.weight[0].detach().double().numpy()
        z = trace.tokens[:, 0].double().numpy()
        np.testing.assert_allclose(points[..., 0], z @ (w / np.linalg.norm(w)), atol=1e-9)
        assert normal[1] == 0 and normal[0] == pytest.approx(np.linalg.norm(w))


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_plot_review_panels(review):
    model, explanation = review
    fig = plot_review(explanation, model, layers=(0, 1, 2, 8))  # 8 > LAYERS: clipped to the last layer
    assert [ax.get_title() for ax in fig.axes] == ["layer 0", "layer 1", "layer 2", f"layer {LAYERS}"]
    leader_words = sorted(explanation.words[i] for i in explanation.leaders)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(legend[:len(leader_words)]) == leader_words  # every leader named in the legend
    assert legend[len(leader_words):] == ["mean token (decided on)", "decision line v·z + b = 0",
                                          "positive half-plane", "negative half-plane"]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for ax in fig.axes:  # names beside stars: leaders only, none overlapping another
        assert {t.get_text() for t in ax.texts} <= set(leader_words)
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    title = fig.get_suptitle()
    assert title.startswith(explanation.label) and f"{len(explanation.leaders)} leaders" in title
    axes = "token coordinates" if model.config.d == 2 else "decoder direction × principal component"
    assert title.endswith(f"axes: {axes}")


def test_up_to_twenty_leaders_get_distinct_colours(corpus):
    """With many leaders (here every word made one), each drawn leader has its own colour up to 20."""
    model, explanation = explained(corpus, 2)
    many = dataclasses.replace(explanation, leaders=list(range(len(explanation.words))), follows={},
                               word_logits=[])
    stars = shown_leaders(many)
    assert len(stars) == len(explanation.words) > 12
    fig = plot_review(many, model, layers=(0, LAYERS))
    handles = fig.legends[0].legend_handles[:min(len(stars), 20)]
    colours = {tuple(np.round(to_rgba(h.get_markerfacecolor()), 3)) for h in handles}
    assert len(colours) == len(handles)
    assert not fig.axes[0].texts  # too many to name beside the stars: the legend names them


def test_when_every_word_leads_the_stars_are_the_decisive_leaders(corpus):
    model, explanation = explained(corpus, 5)
    every = dataclasses.replace(explanation, leaders=list(range(len(explanation.words))), follows={}, d=16)
    assert every.mostly_leaders
    decisive = float(np.median(np.abs(every.word_logits)))
    stars = shown_leaders(every, decisive)
    assert stars == every.decisive_leaders(decisive) and 0 < len(stars) < len(every.words)
    fig = plot_review(every, model, layers=(0, LAYERS), decisive=decisive)
    assert "almost every word is its own leader" in fig.get_suptitle()
    assert fig.legends[0].get_title().get_text().startswith("decisive leaders")


def test_animate_review_writes_a_gif(review, tmp_path):
    model, explanation = review
    path = animate_review(explanation, model, tmp_path / "review.gif", fps=4)
    assert path == tmp_path / "review.gif" and _files(tmp_path) == ["review.gif"]  # no temporary file left
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == LAYERS + 1 > 1
    assert plt.get_fignums() == []


# --------------------------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------------------------


def test_save_writes_png_and_pdf_atomically(corpus, tmp_path):
    model, explanation = explained(corpus, 2)
    fig = plot_review(explanation, model, layers=(0, LAYERS))
    paths = save_figure(fig, tmp_path / "figures" / "review", tight=True, close=True)
    assert paths == [tmp_path / "figures" / "review.png", tmp_path / "figures" / "review.pdf"]
    assert _files(tmp_path / "figures") == ["review.pdf", "review.png"]  # no temporary files left
    assert (tmp_path / "figures" / "review.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "figures" / "review.pdf").read_bytes()[:5] == b"%PDF-"
    assert plt.get_fignums() == []  # figures are plain `Figure`s: nothing is left open in pyplot


def test_a_failed_save_leaves_no_temporary_file_and_still_closes(tmp_path):
    fig = plot_leader_words({"positive": Counter({2: 1})}, WORDS)
    with pytest.raises(ValueError, match="not-a-format"):
        save_figure(fig, tmp_path / "bars", formats=("png", "not-a-format"), close=True)
    assert _files(tmp_path) == ["bars.png"]
    assert plt.get_fignums() == []


def test_tight_saving_crops_to_the_drawing(tmp_path):
    """Long labels past the canvas are kept by `tight=True`; the image size then differs."""
    fig = plot_leader_words({"positive": Counter({2: 3}), "negative": Counter({3: 1})}, WORDS)
    fig.text(1.02, 0.5, "a label outside the canvas")
    loose = save_figure(fig, tmp_path / "loose", formats=("png",))[0]
    tight = save_figure(fig, tmp_path / "tight", formats=("png",), tight=True, close=True)[0]
    with Image.open(loose) as a, Image.open(tight) as b:
        assert a.size == tuple(round(v * 150) for v in fig.get_size_inches())
        assert b.size[0] > a.size[0]  # grown to hold the outside label
