"""The explorer's JSON API (hardmax.explore) against the library: same numbers, bounded and validated requests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from explore_server import Client, LiveServer, train_runs

import hardmax
from hardmax.explore import Limits, create_app, find_runs, standalone_html, view
from hardmax.explore.frames import (
    decode_array,
    decode_frame,
    decode_path,
    encode_array,
    encode_frame,
    encode_path,
    raw_array,
)
from hardmax.explore.requests import PlaygroundRequest, RequestError, TooLarge
from hardmax.explore.views import presets

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("explore")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HARDMAX_IMDB", raising=False)
        mp.setenv("HARDMAX_CACHE", str(root / "cache"))
        return train_runs(root, root / "cache", (("d2", ("--d", "2")), ("d4", ("--d", "4")),
                                                 ("crate", ("--d", "4", "--layer", "crate"))))


@pytest.fixture(scope="module")
def client(runs):
    app = create_app(runs, Limits(tokens=50, layers=300, points=6_000, text=500, body=20_000))
    with LiveServer(app) as server:
        yield Client(server.url)


def _post(client, url, body):
    response = client.post(url, json=body)
    return response.status_code, response.json()


SQUARE = [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [0.5, 0.0], [-0.5, 0.0]]


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


def test_simulate_equals_the_library(client, rng):
    tokens = rng.standard_normal((20, 2)).tolist()
    A = [[2.0, 0.5], [0.5, 1.0]]
    code, answer = _post(client, "/api/simulate", {"tokens": tokens, "alpha": 0.7, "layers": 60, "A": A})
    assert code == 200, answer
    trajectory = hardmax.simulate(np.array(tokens), alpha=0.7, layers=60, A=np.array(A))
    assert np.array_equal(decode_path(answer["path"], 60), trajectory.tokens.numpy())
    clusters = hardmax.find_clusters(trajectory)
    assert answer["labels"] == clusters.labels.tolist()
    assert answer["leader_since"] == hardmax.leader_layers(trajectory).tolist()
    report = hardmax.check_theorem(trajectory)
    assert answer["theorem"]["passed"] == report.passed is True
    assert [c["status"] for c in answer["theorem"]["checks"]] == [c.status for c in report.checks]
    K = hardmax.polytope(trajectory.final[hardmax.leader_layers(trajectory) >= 0])
    assert np.allclose(np.array(answer["vertices"]), K.vertices, atol=1e-12)


def test_the_python_it_offers_reproduces_the_run(client, rng, capsys):
    tokens = rng.standard_normal((7, 3)).tolist()
    code, answer = _post(client, "/api/simulate", {"tokens": tokens, "alpha": 0.3, "layers": 25, "rule": "softmax",
                                                   "beta": 3.5})
    assert code == 200, answer
    scope: dict = {}
    exec(answer["python"], scope)  # the "Copy as Python" text
    assert np.array_equal(scope["trajectory"].tokens.numpy(), decode_path(answer["path"], 25))
    assert answer["theorem"] is None and answer["rule"] == "softmax"


def test_the_figure2_limits_on_S(client):
    code, answer = _post(client, "/api/simulate", {"tokens": SQUARE, "layers": 200})
    assert code == 200
    final = decode_path(answer["path"], 200)[-1]
    assert answer["path"]["shape"][0] < 201  # converged to the last bit: the standing-still layers are implied
    assert np.allclose(final[4:], [[1.0, 0.0], [-1.0, 0.0]], atol=1e-9)  # projections of 0 on the sides
    assert sorted(map(tuple, answer["limit"])) == [(-1.0, 0.0), (1.0, 0.0)]
    assert answer["leader_since"] == [0, 0, 0, 0, -1, -1]


def test_attention_view_is_the_engines_rule(client):
    code, answer = _post(client, "/api/attention", {"tokens": SQUARE})
    assert code == 200
    sets = hardmax.attention_sets(torch.tensor(SQUARE, dtype=torch.float64))
    assert answer["sets"] == [np.nonzero(r)[0].tolist() for r in sets.numpy()]
    assert answer["sets"][4] == [0, 3]  # the exact tie, both kept
    code, soft = _post(client, "/api/attention", {"tokens": SQUARE, "rule": "softmax", "beta": 2.0})
    P = hardmax.attention_matrix(torch.tensor([SQUARE], dtype=torch.float64), rule=hardmax.Softmax(beta=2.0))[0]
    for i, row in enumerate(soft["weights"]):
        for j, w in row:
            assert w == pytest.approx(float(P[i, j]), rel=1e-12)


@pytest.mark.parametrize("body, status, words", [
    ({"tokens": SQUARE, "A": [[1.0, 0.0], [0.0, -1.0]]}, 400, "positive definite"),
    ({"tokens": SQUARE, "A": [[1.0, 0.5], [0.0, 1.0]]}, 400, "symmetric"),
    ({"tokens": SQUARE, "alpha": 0}, 400, "alpha"),
    ({"tokens": SQUARE, "alpha": "1"}, 400, "alpha must be a number"),
    ({"tokens": SQUARE, "layers": 2.5}, 400, "layers must be an integer"),
    ({"tokens": SQUARE, "layers": 301}, 413, "at most 300"),
    ({"tokens": [[0.1 * i, 1.0] for i in range(51)]}, 413, "at most 50"),
    ({"tokens": [[0.1 * i, 1.0] for i in range(40)], "layers": 200}, 413, "positions"),
    ({"tokens": []}, 400, "non-empty"),
    ({"tokens": [[1.0, 2.0], [1.0]]}, 400, "row 1"),
    ({"tokens": [[1.0, 2.0, 3.0, 4.0]]}, 400, "dimension 2 or 3"),
    ({"tokens": [[1e300, 0.0]]}, 413, "beyond"),
    ({"tokens": SQUARE, "rule": "maxout"}, 400, "rule"),
    ({"tokens": SQUARE, "rule": "softmax", "beta": -1}, 400, "beta"),
    ({"tokens": SQUARE, "path": "/etc/passwd"}, 400, "unknown field"),
    ({"tokens": [[10**400, 0.0], [0.0, 1.0]]}, 413, "too large a number"),
    ({"tokens": SQUARE, "\ud800" * 3: 1}, 400, "unknown field"),
    ({"tokens": SQUARE, **{f"k{i}": 1 for i in range(50)}}, 400, "and 45 more"),
    ([1, 2], 400, "JSON object"),
])
def test_bad_requests_get_one_line(client, body, status, words):
    code, answer = _post(client, "/api/simulate", body)
    assert code == status, answer
    assert words in answer["error"] and "\n" not in answer["error"]


def test_layers_zero_is_the_input(client):
    code, answer = _post(client, "/api/simulate", {"tokens": SQUARE, "layers": 0})
    assert code == 200, answer
    assert np.array_equal(decode_path(answer["path"], 0), np.array([SQUARE]))


def test_only_json_from_this_host_is_read(client):
    plain = client.post("/api/simulate", content=json.dumps({"tokens": SQUARE}).encode(),
                        headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]
    deep = client.post("/api/simulate", content=b"[" * 9_000 + b"]" * 9_000,
                       headers={"content-type": "application/json"})
    assert deep.status_code == 400 and "nested" in deep.json()["error"]
    rebound = client.post("/api/simulate", json={"tokens": SQUARE},
                          headers={"content-type": "application/json", "host": "attacker.example:80"})
    assert rebound.status_code == 400  # a DNS-rebinding page names another host


def test_bodies_are_bounded_and_parsed(client):
    big = client.post("/api/simulate", content=b"{" + b" " * 30_000 + b"}",
                      headers={"content-type": "application/json"})
    assert big.status_code == 413 and "bytes" in big.json()["error"]
    bad = client.post("/api/simulate", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]
    assert client.post("/api/simulate", json={"tokens": SQUARE}).status_code == 200  # the server goes on


def test_runs_are_found_and_named_not_pathed(client, runs):
    assert set(find_runs(runs)) == {"d2", "d4", "crate"}
    listed = client.get("/api/runs").json()["runs"]
    assert [r["name"] for r in listed] == ["d2", "d4", "crate"]  # the paper's layer first
    for name in ("../d2", str(runs / "d2"), "/etc", "d3"):
        code, answer = _post(client, "/api/review", {"run": name, "text": "a great film"})
        assert code == 400 and "one of the server's runs" in answer["error"]
    code, answer = _post(client, "/api/review", {"run": "d2", "text": "x" * 501})
    assert code == 413
    code, answer = _post(client, "/api/review", {"run": "d2", "text": "   "})
    assert code == 400 and "empty" in answer["error"]
    code, answer = _post(client, "/api/review", {"run": "d2", "text": "the and of ..."})
    assert code == 400 and "empty after cleaning" in answer["error"]
    assert client.get("/static/../server.py").status_code == 404


@pytest.mark.parametrize("name", ["d2", "d4"])
def test_review_equals_explain(client, runs, name):
    from hardmax.explain import explain_text, project_review
    from hardmax.training import load_run, predict

    text = "A wonderful film, the story was superb but the ending boring. Brilliant cast!"
    code, answer = _post(client, "/api/review", {"run": name, "text": text})
    assert code == 200, answer
    run = load_run(runs / name)
    expected = explain_text(run, text)
    assert answer["label"] == expected.label and answer["words"] == expected.words
    assert answer["probability"]["hardmax"] == pytest.approx(expected.probability, rel=1e-12)
    assert answer["leaders"] == expected.leaders and answer["decisive"] == expected.decisive_leaders(2.0)
    assert answer["summary"] == expected.summary()
    assert np.array_equal(decode_array(answer["points"]), project_review(expected, run.model).points)
    assert len(answer["sets"]) == run.model.config.layers + 1
    final_sets = hardmax.attention_sets(expected.trace.tokens[-1, 0].double(), A=run.model.A)
    assert answer["sets"][-1] == [np.nonzero(r)[0].tolist() for r in final_sets.numpy()]
    assert all([i] == answer["sets"][-1][i] for i in expected.leaders)
    from hardmax.data import encode_texts
    data = run.data_config
    enc = encode_texts([text], run.vocab, max_len=data.max_len, truncation=data.truncation, **data.clean_options())
    soft = torch.sigmoid(predict(run.model, enc.ids, enc.mask, rule=None)[0]).item()
    assert answer["probability"]["softmax"] == pytest.approx(soft, rel=1e-6)  # float32 logits
    X = expected.trace.tokens[0, 0].double()
    v = run.model.decoder.weight.detach()[0].double()
    sign = 1 if expected.label == "positive" else -1
    assert answer["svm"]["selected"] == int(torch.argmax(sign * (X @ v)))
    assert len(answer["rate"]["rate"]) == run.model.config.layers + 1
    layer_logits = np.array(answer["layer_logits"])  # each word's decoder logit at every layer
    assert np.allclose(layer_logits[-1], expected.word_logits, atol=1e-5)
    Zk = expected.trace.tokens[:, 0].double().numpy()
    w, b = run.model.decoder.weight.detach()[0].double().numpy(), float(run.model.decoder.bias.detach())
    assert np.allclose(layer_logits, Zk @ w + b, atol=1e-9)


def test_a_one_word_review(client, runs):
    from hardmax.explain import explain_text
    from hardmax.training import load_run

    code, answer = _post(client, "/api/review", {"run": "d2", "text": "great great great"})
    assert code == 200, answer
    assert answer["svm"] is None and answer["words"] == ["great"] and answer["multiplicity"] == [3]
    assert answer["label"] == explain_text(load_run(runs / "d2"), "great great great").label


def test_crate_review_shows_blocks(client):
    code, answer = _post(client, "/api/review", {"run": "crate", "text": "a wonderful superb film"})
    assert code == 200, answer
    assert answer["kind"] == "crate" and len(answer["crate"]["sparsity"]) == answer["layers"] > 0
    assert all(0 <= s <= 1 for s in answer["crate"]["sparsity"])


def test_export_is_self_contained(client):
    response = client.post("/api/export", json={"page": "playground", "request": {"tokens": SQUARE, "layers": 10}})
    assert response.status_code == 200
    html = response.text
    assert "window.HARDMAX_EMBEDDED" in html and "/static/" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing fetched from anywhere
    data = json.loads(re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", html, re.S).group(1))["data"]
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=10)
    assert len(data["attention"]) == data["path"]["shape"][0]  # every stored layer's attention sets
    for k, layer in enumerate(data["attention"]):
        sets = hardmax.attention_sets(trajectory.tokens[k]).numpy()
        assert layer["sets"] == [np.nonzero(row)[0].tolist() for row in sets]
    assert client.post("/api/export", json={"page": "other"}).status_code == 400


def test_view_of_a_trajectory_for_notebooks(tmp_path):
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=12)
    shown = view(trajectory)
    assert shown._repr_html_().startswith("<iframe srcdoc=")
    path = shown.save(tmp_path / "v.html")
    payload = re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", path.read_text(), re.S).group(1)
    data = json.loads(payload)["data"]
    assert np.array_equal(decode_path(data["path"], 12), trajectory.tokens.numpy())
    with pytest.raises(ValueError, match="one sequence"):
        view(hardmax.simulate(np.array([SQUARE]), alpha=0.5, layers=2))
    with pytest.raises(ValueError, match="page"):
        standalone_html("other", {})


def test_views_of_other_trajectories():
    rng = np.random.default_rng(3)
    with pytest.raises(ValueError, match=r"save=Save\(\) \(every layer\)"):
        view(hardmax.simulate(rng.standard_normal((6, 2)), hardmax.Softmax(beta=3.0), alpha=0.5, layers=30,
                              save=hardmax.Save(every=5)))
    Z = rng.standard_normal((12, 5)) * np.array([0.01, 0.01, 5, 5, 5])
    from hardmax.explore.views import trajectory_view

    shown = trajectory_view(hardmax.simulate(Z, hardmax.Softmax(beta=0.5), alpha=0.5, layers=8))
    assert shown["shown"] == 3 and decode_array(shown["path"]).shape[-1] == 3
    assert "principal components" in shown["note"]  # projected, and said so (not the first raw coordinates)
    spread = decode_array(shown["path"])[0].std(axis=0)
    assert spread.min() > 1.0  # the three large directions, not the two tiny ones


def test_presets_are_figure2():
    found = presets()
    assert np.array_equal(np.array(found["dyadic_square"]["tokens"]), hardmax.figure2_configurations()["square"])
    assert len(found) == 9 and found["square_with_a_follower"]["tokens"][:4] == [[1, 1], [-1, 1], [-1, -1], [1, -1]]


def test_request_objects_refuse_directly():
    with pytest.raises(TooLarge):
        PlaygroundRequest.from_json({"tokens": SQUARE, "layers": 10}, Limits(points=10))
    with pytest.raises(RequestError, match="positive definite"):
        PlaygroundRequest.from_json({"tokens": SQUARE, "A": [[0.0, 0.0], [0.0, 0.0]]}, Limits())
    with pytest.raises(ValueError, match="Limits.tokens"):
        Limits(tokens=0)


def test_leader_history_is_recomputed_after_an_in_place_change():
    trajectory = hardmax.simulate(np.array(SQUARE), alpha=0.5, layers=8)
    before = hardmax.leader_layers(trajectory).tolist()
    assert before == [0, 0, 0, 0, -1, -1]
    with torch.no_grad():
        trajectory.tokens[:, 4] = torch.tensor([3.0, 3.0], dtype=torch.float64)  # token 4 now leads at every layer
    assert hardmax.leader_layers(trajectory).tolist()[4] == 0


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


def test_the_api_answers_a_frame_when_asked(client, rng):
    tokens = rng.normal(size=(9, 2)).tolist()
    body = json.dumps({"tokens": tokens, "alpha": 0.5, "layers": 30}).encode()
    framed = client.post("/api/simulate", content=body, headers={"content-type": "application/json",
                                                                  "accept": "application/vnd.hardmax.frame"})
    plain = client.post("/api/simulate", content=body)
    assert framed.status_code == plain.status_code == 200
    assert framed.content[:4] == b"HMXF" and plain.content[:1] == b"{"
    a, b = decode_frame(framed.content), plain.json()
    assert np.array_equal(decode_array(a["path"]), decode_array(b["path"])) and a["labels"] == b["labels"]
    refused = client.post("/api/simulate", json={"tokens": tokens, "alpha": -1},
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


# --- the network edge: slow clients, hang-ups, the connection cap, the Host names, the listening socket ---------

HEAD = (b"POST /api/simulate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n")


def _raw(server, data: bytes = b"", *, timeout: float = 10.0, receive_buffer: int | None = None):
    """A plain TCP connection to `server` that sends `data` (a request, or part of one) and no more."""
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", server.port))
    if data:
        sock.sendall(data)
    return sock


def _until_closed(sock) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout if it never does)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _one_response(sock) -> tuple[int, bytes]:
    """The status and body of one HTTP response read from `sock` (Content-Length framed)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), body[:length]


