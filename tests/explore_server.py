"""Helpers for the explorer's tests: a trained run made from a generated archive, and a live server."""

from __future__ import annotations

import contextlib
import io
import json
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
