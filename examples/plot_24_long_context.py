"""
Long context: the critical temperature β_n = γ log n
====================================================

Chen, Lin, Polyanskiy and Rigollet (ICLR 2026) scale attention's inverse temperature with the context length,
β_n = γ log n, and show a phase transition for tokens whose pairwise cosines are ρ: below γ_c = 1/(1 − ρ) one
attention layer sends every token to one direction, above it attention is close to the identity. Here a sweep
(task `long_context`, one layer, ρ = 1/2, d = 64) measures the angle ratio λ = θ_out/θ_in over γ for n = 64 … 1,024
and locates where λ crosses 1/2, beside the exact simplex's finite-n value and the paper's limit γ_c = 2.
docs/dynamics.md reports the same over n = 64 … 4,096 and three dimensions d.
"""

import concurrent.futures
import tempfile

import numpy as np

import hardmax
from hardmax.experiments.long_context import transition
from hardmax.sweep import read_table

out = tempfile.mkdtemp()
grid = {"n": [64, 128, 256, 512, 1024], "gamma": [round(g, 2) for g in np.arange(1.0, 3.01, 0.2)], "d": [64],
        "seed": [0]}
with concurrent.futures.ThreadPoolExecutor(1) as executor:
    result = hardmax.sweep("long_context", grid, out=out, executor=executor, progress=False)
print(result.describe())

found = transition(read_table(out))
print(found.table())

fig = found.figure()
fig
