"""Progress reporting: a tqdm bar on a terminal, a line every few seconds anywhere else.

tqdm redraws its bar with carriage returns, which fill a log file or a CI console with thousands of
partial lines (a `hardmax reproduce` log grew to 157 KB of them). `progress` gives the bar only when
stderr is a terminal and otherwise prints one plain line at most every `every` seconds, plus one at
the end. Nothing else lives here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

__all__ = ["LineProgress", "progress"]


class LineProgress:
    """The non-terminal stand-in for a tqdm bar: ``desc: done/total unit (pct) elapsed``, one line at a time.

    Supports the part of tqdm's interface the library uses: iteration, ``update(n)``, ``close()``,
    ``set_postfix_str(text)``, ``write(text)`` and use as a context manager.
    """

    def __init__(self, iterable: Iterable | None = None, *, total: float | None = None, desc: str = "",
                 unit: str = "it", initial: float = 0, every: float = 10.0, file: TextIO | None = None,
                 disable: bool = False, clock=time.monotonic):
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        self.iterable = iterable
        self.total = total
        self.desc = desc
        self.unit = unit.strip()
        self.n = initial
        self.every = every
        self.file = file
        self.disable = disable
        self.postfix = ""
        self._clock = clock
        self._start = clock()
        self._last = self._start
        self._closed = False

    def __iter__(self) -> Iterator:
        if self.iterable is None:
            raise TypeError("this progress reporter was made without an iterable")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self) -> str:
        """The current state as one line."""
        elapsed = self._clock() - self._start
        done = f"{self.n:,.0f}" + (f"/{self.total:,.0f}" if self.total else "")
        pct = f" ({100 * self.n / self.total:.0f} %)" if self.total else ""
        speed = self.n / elapsed if elapsed > 0 else 0.0
        rate = f", {speed:,.{0 if speed >= 10 else 1}f} {self.unit}/s" if speed else ""
        postfix = f", {self.postfix}" if self.postfix else ""
        return f"{self.desc + ': ' if self.desc else ''}{done} {self.unit}{pct} in {elapsed:.0f} s{rate}{postfix}"

    def _print(self, text: str) -> None:
        if not self.disable:
            print(text, file=self.file or sys.stderr, flush=True)

    def update(self, n: float = 1) -> None:
        """Count `n` more; print the line when `every` seconds have passed since the last one."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.every:
            self._last = now
            self._print(self.line())

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        """Show `text` at the end of each line from the next one on (`refresh` is ignored)."""
        self.postfix = text

    def write(self, text: str) -> None:
        """Print `text` on a line of its own (nothing when disabled)."""
        self._print(text)

    def close(self) -> None:
        """Print the last line, once; later calls do nothing."""
        if not self._closed:
            self._closed = True
            self._print(self.line())


def progress(iterable: Iterable | None = None, *, total: float | None = None, desc: str = "", unit: str = "it",
             initial: float = 0, disable: bool = False, every: float = 10.0, file: TextIO | None = None,
             **tqdm_options: Any):
    """A progress reporter over `iterable` (or updated by hand with ``update(n)`` when it is None).

    On a terminal (``file``, default stderr, is a tty): ``tqdm(iterable, total=..., desc=..., ...)``,
    with `tqdm_options` passed through. Elsewhere: a `LineProgress`, which prints one line at most every
    `every` seconds and a last one when closed. `disable=True` prints nothing in either case.
    """
    stream = file or sys.stderr
    if not disable and getattr(stream, "isatty", lambda: False)():
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, file=stream, **tqdm_options)
    return LineProgress(iterable, total=total, desc=desc, unit=unit, initial=initial, every=every, file=file,
                        disable=disable)
