"""
Who attracts whom: the geometry of one layer
============================================

In a hardmax layer token :math:`z_i` attends to the tokens with the largest score
:math:`\\langle A z_i, z_j\\rangle`: the tokens that lie furthest along the direction :math:`A z_i`
(the paper's Figure 1). Changing the symmetric positive definite matrix :math:`A` turns that direction,
and so changes who attracts whom. Here the same twelve tokens under :math:`A = I` and under an
anisotropic :math:`A`; each arrow goes from a token to the mean of its attention set :math:`C_i`, the
point it moves towards, and stars mark the leaders (:math:`C_i = \\{i\\}`).
"""

import matplotlib.pyplot as plt
import torch

import hardmax

torch.manual_seed(3)
tokens = torch.randn(12, 2, dtype=torch.float64)
matrices = {"A = I": torch.eye(2, dtype=torch.float64),
            "A = diag(4, 1/4)": torch.diag(torch.tensor([4.0, 0.25], dtype=torch.float64))}

fig, axes = plt.subplots(1, 2, figsize=(9, 4.5), sharex=True, sharey=True)
for ax, (name, A) in zip(axes, matrices.items(), strict=True):
    sets = hardmax.attention_sets(tokens, A=A)          # (n, n) bool: row i is C_i (ties kept)
    targets = (sets.double() @ tokens) / sets.sum(1, keepdim=True)
    leaders = hardmax.find_leaders(tokens, A=A)
    for z, target in zip(tokens, targets, strict=True):
        ax.annotate("", xy=target.tolist(), xytext=z.tolist(),
                    arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8})
    ax.scatter(*tokens[~leaders].T, s=25, color="tab:blue", label="followers")
    ax.scatter(*tokens[leaders].T, s=160, marker="*", color="tab:red", label="leaders")
    ax.set_title(f"{name}: {int(leaders.sum())} leaders")
    ax.set_aspect("equal")
axes[0].legend(loc="lower left")
fig.tight_layout()
plt.show()

# %%
# A leader is the token that lies furthest along its own direction :math:`A z_i`, so it is a vertex of
# the tokens' convex hull (the one that direction exposes); not every vertex leads. Stretching the first
# axis favours the tokens far out along it: here two leaders remain.
