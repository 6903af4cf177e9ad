"""SIGTERM as a clean exit: `Terminated` and `sigterm_exits()`, for the command line and every atomic writer.

SIGTERM's default action (kill, a scheduler's time limit, a container stopping) ends the process on the spot, so a
temporary file being written would stay behind. Inside `sigterm_exits()` it raises `Terminated` in the main thread
instead: every `finally` runs (`hardmax.io.atomic_write` removes its temporary file), and left uncaught the process
still ends with status 143 (128 + SIGTERM), only cleanly. Torch-free, so that the command line imports it at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "sigterm_exits"]


class Terminated(SystemExit):
    """SIGTERM received inside `sigterm_exits()`: a `SystemExit` with status 143."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def _terminated(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def sigterm_exits():
    """While inside, SIGTERM raises `Terminated` instead of ending the process on the spot, when its handler is the
    default one: a handler someone installed (a server's, an outer `sigterm_exits`) or an ignored SIGTERM is left
    alone, and only the main thread can take signals, so other threads change nothing."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
