"""
Figure 2: leaders reach a polytope, the others its faces
========================================================

Theorem 2.1 of the paper: every token converges; the leaders reach distinct vertices of a convex polytope
:math:`K` in finitely many layers, and every other token converges to a vertex of :math:`K` or to a point
of a finite set :math:`S \\subset \\partial K` of :math:`A`-norm projections of the origin onto faces of
:math:`K`. The library's dyadic versions of the paper's configurations (exact in floating point) are run,
checked against the theorem, and drawn as in the paper: stars are leaders, diamonds the points of :math:`S`.
"""


import hardmax
from hardmax.plots import figure2

configurations = hardmax.figure2_configurations()          # name -> (n, 2) float64 tokens
runs = {name: hardmax.simulate(tokens, alpha=hardmax.FIGURE2_ALPHA, layers=30)
        for name, tokens in configurations.items()}

for name, run in runs.items():
    report = hardmax.check_theorem(run)
    print(f"{name:>20}: {len(run.final)} tokens, Theorem 2.1 {'holds' if report.passed else 'FAILS'}")

fig = figure2(runs)
fig  # hardmax.plots returns the Figure: shown here and in a notebook

# %%
# The table of checks behind one verdict:
print(hardmax.check_theorem(runs["non_leader_clusters"]).table())
