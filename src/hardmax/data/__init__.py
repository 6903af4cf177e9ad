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

from typing import TYPE_CHECKING

from hardmax.lazy import lazy_exports

# public name -> module that defines it. Names are imported on first use (PEP 562 `__getattr__`), so
# `hardmax.data.config` (DataConfig, read by the command line for its options) loads without torch.
_EXPORTS: dict[str, str] = {
    "DataConfig": "hardmax.data.config",
    "DataError": "hardmax.data.config",
    "DataStats": "hardmax.data.splits",
    "EncodedTexts": "hardmax.data.text",
    "IMDB_BYTES": "hardmax.data.config",
    "IMDB_FILENAME": "hardmax.data.config",
    "IMDB_SHA256": "hardmax.data.config",
    "IMDB_URL": "hardmax.data.config",
    "ImdbData": "hardmax.data.splits",
    "PAD": "hardmax.data.config",
    "PAD_WORD": "hardmax.data.config",
    "PIPELINE_VERSION": "hardmax.data.config",
    "Reviews": "hardmax.data.source",
    "STOP_LISTS": "hardmax.data.config",
    "Split": "hardmax.data.text",
    "SplitProtocol": "hardmax.data.config",
    "SplitStats": "hardmax.data.splits",
    "StopWords": "hardmax.data.config",
    "Truncation": "hardmax.data.config",
    "UNK": "hardmax.data.config",
    "UNK_WORD": "hardmax.data.config",
    "VAL_BLOCK": "hardmax.data.config",
    "ValSplit": "hardmax.data.config",
    "Vocabulary": "hardmax.data.text",
    "clean_text": "hardmax.data.text",
    "default_cache_dir": "hardmax.data.source",
    "download_imdb": "hardmax.data.source",
    "encode_texts": "hardmax.data.text",
    "load_imdb": "hardmax.data.load",
    "read_reviews": "hardmax.data.source",
    "resolve_imdb_path": "hardmax.data.source",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from hardmax.data.config import (  # noqa: F401
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
    from hardmax.data.load import load_imdb  # noqa: F401
    from hardmax.data.source import (  # noqa: F401
        Reviews,
        default_cache_dir,
        download_imdb,
        read_reviews,
        resolve_imdb_path,
    )
    from hardmax.data.splits import DataStats, ImdbData, SplitStats  # noqa: F401
    from hardmax.data.text import EncodedTexts, Split, Vocabulary, clean_text, encode_texts  # noqa: F401
