"""
Leaders are sentiment words: the leader-word histogram
======================================================

Which words lead? Over the test reviews the classifier is confident about, count the words that end as
leaders whose own final position would classify the review firmly (decoder logit
:math:`|v \\cdot z + b| > 2`: *decisive* leaders), separately for positive and negative reviews. The
paper's histogram: the leaders are the sentiment words. Same small model as the previous example; at
this size (5,000 reviews, 4 epochs, :math:`d = 2`) the negative side is already a list of sentiment words and
the positive side is still noisy (the full models' histograms are in the reproduction report).
"""

from hardmax.data import default_cache_dir, load_imdb
from hardmax.experiments.pipeline import train_or_load
from hardmax.experiments.reproduce import quick
from hardmax.explain import leader_word_counts
from hardmax.plots.sentiment import plot_leader_words

config = quick(out_dir=str(default_cache_dir() / "gallery"), progress=False)   # hardmax's cache
data = load_imdb(config.data, progress=False)                # 5,000 training and 5,000 test reviews
model = train_or_load(2, data, config).model                  # trained once, then reused

counts = leader_word_counts(model, data.test.ids, data.test.mask, data.test.labels, confidence=0.95, decisive=2.0)
words = list(data.vocab.words)
for side, counter in counts.items():
    print(f"{side:>8}: " + ", ".join(f"{words[k]} ({c})" for k, c in counter.most_common(10)))

fig = plot_leader_words(counts, words, top=15, title="decisive leaders, d = 2 (5,000 test reviews)")
fig  # hardmax.plots returns the Figure: shown here and in a notebook
