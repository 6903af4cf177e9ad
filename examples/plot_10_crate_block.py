"""
A CRATE block: compress, then sparsify
======================================

CRATE (Yu et al. 2023) derives a transformer block from the rate-reduction objective: a *multi-head
subspace self-attention* (MSSA) step lowers the coding rate of the tokens against learned subspaces
:math:`U_k \\in \\mathbb{R}^{d \\times p}` (tokens :math:`Z \\in \\mathbb{R}^{N \\times d}` as rows),

.. math:: R^c(Z \\mid U) = \\sum_k \\tfrac12 \\log\\det\\Big(I + \\frac{p}{N\\varepsilon^2} (Z U_k)^\\top (Z U_k)\\Big),

and one ISTA step makes the tokens sparse. In the derivation's form (``CrateBlocks(mode="faithful",
ista=False)``) with one head, :math:`U = I` and hardmax attention, MSSA is the paper's layer with
:math:`A = I`; the default follows the authors' code. Here a small CRATE classifier (:math:`d = 8`, 8 blocks)
is trained on 5,000 IMDb reviews for five epochs, and each block's compression and sparsity are measured at
initialisation and after training.
"""

import tempfile

import hardmax
from hardmax.data import load_imdb
from hardmax.experiments.rate import crate_measures
from hardmax.experiments.reproduce import quick
from hardmax.plots.rate import plot_crate_measures
from hardmax.training import initial_model

data = load_imdb(quick().data, progress=False)                          # 5,000 + 5,000 reviews
model_config = hardmax.ModelConfig(vocab_size=len(data.vocab), d=8, crate=hardmax.CrateBlocks())
train_config = hardmax.TrainConfig(epochs=5, lr=3e-3, select_on="softmax")
with tempfile.TemporaryDirectory() as run_dir:
    result = hardmax.train(data.train, data.val, model_config=model_config, train_config=train_config,
                           run_dir=run_dir, vocab=data.vocab, progress=False)
print(f"validation accuracy (softmax): {result.best_val_accuracy:.3f}")

reviews = data.test.ids[:1000], data.test.mask[:1000]
measures = {"d = 8, initialisation": crate_measures(initial_model(model_config, train_config).eval(), *reviews),
            "d = 8, trained": crate_measures(result.model.eval(), *reviews)}
for name, m in measures.items():
    print(f"{name}: R^c block 1 → 8: {m.compression[0]:.2f} → {m.compression[-1]:.2f}; "
          f"exact zeros after the last ISTA step: {m.sparsity[-1]:.0%}")

fig = plot_crate_measures(measures)
fig  # hardmax.plots returns the Figure: shown here and in a notebook
