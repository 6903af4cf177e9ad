"""A small synthetic sentiment corpus for tests: seeded, labelled, padded like the real data.

Vocabulary (word id → word):

    0 "<pad>", 1 "<unk>", then `n_sentiment` positive words "good0", "good1", ...,
    `n_sentiment` negative words "bad0", ..., and `n_neutral` neutral words "w0", "w1", ...

A review has a label (1 = positive, with probability 1/2), a length drawn uniformly in
[min_length, max_length], a few sentiment words of its own polarity (sometimes one of the other
polarity, as noise), neutral words drawn from a Zipf law (word "w0" is the most common, as "the" is),
and an occasional "<unk>". Tokens are shuffled and the review is right-padded with "<pad>".
The label is therefore a function of a handful of words, which is what the paper's classifier is
expected to find: a linear decoder on pooled tokens can reach it, chance is 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

PAD, UNK = 0, 1


@dataclass(frozen=True)
class Corpus:
    """Reviews as padded word ids, with the vocabulary that produced them.

    Attributes:
        ids: (N, n) int64 word ids, PAD after the last real token.
        mask: (N, n) bool, True for real tokens.
        labels: (N,) int64, 1 = positive, 0 = negative.
        words: the vocabulary, words[i] is the word of id i.
        positive_ids, negative_ids: ids of the sentiment words.
    """

    ids: Tensor
    mask: Tensor
    labels: Tensor
    words: list[str]
    positive_ids: tuple[int, ...]
    negative_ids: tuple[int, ...]

    @property
    def vocab_size(self) -> int:
        return len(self.words)

    def __len__(self) -> int:
        return int(self.labels.numel())

    def subset(self, rows: slice | Tensor) -> Corpus:
        """The reviews `rows` (a slice or an index tensor), same vocabulary."""
        return Corpus(ids=self.ids[rows], mask=self.mask[rows], labels=self.labels[rows], words=self.words,
                      positive_ids=self.positive_ids, negative_ids=self.negative_ids)


def sentiment_corpus(
    n_reviews: int = 400,
    *,
    n_sentiment: int = 3,
    n_neutral: int = 40,
    min_length: int = 5,
    max_length: int = 24,
    sentiment_words: tuple[int, int] = (1, 3),
    noise: float = 0.2,
    zipf: float = 1.1,
    unk: float = 0.02,
    seed: int = 0,
) -> Corpus:
    """Generate `n_reviews` reviews (see the module docstring); a pure function of its arguments.

    Args:
        n_sentiment: positive words, and as many negative words.
        n_neutral: neutral words, drawn with probability ∝ 1/rank^zipf.
        min_length, max_length: review lengths (real tokens), uniform in this range.
        sentiment_words: (lo, hi) number of words of the review's polarity, uniform in this range.
        noise: probability that one word of the other polarity is added.
        unk: probability that a neutral token is replaced by "<unk>".
        seed: NumPy seed.
    """
    if not 1 <= sentiment_words[0] <= sentiment_words[1] < min_length:
        raise ValueError(f"need 1 ≤ lo ≤ hi < min_length, got sentiment_words={sentiment_words}, "
                         f"min_length={min_length}")
    if max_length < min_length:
        raise ValueError(f"max_length {max_length} < min_length {min_length}")
    rng = np.random.default_rng(seed)
    positive = np.arange(2, 2 + n_sentiment)
    negative = positive + n_sentiment
    neutral = np.arange(2 + 2 * n_sentiment, 2 + 2 * n_sentiment + n_neutral)
    words = (["<pad>", "<unk>"] + [f"good{i}" for i in range(n_sentiment)]
             + [f"bad{i}" for i in range(n_sentiment)] + [f"w{i}" for i in range(n_neutral)])
    zipf_p = 1.0 / np.arange(1, n_neutral + 1) ** zipf
    zipf_p /= zipf_p.sum()

    ids = np.full((n_reviews, max_length), PAD, dtype=np.int64)
    labels = rng.integers(0, 2, size=n_reviews)
    lengths = rng.integers(min_length, max_length + 1, size=n_reviews)
    for r in range(n_reviews):
        own, other = (positive, negative) if labels[r] == 1 else (negative, positive)
        tokens = list(rng.choice(own, size=rng.integers(sentiment_words[0], sentiment_words[1] + 1)))
        if rng.random() < noise:
            tokens.append(rng.choice(other))
        n_neutral_here = lengths[r] - len(tokens)
        filler = rng.choice(neutral, size=n_neutral_here, p=zipf_p)
        filler[rng.random(n_neutral_here) < unk] = UNK
        review = rng.permutation(np.concatenate([np.asarray(tokens, dtype=np.int64), filler]))
        ids[r, : len(review)] = review
    ids_t = torch.from_numpy(ids)
    return Corpus(ids=ids_t, mask=ids_t != PAD, labels=torch.from_numpy(labels.astype(np.int64)), words=words,
                  positive_ids=tuple(positive.tolist()), negative_ids=tuple(negative.tolist()))


def train_val(n_train: int = 320, n_val: int = 160, *, seed: int = 0, **kwargs) -> tuple[Corpus, Corpus]:
    """A training and a validation split drawn from one corpus (same vocabulary, disjoint reviews)."""
    corpus = sentiment_corpus(n_train + n_val, seed=seed, **kwargs)
    return corpus.subset(slice(0, n_train)), corpus.subset(slice(n_train, n_train + n_val))
