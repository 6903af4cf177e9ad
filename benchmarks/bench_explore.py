"""The explorer's latency (issue #26), measured against the real server over HTTP, as a page would see it.

Starts `hardmax.explore.create_app` under uvicorn on 127.0.0.1 and reports p50 / p95 of:

- re-simulating after an edit: n Gaussian tokens over L layers (`--sizes`, default 50 × 100, 200 × 100 and
  the issue's largest, 200 × 500, in 2-D at the paper's α = 1/2; 200 × 500 at α = 0.05, a run that converges
  slowly so that every layer moves; 200 × 500 in 3-D), one token moved per request, with leaders, K, S and the
  Theorem 2.1 check (hardmax) or the trajectory (softmax, β = 5);
- a review on a trained run (`--runs DIR`, each run found there; without one, a d = 16 run is trained on a
  generated IMDb-layout archive, ~10 s): texts of 200 words, so that every review fills max_len = 128 tokens;
- a page made interactive: from navigation to the first answer drawn (`window.explorer.idle()`), in headless
  Chromium when one is installed (Playwright).

Targets: edit < 100 ms, review < 300 ms, page < 1 s. The script states each as met or not; it does not assert.

    .venv/bin/python benchmarks/bench_explore.py --json results/bench_explore.json
    .venv/bin/python benchmarks/bench_explore.py --quick          # a smoke run, ~30 s
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _post(url: str, body: dict) -> tuple[float, dict]:
    """POST as the pages do: JSON in, a binary frame (`hardmax.explore.frames`) asked for and read back."""
    from hardmax.explore.frames import FRAME_TYPE, decode_frame

    data = json.dumps(body).encode()
    start = time.perf_counter()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"content-type": "application/json", "accept": FRAME_TYPE})
    with urllib.request.urlopen(request, timeout=120) as r:
        raw = r.read()
        payload = decode_frame(raw) if r.headers.get("content-type", "").startswith(FRAME_TYPE) else json.loads(raw)
    return time.perf_counter() - start, payload


def _quantiles(seconds: list[float]) -> dict:
    ms = sorted(1000 * s for s in seconds)
    return {"p50_ms": statistics.median(ms), "p95_ms": ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))],
            "runs": len(ms)}


def bench_edits(base: str, *, n: int, layers: int, d: int, alpha: float, rule: str, repeats: int,
                seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tokens = rng.standard_normal((n, d))
    body = {"tokens": tokens.tolist(), "alpha": alpha, "layers": layers, "rule": rule}
    if rule == "softmax":
        body["beta"] = 5.0
    _post(base + "/api/simulate", body)  # warm
    seconds, server = [], []
    for _ in range(repeats):
        i = int(rng.integers(n))
        tokens[i] += 0.05 * rng.standard_normal(d)  # the edit: one token dragged a little
        body["tokens"] = tokens.tolist()
        took, answer = _post(base + "/api/simulate", body)
        seconds.append(took)
        server.append(sum(answer["seconds"].values()))
    out = _quantiles(seconds)
    out["server_p50_ms"] = 1000 * statistics.median(server)
    return out


def _words(run_dir: Path) -> list[str]:
    vocab = json.loads((run_dir / "vocab.json").read_text())
    words = vocab["words"] if isinstance(vocab, dict) else vocab
    return [w for w in words if w.isalpha()]


def bench_reviews(base: str, name: str, run_dir: Path, *, repeats: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    words = _words(run_dir)
    texts = [" ".join(rng.choice(words, size=200)) for _ in range(repeats + 1)]
    _post(base + "/api/review", {"run": name, "text": texts[0]})  # loads the run once
    return _quantiles([_post(base + "/api/review", {"run": name, "text": t})[0] for t in texts[1:]])


def bench_pages(base: str, *, repeats: int, run: str | None) -> dict | None:
    chromium = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser")) if p), None)
    if chromium is None:
        return None
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"]
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        pages = {"playground": "/playground"}
        if run:
            pages["classifier"] = f"/classifier#run={run}"
        for name, path in pages.items():
            seconds = []
            for _ in range(repeats + 1):
                page = browser.new_page()
                start = time.perf_counter()
                page.goto(base + path)
                page.wait_for_function("() => window.explorer && window.explorer.idle() && "
                                       "document.body.dataset.state === 'ready'", timeout=60_000)
                seconds.append(time.perf_counter() - start)
                page.close()
            out[name] = _quantiles(seconds[1:])
        browser.close()
    return out


def _train_run(root: Path) -> Path:
    """A d = 16 run under root/runs, trained in a process of its own: PyTorch work in this process's main thread
    would leave an OpenMP team beside the server's, and libgomp would then throttle both (see `warm_up`)."""
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from explore_server import train_runs; "
            "train_runs(Path(sys.argv[2]), Path(sys.argv[2]) / 'cache', (('d16', ('--d', '16')),))")
    subprocess.run([sys.executable, "-c", code, str(ROOT / "tests"), str(root)], check=True)
    return root / "runs"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, help="trained runs to time reviews on (default: train a small d = 16 one)")
    parser.add_argument("--sizes", default="50x100,200x100,200x500,200x500@0.05,200x500x3",
                        help="tokens x layers[x d][@alpha] of the timed edits, comma-separated (default: "
                             "50x100,200x100,200x500 in 2-D at α = 1/2; 200x500@0.05: a run that converges slowly, "
                             "so that every layer moves; 200x500x3: the 3-D view)")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    repeats = 8 if args.quick else args.repeats

    from hardmax.explore.server import Background, create_app, quiet_openmp

    if not quiet_openmp():  # as `hardmax explore` does before it imports torch
        print("note: torch was imported before the benchmark started: PyTorch's OpenMP workers spin as by default")

    with tempfile.TemporaryDirectory() as scratch:
        runs = args.runs if args.runs is not None else _train_run(Path(scratch))
        app = create_app(runs)
        found = app.state.explorer.runs
        with Background(app) as server:
            sizes = []
            for size in args.sizes.split(","):
                shape, _, alpha = size.partition("@")
                n, layers, d = ([int(x) for x in shape.split("x")] + [2])[:3]
                sizes.append((n, layers, d, float(alpha or 0.5)))
            results: dict = {"config": {"sizes": sizes, "repeats": repeats}, "edit": []}
            for n, layers, d, alpha in sizes:
                for rule in ("hardmax", "softmax"):
                    results["edit"].append({"tokens": n, "layers": layers, "d": d, "alpha": alpha, "rule": rule,
                                            **bench_edits(server.url, n=n, layers=layers, d=d, alpha=alpha,
                                                          rule=rule, repeats=repeats)})
            results["review"] = {name: bench_reviews(server.url, name, path, repeats=repeats)
                                 for name, path in found.items()}
            results["page"] = bench_pages(server.url, repeats=max(3, repeats // 4),
                                          run=next(iter(found), None))
    _print(results)
    if args.json:
        from hardmax.io import write_json

        write_json(args.json, results)
    return results


def _print(results: dict) -> None:
    rows = []
    for r in results["edit"]:
        rows.append((f"edit, {r['rule']} (n = {r['tokens']}, {r['layers']} layers, d = {r['d']}, α = {r['alpha']:g}; "
                     f"server {r['server_p50_ms']:.0f} ms)", r["p50_ms"], r["p95_ms"], 100))
    for name, r in results["review"].items():
        rows.append((f"review on run {name}", r["p50_ms"], r["p95_ms"], 300))
    for name, r in (results["page"] or {}).items():
        rows.append((f"{name} page interactive", r["p50_ms"], r["p95_ms"], 1000))
    print("| request | p50 (ms) | p95 (ms) | target | p50 / p95 under it |")
    print("|---|---|---|---|---|")
    for what, p50, p95, target in rows:
        print(f"| {what} | {p50:.0f} | {p95:.0f} | < {target} ms | {'yes' if p50 < target else 'no'} / "
              f"{'yes' if p95 < target else 'no'} |")
    if results["page"] is None:
        print("(page timings skipped: no Chromium; apt-get install chromium)")


if __name__ == "__main__":
    main()
