"""What the explorer accepts: `Limits`, and requests validated from JSON into library arguments.

Every number a page sends is checked here, before any library call, and refused with a `RequestError` whose
message the page shows (HTTP 400), or a `TooLarge` (HTTP 413) when a limit is exceeded. A request never names
a file: a trained run is chosen by the name the server gave it when it started.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Limits", "PlaygroundRequest", "RequestError", "ReviewRequest", "TooLarge", "AttentionRequest",
           "rule_catalogue"]


class RequestError(ValueError):
    """A request the explorer refuses (HTTP 400); its message is one line for the page."""

    status = 400


class TooLarge(RequestError):
    """A request beyond the server's `Limits` (HTTP 413)."""

    status = 413


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Bounds on what one request may ask for (the server refuses anything larger with HTTP 413), on how many
    requests and connections it holds at once (HTTP 503) and on how long a client may take (HTTP 408)."""

    tokens: int = 400  # tokens in a playground configuration
    layers: int = 2000  # layers of a playground run
    points: int = 250_000  # tokens × (layers + 1): the positions one answer carries (8 bytes × d each)
    text: int = 20_000  # characters of a review
    body: int = 1 << 20  # bytes of a request body
    coordinate: float = 1e6  # largest |coordinate| of a token and |entry| of A
    beta: float = 1e6  # largest inverse temperature β
    parameter: float = 1e6  # largest |value| of any other rule parameter (localmax's θ, a registered rule's own)
    concurrent: int = 2  # requests computed at once (the others wait their turn)
    waiting: int = 16  # requests waiting for a turn; more are refused with HTTP 503
    connections: int = 128  # connections open at once; a new one beyond is answered HTTP 503 and closed
    buffered: int = 32 << 20  # bytes of request bodies held at once, all requests together (beyond: HTTP 503)
    header_seconds: float = 10.0  # time to send a request's headers (from connecting or from the last answer)
    body_seconds: float = 30.0  # time to send a request's body once its headers are in (else HTTP 408)
    write_seconds: float = 60.0  # time a client may leave an answer unread before its connection is dropped

    def __post_init__(self):
        for name in ("tokens", "layers", "points", "text", "body", "concurrent", "waiting", "connections",
                     "buffered"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be an integer ≥ 1, got {value!r}")
        for name in ("header_seconds", "body_seconds", "write_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ValueError(f"Limits.{name} must be a number of seconds > 0, got {value!r}")


def _number(value, name: str, *, low: float | None = None, high: float | None = None,
            strict_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{name} must be a number, got {_shown(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise TooLarge(f"{name} is too large a number ({len(str(abs(value)))} digits)") from None
    if not math.isfinite(x):
        raise RequestError(f"{name} must be finite, got {x}")
    if low is not None and (x <= low if strict_low else x < low):
        raise RequestError(f"{name} must be {'>' if strict_low else '≥'} {low:g}, got {x:g}")
    if high is not None and x > high:
        raise TooLarge(f"{name} must be at most {high:g}, got {x:g}")
    return x


def _flag(value, name: str) -> bool:
    """A JSON true/false; RequestError for anything else (1, "yes", null)."""
    if not isinstance(value, bool):
        raise RequestError(f"{name} must be true or false, got {_shown(value)}")
    return value


def _integer(value, name: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{name} must be an integer, got {_shown(value)}")
    if value < low:
        raise RequestError(f"{name} must be ≥ {low}, got {value}")
    if value > high:
        raise TooLarge(f"{name} must be at most {high}, got {value}")
    return value


def _shown(value) -> str:
    """A short, printable rendering of what a request sent (ASCII escapes: lone surrogates included)."""
    if isinstance(value, int) and abs(value) >= 10**40:
        return f"<an integer of {len(str(abs(value)))} digits>"
    text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _matrix(value, name: str, rows: int | None, cols: int, bound: float) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise RequestError(f"{name} must be a non-empty list of rows, got {_shown(value)}")
    if rows is not None and len(value) != rows:
        raise RequestError(f"{name} must have {rows} rows, got {len(value)}")
    out = np.empty((len(value), cols), dtype=np.float64)
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != cols:
            raise RequestError(f"{name} row {i} must be a list of {cols} numbers, got {_shown(row)}")
        for j, x in enumerate(row):
            out[i, j] = _number(x, f"{name}[{i}][{j}]")
            if abs(out[i, j]) > bound:
                raise TooLarge(f"{name}[{i}][{j}] = {out[i, j]:g} is beyond ±{bound:g}")
    return out


def _object(body, keys: set[str], what: str) -> dict:
    if not isinstance(body, dict):
        raise RequestError(f"a {what} request is a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - keys)
    if unknown:
        shown = ", ".join(_shown(k) for k in unknown[:5])
        shown += f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise RequestError(f"unknown field(s) in a {what} request: {shown}; known: {', '.join(sorted(keys))}")
    return body


def _rule_fields() -> set[str]:
    """Every parameter of every registered rule (`hardmax.dynamics.RULES`): the fields a request may add."""
    from hardmax.dynamics.rules import RULES, rule_parameters

    return {p for name in RULES for p in rule_parameters(name)}


def _rule(body: dict, limits: Limits):
    """Any rule of the registry (`RULES`, built by `rule_from_dict`) from the request's "rule" (default hardmax)
    and its parameters, the rule class's dataclass fields sent under their own names: β (`beta`) a number in
    (0, limits.beta] (default 1, as the page's slider starts), any other a finite number within ±limits.parameter
    (then the rule's own checks). A parameter the chosen rule does not take is refused, as is an unknown name
    (the known ones listed)."""
    from hardmax.dynamics.rules import RULES, rule_from_dict, rule_parameters

    name = body.get("rule", "hardmax")
    if not isinstance(name, str) or name not in RULES:
        raise RequestError(f"rule must be one of {', '.join(RULES)}, got {_shown(name)}")
    parameters = rule_parameters(name)
    stray = sorted(p for p in _rule_fields() - set(parameters) if p in body)
    if stray:
        raise RequestError(f"rule {name} takes no {', '.join(stray)}"
                           + (f" (its parameters: {', '.join(parameters)})" if parameters else ""))
    record = {"rule": name}
    for p, required in parameters.items():
        if p == "beta":
            record[p] = _number(body.get(p, 1.0), p, low=0, high=limits.beta)
        elif p in body:
            record[p] = _number(body[p], p, low=-limits.parameter, high=limits.parameter)
        elif required:
            raise RequestError(f"rule {name} needs {p} (a number)")
    try:
        return rule_from_dict(record)
    except ValueError as e:  # the rule's own check of a value, one line
        raise RequestError(str(e).splitlines()[0]) from None


def rule_catalogue(limits: Limits) -> dict:
    """What `_rule` accepts, for a page to build its controls from: {"rules": [{"name", "parameters": [{"name",
    "required", "default", "low", "high"}]}]}, one entry per rule of `RULES` in its order, each parameter a
    dataclass field of the rule class (`rule_parameters`). "default" is the field's own default when it is a
    number or null (else null); β (`beta`) is bounded to (0, limits.beta] and taken as 1 when a request leaves it
    out, any other parameter to ±limits.parameter."""
    import dataclasses

    from hardmax.dynamics.rules import RULES, rule_parameters

    rules = []
    for name, cls in RULES.items():
        fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        parameters = []
        for p, required in rule_parameters(name).items():
            default = None if required or p not in fields else fields[p].default
            if isinstance(default, bool) or not isinstance(default, int | float) or not math.isfinite(default):
                default = None
            low, high = (0.0, limits.beta) if p == "beta" else (-limits.parameter, limits.parameter)
            parameters.append({"name": p, "required": required, "default": default, "low": low, "high": high})
        rules.append({"name": name, "parameters": parameters})
    return {"rules": rules}


def _tokens_and_A(body: dict, limits: Limits) -> tuple[np.ndarray, np.ndarray]:
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        raise RequestError("tokens must be a non-empty list of points; add a token by clicking the plane")
    if len(tokens) > limits.tokens:
        raise TooLarge(f"{len(tokens)} tokens: this server runs at most {limits.tokens}")
    first = tokens[0]
    d = len(first) if isinstance(first, list) else 0
    if d not in (2, 3):
        raise RequestError(f"tokens must be points of dimension 2 or 3, got {_shown(first)}")
    Z = _matrix(tokens, "tokens", None, d, limits.coordinate)
    A = _matrix(body.get("A", np.eye(d).tolist()), "A", d, d, limits.coordinate)
    if not np.array_equal(A, A.T):
        raise RequestError(f"A must be symmetric (A = Aᵀ), got {A.tolist()}")
    eig = np.linalg.eigvalsh(A)
    if eig.min() <= 0:
        raise RequestError(f"A must be positive definite: its smallest eigenvalue is {eig.min():.4g} "
                           "(Theorem 2.1 needs a symmetric positive definite A); nothing was run")
    return Z, A


@dataclass(frozen=True)
class PlaygroundRequest:
    """One playground run: tokens (n, d) float64 with d = 2 or 3, α, layers, A (d, d) SPD, the rule, and whether
    the attention is causal (token i sees the tokens j ≤ i: decoder attention, `hardmax.dynamics.Causal`)."""

    tokens: np.ndarray
    alpha: float
    layers: int
    A: np.ndarray
    rule: object  # a rule of hardmax.dynamics.RULES
    causal: bool = False

    KEYS = frozenset({"tokens", "alpha", "layers", "A", "rule", "causal"})  # and every registered rule's parameters

    @classmethod
    def from_json(cls, body, limits: Limits) -> PlaygroundRequest:
        """The run the JSON object `body` asks for; RequestError if it is malformed, TooLarge beyond `limits`."""
        body = _object(body, set(cls.KEYS) | _rule_fields(), "simulate")
        Z, A = _tokens_and_A(body, limits)
        alpha = _number(body.get("alpha", 0.5), "alpha", low=0, strict_low=True, high=1e6)
        layers = _integer(body.get("layers", 30), "layers", low=0, high=limits.layers)
        if len(Z) * (layers + 1) > limits.points:
            raise TooLarge(f"{len(Z)} tokens × {layers + 1} layers = {len(Z) * (layers + 1):,} positions: this "
                           f"server answers at most {limits.points:,}; use fewer tokens or layers")
        return cls(tokens=Z, alpha=alpha, layers=layers, A=A, rule=_rule(body, limits),
                   causal=_flag(body.get("causal", False), "causal"))

    def python(self) -> str:
        """The `hardmax.simulate(...)` call that reproduces this run (floats written to round-trip exactly)."""
        from hardmax import dynamics
        from hardmax.dynamics import Hardmax
        from hardmax.dynamics.rules import rule_to_dict

        rows = ",\n    ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in self.tokens)
        A = "[" + ", ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in self.A) + "]"
        record = rule_to_dict(self.rule)
        cls = type(self.rule).__name__
        imports = ["import numpy as np", "import hardmax"]
        if cls in dynamics.__all__ and getattr(dynamics, cls) is type(self.rule):  # public API: its constructor
            rule = f"hardmax.{cls}({', '.join(f'{k}={v!r}' for k, v in record.items() if k != 'rule')})"
        else:  # any other registered rule: its JSON spelling
            imports.append("from hardmax.dynamics import rule_from_dict")
            rule = f"rule_from_dict({record!r})"
        lines = [*imports, "", f"tokens = np.array([\n    {rows},\n])",
                 f"A = np.array({A})",
                 f"trajectory = hardmax.simulate(tokens, {rule}, alpha={self.alpha!r}, layers={self.layers}, A=A"
                 + (", mask=hardmax.dynamics.Causal())" if self.causal else ")")]
        if type(self.rule) is Hardmax and not self.causal:
            lines.append("print(hardmax.check_theorem(trajectory).table())")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class AttentionRequest:
    """Who attends to whom at one layer: tokens (n, d), A, the rule, and whether the attention is causal."""

    tokens: np.ndarray
    A: np.ndarray
    rule: object
    causal: bool = False

    KEYS = frozenset({"tokens", "A", "rule", "causal"})  # and every registered rule's parameters

    @classmethod
    def from_json(cls, body, limits: Limits) -> AttentionRequest:
        """The request in the JSON object `body`; RequestError if it is malformed, TooLarge beyond `limits`."""
        body = _object(body, set(cls.KEYS) | _rule_fields(), "attention")
        Z, A = _tokens_and_A(body, limits)
        return cls(tokens=Z, A=A, rule=_rule(body, limits), causal=_flag(body.get("causal", False), "causal"))


@dataclass(frozen=True)
class ReviewRequest:
    """A text for one of the server's trained runs, named as the server listed it."""

    run: str
    text: str
    decisive: float = 2.0  # a leader is decisive when its own decoder logit |v·z + b| exceeds this

    KEYS = frozenset({"run", "text", "decisive"})

    @classmethod
    def from_json(cls, body, limits: Limits, runs: tuple[str, ...]) -> ReviewRequest:
        """The request in the JSON object `body`, for one of `runs`; RequestError if not, TooLarge beyond `limits`."""
        body = _object(body, set(cls.KEYS), "review")
        run, text = body.get("run"), body.get("text")
        if not isinstance(run, str) or run not in runs:
            listed = ", ".join(runs) if runs else "none: start the server with --runs DIR holding trained runs"
            raise RequestError(f"run must be one of the server's runs ({listed}), got {_shown(run)}")
        if not isinstance(text, str) or not text.strip():
            raise RequestError("type or paste a review: the text is empty")
        if len(text) > limits.text:
            raise TooLarge(f"the review has {len(text):,} characters: this server reads at most {limits.text:,}")
        decisive = _number(body.get("decisive", 2.0), "decisive", low=0, high=1e6)
        return cls(run=run, text=text, decisive=decisive)
