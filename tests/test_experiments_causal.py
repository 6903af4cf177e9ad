"""`hardmax.experiments.causal`: random key-query matrices on the sphere under causal attention cluster at
x_1 (`causal_clustering`), and KPR 2024's Figure 2 claim, strong Rényi centres staying while clusters merge
(`causal_figure2`). The checks themselves (`hardmax.theory.causal`) are test_theory_causal.py's.
"""

from __future__ import annotations

import pytest

from hardmax.experiments.causal import causal_clustering, causal_figure2


def test_random_key_query_matrices_cluster_at_x1():
    check = causal_clustering(matrices=6, starts=2, n=12, t1=150.0)
    assert check.passed, check.value
    assert check.numbers["farthest_from_x1"] < 1e-2


@pytest.mark.slow
def test_kpr_figure2_strong_centres_stay_while_clusters_merge():
    fig2 = causal_figure2()
    check = fig2.check()
    assert check.passed, check.value
    assert int(fig2.centres.strong.sum()) >= 2
