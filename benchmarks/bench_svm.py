"""Time the Att-SVM synthetic experiment: batched (hardmax.experiments.svm) against a per-seed loop.

The loop is written the way the authors' notebook (TF-as-SVM, local_converge.ipynb) runs it: for every
seed and parameterisation, autograd through the model, one normalised SGD step per iteration, W and
the softmax maximum copied out every iteration, then cvxpy programs built one constraint at a time
(both norms) and the correlations computed iteration by iteration. Both are measured in the same run,
wall clock and CPU time (the machine is shared: CPU time is the steadier figure). The loop runs on
`--loop-seeds` seeds and is extrapolated linearly to all seeds (seeds are independent).

    python benchmarks/bench_svm.py                 # 100 seeds, 2,000 steps; loop timed on 5 seeds
    python benchmarks/bench_svm.py --loop-seeds 10 --out results/bench_svm.json
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np
import torch

from hardmax.experiments.svm import SyntheticConfig, run_synthetic, synthetic_problems
from hardmax.io import write_json


class Clock:
    """Wall and CPU seconds since construction."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def notebook_descent(X, z, y, v, kq: bool, iterations: int, generator: torch.Generator):
    """One seed, one parameterisation, as the notebook: autograd, per-iteration copies to NumPy."""
    n, T, d = X.shape
    eps = torch.finfo(torch.float64).eps
    bound = 1 / math.sqrt(d)
    params = [(torch.rand(d, d, generator=generator, dtype=torch.float64) * 2 - 1) * bound
              for _ in range(2 if kq else 1)]
    for p in params:
        p.requires_grad_()
    history = np.zeros((iterations, d, d))
    mass = np.zeros(iterations)
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
            W = params[0] @ params[1].T if kq else params[0]
        history[it] = W.detach().numpy()
        top = att.detach().max(dim=-1)
        mass[it] = float(top.values.mean())
        selection = top.indices
    return history, selection.tolist()


def notebook_svms(X, z, history, selection) -> np.ndarray:
    """Both SVMs of one selection, constraints appended one by one, and the correlation per iteration."""
    import cvxpy as cp

    n, T, d = X.shape
    Xn, zn = X.numpy(), z.numpy()
    corrs = []
    for norm in ("fro", "nuc"):
        Wv = cp.Variable((d, d))
        constraints = []
        for i in range(n):
            for t in range(T):
                if t != selection[i]:
                    constraints.append((Xn[i, t] - Xn[i, selection[i]]).reshape(1, -1) @ Wv @ zn[i].reshape(-1, 1)
                                       <= -1)
        cp.Problem(cp.Minimize(cp.norm(Wv, norm)), constraints).solve(solver=cp.CLARABEL)
        ref = Wv.value / np.linalg.norm(Wv.value)
        corrs.append([float((h / np.linalg.norm(h) * ref).sum()) for h in history])
    return np.array(corrs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100, help="seeds of the batched run (default 100)")
    parser.add_argument("--iterations", type=int, default=2000, help="gradient steps (default 2000)")
    parser.add_argument("--loop-seeds", type=int, default=5, help="seeds the per-seed loop is timed on (default 5)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", default="results/bench_svm.json", help="where the figures are written as JSON")
    args = parser.parse_args()
    if min(args.seeds, args.iterations, args.loop_seeds, args.threads) < 1:
        raise SystemExit("--seeds, --iterations, --loop-seeds and --threads must be ≥ 1")
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    config = SyntheticConfig(seeds=args.seeds, iterations=args.iterations)

    clock = Clock()
    result = run_synthetic(config)
    batched_wall, batched_cpu = clock.read()

    problems = synthetic_problems(SyntheticConfig(seeds=args.loop_seeds, iterations=args.iterations),
                                  torch.Generator().manual_seed(0))
    X, z, y, v = problems.X, problems.z, problems.y, problems.v
    g = torch.Generator().manual_seed(1)
    import cvxpy  # noqa: F401  (imported before the clock starts: the loop is not charged for the import)

    descent, svm = np.zeros(2), np.zeros(2)  # (wall, cpu)
    for s in range(args.loop_seeds):  # the baseline being measured: a Python loop over seeds, on purpose
        for kq in (False, True):
            clock = Clock()
            history, selection = notebook_descent(X[s], z[s], y[s], v[s], kq, args.iterations, g)
            descent += clock.read()
            clock = Clock()
            notebook_svms(X[s], z[s], history, selection)
            svm += clock.read()
    scale = args.seeds / args.loop_seeds
    descent, svm = descent * scale, svm * scale
    loop_wall, loop_cpu = descent + svm
    load_after = os.getloadavg()[0]

    out = {
        "command": "python benchmarks/bench_svm.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
        "seeds": args.seeds, "iterations": args.iterations, "threads": args.threads, "loop_seeds": args.loop_seeds,
        "batched": {"wall_s": batched_wall, "cpu_s": batched_cpu, "descent_wall_s": result.seconds["descent"],
                    "svm_wall_s": result.seconds["svm"], "svm_solves": int(result.seconds["solves"])},
        "loop_extrapolated": {"wall_s": loop_wall, "cpu_s": loop_cpu, "descent_wall_s": descent[0],
                              "descent_cpu_s": descent[1], "svm_wall_s": svm[0], "svm_cpu_s": svm[1],
                              "svm_solves": 4 * args.seeds},
        "speedup_wall": loop_wall / batched_wall, "speedup_cpu": loop_cpu / batched_cpu,
        "load_average_1min": [load_before, load_after], "cores": os.cpu_count(),
        "machine": platform.machine(), "python": platform.python_version(), "torch": torch.__version__,
    }
    print(f"{args.seeds} seeds, n = 6, T = 8, d = 10, {args.iterations} steps, W and (K, Q), {args.threads} "
          f"thread(s), {os.cpu_count()} cores, load average {load_before:.1f} -> {load_after:.1f}")
    print("| method | wall s | CPU s | descent wall s | SVM wall s | SVM solves |\n|---|---|---|---|---|---|")
    b, lo = out["batched"], out["loop_extrapolated"]
    print(f"| batched (hardmax.experiments.svm) | {b['wall_s']:.1f} | {b['cpu_s']:.1f} | {b['descent_wall_s']:.1f} | "
          f"{b['svm_wall_s']:.1f} | {b['svm_solves']} |")
    print(f"| per-seed loop, notebook style ({args.loop_seeds} seeds × {scale:g}) | {lo['wall_s']:.1f} | "
          f"{lo['cpu_s']:.1f} | {lo['descent_wall_s']:.1f} | {lo['svm_wall_s']:.1f} | {lo['svm_solves']} |")
    print(f"speed-up: {out['speedup_wall']:.1f}× wall, {out['speedup_cpu']:.1f}× CPU")
    write_json(args.out, out)


if __name__ == "__main__":
    main()
