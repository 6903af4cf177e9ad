"""What a nonlinear bag-of-words network reaches on the classifier's own inputs.

    python scripts/bow_network.py --out runs/bow_network            # standard split, ~4 min
    python scripts/bow_network.py --widths 16:64 64:256 --epochs 8  # embedding:hidden sizes

Why this yardstick. The hardmax classifier has no positional information: the attention scores
⟨A z_i, z_j⟩ depend only on the tokens, and the output is a mean over tokens, so the logit is a
symmetric function of the review's (at most 128) kept tokens: a bag-of-words model, nonlinear
through the dynamics. `scripts/ceiling.py` measures the linear bag-of-words models on those tokens;
this script measures a standard nonlinear one, a deep averaging network (Iyyer et al. 2015):

    logit = w₂ · relu(W₁ · mean_t E[x_t] + b₁) + b₂,     E: (V, width), W₁: (hidden, width)

trained like `hardmax train` (Adam, BCE-with-logits, batches of 64, the same word dropout, the epoch
selected on the movie-disjoint validation split, the test set scored once per epoch for the table
but never used to choose). Results go to OUT/bow_network.md and OUT/bow_network.json.
"""

from __future__ import annotations

import argparse
import os

import torch
from _report import run_and_report
from torch import Tensor, nn

from hardmax.data import DataConfig, load_imdb
from hardmax.training import word_dropout


class AveragingNetwork(nn.Module):
    """Embedding → masked mean over real tokens → one ReLU layer → logit."""

    def __init__(self, vocab_size: int, width: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, width)
        self.head = nn.Sequential(nn.Linear(width, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        """ids, mask: (batch, n) → logits (batch,)."""
        weights = mask.to(self.embedding.weight.dtype)
        pooled = (self.embedding(ids) * weights[..., None]).sum(1) / weights.sum(1, keepdim=True).clamp_min(1)
        return self.head(pooled).squeeze(-1)


@torch.no_grad()
def accuracy(model: AveragingNetwork, split, batch_size: int = 2048) -> float:
    correct = 0
    for start in range(0, len(split.labels), batch_size):
        rows = slice(start, start + batch_size)
        correct += ((model(split.ids[rows], split.mask[rows]) > 0) == split.labels[rows].bool()).sum().item()
    return correct / len(split.labels)


def fit(data, width: int, hidden: int, args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    model = AveragingNetwork(len(data.vocab), width, hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(args.seed)
    history = []
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(data.train.labels), generator=g)
        for b, start in enumerate(range(0, len(order), args.batch_size)):
            rows = order[start:start + args.batch_size]
            mask = word_dropout(data.train.mask[rows], args.word_dropout, seed=args.seed, epoch=epoch, batch=b)
            loss = nn.functional.binary_cross_entropy_with_logits(model(data.train.ids[rows], mask),
                                                                  data.train.labels[rows].float())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        history.append({"epoch": epoch + 1, "val": accuracy(model, data.val), "test": accuracy(model, data.test)})
    best = max(history, key=lambda h: h["val"])  # first maximum: selected on validation only
    return {"width": width, "hidden": hidden, "epoch": best["epoch"], "val": best["val"], "test": best["test"],
            "history": history}


def table(rows: list[dict]) -> str:
    lines = ["| embedding width | hidden units | selected epoch | val acc | test acc |", "|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['width']} | {r['hidden']} | {r['epoch']} | {r['val']:.4f} | {r['test']:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB"), help="IMDb archive/directory/CSV")
    parser.add_argument("--widths", nargs="+", default=["16:64", "64:256", "256:256"],
                        help="embedding width:hidden units of each network tried")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--word-dropout", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="use only the first N reviews of each split (smoke runs)")
    parser.add_argument("--out", default="runs/bow_network", help="directory for bow_network.md and .json")
    args = parser.parse_args(argv)
    try:
        sizes = [tuple(int(v) for v in spec.split(":")) for spec in args.widths]
        if any(len(s) != 2 or min(s) < 1 for s in sizes):
            raise ValueError
    except ValueError:
        parser.error(f"--widths takes WIDTH:HIDDEN pairs of positive integers, got {args.widths}")
    data = load_imdb(DataConfig(path=args.data, limit=args.limit), progress=False)  # the classifier's defaults
    return run_and_report(sizes, lambda size: fit(data, *size, args), table, args.out, "bow_network")


if __name__ == "__main__":
    main()
