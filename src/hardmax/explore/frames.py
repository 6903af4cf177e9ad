"""How the explorer's arrays travel: exact float64, as base64 inside JSON or as raw bytes in a binary frame.

    encode_array(x) / decode_array(record)   {"shape": [...], "b64": ...}: JSON as it is (exports, notebooks, the
                                             JSON API)
    encode_path(path) / decode_path(record)  a path cut after the last layer at which anything moved
    encode_frame(view) / decode_frame(bytes) a view with its arrays as raw bytes after a JSON header: the pages ask
                                             for it (Accept: `FRAME_TYPE`), and neither side decodes base64;
                                             a view computed for a frame holds `raw_array`s (no base64 made)

Only NumPy: the server imports this before anything loads PyTorch (see `server.quiet_openmp`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["FRAME_TYPE", "EncodedArray", "RawArray", "decode_array", "decode_frame", "decode_path", "encode_array",
           "encode_frame", "encode_path", "raw_array"]


class EncodedArray(dict):
    """An `encode_array` record: the dict {"shape": [...], "b64": ...} (JSON as it is) that also holds the array it
    encodes (`.array`), so that a binary answer (`encode_frame`) carries its bytes without decoding the text."""

    array: np.ndarray


def encode_array(x: np.ndarray) -> EncodedArray:
    """{"shape": [...], "b64": base64 of the float64 little-endian bytes} (`decode_array` reads it back)."""
    x = np.ascontiguousarray(np.asarray(x, dtype="<f8"))
    record = EncodedArray(shape=list(x.shape), b64=base64.b64encode(x.tobytes()).decode("ascii"))
    record.array = x
    return record


@dataclass(frozen=True)
class RawArray:
    """An array bound for a binary frame only (`raw_array`): no base64, and not JSON (json.dumps refuses it)."""

    array: np.ndarray


def raw_array(x: np.ndarray) -> RawArray:
    """`encode_array` for a view that travels as a binary frame: the float64 array as it is (the base64 text
    `encode_array` adds costs ~4 ms for a 2.4 MB path, and a frame does not carry it)."""
    return RawArray(np.ascontiguousarray(np.asarray(x, dtype="<f8")))


def decode_array(record: dict | RawArray) -> np.ndarray:
    """The float64 array of an `encode_array` record {"b64": little-endian bytes in base64, "shape": [...]}, of a
    frame's record {"shape": [...], "array": ...} (`decode_frame`), or of a `RawArray`."""
    if isinstance(record, RawArray):
        return record.array
    if "array" in record:
        return record["array"]
    return np.frombuffer(base64.b64decode(record["b64"]), dtype="<f8").reshape(record["shape"])


#: The media type of a binary answer (`encode_frame`), which the pages ask for (Accept); JSON otherwise.
FRAME_TYPE = "application/vnd.hardmax.frame"
_MAGIC = b"HMXF"


def encode_frame(record: dict) -> bytes:
    """A view as one binary frame: its `encode_array` / `raw_array` records (one level down) as raw float64 bytes,
    the rest JSON.

        b"HMXF" | header length h (uint32, little-endian) | header: UTF-8 JSON, h bytes, padded with spaces to a
        multiple of 8 | the arrays' little-endian float64 bytes, one after the other

    In the header each such record is {"shape": [...], "at": byte offset of its data after the padded header}
    (a multiple of 8: a Float64Array views it in place). A 200-token, 500-layer path is 1.6 MB instead of 2.1 MB of
    base64 inside JSON, and neither side decodes text.
    """
    header, blobs, at = dict(record), [], 0
    for key, value in record.items():
        if isinstance(value, EncodedArray | RawArray):
            header[key] = {"shape": list(value.array.shape), "at": at}
            blobs.append(value.array.astype("<f8", copy=False).tobytes())
            at += len(blobs[-1])  # float64: a multiple of 8
    text = json.dumps(header, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(_MAGIC) + 4 + len(text)) % 8)
    return b"".join([_MAGIC, len(text).to_bytes(4, "little"), text, *blobs])


def decode_frame(frame: bytes) -> dict:
    """The record of an `encode_frame` frame, each array record {"shape": [...], "array": float64 array}
    (`decode_array` reads both kinds of record)."""
    if len(frame) < 8 or frame[:4] != _MAGIC:
        raise ValueError("not a hardmax frame")
    size = int.from_bytes(frame[4:8], "little")
    record = json.loads(frame[8:8 + size].decode("utf-8"))
    for key, value in record.items():
        if isinstance(value, dict) and isinstance(value.get("at"), int) and "shape" in value:
            count = int(np.prod(value["shape"], dtype=np.int64))
            data = np.frombuffer(frame, dtype="<f8", count=count, offset=8 + size + value["at"])
            record[key] = {"shape": value["shape"], "array": data.reshape(value["shape"])}
    return record


def encode_path(path: np.ndarray, encode: Callable[[np.ndarray], object] = encode_array):
    """`encode` (`encode_array`, or `raw_array` for a frame) of a (layers + 1, n, p) path cut after the last layer at
    which anything moved: the layers after it repeat it bit for bit (a converged run stands still), so they are
    implied, not sent."""
    if len(path) < 2:  # no layer run: the input alone
        return encode(path)
    moved = np.nonzero((path[1:] != path[:-1]).reshape(len(path) - 1, -1).any(axis=1))[0]
    last = int(moved[-1]) + 1 if len(moved) else 0
    return encode(path[:last + 1])


def decode_path(record: dict, layers: int) -> np.ndarray:
    """The (layers + 1, n, p) path an `encode_path` record stands for (its last layer repeated to `layers`)."""
    kept = decode_array(record)
    return np.concatenate([kept, np.repeat(kept[-1:], layers + 1 - len(kept), axis=0)])
