"""Tests of `hardmax.terminate`: inside `sigterm_exits()` SIGTERM raises `Terminated` (a SystemExit with status
143) in the main thread, so that every `finally` runs; a handler someone else installed is left alone, and the
default one comes back on the way out."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from hardmax.terminate import Terminated, sigterm_exits


def test_terminated_is_a_system_exit_with_status_143():
    assert isinstance(Terminated(), SystemExit) and Terminated().code == 143


def test_sigterm_inside_raises_terminated_after_which_the_default_handler_is_back():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ran = []
    with pytest.raises(Terminated):
        with sigterm_exits():
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next statement
                ran.append("not reached")
            finally:
                ran.append("finally")
    assert ran == ["finally"] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_someone_installed_is_left_alone():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with sigterm_exits():
            assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_another_thread_changes_nothing():
    seen = []

    def inside():
        with sigterm_exits():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=inside)
    thread.start()
    thread.join()
    assert seen == [signal.SIG_DFL]
