"""The import structure the package documents (docs/architecture.md "Modules", CONTRIBUTING.md): imports flow one way,
no module imports another in a cycle, nothing imports the command line, and no private name crosses a file.

Imports are read from the source (every level, function bodies included; `if TYPE_CHECKING:` blocks are
annotations, not imports), so a lazy import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# Each package may import its own modules and those of the layers before it, never those after it.
LAYERS = [
    {"hardmax.version", "hardmax._numba", "hardmax.lazy", "hardmax.memory", "hardmax.io", "hardmax.progress",
     "hardmax.inputs", "hardmax.terminate",
     "hardmax.tables"},
    {"hardmax.dynamics"},
    {"hardmax.theory", "hardmax.measures", "hardmax.svm"},
    {"hardmax.models", "hardmax.data"},
    {"hardmax.training"},
    {"hardmax.explain"},
    {"hardmax.plots"},
    {"hardmax.pretrained"},  # real transformers (Hugging Face): dynamics, theory, measures, svm, plots
    {"hardmax.experiments"},
    {"hardmax.sweep"},  # parameter grids on Dask: tasks from every layer before it
    {"hardmax.explore"},
    {"hardmax.cli"},
    {"hardmax.__main__"},
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "hardmax").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[tuple[str, tuple[str, ...]]]:
    """(module, names) of every hardmax import in the file, outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for branch in ast.walk(tree)
               if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
               for node in ast.walk(branch)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hardmax"):
            found.add((node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            found |= {(a.name, ()) for a in node.names if a.name.startswith("hardmax")}
    return found


def _edges() -> dict[str, set[str]]:
    """module -> the modules it imports (`from package import submodule` counts as the submodule)."""
    edges = {}
    for module, path in MODULES.items():
        targets = set()
        for imported, names in _imports(path):
            submodules = {f"{imported}.{n}" for n in names if f"{imported}.{n}" in MODULES}
            targets |= submodules if names and len(submodules) == len(names) else {imported} | submodules
        edges[module] = {t for t in targets if t in MODULES and t != module}
    return edges


EDGES = _edges()


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _layer(module: str) -> int:
    package = _package(module)
    for k, layer in enumerate(LAYERS):
        if package in layer:
            return k
    raise AssertionError(f"{package} is in no layer of tests/test_architecture.py: add it where it belongs")


def test_every_package_has_a_layer():
    for module in MODULES:
        if module != "hardmax":
            _layer(module)


def test_no_module_imports_a_later_layer():
    upward = [f"{m} -> {t}" for m, targets in EDGES.items() if m != "hardmax" for t in targets
              if t != "hardmax" and _layer(t) > _layer(m)]
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_import_cycles_between_modules_or_packages():
    def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
        index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in graph.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

        for v in list(graph):
            if v not in index:
                visit(v)
        return found

    assert cycles(EDGES) == []
    packages: dict[str, set[str]] = {}
    for m, targets in EDGES.items():
        packages.setdefault(_package(m), set()).update(_package(t) for t in targets if _package(t) != _package(m))
    packages.pop("hardmax", None)
    assert cycles(packages) == []


def test_nothing_imports_the_command_line_or_the_package_root():
    for module, targets in EDGES.items():
        if module in ("hardmax.__main__",) or module.startswith("hardmax.cli"):
            continue
        assert not any(t.startswith("hardmax.cli") for t in targets), module
        assert "hardmax" not in targets, f"{module} imports the package root (a cycle through __init__)"


ENGINES = "hardmax.dynamics._engines"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_file(module):
    """No `from m import _name` across files; the one private package, the engines, is imported by name only from
    `hardmax.dynamics` itself (`solve` hands it the case), and inside it its modules share what they like."""
    inside = module == ENGINES or module.startswith(ENGINES + ".")
    private = [f"{imported}.{name}" for imported, names in _imports(MODULES[module]) for name in names
               if name.startswith("_") and not name.startswith("__")
               and not (f"{imported}.{name}" == ENGINES and module.startswith("hardmax.dynamics."))
               and not (inside and imported.startswith(ENGINES))]
    assert not private, f"{module} imports private names: {private}"


def test_the_engines_are_private_to_dynamics_but_for_their_listed_services():
    """Outside `hardmax.dynamics`, a module imports from the engines' private package only the services it lists
    (`_engines.SERVICES`: the leader rule's compiled snapshots and tie sets, the kernel's lock, the classifier's
    compact layers); `hardmax.dynamics` itself reaches them through `solve`."""
    from hardmax.dynamics._engines import SERVICES

    used = {}
    for module, path in MODULES.items():
        if module.startswith("hardmax.dynamics"):
            continue
        for imported, names in _imports(path):
            if imported == ENGINES or imported.startswith(ENGINES + "."):
                allowed = SERVICES.get(imported, ())
                wrong = [n for n in names if n not in allowed] or ([] if names else [imported])
                assert not wrong, f"{module} imports {wrong} from {imported}: not an engine service ({SERVICES})"
                used.setdefault(imported, set()).update(names)
    assert used == {k: set(v) for k, v in SERVICES.items()}, "SERVICES lists a name nobody uses"


def test_no_engine_internal_is_public():
    """No `__all__` of a public module names an object the engines define (what a user calls is defined in a public
    module: `dedup.deduplicate`, `rules.default_tie_rtol`); and the API reference skips the private package
    (docs/_ext/hardmax_api.py)."""
    import importlib
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
    try:
        from hardmax_api import all_modules
    finally:
        sys.path.pop(0)
    leaked = []
    for module in all_modules():
        for name in getattr(module, "__all__", ()):
            home = getattr(getattr(module, name), "__module__", "") or ""
            if home.startswith(ENGINES):
                leaked.append(f"{module.__name__}.{name}")
    assert not leaked, leaked
    assert not [m.__name__ for m in all_modules() if m.__name__.startswith(ENGINES)]
    assert all(not hasattr(importlib.import_module(m), "__all__") for m in MODULES if m.startswith(ENGINES + "."))


def _names_imported(node: ast.AST) -> set[str]:
    """The modules an import statement names (`from p import m` names p and p.m, m possibly a submodule)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module:
        return {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return set()


NUMBA = "hardmax._numba"


def _compiled_modules() -> set[str]:
    """numba and every hardmax module that imports it (itself, or as configured by hardmax._numba): the compiled
    code."""
    found = {"numba"}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(name.split(".")[0] == "numba" or name.startswith(NUMBA) for node in ast.walk(tree)
               for name in _names_imported(node)):
            found.add(module)
    return found


def test_numba_is_imported_plainly_never_behind_a_try():
    """numba is a dependency (pyproject.toml), so no module imports it, or a module of compiled code, inside a `try:`
    with a fallback for its absence (issue #40): each compiled routine has one reference, a path the library also
    takes for other reasons or a plain version in tests/reference.py, never a second path for a missing numba."""
    compiled = _compiled_modules()
    assert {"numba", "hardmax.dynamics._engines.kernel"} <= compiled
    guarded = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for block in ast.walk(tree):
            if not isinstance(block, ast.Try):
                continue
            for node in (n for statement in block.body for n in ast.walk(statement)):
                names = {name for name in _names_imported(node) if name in compiled or name.split(".")[0] == "numba"}
                guarded += [f"{module}:{node.lineno} imports {name} inside a try" for name in sorted(names)]
    assert not guarded, "\n".join(guarded)


def test_numba_is_imported_through_hardmax_numba():
    """Every module that uses numba takes it from `hardmax._numba` (`from hardmax._numba import numba`), which chooses
    the threading layer before anything can start numba's thread pool: a module that imported numba itself and
    started the pool first (a sweep's worker pinning numba's threads did) got OpenMP's spinning workers, and the
    phase diagrams ran 13-19 % slower on a worker than in the driver."""
    direct, unconfigured = [], []
    for module, path in MODULES.items():
        if module == NUMBA:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {name for node in ast.walk(tree) for name in _names_imported(node)}
        direct += [f"{module} imports numba itself" for node in ast.walk(tree)
                   if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba" for a in node.names)]
        if any(name.split(".")[0] == "numba" for name in names) and NUMBA not in names:
            unconfigured.append(module)
    assert not direct and not unconfigured, (direct, unconfigured)
    assert {"hardmax.dynamics._engines.kernel", "hardmax.sweep.cluster", "hardmax.theory.support"} <= \
        _compiled_modules()


# γ = α/(1+α) and 1 − γ = 1/(1+α): a sum of 1 and an α closing a bracket, `(1 + alpha)`, `(1.0 + alphas[k])`,
# `(1 + a)`, `(1 + self.alpha)`, or `(alpha + 1)`. The single letter counts only after the 1 (`str(a + 1)` is an
# index); `log1p(alpha)` is a logarithm, not a step.
_ALPHA = r"(?:self\.)?(?:alpha\w*|α\w*|a)(?:\[[^\]]*\])?"
_LAYER_STEP = re.compile(rf"(?<![\w.])1(?:\.0*)?\s*\+\s*{_ALPHA}\s*\)"
                         r"|\(\s*(?:self\.)?(?:alpha\w*|α\w*)(?:\[[^\]]*\])?\s*\+\s*1(?:\.0*)?(?![\w.])")
# The home of the expressions, and code whose α is another paper's (one spelling each, with why).
_LAYER_STEP_HOME = "hardmax/dynamics/solvers.py"
_OTHER_ALPHAS = {
    # the long-context paper's layer x' = (α y + Σ_j A_ij y_j)/(1 + α): its α weighs the residual, so its Euler step
    # is 1/(1 + α); not the paper's γ
    ("hardmax/experiments/long_context.py", "Euler ( 1.0 / ( 1.0 + alpha ) )"),
}


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """(first line, code) of each logical line of the file, strings and comments left out (docstrings may state the
    equation), tokens joined by single spaces."""
    lines, current, start = [], [], None
    skip = {tokenize.COMMENT, tokenize.STRING, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    skip |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    with path.open("rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.NEWLINE:
                if current:
                    lines.append((start, " ".join(current)))
                current, start = [], None
            elif tok.type not in skip:
                start = tok.start[0] if start is None else start
                current.append(tok.string)
    return lines


@pytest.mark.parametrize(("code", "found"), [
    ("gamma = (alpha / (1.0 + alpha))[:, None, None]", True),
    ("torch.cumprod(1 / (1 + a), 0)", True),
    ("g = a[k] / (1 + a[k])", True),
    ("step = self.alpha / (self.alpha + 1)", True),
    ("run = solve(field, Euler(1.0 / (1.0 + alpha)), y)", True),
    ("yticklabels=[str(a + 1) for a in range(L)]", False),
    ("np.log1p(alpha)", False),
    ("bound = (T - 1) * torch.exp(-R) / (1 + (T - 1) * torch.exp(-R))", False),
    ("a = 1.0 / (1.0 + (n - 1) * math.exp(-beta * (1.0 - r)))", False),
    ("x = 1 + alpha_max * y", False),
])
def test_the_layer_step_pattern(code, found):
    """The pattern below finds γ = α/(1+α) and 1/(1+α) however they are spelt, and not other sums of 1."""
    assert bool(_LAYER_STEP.search(code)) == found


def test_the_layer_step_is_computed_in_the_solvers_only():
    """γ = α/(1+α) (`layer_step`) and 1 − γ = 1/(1+α) (`layer_contraction`) are written in `dynamics/solvers.py` and
    nowhere else in src (issue #40: one engine, the step in the solver only): a check, an experiment or a compiled
    kernel that needs γ_k takes it from the solver, so they all step by the same numbers bit for bit."""
    found = []
    for path in sorted((SRC / "hardmax").rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative == _LAYER_STEP_HOME:
            continue
        for line, code in _code_lines(path):
            if _LAYER_STEP.search(code) and not any(relative == f and snippet in code for f, snippet in _OTHER_ALPHAS):
                found.append(f"{relative}:{line}: {code}")
    assert not found, "\n".join(found)
    home = [code for _, code in _code_lines(SRC / _LAYER_STEP_HOME) if _LAYER_STEP.search(code)]
    assert home == ["return alpha / ( 1 + alpha )", "return 1 / ( 1 + alpha )"], home


def _compiled_functions(tree: ast.AST) -> list[ast.FunctionDef]:
    """The functions of a module decorated with numba's `njit` / `jit` (bare or called, `numba.` or imported)."""
    def compiled(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return ast.unparse(target).split(".")[-1] in ("njit", "jit")
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(compiled(d) for d in node.decorator_list)]


def test_the_dynamics_compiled_code_is_an_engine():
    """In `hardmax.dynamics`, numba code lives in the private engines only (issue #40): a public module (the circle's
    `positional.circle_flow`, say) checks its arguments and calls an engine's entry, and no public module compiles."""
    public = [m for m, path in MODULES.items() if m.startswith("hardmax.dynamics")
              and not (m == ENGINES or m.startswith(ENGINES + "."))
              and _compiled_functions(ast.parse(path.read_text(encoding="utf-8")))]
    compiling = [m for m in _compiled_modules() if m.startswith("hardmax.dynamics") and not m.startswith(ENGINES)]
    assert not public and not compiling, (public, compiling)


def test_every_compiled_function_says_what_it_computes():
    """Every numba function in src has a docstring (its equation, the shapes it reads and writes, its invariant): a
    compiled kernel is read far more often than the Python that calls it, and cannot be stepped through."""
    bare = [f"{module}.{node.name}" for module, path in sorted(MODULES.items())
            for node in _compiled_functions(ast.parse(path.read_text(encoding="utf-8")))
            if not ast.get_docstring(node)]
    assert not bare, bare


def test_every_engine_name_is_used():
    """Every top-level function, class and constant of the engines is named somewhere besides its definition (src,
    tests or benchmarks): a fast path's helper that nothing calls is dead code, which the chooser's own checks
    (`_engines.serves`) replaced (issue #40: the paper engine's own "can the kernel run it" check)."""
    root = SRC.parent
    texts = [p.read_text(encoding="utf-8") for folder in ("src", "tests", "benchmarks")
             for p in (root / folder).rglob("*.py")]
    unused = []
    for module, path in sorted(MODULES.items()):
        if not module.startswith(ENGINES + "."):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", None) == "overload" for d in node.decorator_list):
                continue  # numba's `overload` registers it: its use is the decorated stub's (`_exp_any`)
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            for name in names:
                word = re.compile(rf"\b{re.escape(name)}\b")
                if sum(len(word.findall(text)) for text in texts) <= 1:
                    unused.append(f"{module}.{name}")
    assert not unused, unused


def test_every_public_module_has_its_test_file():
    """tests/ mirrors src/ (the house style): each public module hardmax.<package>.<module> (no part of its name
    private, packages' __init__ aside) has tests/test_<package>_<module>.py (a top-level module hardmax.<module>:
    tests/test_<module>.py), where the tests of what it defines live; the private engines' are
    tests/test_dynamics_engines*.py."""
    tests = SRC.parent / "tests"
    missing = []
    for module, path in sorted(MODULES.items()):
        parts = module.split(".")[1:]
        if path.name == "__init__.py" or any(part.startswith("_") for part in parts):
            continue
        name = "test_" + "_".join(parts) + ".py"
        if not (tests / name).is_file():
            missing.append(f"tests/{name}")
    assert not missing, missing
