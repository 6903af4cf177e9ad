"""
Exact ties at any depth
=======================

Points of :math:`S` that are not vertices of :math:`K` are reached only through exact ties: a token
equidistant, in score, from two leaders moves to the midpoint of a face and stays tied forever. A naive
floating-point argmax breaks such a tie by rounding after a few dozen layers and sends the token to a
vertex; hardmax decides ties by rule (★) (its engines' tie rule) and keeps it exact. Reference: the
same layer in exact rational arithmetic, where the follower stays tied and converges to the midpoint
:math:`(4, 2)` of the edge, a point of :math:`S`.
"""

from fractions import Fraction

import matplotlib.pyplot as plt
import torch

import hardmax

# Four leaders of norm 5, and a follower tied between the first two: <z, a> = <z, b> = 2 exactly.
tokens = [[5, 0], [3, 4], [-5, 0], [0, -5], [0.4, 0.2]]
layers, gamma = 200, Fraction(1, 3)                                      # α = 1/2: each step moves γ = 1/3

# Exact rational reference: C_i = argmax_j <z_i, z_j>, every tie kept.
exact = [[Fraction(str(x)) for x in z] for z in tokens]
for _ in range(layers):
    new = []
    for z in exact:
        scores = [z[0] * w[0] + z[1] * w[1] for w in exact]
        best = [w for w, s in zip(exact, scores, strict=True) if s == max(scores)]
        mean = [sum(w[k] for w in best) / len(best) for k in range(2)]
        new.append([z[k] + gamma * (mean[k] - z[k]) for k in range(2)])
    exact = new

# The naive float loop: softmax with a huge β is argmax up to rounding.
naive = torch.tensor(tokens, dtype=torch.float64)
path_naive = [naive]
for _ in range(layers):
    weights = torch.softmax(1e12 * naive @ naive.T, dim=-1)
    naive = naive + (weights @ naive - naive) / 3
    path_naive.append(naive)
path_naive = torch.stack(path_naive)

run = hardmax.simulate(torch.tensor(tokens, dtype=torch.float64), alpha=0.5, layers=layers)
reference = torch.tensor([[float(x) for x in z] for z in exact])
print("hardmax vs exact rationals, after", layers, "layers:", (run.final - reference).abs().max().item())
print("naive   vs exact rationals, after", layers, "layers:", (path_naive[-1] - reference).abs().max().item())

fig, ax = plt.subplots(figsize=(5, 5))
ax.plot(*path_naive[:, 4].T, "--", color="tab:orange", label="naive float argmax")
ax.plot(*run.tokens[:, 4].T, color="tab:blue", label="hardmax (rule ★)")
ax.scatter(*reference[:4].T, marker="*", s=200, color="tab:red", label="leaders")
ax.scatter(*reference[4:5].T, marker="D", s=60, facecolor="none", edgecolor="k", label="exact limit")
ax.set_aspect("equal")
ax.legend(fontsize=8)
plt.show()
