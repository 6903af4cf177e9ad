"""What the tests of `hardmax.models` share (test_models_*.py): a small seeded `HardmaxClassifier`, random
batches of word ids, and a classifier's two rules by name.
"""

from __future__ import annotations

import torch
from corpus import PAD

from hardmax import HardmaxClassifier, ModelConfig
from hardmax.dynamics import Hardmax

VOCAB = 30


# The two rules of a classifier by the names the tests are parametrised with.
ATTENTION = {"softmax": None, "hardmax": Hardmax()}


def make_model(*, seed: int = 0, double: bool = True, randomize_A: bool = False, **config) -> HardmaxClassifier:
    """A classifier with seeded weights (float64 by default); a random non-identity A if asked."""
    config = {"vocab_size": VOCAB, "d": 3, "layers": 4, "alpha_init": 0.7, **config}
    torch.manual_seed(seed)
    model = HardmaxClassifier(ModelConfig(**config))
    if double:
        model = model.double()
    if randomize_A:
        with torch.no_grad():
            model.A_factor.copy_(torch.eye(config["d"]) + 0.4 * torch.randn(config["d"], config["d"]))
    return model


def random_batch(generator: torch.Generator, batch: int = 5, n: int = 12, vocab: int = VOCAB, *,
                 few_words: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, n) ids and a mask with padding at random positions (not only at the end).

    `few_words` draws from 4 words only, so reviews repeat words many times.
    """
    high = 6 if few_words else vocab
    ids = torch.randint(2, high, (batch, n), generator=generator)
    mask = torch.rand(batch, n, generator=generator) < 0.7
    mask[torch.arange(batch), torch.randint(0, n, (batch,), generator=generator)] = True
    ids[~mask] = PAD
    return ids, mask
