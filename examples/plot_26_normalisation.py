"""
Normalisation as speed regulation
=================================

Karagodin, Ge, Polyanskiy and Rigollet (NeurIPS 2025, arXiv 2510.22026) write a token as :math:`x_k = r_k\\theta_k`
(:math:`\\theta_k` on the sphere) and show that every common placement of the layer norm moves the directions by
the same attention, :math:`\\dot\\theta_k = s_k P^\\perp_{\\theta_k}(a_k)` with :math:`a_k = \\sum_j P_{kj}\\theta_j`,
at its own *speed* :math:`s_k`:

============  ===============================  ==========================================
scheme        layer                            speed :math:`s_k`
============  ===============================  ==========================================
Post-LN       x ← N(x + dt a(Nx))              1
Pre-LN        x ← x + dt a(Nx)                 1 / r_k (r_k grows with depth)
Peri-LN       x ← x + dt N(a(Nx))              1 / (r_k ‖a_k‖) (‖a_k‖ < 1 while tokens spread)
nGPT          x ← N(x + α dt (N(a(Nx)) − x))   α / ‖a_k‖ (unit tokens: never slows down)
Mix-LN        Post-LN, then Pre-LN             1 for 20 layers, then 1 / r_k
============  ===============================  ==========================================

N(y) = y/‖y‖. Each is a solver of `solve` (`PostLN(dt)`, `PreLN(dt)`, `PeriLN(dt)`, `NGPT(dt, alpha)`, `MixLN(dt,
switch)`) with a `Field` in R^d that supplies :math:`a_k`. `compare_normalisations` runs the five from the same 32
starts of 32 unit tokens in R^16 (softmax at β = 4, V = I, dt = 0.1, 2,000 layers: about 3–4 s on one core) and
`.check()` states the comparison: in the first layers Peri-LN and nGPT move the directions faster than Post-LN, and
Post-LN at least as fast as Pre-LN; in depth Post-LN and nGPT collapse (mean cosine ≥ 0.99) before Pre-LN and
Peri-LN, whose growing radii slow them down.
"""

import matplotlib.pyplot as plt

from hardmax.experiments.normalisation import compare_normalisations

comparison = compare_normalisations()
check = comparison.check()
print(check.status, "—", check.value)

names = {"post-ln": "Post-LN", "pre-ln": "Pre-LN", "peri-ln": "Peri-LN", "ngpt": "nGPT (α = 1)",
         "mix-ln": "Mix-LN (20 layers Post-LN)"}
colours = {"post-ln": "#1b9e77", "pre-ln": "#d95f02", "peri-ln": "#7570b3", "ngpt": "#e7298a", "mix-ln": "#666666"}
layers = comparison.layers.numpy()
fig, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 3.6), layout="constrained")
for scheme, name in names.items():
    left.plot(layers[1:], comparison.cosine[scheme].numpy()[1:], color=colours[scheme], label=name)
    middle.plot(layers[1:], comparison.radius[scheme].numpy()[1:], color=colours[scheme])
left.axhline(comparison.collapse, color="0.6", ls="--", lw=0.8)
left.set_xscale("log")
left.set_xlabel("layer")
left.set_ylabel("mean ⟨θ_i, θ_j⟩")
left.set_title("clustering: 1 is one cluster (collapse)")
left.legend(fontsize=7)
middle.set_xscale("log")
middle.set_yscale("log")
middle.set_xlabel("layer")
middle.set_ylabel("mean ‖x_k‖")
middle.set_title("the radii that slow Pre- and Peri-LN")
order = list(names)
right.bar(range(len(order)), [comparison.speed[s] for s in order], color=[colours[s] for s in order])
right.set_xticks(range(len(order)), [names[s].split(" ")[0] for s in order])
right.set_ylabel("mean ‖θ(t) − θ(0)‖ / t")
right.set_title(f"speed over the first {comparison.early} layers")

# %%
# What the run shows: over the first 5 layers the directions move at 0.195 (nGPT), 0.148 (Peri-LN), 0.113 (Post-LN
# and Mix-LN, identical there) and 0.101 (Pre-LN) per unit time; nGPT collapses at layer 360 and Post-LN at 420,
# while Pre-LN, Peri-LN and Mix-LN are still below 0.99 after 2,000 layers (mean cosine about 0.94, radii near 190).
# nGPT's α is held constant here; with the α it learns per layer its speed, and so its collapse, would differ.
