"""The README's commands, run as written, in README order, from a clean directory (so the README cannot drift).

What a newcomer types is taken from README.md itself: the ```bash and ```console blocks (a ``$ `` prompt
marks a command) and the first column of the Commands table, plus the Python example. They run in an
empty temporary directory with an empty home (no cache, no runs), `hardmax` on PATH as after
``source .venv/bin/activate``, and the reviews of a small generated corpus (tests/corpus.py style, never
real reviews) as the Makefile's archive: `make quickstart` gets it through HARDMAX_IMDB, every later
command without it, so the test also checks that the data location is remembered. Sizes are the corpus'
(a few hundred reviews), so the whole README runs in a few minutes (3.5 min on 2 busy cores).

Skipped, with the reason printed: `make test` (the whole suite, which CI runs itself) and the setup step
of `make quickstart` (pip installs; the rest of the recipe runs).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent  # the environment running the tests: .venv/bin in `make test`


def readme_commands(text: str) -> list[str]:
    """Shell commands of the README in order: code blocks (bash: every line, comments cut; console: lines
    after a ``$ `` prompt) and the first cell of table rows that start with a `hardmax` command."""
    found: list[tuple[int, str]] = []
    for block in re.finditer(r"```(bash|console)\n(.*?)```", text, re.S):
        for line in block.group(2).splitlines():
            if block.group(1) == "console":
                if line.startswith("$ "):
                    found.append((block.start(), line[2:].strip()))
                continue
            command = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()  # "cmd   # comment"
            if command and not command.startswith("#"):
                found.append((block.start(), command))
    for row in re.finditer(r"^\| `(hardmax [^`]*)` \|", text, re.M):
        found.append((row.start(), row.group(1)))
    return [command for _, command in sorted(found, key=lambda pair: pair[0])]


def python_example(text: str) -> str:
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def test_readme_commands_are_found():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert commands[:3] == ["make quickstart", "make test", "source .venv/bin/activate"]
    assert {c.split()[1] for c in commands if c.startswith("hardmax ")} >= {"simulate", "train", "evaluate",
                                                                           "explain", "reproduce"}
    # Only commands hardmax has: a README that names an option the parser lacks fails here already.
    from hardmax.cli.app import build_parser

    for command in commands:
        if command.startswith("hardmax "):
            words = shlex.split(command)[1:]
            assert build_parser().parse_args(words).command == words[0], command


def _serve_and_stop(words: list[str], work: Path, env: dict) -> str:
    """Run a `hardmax explore` command as written (plus a free port and no browser), load both pages, stop it
    with Ctrl-C; "" when all went well, else what went wrong."""
    import signal
    import urllib.request

    process = subprocess.Popen([*words, "--port", "0", "--no-browser"], cwd=work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()  # "hardmax explore: http://127.0.0.1:PORT/playground  (Ctrl-C stops it)"
        found = re.search(r"(http://\S+)/playground", line)
        if not found:
            return f"no URL printed: {line!r} {process.stderr.read()[-1000:] if process.poll() is not None else ''}"
        for path in ("/playground", "/classifier", "/api/runs"):
            with urllib.request.urlopen(found.group(1) + path, timeout=60) as r:
                if r.status != 200:
                    return f"{path}: HTTP {r.status}"
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        return "" if code == 0 else f"exit {code} after Ctrl-C: {process.stderr.read()[-1000:]}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path, one_thread):
    from test_cli_sentiment import write_archive

    text = README.read_text(encoding="utf-8")
    (tmp_path / "shared").mkdir()
    archive = write_archive(tmp_path / "shared" / "reviews.tar.gz")
    work, home = tmp_path / "clone", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARDMAX_")}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1",
               MPLBACKEND="Agg")
    skipped, failed = [], []
    for command in readme_commands(text):
        words = shlex.split(command)
        if command == "make test":
            skipped.append(f"{command}: the whole suite, which CI runs itself")
            continue
        if command.startswith("source "):
            assert (BIN / "activate").is_file() or not (ROOT / ".venv").exists()
            skipped.append(f"{command}: the test puts {BIN} first on PATH instead")
            continue
        if command == "make quickstart":
            skipped.append("make quickstart's setup step: pip installs (its data link and job run below)")
            # The Makefile's archive is the generated one; only this command sees HARDMAX_IMDB.
            argv = ["make", "-f", str(ROOT / "Makefile"), "-o", "setup", f"VENV={BIN.parent}",
                    f"HARDMAX_IMDB={archive}", "quickstart"]
        elif words[:2] == ["hardmax", "explore"]:
            problem = _serve_and_stop(words, work, env)
            if problem:
                failed.append(f"{command}\n  {problem}")
            continue
        else:
            argv = words
        result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            failed.append(f"{command}\n  exit {result.returncode}: {result.stderr.strip()[-2000:]}")
    result = subprocess.run([sys.executable, "-c", python_example(text)], cwd=work, env=env, capture_output=True,
                            text=True, timeout=600)
    if result.returncode != 0:
        failed.append(f"the Python example\n  {result.stderr.strip()[-2000:]}")
    print("\nskipped: " + "; ".join(skipped))
    assert not failed, "\n".join(failed)
    # What the README promises these commands leave behind.
    assert (work / "runs" / "quick" / "results.md").is_file() and (work / "runs" / "quick" / "d2").is_dir()
    assert (home / ".cache" / "hardmax" / "aclImdb_v1.tar.gz").resolve() == archive.resolve()
    assert (work / "runs" / "figure2" / "figure2.gif").is_file()