def _settled(server, seconds: float = 10.0) -> bool:
    """Whether the server holds no connection and no request task within `seconds`."""
    import time

    state = server.server.server_state
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not state.connections and not state.tasks:
            return True
        time.sleep(0.02)
    return False


def test_a_half_sent_request_is_closed_within_the_header_deadline():
    """A connection that sends nothing, or half a request's headers, is closed after `Limits.header_seconds`; so is
    a kept-alive connection whose next request stops half-way (before: held until the client left)."""
    import time

    with LiveServer(create_app(None, Limits(header_seconds=0.5))) as server:
        for sent in (b"", b"POST /api/simulate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty", b"GET /api/pre"):
            start = time.monotonic()
            with _raw(server, sent) as sock:
                assert _until_closed(sock) == b""
            assert time.monotonic() - start < 4.0
        with _raw(server, b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as sock:
            status, _ = _one_response(sock)
            assert status == 200
            start = time.monotonic()
            sock.sendall(b"GET /api/presets HTTP/1.1\r\nHo")
            assert _until_closed(sock) == b"" and time.monotonic() - start < 4.0
        assert _settled(server)


def test_a_stalled_body_is_answered_408_and_nothing_is_held():
    """Bodies that stop half-way are answered 408 after `Limits.body_seconds`, their connections closed and the
    request tasks (with what they had read) gone; the server answers the next request as before."""
    with LiveServer(create_app(None, Limits(body_seconds=0.5))) as server:
        stalled = [_raw(server, HEAD % 100_000 + b'{"tokens": [' + b" " * 50_000) for _ in range(8)]
        for sock in stalled:
            status, body = _one_response(sock)
            assert status == 408 and "did not arrive within 0.5 s" in json.loads(body)["error"]
            assert _until_closed(sock) == b""
            sock.close()
        assert _settled(server)
        assert Client(server.url).post("/api/simulate", json={"tokens": SQUARE}).status_code == 200


def test_bodies_being_read_are_bounded_together():
    """`Limits.buffered`: while one slow client holds 200 kB of its body, another's 100 kB is refused (503), not
    held; once the slow one is answered 408, the same request is read."""
    import time

    limits = Limits(body=1 << 20, buffered=256_000, body_seconds=1.5)
    big = json.dumps({"tokens": SQUARE, "note": "x" * 100_000}).encode()  # (an unknown field: 400 once read)
    with LiveServer(create_app(None, limits)) as server:
        client = Client(server.url)
        with _raw(server, HEAD % 300_000 + b" " * 200_000) as slow:
            time.sleep(0.3)  # its 200 kB are read
            refused = client.post("/api/simulate", content=big)
            assert refused.status_code == 503 and "bytes of other requests" in refused.json()["error"]
            assert _one_response(slow)[0] == 408
        read = client.post("/api/simulate", content=big)
        assert read.status_code == 400 and "unknown field" in read.json()["error"]


def test_a_client_that_hangs_up_leaves_no_traceback(caplog, capfd):
    """A client that leaves mid-body ends its request quietly: no traceback, no error logged (before: a 10-line
    ClientDisconnect traceback for each)."""
    import logging

    with caplog.at_level(logging.DEBUG), LiveServer(create_app(None)) as server:
        for _ in range(3):
            _raw(server, HEAD % 1000 + b'{"tokens": [[1').close()
        assert _settled(server)
        assert Client(server.url).get("/api/presets").status_code == 200
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert loud == [], [r.getMessage() for r in loud]
    assert "Traceback" not in capfd.readouterr().err


def test_connections_beyond_the_cap_are_answered_503():
    with LiveServer(create_app(None, Limits(connections=3))) as server:
        held = [_raw(server) for _ in range(3)]
        import time

        deadline = time.monotonic() + 10
        while len(server.server.server_state.connections) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        with _raw(server, b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as extra:
            reply = _until_closed(extra)
        assert reply.startswith(b"HTTP/1.1 503") and b"connections open" in reply
        for sock in held:
            sock.close()
        assert _settled(server)
        assert Client(server.url).get("/api/presets").status_code == 200


def test_an_answer_left_unread_is_dropped(monkeypatch):
    """A client that asks for a large answer and never reads it holds it for `Limits.write_seconds`, not for ever."""
    from hardmax.explore import views

    monkeypatch.setattr(views, "playground_view", lambda request, encode: {"value": "x" * 16_000_000})
    with LiveServer(create_app(None, Limits(write_seconds=0.5))) as server:
        body = json.dumps({"tokens": SQUARE}).encode()
        with _raw(server, HEAD % len(body) + body, receive_buffer=4096):
            assert _settled(server, 20.0)


def test_the_host_names_answered_follow_the_bound_address(monkeypatch):
    """Loopback addresses answer the loopback names; every interface adds this machine's own names and addresses;
    another address answers itself only. Never every Host (before: any --host but three turned the check off)."""
    import socket

    from hardmax.explore.network import HostCheck, allowed_hosts, is_loopback

    assert allowed_hosts("127.0.0.2", "127.0.0.2") == ("127.0.0.1", "127.0.0.2", "[::1]", "localhost")
    assert allowed_hosts("::1", "::1") == ("127.0.0.1", "[::1]", "localhost")
    assert allowed_hosts("10.1.2.3", "10.1.2.3") == ("10.1.2.3",)
    assert allowed_hosts("Box.Example", "10.1.2.3") == ("10.1.2.3", "box.example")
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setattr(socket, "getfqdn", lambda: "box.lab.example")
    every = allowed_hosts("0.0.0.0", "0.0.0.0")
    assert {"127.0.0.1", "localhost", "[::1]", "0.0.0.0", "box", "box.lab.example"} <= set(every)
    assert "*" not in every and "attacker.example" not in every
    assert [is_loopback(a) for a in ("127.0.0.2", "::1", "[::1]", "::ffff:127.0.0.1", "0.0.0.0", "10.0.0.1",
                                     "localhost")] == [True, True, True, True, False, False, False]
    check = HostCheck(None, every)
    for value in (b"box", b"BOX:8765", b"localhost:1", b"[::1]:8765", b"127.0.0.1", b"0.0.0.0:80"):
        assert check.allows(value), value
    for value in (b"attacker.example", b"box.attacker.example", b"localhost.", b"localhost:", b"localhost:http",
                  b"::1", b"127.0.0.1:8765:1", b"localhost:\xd9\xa1", b"", None, b"127.0.0.1 ", b"box:123456"):
        assert not check.allows(value), value


def test_every_interface_refuses_a_rebinding_host():
    from hardmax.explore.network import allowed_hosts

    app = create_app(None, hosts=allowed_hosts("0.0.0.0", "0.0.0.0"))
    with LiveServer(app, host="0.0.0.0") as server:
        client = Client(f"http://127.0.0.1:{server.port}")
        for host, status in ((f"localhost:{server.port}", 200), ("127.0.0.1", 200), ("attacker.example", 400),
                             (f"attacker.example:{server.port}", 400)):
            answer = client.post("/api/attention", json={"tokens": SQUARE},
                                 headers={"content-type": "application/json", "host": host})
            assert answer.status_code == status, host
        assert "Host header" in answer.json()["error"]


def _explore(monkeypatch, capsys, *args) -> tuple[int, str, dict]:
    """`hardmax explore ARGS` without serving: the app it would serve, its exit code and what it printed."""
    from hardmax.cli import main
    from hardmax.explore import server

    served = {}
    monkeypatch.setattr(server, "warm_up", lambda: None)
    monkeypatch.setattr(server, "serve", lambda app, sock, on_ready=None: served.update(app=app, sock=sock))
    code = main(["explore", "--no-browser", "--runs", "/nonexistent", *args])
    if "sock" in served:
        served["sock"].close()
    out = capsys.readouterr()
    return code, out.out + out.err, served


def test_explore_warns_only_for_addresses_other_machines_reach(monkeypatch, capsys):
    for host, warned in (("127.0.0.2", False), ("localhost", False), ("0.0.0.0", True)):
        code, printed, served = _explore(monkeypatch, capsys, "--host", host, "--port", "0")
        assert code == 0 and ("reachable from other machines" in printed) is warned, (host, printed)
        hosts = served["app"].user_middleware[0].kwargs["hosts"]
        assert "*" not in hosts and "localhost" in hosts


def test_explore_says_what_is_wrong_with_the_address(monkeypatch, capsys):
    """A host that is no address, a port in use and a port refused are three different messages (before: all
    "choose another --port")."""
    import errno
    import socket

    code, printed, _ = _explore(monkeypatch, capsys, "--host", "not a host", "--port", "0")
    assert code == 2 and "not an address or a name" in printed and "--port" not in printed
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        code, printed, _ = _explore(monkeypatch, capsys, "--port", str(taken.getsockname()[1]))
        assert code == 2 and "in use; choose another --port" in printed

    class Refused(socket.socket):
        def bind(self, address):
            raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("hardmax.explore.network.socket.socket", Refused)
    code, printed, _ = _explore(monkeypatch, capsys, "--port", "80")
    assert code == 2 and "permission denied" in printed and "1024" in printed


def test_errors_name_no_server_path_and_are_bounded(runs, tmp_path, monkeypatch):
    """What a client is told names a run by its name under --runs and no folder of the server, on one line of at
    most 300 characters: a damaged run, a run list of 8 kB, an unexpected exception, a long header echoed back."""
    import shutil

    from hardmax.explore import views

    served = tmp_path / "served"
    shutil.copytree(runs / "d2", served / "nested" / "d2")
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


def test_an_export_embeds_any_text_inertly():
    """Text in an export's data or state (a review's words, the URL fragment) cannot end its script or open markup:
    <, >, & and U+2028/9 are \\u escapes of the same JSON (before: only "</" was, and "<!--<script>" blanked it)."""
    from html.parser import HTMLParser

    hostile = "<!--<script>x</script><SCRIPT>alert(1)</script >&amp;\u2028\u2029-->"
    data = {"words": [hostile, "ok"], "nested": {"summary": hostile}}
    page = standalone_html("classifier", data, state="k=1&t=" + hostile)
    payload = re.search(r"window.HARDMAX_EMBEDDED = (.*?);</script>", page, re.S).group(1)
    assert not set(payload) & set("<>&\u2028\u2029")
    assert json.loads(payload) == {"data": data, "state": "k=1&t=" + hostile}

    class Scripts(HTMLParser):
        found: list = []

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.found.append(tag)

    Scripts().feed(page)
    assert len(Scripts.found) == 3  # the embedded data, plane.js and classifier.js: nothing else opened one


def test_inlined_assets_cannot_end_their_element(tmp_path, monkeypatch):
    """A script or a style sheet holding "</script", "<!--", "<script" or "</style" is inlined with those written as
    escapes of the same characters, so the element ends where the file does."""
    from hardmax.explore import export

    (tmp_path / "playground.html").write_text('<head><link rel="stylesheet" href="/static/a.css"></head><body>\n'
                                              '<!-- embedded -->\n<script src="/static/a.js"></script></body>')
    (tmp_path / "a.js").write_text('const s = "<!--<script>"; const t = /<\\/script>/; // </SCRIPT> <Script\n')
    (tmp_path / "a.css").write_text('.x::after { content: "</style><script>"; }\n')
    monkeypatch.setattr(export, "STATIC", tmp_path)
    page = standalone_html("playground", {"x": 1})
    script = page.split("<script>\n", 1)[1].rsplit("\n</script>", 1)[0]
    style = page.split("<style>\n", 1)[1].split("\n</style>", 1)[0]
    assert not re.search(r"(?i)<!--|</?script", script) and not re.search(r"(?i)</style", style)
    assert script == 'const s = "\\x3C!--\\x3Cscript>"; const t = /<\\/script>/; // \\x3C/SCRIPT> \\x3CScript\n'


def test_connections_send_without_delay():
    """The listening socket says it is TCP, so each connection gets TCP_NODELAY (before: proto 0, Nagle on, and an
    answer on a kept-alive connection waited for the client's delayed ACK, ~40 ms)."""
    import socket
    import time

    asked = b"GET /api/presets HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with LiveServer(create_app(None)) as server, _raw(server, asked) as sock:
        assert _one_response(sock)[0] == 200
        deadline = time.monotonic() + 10
        while not server.server.server_state.connections and time.monotonic() < deadline:
            time.sleep(0.02)
        (connection,) = server.server.server_state.connections
        accepted = connection.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# --------------------------------------------------------------------------------------------
# every rule of the registry (hardmax.dynamics.RULES) reaches the playground, issue #40
# --------------------------------------------------------------------------------------------


def _parameters(name: str) -> dict:
    """A valid value for each required parameter of the registered rule `name` (0.5: β, θ and the like)."""
    from hardmax.dynamics.rules import rule_parameters

    return {p: 0.5 for p, required in rule_parameters(name).items() if required}


@pytest.mark.parametrize("name", list(hardmax.dynamics.RULES))
def test_every_registered_rule_runs_in_the_playground(client, name):
    """/api/simulate and /api/attention build any rule of RULES from the request (rule_from_dict) and run it on
    simulate's torch engine: the path is the library's, the rule named back, its Python reproduces it."""
    body = {"tokens": SQUARE, "alpha": 0.5, "layers": 12, "rule": name, **_parameters(name)}
    code, answer = _post(client, "/api/simulate", body)
    assert code == 200, answer
    rule = hardmax.dynamics.rule_from_dict({"rule": name, **_parameters(name)})
    expected = hardmax.simulate(np.array(SQUARE), rule, alpha=0.5, layers=12, A=np.eye(2)).tokens.numpy()
    assert answer["rule"] == name
    assert np.array_equal(decode_path(answer["path"], 12), expected)
    assert float(np.abs(expected[-1] - expected[0]).max()) > 1e-3  # the tokens moved
    assert (answer["theorem"] is None) == (name != "hardmax")  # Theorem 2.1 is hardmax's
    scope: dict = {}
    exec(answer["python"], scope)
    assert np.array_equal(scope["trajectory"].tokens.numpy(), expected)
    code, seen = _post(client, "/api/attention", {"tokens": SQUARE, "rule": name, **_parameters(name)})
    assert code == 200, seen
    assert len(seen["sets" if name == "hardmax" else "weights"]) == len(SQUARE)


@pytest.mark.parametrize("body, status, words", [
    ({"rule": "localmax"}, 400, "rule localmax needs theta"),
    ({"rule": "localmax", "theta": -1}, 400, "theta > 0"),  # the rule's own check, one line
    ({"rule": "localmax", "theta": "0.3"}, 400, "theta must be a number"),
    ({"rule": "localmax", "theta": 1e9}, 413, "theta must be at most"),
    ({"rule": "unnormalised", "beta": 1e9}, 413, "beta must be at most"),
    ({"rule": "hardmax", "theta": 0.3}, 400, "rule hardmax takes no theta"),
    ({"rule": "softmax", "beta": 1.0, "theta": 0.3}, 400, "takes no theta (its parameters: beta)"),
    ({"rule": ["softmax"]}, 400, "rule must be one of"),
])
def test_a_rule_parameter_is_checked_by_the_registry(client, body, status, words):
    code, answer = _post(client, "/api/simulate", {"tokens": SQUARE, **body})
    assert code == status, answer
    assert words in answer["error"] and "\n" not in answer["error"]


def test_an_unknown_rule_names_the_registered_ones(client):
    for url in ("/api/simulate", "/api/attention"):
        code, answer = _post(client, url, {"tokens": SQUARE, "rule": "maxout"})
        assert code == 400 and "maxout" in answer["error"] and "\n" not in answer["error"]
        assert answer["error"].startswith("rule must be one of " + ", ".join(hardmax.dynamics.RULES))


def test_the_rules_endpoint_lists_the_registry(monkeypatch):
    """GET /api/rules answers every rule of RULES (no hand-kept list) with its parameters and the bounds the
    server enforces; a rule registered later is listed, and a foreign Host is refused as for every route."""
    from dataclasses import dataclass

    from hardmax.dynamics.rules import RULES, Softmax, rule_parameters

    @dataclass(frozen=True)
    class Toy(Softmax):
        gain: float = 2.5

    monkeypatch.setitem(RULES, "toy", Toy)
    limits = Limits(beta=50.0, parameter=7.0)
    with LiveServer(create_app(None, limits)) as server:
        client = Client(server.url)
        response = client.get("/api/rules")
        assert response.status_code == 200
        listed = {r["name"]: r["parameters"] for r in response.json()["rules"]}
        refused = client._open(__import__("urllib.request").request.Request(
            server.url + "/api/rules", headers={"Host": "evil.example"}))
    assert list(listed) == list(RULES)
    for name, parameters in listed.items():
        assert {p["name"]: p["required"] for p in parameters} == rule_parameters(name)
    assert listed["softmax"] == [{"name": "beta", "required": True, "default": None, "low": 0.0, "high": 50.0}]
    assert listed["localmax"] == [{"name": "theta", "required": True, "default": None, "low": -7.0, "high": 7.0}]
    assert listed["hardmax"] == [{"name": "tie_rtol", "required": False, "default": None, "low": -7.0, "high": 7.0}]
    assert listed["toy"] == [{"name": "beta", "required": True, "default": None, "low": 0.0, "high": 50.0},
                             {"name": "gain", "required": False, "default": 2.5, "low": -7.0, "high": 7.0}]
    assert refused.status_code == 400


def test_the_playground_runs_causal_attention_and_says_what_it_does_not_show():
    """Issue #43: the playground's causal switch — simulate(..., mask=Causal()) on the server, the first token
    never moves, no hardmax scene or Theorem 2.1 check (they are about full attention), and the attention
    requests see the tokens before each one only."""
    from hardmax.explore.requests import AttentionRequest, Limits, PlaygroundRequest, RequestError
    from hardmax.explore.views import attention_view, playground_view

    body = {"tokens": [[1.0, 0.2], [0.1, 1.0], [-1.0, 0.3], [0.4, -1.0], [0.2, 0.1]], "alpha": 0.5, "layers": 12,
            "A": [[1.0, 0.0], [0.0, 1.0]], "rule": "hardmax", "causal": True}
    request = PlaygroundRequest.from_json(body, Limits())
    view = playground_view(request)
    path = np.asarray(__import__("hardmax.explore.frames", fromlist=["decode_array"]).decode_array(view["path"]))
    assert view["causal"] and view["theorem"] is None and "causal attention" in view["note"]
    np.testing.assert_array_equal(path[:, 0], np.repeat(path[:1, 0], len(path), axis=0))  # token 1 stays
    assert "mask=hardmax.dynamics.Causal()" in request.python()
    full = playground_view(PlaygroundRequest.from_json({**body, "causal": False}, Limits()))
    assert not full["causal"] and full["theorem"] is not None
    sets = attention_view(AttentionRequest.from_json({k: body[k] for k in ("tokens", "A", "rule", "causal")},
                                                     Limits()))["sets"]
    assert sets[0] == [0] and all(max(s) <= i for i, s in enumerate(sets))
    with pytest.raises(RequestError, match="causal must be true or false"):
        PlaygroundRequest.from_json({**body, "causal": 1}, Limits())
