"""
A phase diagram from a sweep table
==================================

`hardmax.sweep` runs a task on every cell of a grid and appends one row per cell to a Parquet table; rerun with the
same grid and only the missing cells run. Here the task is one β of the phase diagram of self-attention on the
sphere S² (`phase_cell`: uniform starts of n tokens, RK4 steps of the softmax flow, the fraction of starts in one
cluster at every tenth step), the grid six values of β, the executor a thread (a local Dask cluster, the default,
or any scheduler by address, run the same sweep: docs/sweeps.md). The table draws the diagram.
"""

import concurrent.futures
import tempfile

import hardmax
from hardmax.sweep import read_table
from hardmax.sweep.plots import phase_heatmap

out = tempfile.mkdtemp()
grid = {"beta": [0.0, 1.0, 2.0, 4.0, 6.0, 9.0], "starts": [24], "n": [16], "steps": [120]}
with concurrent.futures.ThreadPoolExecutor(1) as executor:
    result = hardmax.sweep("phase_cell", grid, out=out, executor=executor, progress=False)
print(result.describe())
table = read_table(out)
for row in sorted(table.select(["beta", "single_final", "solve_seconds"]).to_pylist(), key=lambda r: r["beta"]):
    print(f"β = {row['beta']:4.1f}: P(one cluster) at the end {row['single_final']:.2f} ({row['solve_seconds']:.2f} s)")

fig = phase_heatmap(table, title="P(one cluster) over (t, β): 24 starts of 16 tokens on S² per β")
fig
