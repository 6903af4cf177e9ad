"""Throughput of the hardmax dynamics on IMDb-shaped batches.

Prints, for batches shaped like the paper's IMDb experiment (n = 128 tokens per review, many of them
repeated words or padding, d = 16, 8 layers), in float32 and float64:

- reviews/s of a per-token NumPy loop written from eq. (1.1), the way the paper's published code works
  (for each review, each layer, each token: scores to all tokens, argmax set, mean);
- reviews/s of a naive vectorised torch version (dense scores, tie mask, matmul; no deduplication);
- reviews/s of `hardmax.dynamics.simulate` (full trajectory returned), with its default engine (the
  compiled kernel, `hardmax.dynamics._engines.kernel`) and with `backend="torch"` (the batched torch engine);
- the library's achieved GFLOP/s and its fraction of this machine's measured matmul rate.

Before timing, both library engines and the naive baseline are checked against the per-token loop in float64
(max abs error ≤ 1e-10), so a fast but wrong engine cannot be reported.

    .venv/bin/python benchmarks/bench_dynamics.py                 # full run, ~1.5 min on 2 cores
    .venv/bin/python benchmarks/bench_dynamics.py --quick         # smoke run, a few seconds
    .venv/bin/python benchmarks/bench_dynamics.py --json out.json --profile
    .venv/bin/python benchmarks/bench_dynamics.py --imdb ../shared/data/aclImdb-labeled.tar.gz

Timings are wall-clock: run on a quiet machine (the load average at the start is printed).

Results are quoted in docs/reports/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from engine_choice import simulate_on

from hardmax.dynamics import default_tie_rtol

DTYPES = {"float32": torch.float32, "float64": torch.float64}
TARGET_REVIEWS_PER_S = 20_000  # float32, on the 2-core reference machine
TARGET_SPEEDUP = 200  # over the per-token loop
CHECK_ATOL = 1e-10  # float64 agreement required between the library and the per-token loop


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """What to time. Defaults reproduce docs/reports/benchmarks.md; `quick()` is the smoke-test preset."""

    reviews: int = 8192  # reviews per timed `simulate` call
    loop_reviews: int = 100  # reviews timed with the per-token NumPy loop
    naive_reviews: int = 1024  # reviews timed with the naive vectorised torch baseline
    check_reviews: int = 32  # reviews compared against the per-token loop before timing (float64)
    repeats: int = 5  # timed repetitions after one warm-up; the median is reported
    dtypes: tuple[str, ...] = ("float32", "float64")
    n: int = 128  # tokens per review (real + padding), as in the paper
    d: int = 16  # embedding dimension
    layers: int = 8
    alpha: float = 1.0  # step parameter; γ = α/(1+α) = 1/2
    vocab: int = 20_000  # word ids 1..vocab; 0 is PAD
    zipf_exponent: float = 0.95  # word frequency ∝ rank^-s
    length_median: float = 80.0  # log-normal review length before clipping to [min_length, n]
    length_sigma: float = 0.66  # log-normal shape
    min_length: int = 10
    matmul_size: int = 2048  # side of the square matmul that measures the machine's rate
    threads: int = 2  # torch.set_num_threads
    seed: int = 0
    imdb: str | None = None  # path of the IMDb archive: real word ids via hardmax.data, if available

    def __post_init__(self):
        for name in ("reviews", "loop_reviews", "naive_reviews", "check_reviews", "repeats", "n", "d",
                     "vocab", "matmul_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.layers < 0:
            raise ValueError(f"layers must be ≥ 0, got {self.layers}")
        if not 1 <= self.min_length <= self.n:
            raise ValueError(f"min_length must be in [1, n={self.n}], got {self.min_length}")
        unknown = set(self.dtypes) - set(DTYPES)
        if unknown or not self.dtypes:
            raise ValueError(f"dtypes must be a non-empty subset of {tuple(DTYPES)}, got {self.dtypes}")


def quick() -> BenchConfig:
    """Small sizes for smoke testing (a few seconds)."""
    return BenchConfig(reviews=128, loop_reviews=4, naive_reviews=32, check_reviews=3, repeats=1,
                       matmul_size=256, threads=1)


# --------------------------------------------------------------------------------------------
# IMDb-shaped data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """Reviews as embedded tokens.

    Attributes:
        ids: (reviews, n) int64 word ids, 0 = PAD. tokens: (reviews, n, d) float64 embeddings.
        mask: (reviews, n) bool, True for real tokens. A: (d, d) SPD score matrix. source: a description.
    """

    ids: np.ndarray
    tokens: np.ndarray
    mask: np.ndarray
    A: np.ndarray
    source: str

    def stats(self) -> dict[str, float]:
        """Mean real tokens, mean distinct real tokens and share of reviews at the length cap."""
        lengths = self.mask.sum(1)
        sorted_ids = np.sort(np.where(self.mask, self.ids, -1), axis=1)
        distinct = ((sorted_ids[:, 1:] != sorted_ids[:, :-1]) & (sorted_ids[:, 1:] >= 0)).sum(1)
        distinct += sorted_ids[:, 0] >= 0  # no padding: the first id is real and new
        return {"mean_real_tokens": float(lengths.mean()), "mean_distinct_tokens": float(distinct.mean()),
                "share_at_cap": float((lengths == self.mask.shape[1]).mean())}


IdsAndMask = tuple[np.ndarray, np.ndarray]


def synthetic_ids(config: BenchConfig, reviews: int, rng: np.random.Generator) -> IdsAndMask:
    """(ids, mask) of `reviews` synthetic reviews, padded at the end to config.n.

    Lengths are log-normal (median `length_median`, shape `length_sigma`) clipped to [min_length, n];
    word ids follow a Zipf law with exponent `zipf_exponent` over `vocab` words. The defaults are fitted
    to the IMDb training split as `hardmax.data.load_imdb` prepares it for the classifier (lowercase,
    lemmas, scikit-learn's stop words removed, first 128 tokens; 18,454 words; the defaults at the time):
    mean 82.4 real tokens, 66.7 distinct, 25% of reviews at the cap. This generator gives 82.5, 67.7
    and 24%.
    """
    raw = rng.lognormal(math.log(config.length_median), config.length_sigma, reviews)
    lengths = np.clip(np.rint(raw), config.min_length, config.n).astype(np.int64)
    ranks = np.arange(1, config.vocab + 1, dtype=np.float64)
    p = ranks ** -config.zipf_exponent
    ids = rng.choice(config.vocab, size=(reviews, config.n), p=p / p.sum()) + 1
    mask = np.arange(config.n) < lengths[:, None]
    return np.where(mask, ids, 0), mask


def imdb_ids(config: BenchConfig, reviews: int, rng: np.random.Generator) -> IdsAndMask | None:
    """(ids, mask) of `reviews` IMDb training reviews drawn with replacement, through `hardmax.data`.

    The reviews are cleaned as for the sentiment model (`hardmax.data.DataConfig` defaults: lowercase,
    lemmas, stop words removed, first n tokens). Returns None, with a note, when `hardmax.data` is not
    available; a bad path raises.
    """
    try:
        from hardmax.data import DataConfig, load_imdb  # optional: the benchmark does not need it
    except ImportError as error:
        print(f"note: --imdb ignored, hardmax.data is not available ({error}); using synthetic data")
        return None
    data_config = DataConfig(path=config.imdb, max_len=config.n, download=False)
    train = load_imdb(data_config, progress=False).train
    pick = rng.choice(len(train), size=reviews, replace=True)
    return train.ids.numpy()[pick], train.mask.numpy()[pick]


def make_batch(config: BenchConfig, reviews: int, seed_offset: int = 0) -> Batch:
    """IMDb-shaped reviews: word ids → a random (vocab + 1, d) embedding (row 0 = PAD), and a random SPD A."""
    rng = np.random.default_rng([config.seed, seed_offset])
    loaded = imdb_ids(config, reviews, rng) if config.imdb else None
    ids, mask = loaded if loaded is not None else synthetic_ids(config, reviews, rng)
    source = "IMDb (hardmax.data)" if loaded is not None else "synthetic Zipf/log-normal"
    embedding = rng.standard_normal((int(ids.max()) + 1, config.d)) / math.sqrt(config.d)
    g = rng.standard_normal((config.d, config.d)) / math.sqrt(config.d)
    A = np.eye(config.d) + 0.5 * g @ g.T  # SPD, like a learned score matrix
    return Batch(ids=ids, tokens=embedding[ids], mask=mask, A=A, source=source)


# --------------------------------------------------------------------------------------------
# The two baselines
# --------------------------------------------------------------------------------------------


def per_token_loop(tokens: np.ndarray, mask: np.ndarray, A: np.ndarray, *, alpha: float, layers: int,
                   tie_rtol: float) -> np.ndarray:
    """Eq. (1.1) token by token in NumPy, one review at a time. Returns (layers + 1, reviews, n, d).

    Ties: j ∈ C_i when s_ij ≥ max_l s_il − tie_rtol ||z_i||_A max_l ||z_l||_A, the library's rule, so
    that both agree on which scores are equal. Padding (mask False) is left out and does not move.
    """
    gamma = alpha / (1 + alpha)
    out = np.empty((layers + 1, *tokens.shape), dtype=tokens.dtype)
    out[:] = tokens
    for r in range(tokens.shape[0]):
        real = np.flatnonzero(mask[r])
        z = tokens[r, real]
        for k in range(layers):
            sq_norms = np.einsum("jd,de,je->j", z, A, z)
            largest = np.sqrt(max(sq_norms.max(), 0.0))
            new = np.empty_like(z)
            for i in range(len(z)):
                s = z @ (A @ z[i])
                scale = math.sqrt(max(sq_norms[i], 0.0)) * largest
                maximisers = np.flatnonzero(s >= s.max() - tie_rtol * scale)
                new[i] = z[i] + gamma * (z[maximisers].mean(axis=0) - z[i])
            z = new
            out[k + 1, r, real] = z
    return out


def naive_torch(tokens: torch.Tensor, mask: torch.Tensor, A: torch.Tensor, *, alpha: float, layers: int,
                tie_rtol: float, chunk_size: int = 256) -> torch.Tensor:
    """Eq. (1.1) batched in torch without deduplication: dense (n, n) scores, tie mask, one matmul.

    Returns (layers + 1, reviews, n, d).
    """
    gamma = alpha / (1 + alpha)
    out = torch.empty(layers + 1, *tokens.shape, dtype=tokens.dtype)
    out[0] = tokens
    for start in range(0, tokens.shape[0], chunk_size):
        z, real = tokens[start : start + chunk_size], mask[start : start + chunk_size]
        absent = (~real).unsqueeze(-2)  # padding keys
        for k in range(layers):
            s = (z @ A @ z.transpose(-1, -2)).masked_fill(absent, -math.inf)
            sq_norms = torch.diagonal(s, dim1=-2, dim2=-1).clamp(min=0)
            scale = torch.sqrt(sq_norms * sq_norms.amax(-1, keepdim=True)).unsqueeze(-1)
            ties = (s >= s.amax(-1, keepdim=True) - tie_rtol * scale).to(z.dtype)
            target = (ties @ z) / ties.sum(-1, keepdim=True)
            z = torch.where(real.unsqueeze(-1), z + gamma * (target - z), z)
            out[k + 1, start : start + chunk_size] = z
    return out


def library(tokens: torch.Tensor, mask: torch.Tensor, A: torch.Tensor, *, alpha: float,
            layers: int, backend: str = "auto", store: str = "all") -> torch.Tensor:
    """`hardmax.dynamics.simulate`, full trajectory (layers + 1, reviews, n, d) (store="final": 2 layers).

    backend "auto" is the default (the compiled kernel on a CPU); "torch" the batched torch engine.
    """
    return simulate_on(tokens, alpha=alpha, layers=layers, A=A, mask=mask, engine=backend,
                       final=store == "final").tokens


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


def wall_times(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Wall time in seconds of each of `repeats` runs of `fn()`, after `warmup` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def matmul_gflops(dtype: torch.dtype, size: int, repeats: int) -> float:
    """GFLOP/s of one (size × size) @ (size × size) matmul (2·size³ flops), median of `repeats`."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen, dtype=dtype)
    b = torch.randn(size, size, generator=gen, dtype=dtype)
    seconds = statistics.median(wall_times(lambda: a @ b, max(repeats, 3)))
    return 2 * size**3 / seconds / 1e9


def check_engines(config: BenchConfig) -> dict[str, float]:
    """Max abs difference of the library and the naive baseline from the per-token loop (float64).

    Raises:
        RuntimeError: if either differs by more than CHECK_ATOL.
    """
    batch = make_batch(config, config.check_reviews, seed_offset=1)
    rtol = default_tie_rtol(torch.float64)
    kwargs = {"alpha": config.alpha, "layers": config.layers}
    reference = per_token_loop(batch.tokens, batch.mask, batch.A, tie_rtol=rtol, **kwargs)
    tokens, mask, A = torch.from_numpy(batch.tokens), torch.from_numpy(batch.mask), torch.from_numpy(batch.A)
    errors = {
        "library": library(tokens, mask, A, **kwargs),
        "torch_engine": library(tokens, mask, A, backend="torch", **kwargs),
        "naive_torch": naive_torch(tokens, mask, A, tie_rtol=rtol, **kwargs),
    }
    errors = {name: float(np.abs(path.numpy() - reference).max()) for name, path in errors.items()}
    for name, error in errors.items():
        if not error <= CHECK_ATOL:
            raise RuntimeError(f"{name} differs from the per-token loop by {error:.3g} > {CHECK_ATOL:g} "
                               f"(float64, {config.check_reviews} reviews): not timing a wrong engine")
    return errors


def time_dtype(config: BenchConfig, batch: Batch, name: str, matmul: float) -> dict[str, object]:
    """Reviews/s of the three implementations in one dtype, and the library's GFLOP/s."""
    dtype = DTYPES[name]
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    kwargs = {"alpha": config.alpha, "layers": config.layers}
    rtol = default_tie_rtol(dtype)
    tokens = torch.from_numpy(batch.tokens).to(dtype)
    mask, A = torch.from_numpy(batch.mask), torch.from_numpy(batch.A).to(dtype)

    few = slice(0, config.loop_reviews)
    loop_args = (batch.tokens[few].astype(np_dtype), batch.mask[few], batch.A.astype(np_dtype))
    loop_s = wall_times(partial(per_token_loop, *loop_args, tie_rtol=rtol, **kwargs), 1, warmup=0)[0]
    some = slice(0, config.naive_reviews)
    naive = partial(naive_torch, tokens[some], mask[some], A, tie_rtol=rtol, **kwargs)
    naive_s = statistics.median(wall_times(naive, max(1, config.repeats // 2)))
    # The first call on a batch in fresh memory (the engine already loaded by `check_engines`): the
    # trajectory is written to newly mapped pages.
    first_s = wall_times(partial(library, tokens.clone(), mask.clone(), A, **kwargs), 1, warmup=0)[0]
    library_times = wall_times(partial(library, tokens, mask, A, **kwargs), config.repeats)
    library_s = statistics.median(library_times)
    final_s = statistics.median(wall_times(partial(library, tokens, mask, A, store="final", **kwargs),
                                           max(1, config.repeats // 2)))
    engine = partial(library, tokens, mask, A, backend="torch", **kwargs)
    engine_s = statistics.median(wall_times(engine, max(1, config.repeats // 2)))

    rates = {
        "loop_reviews_per_s": config.loop_reviews / loop_s,
        "naive_reviews_per_s": config.naive_reviews / naive_s,
        "library_reviews_per_s": config.reviews / library_s,
        "torch_engine_reviews_per_s": config.reviews / engine_s,
        "first_call_reviews_per_s": config.reviews / first_s,
        "store_final_reviews_per_s": config.reviews / final_s,
    }
    gflops = rates["library_reviews_per_s"] * flops_per_review(config) / 1e9
    return {
        **rates,
        "library_seconds": library_times,  # every timed run: their spread shows a busy machine
        "speedup_vs_loop": rates["library_reviews_per_s"] / rates["loop_reviews_per_s"],
        "speedup_vs_naive": rates["library_reviews_per_s"] / rates["naive_reviews_per_s"],
        "library_gflops": gflops,
        "matmul_gflops": matmul,
        "fraction_of_matmul": gflops / matmul,
    }


def flops_per_review(config: BenchConfig) -> int:
    """The convention for useful work: dense scores of a full review, 2·n²·d per layer."""
    return 2 * config.n**2 * config.d * config.layers


def machine() -> dict[str, object]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "logical_cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "load_average_1min": os.getloadavg()[0]}  # other work on the machine skews every timing


def run(config: BenchConfig) -> dict[str, object]:
    """Check the engines, then time everything. Returns the JSON-ready results."""
    with torch_threads(config.threads):
        return _run(config)


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run with `threads` torch threads, then restore (the smoke test runs inside a pytest worker)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _run(config: BenchConfig) -> dict[str, object]:
    check = check_engines(config)
    batch = make_batch(config, config.reviews)
    results = {"machine": machine(), "config": dataclasses.asdict(config), "data": {"source": batch.source,
               **batch.stats()}, "flops_per_review": flops_per_review(config),
               "check": {"reviews": config.check_reviews, "atol": CHECK_ATOL, "max_abs_error": check},
               "dtypes": {}}
    for name in config.dtypes:
        matmul = matmul_gflops(DTYPES[name], config.matmul_size, config.repeats)
        results["dtypes"][name] = time_dtype(config, batch, name, matmul)
    if "float32" in results["dtypes"]:
        f32 = results["dtypes"]["float32"]
        results["targets"] = {
            "reviews_per_s": TARGET_REVIEWS_PER_S, "speedup_vs_loop": TARGET_SPEEDUP,
            "met": f32["library_reviews_per_s"] >= TARGET_REVIEWS_PER_S
            and f32["speedup_vs_loop"] >= TARGET_SPEEDUP,
        }
    return results


def format_table(results: dict) -> str:
    """The results as a plain-text report."""
    c, data = results["config"], results["data"]
    mach = results["machine"]
    lines = [
        f"machine: {mach['cpu']}, {mach['logical_cpus']} logical CPUs, torch {mach['torch']}, "
        f"{mach['torch_threads']} threads, load average {mach['load_average_1min']:.1f} at start",
        f"data: {c['reviews']} reviews ({data['source']}), n = {c['n']}, d = {c['d']}, "
        f"{c['layers']} layers, alpha = {c['alpha']}",
        f"      mean real tokens {data['mean_real_tokens']:.1f}, mean distinct real tokens "
        f"{data['mean_distinct_tokens']:.1f}, {100 * data['share_at_cap']:.0f}% of reviews at the cap",
        "check: max |library - loop| = {library:.1e}, max |torch engine - loop| = {torch_engine:.1e}, "
        "max |naive - loop| = {naive_torch:.1e} "
        "(float64, {n} reviews)".format(n=results["check"]["reviews"], **results["check"]["max_abs_error"]),
        "",
        f"{'dtype':<8}{'loop':>10}{'naive':>10}{'torch':>10}{'library':>10}{'x loop':>9}{'x naive':>9}"
        f"{'GFLOP/s':>9}{'matmul':>9}{'of mm':>7}",
        f"{'':<8}{'rev/s':>10}{'rev/s':>10}{'engine':>10}{'rev/s':>10}{'':>9}{'':>9}{'':>9}{'GFLOP/s':>9}"
        f"{'':>7}",
    ]
    for name, r in results["dtypes"].items():
        lines.append(
            f"{name:<8}{r['loop_reviews_per_s']:>10,.0f}{r['naive_reviews_per_s']:>10,.0f}"
            f"{r['torch_engine_reviews_per_s']:>10,.0f}{r['library_reviews_per_s']:>10,.0f}{r['speedup_vs_loop']:>9,.0f}{r['speedup_vs_naive']:>9,.1f}"
            f"{r['library_gflops']:>9.1f}{r['matmul_gflops']:>9.1f}{100 * r['fraction_of_matmul']:>6.0f}%"
        )
    for name, r in results["dtypes"].items():
        if "first_call_reviews_per_s" in r:
            lines.append(f"{name}: first call on a fresh batch {r['first_call_reviews_per_s']:,.0f} rev/s "
                         f"({r['library_reviews_per_s'] / r['first_call_reviews_per_s']:.2f}x the median call's "
                         f"time); store='final' {r['store_final_reviews_per_s']:,.0f} rev/s")
    if mach["load_average_1min"] > 0.5:
        lines.append("warning: the machine was busy when the run started; timings are pessimistic")
    lines.append("")
    lines.append(f"GFLOP/s counts 2·n²·d·layers = {results['flops_per_review'] / 1e6:.2f} MFLOP per review "
                 f"(dense scores of a {c['n']}-token review); matmul: one {c['matmul_size']}² matmul.")
    if "targets" in results:
        t = results["targets"]
        lines.append(f"target (float32): ≥ {t['reviews_per_s']:,} reviews/s and ≥ {t['speedup_vs_loop']}× "
                     f"the loop: {'met' if t['met'] else 'NOT met'}")
    return "\n".join(lines)


def profile(config: BenchConfig, rows: int = 15) -> str:
    """torch.profiler table of one float32 `simulate(engine="torch")` call on `config.reviews` reviews.

    The torch engine only: the default compiled kernel is one opaque call the profiler cannot split.
    """
    batch = make_batch(config, config.reviews)
    tokens, mask = torch.from_numpy(batch.tokens).float(), torch.from_numpy(batch.mask)
    A = torch.from_numpy(batch.A).float()
    with torch_threads(config.threads):
        library(tokens, mask, A, alpha=config.alpha, layers=config.layers, backend="torch")  # warm-up
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            library(tokens, mask, A, alpha=config.alpha, layers=config.layers, backend="torch")
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def parse_args(argv: Sequence[str] | None) -> tuple[BenchConfig, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviews", type=int, help="reviews per timed simulate call (default 8192)")
    parser.add_argument("--repeats", type=int, help="timed repetitions, median reported (default 5)")
    parser.add_argument("--dtype", choices=[*DTYPES, "both"], default="both")
    parser.add_argument("--threads", type=int, help="torch threads (default 2, the reference machine)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke testing")
    parser.add_argument("--imdb", metavar="PATH", help="IMDb archive: real word ids via hardmax.data")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the results as JSON")
    parser.add_argument("--profile", action="store_true",
                        help="print a torch.profiler table of simulate(engine='torch')")
    args = parser.parse_args(argv)
    config = quick() if args.quick else BenchConfig()
    changes = {"reviews": args.reviews, "repeats": args.repeats, "threads": args.threads, "imdb": args.imdb}
    changes = {key: value for key, value in changes.items() if value is not None}
    if args.dtype != "both":
        changes["dtypes"] = (args.dtype,)
    return dataclasses.replace(config, **changes), args


def main(argv: Sequence[str] | None = None) -> int:
    config, args = parse_args(argv)
    results = run(config)
    print(format_table(results))
    if args.profile:
        print()
        print(profile(config))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
