"""Tests of `hardmax.memory`: the one memory-budget check used before any user-sized allocation."""

from __future__ import annotations

import math

import pytest

from hardmax.memory import MemoryBudgetError, format_bytes, memory_budget, require_memory


def test_budget_is_the_available_memory_capped_by_the_environment(monkeypatch):
    monkeypatch.delenv("HARDMAX_MEMORY_LIMIT", raising=False)
    available = memory_budget()
    assert available > 2**20
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "512M")
    assert memory_budget() == min(available, 512 * 2**20)
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1.5G")
    assert memory_budget() == min(available, int(1.5 * 2**30))
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="HARDMAX_MEMORY_LIMIT must be"):
        memory_budget()


def test_require_memory_refuses_with_one_line_naming_what(monkeypatch):
    monkeypatch.setenv("HARDMAX_MEMORY_LIMIT", "1G")
    require_memory(2**29, "--layers 10")  # fits
    for too_much in (2**31, 1e300, math.inf, math.nan):
        with pytest.raises(MemoryBudgetError) as info:
            require_memory(too_much, "--layers 100000000 (a trajectory)")
        message = str(info.value)
        assert message.startswith("--layers 100000000 (a trajectory) needs about ") and "\n" not in message
        assert "1 GiB available" in message
    # Both a ValueError (one line from the CLI) and a MemoryError (what allocation failures raise).
    assert issubclass(MemoryBudgetError, ValueError) and issubclass(MemoryBudgetError, MemoryError)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(8e9) == "7.45 GiB"
    assert format_bytes(math.inf) == "an unbounded amount"
