"""
A review through the layers of a trained classifier
===================================================

The paper's sentiment model: word embeddings in :math:`\\mathbb{R}^d`, the same hardmax layer eight times,
the mean token, and a linear decoder :math:`v \\cdot z + b`. It is trained with softmax attention
(:math:`\\beta = 1000`) and read with exact hardmax. At :math:`d = 2` the words of a review move in the
model's own plane: a few *leaders* gather the other words, and the mean lands on one side of the
decision line. The model here is small (5,000 reviews, 4 epochs, as ``hardmax reproduce --quick``); it is
trained the first time an example needs it and reused afterwards.
"""

import hardmax
from hardmax.data import default_cache_dir, load_imdb
from hardmax.experiments.pipeline import train_or_load
from hardmax.experiments.reproduce import quick
from hardmax.explain import explain_text
from hardmax.plots.sentiment import plot_review

# Trains d = 2 on 5,000 reviews (about 20 s on 2 CPU cores), or reuses the run trained earlier.
config = quick(out_dir=str(default_cache_dir() / "gallery"), progress=False)   # hardmax's cache
trained = train_or_load(2, load_imdb(config.data, progress=False), config)
run = hardmax.load_run(trained.run_dir)
print(f"validation accuracy (exact hardmax): {trained.best_val_accuracy:.3f}")

review = "Awful, the worst film ever: boring, stupid and a waste of time."
explanation = explain_text(run, review)
print(explanation.summary())              # the prediction, the leaders and their followers

fig = plot_review(explanation, run.model, layers=(0, 1, 2, 8))
fig  # hardmax.plots returns the Figure: shown here and in a notebook
