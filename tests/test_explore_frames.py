"""Tests of `hardmax.explore.frames`: arrays as exact float64 in base64 JSON records and in binary frames, paths
cut after the last layer that moved, a view's arrays carried bit for bit.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import hardmax
from hardmax.explore.frames import (
    decode_array,
    decode_frame,
    decode_path,
    encode_array,
    encode_frame,
    encode_path,
    raw_array,
)
from hardmax.explore.requests import PlaygroundRequest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_encode_array_round_trip(rng):
    x = rng.standard_normal((3, 5, 2))
    assert np.array_equal(decode_array(json.loads(json.dumps(encode_array(x)))), x)


def test_encode_path_drops_only_repeated_layers(rng):
    path = rng.standard_normal((6, 4, 2))
    path[3:] = path[2]
    record = json.loads(json.dumps(encode_path(path)))
    assert record["shape"] == [3, 4, 2] and np.array_equal(decode_path(record, 5), path)
    path[5, 0, 0] = np.nextafter(path[5, 0, 0], np.inf)  # a change in the last bit keeps every layer
    assert encode_path(path)["shape"] == [6, 4, 2]


def test_a_frame_carries_the_views_arrays_exactly(rng):
    """`encode_frame`: every array record of a view as raw float64 bytes at an 8-byte aligned offset after a JSON
    header (non-ASCII text included); `decode_frame` gives the same record as the JSON answer, arrays bit for bit."""
    from hardmax.explore.views import playground_view

    view = playground_view(PlaygroundRequest(tokens=rng.normal(size=(12, 2)), alpha=0.5, layers=20, A=np.eye(2),
                                             rule=hardmax.Hardmax()))
    view["points"] = encode_array(rng.normal(size=(3, 5)))  # a second array, after the path
    frame = encode_frame(view)
    size = int.from_bytes(frame[4:8], "little")
    assert frame[:4] == b"HMXF" and (8 + size) % 8 == 0
    back, text = decode_frame(frame), json.loads(json.dumps(view))
    for key in ("path", "points"):
        assert back[key]["shape"] == text[key]["shape"]
        assert np.array_equal(decode_array(back[key]), decode_array(text[key]))
    assert len(frame) - 8 - size == 8 * (decode_array(text["path"]).size + 15)  # nothing but the arrays after it
    rest = {k: v for k, v in back.items() if k not in ("path", "points")}
    assert rest == {k: v for k, v in text.items() if k not in ("path", "points")}  # the theorem's ≤ and ‖ kept
    with pytest.raises(ValueError, match="not a hardmax frame"):
        decode_frame(b"{}")
    # a view made for a frame holds raw arrays (no base64 made): the same frame, and no JSON at all
    request = PlaygroundRequest(tokens=decode_array(text["path"])[0].copy(), alpha=0.5, layers=20, A=np.eye(2),
                                rule=hardmax.Hardmax())
    raw = playground_view(request, encode=raw_array)
    assert np.array_equal(decode_array(decode_frame(encode_frame(raw))["path"]), decode_array(text["path"]))
    with pytest.raises(TypeError):
        json.dumps(raw)
