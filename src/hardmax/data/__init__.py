"""IMDb sentiment data: locate or download, read, clean, tokenise, vocabulary, cache -> tensors.

The paper's sentiment model (Alcalde, Fantuzzi, Zuazua 2024, §5: word embedding -> pure-attention
layers -> mean -> linear decoder) is trained on the Large Movie Review Dataset v1.0 (Maas et al.,
ACL 2011). This package turns the raw reviews into padded id tensors:

    resolve_imdb_path -> read_reviews -> clean_text (each review) -> Vocabulary (training part only)
        -> Split(ids (N, max_len) int64, mask (N, max_len) bool, labels (N,) int64, ...) -> ImdbData

`load_imdb(DataConfig(...))` runs the chain and caches the tensors on disk (safetensors + JSON);
`encode_texts` applies the same cleaning and vocabulary to new text at inference time.
Files, in pipeline order: `config` (DataConfig, constants, DataError) -> `source` (locate, download,
read) -> `text` (clean, vocabulary, encode) -> `splits` (rows, tensors, statistics) -> `load`
(`load_imdb` and its cache). Models, training and plots live elsewhere; nothing here imports them.
"""

from __future__ import annotations

from hardmax.data.config import (
    IMDB_BYTES,
    IMDB_FILENAME,
    IMDB_SHA256,
    IMDB_URL,
    PAD,
    PAD_WORD,
    PIPELINE_VERSION,
    STOP_LISTS,
    UNK,
    UNK_WORD,
    VAL_BLOCK,
    DataConfig,
    DataError,
    SplitProtocol,
    StopWords,
    Truncation,
    ValSplit,
)
from hardmax.data.load import load_imdb
from hardmax.data.source import Reviews, default_cache_dir, download_imdb, read_reviews, resolve_imdb_path
from hardmax.data.splits import DataStats, ImdbData, SplitStats
from hardmax.data.text import EncodedTexts, Split, Vocabulary, clean_text, encode_texts

__all__ = [
    "DataConfig",
    "DataError",
    "DataStats",
    "EncodedTexts",
    "IMDB_BYTES",
    "IMDB_FILENAME",
    "IMDB_SHA256",
    "IMDB_URL",
    "ImdbData",
    "PAD",
    "PAD_WORD",
    "PIPELINE_VERSION",
    "Reviews",
    "STOP_LISTS",
    "Split",
    "SplitProtocol",
    "SplitStats",
    "StopWords",
    "Truncation",
    "UNK",
    "UNK_WORD",
    "VAL_BLOCK",
    "ValSplit",
    "Vocabulary",
    "clean_text",
    "default_cache_dir",
    "download_imdb",
    "encode_texts",
    "load_imdb",
    "read_reviews",
    "resolve_imdb_path",
]
