"""Tests of `hardmax.training.device`: `resolve_device` (a device this machine has, or a one-line ValueError
that says why not) and `set_threads` (checked, then torch's thread count). CUDA and MPS are faked with
monkeypatch, so the refusals are tested on any machine."""

from __future__ import annotations

import pytest
import torch

from hardmax.training.device import resolve_device, set_threads


@pytest.mark.parametrize("name", ["cpu", torch.device("cpu")])
def test_the_cpu_is_always_there(name):
    assert resolve_device(name) == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "cuda:", "CPU", "", 0])
def test_a_misspelt_device_is_one_line_naming_it(name):
    with pytest.raises(ValueError, match=r"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got") as info:
        resolve_device(name)
    assert "\n" not in str(info.value)


def test_cuda_without_a_cuda_device_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device 'cuda': no CUDA device is available .*; use --device cpu"):
        resolve_device("cuda")


def test_a_cuda_index_beyond_the_devices_is_refused_and_one_within_is_resolved(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError, match=r"device 'cuda:2': this machine has 2 CUDA device\(s\)"):
        resolve_device("cuda:2")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)  # resolving allocates nothing


def test_mps_without_mps_is_refused(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'mps': MPS is not available on this machine; use --device cpu"):
        resolve_device("mps")


def test_set_threads_sets_torchs_count_and_refuses_what_is_not_a_count():
    before = torch.get_num_threads()
    try:
        set_threads(1)
        assert torch.get_num_threads() == 1
        for bad in (0, -1, True, 2.0, "2", 10**6):
            with pytest.raises(ValueError, match=r"threads must be an integer from 1 to \d+"):
                set_threads(bad)
        assert torch.get_num_threads() == 1  # a refused count changes nothing
    finally:
        torch.set_num_threads(before)
