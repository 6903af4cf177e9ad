"""
Softmax tends to hardmax as β grows
===================================

Softmax attention with inverse temperature :math:`\\beta` weighs token :math:`j` by
:math:`e^{\\beta\\langle A z_i, z_j\\rangle}`; as :math:`\\beta \\to \\infty` the weights concentrate on
the argmax set :math:`C_i`, and the softmax layer becomes the hardmax layer. The paper's classifier is
trained with softmax at :math:`\\beta = 1000` and run with exact hardmax. Here the distance between the
two trajectories of the same 30 tokens, after 20 layers, for growing :math:`\\beta`.
"""

import matplotlib.pyplot as plt
import torch

import hardmax

torch.manual_seed(1)
tokens = torch.randn(30, 2, dtype=torch.float64)
hard = hardmax.simulate(tokens, alpha=0.5, layers=20).tokens             # (21, 30, 2)

betas = torch.logspace(-1, 3, 17).tolist()
gaps = []
for beta in betas:
    soft = hardmax.simulate(tokens, hardmax.Softmax(beta=beta), alpha=0.5, layers=20).tokens
    gaps.append((soft - hard).norm(dim=-1).max().item())                 # worst token, any layer
    print(f"beta = {beta:8.2f}: max distance to hardmax {gaps[-1]:.2e}")

fig, ax = plt.subplots(figsize=(5.5, 3.8))
ax.loglog(betas, gaps, "o-")
ax.set_xlabel("β (inverse temperature)")
ax.set_ylabel("max |softmax − hardmax| over tokens and layers")
ax.set_title("20 layers, 30 tokens, α = 1/2")
fig.tight_layout()
plt.show()

# %%
# The gap falls by about an order of magnitude each time β doubles past a threshold set by the score
# gaps between a token's best and second-best candidates; at the paper's β = 1000 it is of order 1e-4
# here, which is why the softmax-trained classifier can be read with exact hardmax (their predictions
# agree on 99.98 % of the test reviews).
