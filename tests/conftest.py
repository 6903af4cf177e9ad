"""Shared test setup: seeded generators, the hypothesis profile, deterministic torch.

Only what every test module needs lives here, and the fixtures several test modules share (the reference
training of test_training_{loop,run}.py, the tiny pretrained models of test_pretrained_*.py, the square run of
test_plots_{figures,save}.py, the generated archive and isolated paths of test_data_*.py, the trained runs and live
server of test_explore_*.py); fixtures for one module stay in that module.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import settings

# cuBLAS needs this before CUDA starts to run matmuls deterministically (ignored on CPU).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# warn_only: an op with no deterministic kernel warns instead of failing a test that does not care.
torch.use_deterministic_algorithms(True, warn_only=True)

SEED = 20240701  # arXiv 2407.01602

# "ci" (default) keeps the suite fast on 2 CPU cores; HYPOTHESIS_PROFILE=thorough searches harder.
settings.register_profile("ci", max_examples=25, deadline=None, print_blob=True)
settings.register_profile("thorough", max_examples=500, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _seed_torch() -> None:
    """Code that forgets to pass a generator still gets the same numbers on every run."""
    torch.manual_seed(SEED)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded NumPy generator per test."""
    return np.random.default_rng(SEED)


@pytest.fixture
def generator() -> torch.Generator:
    """A fresh, seeded torch generator (CPU) per test."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread for the test: the tensors are small, bitwise comparisons then use
    the same reductions, and on a busy 2-core machine (pytest -n 2) OpenMP threads would spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def splits():
    """The synthetic corpus's train and validation splits of tests/training_runs.py."""
    from training_runs import training_splits

    return training_splits()


@pytest.fixture(scope="session")
def trained(splits, tmp_path_factory):
    """One uninterrupted reference run (tests/training_runs.py), shared by test_training_{loop,run}.py: read,
    never written (a test that changes it works on a `copy_run`). Built under the first test's `one_thread`."""
    from training_runs import run

    return run(splits, tmp_path_factory.mktemp("runs") / "reference")


@pytest.fixture(scope="session")
def pretrained_dirs(tmp_path_factory):
    """Family name -> the directory of a tiny random model of every supported family (tests/pretrained_models.py),
    shared by test_pretrained_{loader,recording,families}.py: read, never written."""
    from pretrained_models import build

    from hardmax.pretrained import SUPPORTED

    folder = tmp_path_factory.mktemp("models")
    return {kind: build(kind, folder) for kind in SUPPORTED}


@pytest.fixture(scope="session", params=["bert", "gpt2", "albert"])
def pretrained_model(request, tmp_path_factory):
    """A tiny BERT, GPT-2 and ALBERT loaded in float64, shared by test_pretrained_{measures,inspection,svm}.py."""
    from pretrained_models import build

    from hardmax.pretrained import load

    return load(build(request.param, tmp_path_factory.mktemp("m")), dtype=torch.float64)


@pytest.fixture(scope="module")
def run2d():
    """The hardmax run of tests/plots_cases.py's SQUARE, 8 layers, shared by test_plots_{figures,save}.py."""
    from plots_cases import SQUARE

    from hardmax.dynamics import simulate

    return simulate(SQUARE, alpha=0.5, layers=8)


@pytest.fixture
def no_global_paths(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No test reads $HARDMAX_IMDB or writes to ~/.cache unless it sets them itself: every test_data_*.py module
    uses it (pytestmark)."""
    monkeypatch.delenv("HARDMAX_IMDB", raising=False)
    monkeypatch.setenv("HARDMAX_CACHE", str(tmp_path / "default-cache"))


@pytest.fixture
def archive(tmp_path):
    """A generated IMDb-layout .tar.gz (tests/data_cases.py) in tmp_path, for test_data_{source,load}.py."""
    from data_cases import write_tar

    return write_tar(tmp_path / "imdb.tar.gz")


@pytest.fixture(scope="session")
def explore_runs(tmp_path_factory):
    """Three small trained runs (d = 2, d = 4, CRATE) under one folder (tests/explore_server.py), trained once for
    test_explore_{views,requests,server,export}.py: read, never written."""
    from explore_server import train_runs

    root = tmp_path_factory.mktemp("explore")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HARDMAX_IMDB", raising=False)
        mp.setenv("HARDMAX_CACHE", str(root / "cache"))
        return train_runs(root, root / "cache", (("d2", ("--d", "2")), ("d4", ("--d", "4")),
                                                 ("crate", ("--d", "4", "--layer", "crate"))))


@pytest.fixture(scope="session")
def explore_client(explore_runs):
    """A client of a live explorer serving `explore_runs`, with small limits."""
    from explore_server import Client, LiveServer

    from hardmax.explore import Limits, create_app

    app = create_app(explore_runs, Limits(tokens=50, layers=300, points=6_000, text=500, body=20_000))
    with LiveServer(app) as server:
        yield Client(server.url)
