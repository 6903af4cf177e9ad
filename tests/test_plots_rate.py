"""Tests of `hardmax.plots.rate`: `plot_rates` and `plot_crate_measures` drawn from hand-made results (the plots
read `RateReport` and `CrateMeasures` by their fields): one curve per model and attention, titles and labels."""

from __future__ import annotations

from types import SimpleNamespace

from hardmax.plots.rate import plot_crate_measures, plot_rates


def _rates(scale: float):
    return SimpleNamespace(layers=[0, 1, 2], compression=[1.0, 0.8 * scale, 0.5 * scale],
                           reduction=[0.1, 0.2 * scale, 0.3 * scale])


def _report(scale: float):
    return SimpleNamespace(classifier={"hardmax": _rates(scale), "softmax": _rates(scale / 2)},
                           simulated={"hardmax": _rates(scale / 3)},
                           leaders=SimpleNamespace(table={2: (10, 1.5), 1: (5, 2.0)}))


def test_plot_rates_draws_three_panels_for_every_model():
    fig = plot_rates({"d = 2": _report(1.0), "d = 4": _report(2.0)})
    rate, delta, leaders = fig.axes
    assert rate.get_title() == "scale-free coding rate of a review's tokens"
    assert delta.get_ylabel() == "ΔR (nats)" and leaders.get_xlabel() == "number of leaders"
    assert len(rate.lines) == len(delta.lines) == 2 * 3  # per model: the long run, hardmax, softmax
    assert [t.get_text() for t in rate.get_legend().get_texts()] == ["d = 2 (hardmax)", "d = 4 (hardmax)"]
    assert list(leaders.lines[0].get_xdata()) == [1, 2] and list(leaders.lines[0].get_ydata()) == [2.0, 1.5]


def test_plot_crate_measures_draws_compression_and_non_zeros_per_block():
    measures = {"d = 16, init": SimpleNamespace(compression=[3.0, 2.0], sparsity=[0.25, 0.5]),
                "d = 16, trained": SimpleNamespace(compression=[2.0, 1.0], sparsity=[0.5, 0.75])}
    fig = plot_crate_measures(measures)
    compression, non_zero = fig.axes
    assert compression.get_title() == "compression at each block's input" and non_zero.get_ylabel() == \
        "non-zero fraction"
    init, trained = non_zero.lines
    assert list(init.get_xdata()) == [1, 2] and list(trained.get_ydata()) == [0.5, 0.25]  # 1 − zeros
    assert init.get_linestyle() == ":" and trained.get_linestyle() == "-"
