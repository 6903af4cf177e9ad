"""The compiled kernel of this checkout against the kernel of another git revision, bit for bit, on long runs.

Issue #25 changed how the kernel organises its work (rows at one position decided once, a champion before
every pair, no n × n scores) and not a single verdict. This script is how that was checked, and how a later
change to `hardmax/dynamics/kernel.py` can be: both kernels run the same long trajectories (Figure 2's
configurations, whose ties are exact, and Gaussian ones with and without scaled copies and padding, d = 2, 3,
16, A = I and SPD, float32 and float64, 400 layers) and every stored coordinate and every "a leader lost its
place" flag must be equal.

    python scripts/kernel_against.py --against aa9b1ae            # the kernel before issue #25
    python scripts/kernel_against.py --against HEAD --seeds 0 1 2

Both kernels are compiled afresh (no cache), ~1 minute per seed.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

from hardmax.theory.figure2 import figure2_configurations, paper_figure2_configurations

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "src/hardmax/dynamics/kernel.py"


def load(source: str, name: str) -> types.ModuleType:
    """A kernel module from its source, compiled without numba's cache."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(source.replace("cache=True", "cache=False"), module.__file__, "exec"), module.__dict__)
    return module


def cases(seed: int) -> list[tuple[str, np.ndarray, np.ndarray | None, np.ndarray]]:
    """(name, tokens (batch, n, d), A or None, mask (batch, n)) of one seed."""
    rng = np.random.default_rng(seed)
    found = [(name, c[None].astype(np.float64), None, np.ones((1, len(c)), bool))
             for name, c in {**paper_figure2_configurations(), **figure2_configurations()}.items()]
    for n, d, with_A, dtype in itertools.product((20, 60, 150), (2, 3, 16), (False, True), (np.float64, np.float32)):
        z = rng.standard_normal((2, n, d)).astype(dtype)
        if rng.uniform() < 0.3:  # scaled copies: tokens on common rays, exact ties of their directions
            z[:, n // 2:] = z[:, :n - n // 2][:, :n // 2] * rng.uniform(0.2, 0.9)
        A = None
        if with_A:
            M = rng.standard_normal((d, d))
            A = (M @ M.T / d + 0.5 * np.eye(d)).astype(dtype)
        mask = rng.uniform(size=z.shape[:2]) < (0.9 if rng.uniform() < 0.5 else 1.0)  # padding in half the runs
        found.append((f"n={n} d={d} {'A SPD' if with_A else 'A=I'} {np.dtype(dtype).name}", z, A, mask))
    return found


def run(kernel: types.ModuleType, z: np.ndarray, A, mask: np.ndarray,
        gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty((len(gammas) + 1, *z.shape), z.dtype)
    done = kernel.hardmax_trajectory(z, mask, A, gammas, 64 * np.finfo(z.dtype).eps, out, 1)
    return out, done.broke


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git revision whose kernel to compare with")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--layers", type=int, default=400)
    args = parser.parse_args(argv)
    try:
        old_source = subprocess.run(["git", "show", f"{args.against}:{KERNEL}"], cwd=ROOT, check=True,
                                    capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"kernel_against: cannot read {KERNEL} at {args.against}: {error.stderr.strip()}") from None
    old, new = load(old_source, "kernel_against"), load((ROOT / KERNEL).read_text(), "kernel_here")
    total = different = 0
    for seed in args.seeds:
        rng = np.random.default_rng(10_000 + seed)
        for name, z, A, mask in cases(seed):
            gammas = np.full(args.layers, rng.uniform(0.1, 0.9)).astype(z.dtype)
            (a, broke_a), (b, broke_b) = run(old, z, A, mask, gammas), run(new, z, A, mask, gammas)
            same = np.array_equal(a, b, equal_nan=True) and np.array_equal(broke_a, broke_b)
            total += 1
            if not same:
                different += 1
                print(f"seed {seed}, {name}: differs by up to {np.nanmax(np.abs(a - b)):.3g}")
    print(f"{total} runs of {args.layers} layers, {different} different from {args.against}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
