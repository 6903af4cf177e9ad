"""Tests of `hardmax.io`: atomic writes, safetensors + JSON round trips, clear refusals.

- atomic_write: a failing writer leaves the old file and no temporary file behind.
- save_tensors / load_tensors: tensors and metadata round-trip; missing, corrupt, foreign and
  other-version files raise CheckpointError.
- Optimizer state: Adam restored from a file continues exactly like the original.
- read_json / write_json: round trip; missing or corrupt file raises CheckpointError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from hardmax.io import (
    FORMAT_VERSION,
    CheckpointError,
    atomic_write,
    load_tensors,
    read_json,
    save_tensors,
    write_json,
)
from hardmax.training.run import optimizer_from_tensors, optimizer_to_tensors


def files_in(directory: Path) -> list[str]:
    """Every entry of `directory`, hidden temporary files included."""
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------------------------
# atomic_write
# --------------------------------------------------------------------------------------------


def test_atomic_write_replaces_and_cleans_up(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old")
    assert atomic_write(path, lambda tmp: Path(tmp).write_text("new")) == path
    assert path.read_text() == "new"
    assert files_in(tmp_path) == ["a.txt"]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path, error):
    path = tmp_path / "a.txt"
    path.write_text("old")

    def write(tmp: str) -> None:
        Path(tmp).write_text("half a fi")  # a partial write, then the failure
        raise error("disk full")

    with pytest.raises(error, match="disk full"):
        atomic_write(path, write)
    assert path.read_text() == "old"
    assert files_in(tmp_path) == ["a.txt"]


def test_failed_first_write_creates_nothing(tmp_path):
    path = tmp_path / "sub" / "a.txt"

    def write(tmp: str) -> None:
        raise OSError("no space left")

    with pytest.raises(OSError, match="no space left"):
        atomic_write(path, write)
    assert not path.exists()
    assert files_in(tmp_path / "sub") == []


def test_atomic_write_creates_parent_directories(tmp_path):
    path = tmp_path / "x" / "y" / "a.json"
    write_json(path, {"a": 1})
    assert read_json(path) == {"a": 1}


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


def test_tensors_and_metadata_round_trip(tmp_path):
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 3, generator=g, requires_grad=True)
    tensors = {
        "weight": weight,
        "transposed": torch.randn(3, 5, generator=g).T,  # not contiguous
        "double": torch.randn(2, generator=g, dtype=torch.float64),
        "ids": torch.arange(7),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
    }
    meta = {"epoch": 3, "nested": {"x": [1, 2.5, None], "s": "α"}, "path": Path("runs/a"), "t": torch.tensor([1, 2])}
    path = save_tensors(tmp_path / "w.safetensors", tensors, meta)
    loaded, got_meta = load_tensors(path)
    assert set(loaded) == set(tensors)
    for name, value in tensors.items():
        assert loaded[name].dtype == value.dtype and torch.equal(loaded[name], value.detach()), name
    assert got_meta == {"format": FORMAT_VERSION, "epoch": 3, "nested": {"x": [1, 2.5, None], "s": "α"},
                        "path": "runs/a", "t": [1, 2]}
    assert files_in(tmp_path) == ["w.safetensors"]


def test_save_without_metadata(tmp_path):
    save_tensors(tmp_path / "w.safetensors", {"a": torch.ones(2)})
    _, meta = load_tensors(tmp_path / "w.safetensors")
    assert meta == {"format": FORMAT_VERSION}


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_tensors(tmp_path / "nope.safetensors")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_file_is_refused(tmp_path, damage):
    path = save_tensors(tmp_path / "w.safetensors", {"a": torch.arange(100.0)}, {"epoch": 1})
    data = path.read_bytes()
    path.write_bytes({"garbage": b"\x13\x37" * 64, "truncated": data[: len(data) // 2], "empty": b""}[damage])
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_tensors(path)


def test_foreign_safetensors_is_refused(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.ones(2)}, str(path))
    with pytest.raises(CheckpointError, match="not written by hardmax"):
        load_tensors(path)


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, None])
def test_other_format_version_is_refused(tmp_path, version):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.ones(2)}, str(path), metadata={"hardmax": json.dumps({"format": version})})
    with pytest.raises(CheckpointError, match=f"format {version}"):
        load_tensors(path)


# --------------------------------------------------------------------------------------------
# Optimizer state
# --------------------------------------------------------------------------------------------


def make_net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    net[0].bias.requires_grad_(False)  # a frozen parameter is left out of the optimizer
    return net


def trainable(net: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in net.parameters() if p.requires_grad]


def adam_steps(net: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 3, generator=g)
        loss = net(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.mark.parametrize("options", [{}, {"amsgrad": True, "weight_decay": 0.1}], ids=["adam", "amsgrad"])
def test_optimizer_state_round_trip(tmp_path, options):
    net = make_net(0)
    optimizer = torch.optim.Adam(trainable(net), lr=0.05, **options)
    adam_steps(net, optimizer, 5, seed=1)

    tensors, info = optimizer_to_tensors(optimizer)
    tensors.update({f"model.{k}": v for k, v in net.state_dict().items()})
    save_tensors(tmp_path / "ckpt.safetensors", tensors, {"optimizer": info})

    loaded, meta = load_tensors(tmp_path / "ckpt.safetensors")
    restored = make_net(123)  # different initial weights, overwritten below
    restored.load_state_dict({k[6:]: v for k, v in loaded.items() if k.startswith("model.")})
    restored_opt = torch.optim.Adam(trainable(restored), lr=1.0)  # lr, too, comes from the file
    optimizer_from_tensors(restored_opt, loaded, meta["optimizer"])
    assert restored_opt.param_groups[0]["lr"] == 0.05

    adam_steps(net, optimizer, 3, seed=2)
    adam_steps(restored, restored_opt, 3, seed=2)
    for (name, a), b in zip(net.state_dict().items(), restored.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_optimizer_without_state_round_trips():
    net = make_net(0)
    optimizer = torch.optim.Adam(trainable(net), lr=0.1)
    tensors, info = optimizer_to_tensors(optimizer)
    assert tensors == {}
    fresh = torch.optim.Adam(trainable(net), lr=0.5)
    optimizer_from_tensors(fresh, tensors, json.loads(json.dumps(info)))
    assert fresh.param_groups[0]["lr"] == 0.1 and fresh.state_dict()["state"] == {}


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------


def test_json_round_trip(tmp_path):
    obj = {"a": [1, 2.5, None, True], "b": {"c": "α"}, "t": torch.tensor(3.0), "p": Path("x/y")}
    write_json(tmp_path / "c.json", obj)
    assert read_json(tmp_path / "c.json") == {"a": [1, 2.5, None, True], "b": {"c": "α"}, "t": 3.0, "p": "x/y"}


def test_json_refuses_unknown_objects_and_keeps_old_file(tmp_path):
    path = write_json(tmp_path / "c.json", {"a": 1})
    with pytest.raises(TypeError, match="cannot write object"):
        write_json(path, {"a": object()})
    assert read_json(path) == {"a": 1}
    assert files_in(tmp_path) == ["c.json"]


def test_read_json_missing(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        read_json(tmp_path / "nope.json")


@pytest.mark.parametrize("content", [b'{"a": 1', b"", b"\xff\xfe\x00garbage"], ids=["truncated", "empty", "binary"])
def test_read_json_corrupt(tmp_path, content):
    path = tmp_path / "c.json"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not valid JSON"):
        read_json(path)
