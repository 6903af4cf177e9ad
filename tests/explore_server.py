"""Helpers for the explorer's tests: a trained run made from a generated archive, a live server and its client,
`post_json`, the square of tokens the API tests send, and raw connections for the network edge (`HEAD`,
`raw_connection`, `one_response`, `settled`). The fixtures `explore_runs` and `explore_client` are in conftest.py."""

from __future__ import annotations

import contextlib
import io
import json
import re
import urllib.error
import urllib.request
from json import dumps
from pathlib import Path

from test_cli_sentiment import write_archive

from hardmax.cli import main
from hardmax.explore.server import Background

TRAIN_ARGS = ("--epochs", "2", "--min-count", "2", "--batch-size", "16")


def train_runs(root: Path, cache: Path, kinds: tuple[tuple[str, tuple[str, ...]], ...]) -> Path:
    """Train one small run per (name, extra arguments) under root/runs from a generated IMDb-layout archive."""
    archive = write_archive(root / "imdb.tar.gz")
    runs = root / "runs"
    for name, extra in kinds:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["train", "--run", str(runs / name), "--data", str(archive), *TRAIN_ARGS, *extra])
        assert code == 0, err.getvalue()
    return runs


LiveServer = Background  # the library's: uvicorn in a thread on a free port of 127.0.0.1


class Response:
    def __init__(self, status: int, body: bytes):
        self.status_code, self.content = status, body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")

    def json(self):
        return json.loads(self.content)


class Client:
    """A few lines of urllib: GET and POST against a live server, any status returned (no exception)."""

    def __init__(self, base: str):
        self.base = base

    def _open(self, request: urllib.request.Request) -> Response:
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return Response(r.status, r.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read())

    def get(self, path: str) -> Response:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, json=None, content: bytes | None = None, headers: dict | None = None) -> Response:
        body = content if content is not None else dumps(json).encode()
        request = urllib.request.Request(self.base + path, data=body, method="POST",
                                         headers=headers or {"content-type": "application/json"})
        if headers and "host" in headers:  # urllib sets Host itself unless told
            request.add_unredirected_header("Host", headers["host"])
        return self._open(request)


def post_json(client, url, body):
    """POST `body` as JSON to `url`: (status, the JSON answer)."""
    response = client.post(url, json=body)
    return response.status_code, response.json()


#: Six tokens in the plane: a square and two tokens inside it (the API tests' Figure 2 configuration).
SQUARE = [[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [0.5, 0.0], [-0.5, 0.0]]

#: The headers of a POST to /api/simulate of a body of %d bytes, for raw connections.
HEAD = (b"POST /api/simulate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n")


def raw_connection(server, data: bytes = b"", *, timeout: float = 10.0, receive_buffer: int | None = None):
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


def one_response(sock) -> tuple[int, bytes]:
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


def settled(server, seconds: float = 10.0) -> bool:
    """Whether the server holds no connection and no request task within `seconds`."""
    import time

    state = server.server.server_state
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not state.connections and not state.tasks:
            return True
        time.sleep(0.02)
    return False
