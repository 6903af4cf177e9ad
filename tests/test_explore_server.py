"""Tests of `hardmax.explore.server`: only JSON from this host is read, bodies bounded (each, and all being read
together) and parsed, runs found by name and never by path, answers (JSON with base64 arrays spliced in, or frames
when asked) and one-line errors naming no server path, a client hanging up quietly, and `quiet_openmp`.

The trained runs and the live server the API tests ask are conftest.py's `explore_runs` and `explore_client`
(built once per session); helpers in explore_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from explore_server import HEAD, SQUARE, Client, LiveServer, one_response, post_json, raw_connection, settled

import hardmax
from hardmax.explore import Limits, create_app, find_runs
from hardmax.explore.frames import decode_array, decode_frame, decode_path, encode_array
from hardmax.explore.requests import PlaygroundRequest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_only_json_from_this_host_is_read(explore_client):
    plain = explore_client.post("/api/simulate", content=json.dumps({"tokens": SQUARE}).encode(),
                        headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]
    deep = explore_client.post("/api/simulate", content=b"[" * 9_000 + b"]" * 9_000,
                       headers={"content-type": "application/json"})
    assert deep.status_code == 400 and "nested" in deep.json()["error"]
    rebound = explore_client.post("/api/simulate", json={"tokens": SQUARE},
                          headers={"content-type": "application/json", "host": "attacker.example:80"})
    assert rebound.status_code == 400  # a DNS-rebinding page names another host


def test_bodies_are_bounded_and_parsed(explore_client):
    big = explore_client.post("/api/simulate", content=b"{" + b" " * 30_000 + b"}",
                      headers={"content-type": "application/json"})
    assert big.status_code == 413 and "bytes" in big.json()["error"]
    bad = explore_client.post("/api/simulate", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
    assert explore_client.post("/api/simulate", json={"tokens": SQUARE}).status_code == 200  # the server goes on


def test_runs_are_found_and_named_not_pathed(explore_client, explore_runs):
    assert set(find_runs(explore_runs)) == {"d2", "d4", "crate"}
    listed = explore_client.get("/api/runs").json()["runs"]
    assert [r["name"] for r in listed] == ["d2", "d4", "crate"]  # the paper's layer first
    for name in ("../d2", str(explore_runs / "d2"), "/etc", "d3"):
        code, answer = post_json(explore_client, "/api/review", {"run": name, "text": "a great film"})
        assert code == 400 and "one of the server's runs" in answer["error"]
    code, answer = post_json(explore_client, "/api/review", {"run": "d2", "text": "x" * 501})
    assert code == 413
    code, answer = post_json(explore_client, "/api/review", {"run": "d2", "text": "   "})
    assert code == 400 and "empty" in answer["error"]
    code, answer = post_json(explore_client, "/api/review", {"run": "d2", "text": "the and of ..."})
    assert code == 400 and "empty after cleaning" in answer["error"]
    assert explore_client.get("/static/../server.py").status_code == 404


def test_answers_splice_base64_arrays_into_the_same_json():
    """The server's answers put base64 arrays in without json.dumps; the JSON they parse to is the standard one,
    for a playground view (non-ASCII table included), a list, and a "b64" that is not base64 (rendered as text)."""
    from starlette.responses import JSONResponse

    from hardmax.explore.server import _Answer

    request = PlaygroundRequest(tokens=np.random.default_rng(0).standard_normal((12, 2)), alpha=0.5, layers=20,
                                A=np.eye(2), rule=hardmax.Hardmax())
    from hardmax.explore.views import playground_view

    record = playground_view(request)
    for content in (record, [1, "α", {"b64": "AAAA"}], {"x": {"b64": 'not "base64" ‖'}, "y": encode_array(np.ones(3))},
                    {"a": {"b64": ""}, "b": {"b64": "QQ=="}, "note": "\u0000 ≤"}):
        spliced = _Answer(content).body
        assert json.loads(spliced) == json.loads(JSONResponse(content).body) == json.loads(json.dumps(content))
    assert decode_path(json.loads(_Answer(record).body)["path"], 20).shape == (21, 12, 2)


def test_quiet_openmp_sets_the_spin_only_before_torch_loads(monkeypatch):
    from hardmax.explore.server import OPENMP_SPIN, quiet_openmp

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    assert quiet_openmp() is False  # torch is loaded in this process: libgomp has read its settings already
    assert "GOMP_SPINCOUNT" not in os.environ
    code = ("import os, sys; from hardmax.explore.server import quiet_openmp; ok = quiet_openmp(); import torch; "
            "print(ok, os.environ.get('GOMP_SPINCOUNT'))")
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["True", OPENMP_SPIN]
    env["GOMP_SPINCOUNT"] = "123"  # a user's own setting stays
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["True", "123"]


def test_the_api_answers_a_frame_when_asked(explore_client, rng):
    tokens = rng.normal(size=(9, 2)).tolist()
    body = json.dumps({"tokens": tokens, "alpha": 0.5, "layers": 30}).encode()
    framed = explore_client.post("/api/simulate", content=body, headers={"content-type": "application/json",
                                                                  "accept": "application/vnd.hardmax.frame"})
    plain = explore_client.post("/api/simulate", content=body)
    assert framed.status_code == plain.status_code == 200
    assert framed.content[:4] == b"HMXF" and plain.content[:1] == b"{"
    a, b = decode_frame(framed.content), plain.json()
    assert np.array_equal(decode_array(a["path"]), decode_array(b["path"])) and a["labels"] == b["labels"]
    refused = explore_client.post("/api/simulate", json={"tokens": tokens, "alpha": -1},
                          headers={"content-type": "application/json", "accept": "application/vnd.hardmax.frame"})
    assert refused.status_code == 400 and "alpha" in refused.json()["error"]  # errors stay JSON


def test_an_answer_json_cannot_carry_is_a_one_line_500_in_either_format(monkeypatch):
    """A view holding NaN (none does today: the theorem's numbers are sanitised first) is refused in one JSON line,
    whether JSON or a frame was asked for, and the server goes on answering."""
    from hardmax.explore import views

    monkeypatch.setattr(views, "playground_view", lambda request, encode: {"value": float("nan")})
    with LiveServer(create_app(None)) as server:
        client = Client(server.url)
        body = json.dumps({"tokens": [[1.0, 0.0], [0.0, 1.0]], "layers": 3}).encode()
        for accept in ("application/json", "application/vnd.hardmax.frame"):
            answer = client.post("/api/simulate", content=body,
                                 headers={"content-type": "application/json", "accept": accept})
            assert answer.status_code == 500
            assert "could not be encoded" in answer.json()["error"] and "\n" not in answer.json()["error"]
        assert client.get("/api/presets").status_code == 200


def test_a_library_overflow_is_a_one_line_400_not_a_500(monkeypatch):
    """A `FloatingPointError` of the library (states that stopped being finite) is a refusal, as a ValueError is."""
    from hardmax.explore import views

    def overflow(request, encode):
        raise FloatingPointError("the states stopped being finite at step 3 of 10 (t = 0.3)")

    monkeypatch.setattr(views, "playground_view", overflow)
    with LiveServer(create_app(None)) as server:
        client = Client(server.url)
        answer = client.post("/api/simulate", json={"tokens": [[1.0, 0.0], [0.0, 1.0]], "layers": 3})
        assert answer.status_code == 400 and "stopped being finite at step 3" in answer.json()["error"]


def test_bodies_being_read_are_bounded_together():
    """`Limits.buffered`: while one slow client holds 200 kB of its body, another's 100 kB is refused (503), not
    held; once the slow one is answered 408, the same request is read."""
    import time

    limits = Limits(body=1 << 20, buffered=256_000, body_seconds=1.5)
    big = json.dumps({"tokens": SQUARE, "note": "x" * 100_000}).encode()  # (an unknown field: 400 once read)
    with LiveServer(create_app(None, limits)) as server:
        client = Client(server.url)
        with raw_connection(server, HEAD % 300_000 + b" " * 200_000) as slow:
            time.sleep(0.3)  # its 200 kB are read
            refused = client.post("/api/simulate", content=big)
            assert refused.status_code == 503 and "bytes of other requests" in refused.json()["error"]
            assert one_response(slow)[0] == 408
        read = client.post("/api/simulate", content=big)
        assert read.status_code == 400 and "unknown field" in read.json()["error"]


def test_a_client_that_hangs_up_leaves_no_traceback(caplog, capfd):
    """A client that leaves mid-body ends its request quietly: no traceback, no error logged (before: a 10-line
    ClientDisconnect traceback for each)."""
    import logging

    with caplog.at_level(logging.DEBUG), LiveServer(create_app(None)) as server:
        for _ in range(3):
            raw_connection(server, HEAD % 1000 + b'{"tokens": [[1').close()
        assert settled(server)
        assert Client(server.url).get("/api/presets").status_code == 200
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert loud == [], [r.getMessage() for r in loud]
    assert "Traceback" not in capfd.readouterr().err


def test_errors_name_no_server_path_and_are_bounded(explore_runs, tmp_path, monkeypatch):
    """What a client is told names a run by its name under --runs and no folder of the server, on one line of at
    most 300 characters: a damaged run, a run list of 8 kB, an unexpected exception, a long header echoed back."""
    import shutil

    from hardmax.explore import views

    served = tmp_path / "served"
    shutil.copytree(explore_runs / "d2", served / "nested" / "d2")
    (served / "nested" / "d2" / "model.safetensors").write_bytes(b"not weights")
    for i in range(200):
        fake = served / "many" / f"run-{i:03d}-with-a-rather-long-name"
        fake.mkdir(parents=True)
        (fake / "config.json").write_text("{}")
        (fake / "model.safetensors").write_bytes(b"")
    secret = tmp_path / "secret" / "module.py"

    def fail(request, encode):
        raise RuntimeError(f"failed in {secret} while reading {served / 'nested' / 'd2' / 'config.json'}")

    monkeypatch.setattr(views, "playground_view", fail)
    with LiveServer(create_app(served)) as server:
        client = Client(server.url)
        answers = [client.post("/api/review", json={"run": "nested/d2", "text": "a great film"}),
                   client.post("/api/review", json={"run": "many/run-000-with-a-rather-long-name", "text": "a film"}),
                   client.post("/api/review", json={"run": "nope", "text": "a film"}),
                   client.post("/api/simulate", json={"tokens": SQUARE}),
                   client.post("/api/simulate", content=b"{}", headers={"content-type": "text/" + "x" * 6000})]
    errors = [a.json()["error"] for a in answers]
    assert [a.status_code for a in answers] == [400, 400, 400, 500, 415]
    for error in errors:
        assert len(error) <= 300 and "\n" not in error  # (server.ERROR_CHARACTERS)
        assert str(tmp_path) not in error and str(tmp_path.resolve()) not in error and "/tmp" not in error, error
    assert "nested/d2" in errors[0] and "many/run-000-with-a-rather-long-name" in errors[1]
    assert errors[2].endswith("…") and "module.py" in errors[3] and "nested/d2/config.json" in errors[3]
