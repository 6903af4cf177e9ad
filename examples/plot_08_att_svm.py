"""
Attention as a max-margin token selector (Att-SVM)
==================================================

Tarzanagh et al. (2023): for a softmax attention layer :math:`\\mathrm{softmax}(X W z)` trained by
gradient descent on :math:`W = KQ^\\top`, the direction :math:`W_k / \\|W_k\\|` converges to the solution
:math:`W^{mm}` of a hard-margin SVM that separates the selected token :math:`x_{\\alpha}` of each input
from the others:

.. math:: W^{mm} = \\arg\\min \\|W\\| \\quad \\text{s.t.} \\quad (x_{\\alpha} - x_t)^\\top W z \\ge 1 \\ \\text{for all } t \\ne \\alpha .

Descending on :math:`W` gives the Frobenius-norm SVM, descending on the pair :math:`(K, Q)` the
nuclear-norm one. As :math:`\\|W\\| \\to \\infty`, softmax becomes hardmax selection: the link to the
paper's layer. Here 20 random problems (the paper's synthetic setting), all seeds as one batch.
"""


from hardmax.experiments.svm import SyntheticConfig, run_synthetic
from hardmax.plots.svm import plot_correlations

result = run_synthetic(SyntheticConfig(n=6, T=8, d=10, seeds=20, iterations=1000))
print(result.table())                                  # correlation with W_mm along the descent

fig = plot_correlations(result)
fig  # hardmax.plots returns the Figure: shown here and in a notebook

# %%
# One problem by hand: the SVM itself, solved by Clarabel, and the tokens it supports.
import torch

import hardmax

torch.manual_seed(0)
X = torch.randn(4, 5, 3, dtype=torch.float64)        # 4 inputs of 5 tokens in R^3
z = torch.randn(4, 3, dtype=torch.float64)           # the query token of each input
selection = torch.zeros(4, dtype=torch.long)         # select token 0 of every input
svm = hardmax.att_svm(X, z, selection)
print(f"{svm.status}: ‖W_mm‖_F = {svm.objective:.3f}, {int(svm.support.sum())} support tokens")
print(svm.margins)                                   # (x_α − x_t)ᵀ W z: 1 on the support tokens, > 1 elsewhere
