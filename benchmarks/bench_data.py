"""Time of the IMDb pipeline: the first (uncached) run over all 50k reviews, and a cached load.

    python benchmarks/bench_data.py --data ../shared/data/aclImdb-labeled.tar.gz [--repeats 3] [--json OUT]

Cold: `load_imdb` with an empty cache directory (a fresh temporary one per repeat, and the in-memory
table of normalised words cleared, as in a new process): read the archive,
clean, lemmatise and drop stop words, build the vocabulary, tensorise, write the cache. Warm: the
same call again, which reads the cached tensors. Settings are `DataConfig`'s defaults (the classifier's
inputs). Targets of issue #3: first full pipeline < 60 s, cached load < 3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from hardmax.data import STOP_LISTS, DataConfig, load_imdb
from hardmax.data.text import clear_word_caches
from hardmax.io import write_json

TARGETS = {"cold_seconds": 60.0, "warm_seconds": 3.0}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("HARDMAX_IMDB"), help="IMDb archive/directory/CSV")
    parser.add_argument("--repeats", type=int, default=3, help="cold and warm runs (the median is reported)")
    parser.add_argument("--limit", type=int, help="use only N reviews per split (smoke runs)")
    parser.add_argument("--stopwords", default="nltk", choices=sorted(STOP_LISTS))
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("give --data PATH or set HARDMAX_IMDB (the benchmark never downloads)")
    cold, warm, stats = [], [], None
    for _ in range(args.repeats):
        # Every cold run starts from nothing: no tensor cache on disk, no normalised words in memory.
        clear_word_caches()
        with tempfile.TemporaryDirectory(prefix="hardmax-bench-") as cache:
            config = DataConfig(path=args.data, limit=args.limit, cache_dir=cache, download=False,
                                stopwords=args.stopwords)
            first = load_imdb(config, progress=False)
            assert not first.stats.cache_hit
            cold.append(first.stats.seconds)
            again = load_imdb(config, progress=False)
            assert again.stats.cache_hit
            warm.append(again.stats.seconds)
            stats = first.stats
    reviews = sum(s.reviews for s in stats.splits.values())
    result = {
        "source": Path(stats.source).name, "reviews": reviews, "vocab_size": stats.vocab_size,
        "stopwords": args.stopwords, "cold_seconds": statistics.median(cold), "warm_seconds": statistics.median(warm),
        "cold_all": cold, "warm_all": warm, "targets": TARGETS,
    }
    print(f"IMDb pipeline on {result['source']}: {reviews} reviews, vocabulary {stats.vocab_size} "
          f"({args.stopwords} stop words), median of {args.repeats}")
    print("| run | seconds | target |\n|---|---|---|")
    print(f"| first, uncached (read, clean, vocabulary, tensors, cache write) | {result['cold_seconds']:.1f} | "
          f"< {TARGETS['cold_seconds']:.0f} |")
    print(f"| cached load | {result['warm_seconds']:.2f} | < {TARGETS['warm_seconds']:.0f} |")
    if args.json:
        write_json(Path(args.json), result)
    return result


if __name__ == "__main__":
    main()
