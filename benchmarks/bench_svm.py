"""Time the Att-SVM synthetic experiment: batched (hardmax.experiments.svm) against a per-seed loop.

The loop is written the way the authors' notebook runs it: for every seed and parameterisation, a
torch module, autograd, one normalised SGD step per iteration, W copied to NumPy every iteration, then
cvxpy programs built one constraint at a time (both norms). Both are measured in the same run; the
loop runs on `--loop-seeds` seeds and is extrapolated linearly to all seeds (seeds are independent).

    python benchmarks/bench_svm.py                 # 100 seeds, 2,000 steps; loop timed on 5 seeds
    python benchmarks/bench_svm.py --out docs/bench_svm.json
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np
import torch

from hardmax.experiments.svm import SyntheticConfig, run_synthetic, synthetic_problems
from hardmax.io import write_json


def notebook_seed(X, z, y, v, kq: bool, iterations: int, generator: torch.Generator) -> np.ndarray:
    """One seed, one parameterisation, as the notebook: autograd + per-iteration copies + looped constraints."""
    import cvxpy as cp

    n, T, d = X.shape
    eps = torch.finfo(torch.float64).eps
    bound = 1 / math.sqrt(d)
    params = [(torch.rand(d, d, generator=generator, dtype=torch.float64) * 2 - 1) * bound
              for _ in range(2 if kq else 1)]
    for p in params:
        p.requires_grad_()
    history = np.zeros((iterations, d, d))
    for it in range(iterations):
        W = params[0] @ params[1].T if kq else params[0]
        att = torch.softmax((X @ W @ z.unsqueeze(-1)).squeeze(-1), dim=-1)
        out = (att * (X @ v)).sum(-1)
        loss = torch.log(1 + torch.exp(-y * out)).mean()
        if kq:
            loss = loss + eps * (params[0].norm() ** 2 + params[1].norm() ** 2)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= 0.1 * p.grad / (p.grad.norm() + eps)
        history[it] = W.detach().numpy()
    selection = att.argmax(-1).tolist()
    Xn, zn = X.numpy(), z.numpy()
    corrs = []
    for norm in ("fro", "nuc"):
        Wv = cp.Variable((d, d))
        constraints = []
        for i in range(n):
            for t in range(T):
                if t != selection[i]:
                    constraints.append((Xn[i, t] - Xn[i, selection[i]]) @ Wv @ zn[i] <= -1)
        cp.Problem(cp.Minimize(cp.norm(Wv, norm)), constraints).solve(solver=cp.CLARABEL)
        ref = Wv.value / np.linalg.norm(Wv.value)
        corrs.append([float((h * ref).sum() / np.linalg.norm(h)) for h in history])
    return np.array(corrs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--loop-seeds", type=int, default=5, help="seeds the per-seed loop is timed on")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="docs/bench_svm.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = SyntheticConfig(seeds=args.seeds, iterations=args.iterations)

    start = time.perf_counter()
    result = run_synthetic(config)
    batched = time.perf_counter() - start

    X, z, y, v = synthetic_problems(SyntheticConfig(seeds=args.loop_seeds, iterations=args.iterations),
                                    torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    start = time.perf_counter()
    for s in range(args.loop_seeds):  # the baseline being measured: a Python loop over seeds, on purpose
        for kq in (False, True):
            notebook_seed(X[s], z[s], y[s], v[s], kq, args.iterations, g)
    loop = (time.perf_counter() - start) / args.loop_seeds * args.seeds

    rows = [("batched (hardmax.experiments.svm)", batched, result.seconds["descent"], result.seconds["svm"]),
            (f"per-seed loop, notebook style (timed on {args.loop_seeds} seeds, × {args.seeds / args.loop_seeds:g})",
             loop, float("nan"), float("nan"))]
    print(f"{args.seeds} seeds, n = 6, T = 8, d = 10, {args.iterations} steps, W and (K, Q), "
          f"{args.threads} thread(s), {platform.processor() or platform.machine()}")
    print("| method | total s | descent s | SVM s |\n|---|---|---|---|")
    for name, total, descent, svm in rows:
        print(f"| {name} | {total:.1f} | {descent:.1f} | {svm:.1f} |")
    print(f"speed-up: {loop / batched:.1f}×; SVM solves in the batched run: {int(result.seconds['solves'])}")
    write_json(args.out, {"seeds": args.seeds, "iterations": args.iterations, "threads": args.threads,
                          "loop_seeds": args.loop_seeds, "batched_s": batched,
                          "batched_descent_s": result.seconds["descent"],
                          "batched_svm_s": result.seconds["svm"], "solves": result.seconds["solves"],
                          "loop_s_extrapolated": loop, "speedup": loop / batched,
                          "machine": platform.machine(), "python": platform.python_version()})


if __name__ == "__main__":
    main()
