"""Turning what a caller passes (tensors, NumPy arrays, nested lists, numbers) into checked tensors.

One home for the refusals every entry point shares — `simulate` and the theory functions alike: non-numeric
or ragged input, complex numbers, and precisions whose rounding makes distinct scores tie.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["COARSE_DTYPES", "MAX_STEPS", "as_floating", "as_tensor", "validate_A", "validate_alpha"]

#: The most steps (layers) one run takes, in `solve` and `simulate` alike: a step costs ≥ 1 µs compiled and ≥ 10 µs
#: in torch, so 10⁷ steps are minutes at least; more is refused before anything is allocated (Euler(dt=1e-300),
#: t1=1e300, steps=10**12, layers=10**9).
MAX_STEPS = 10_000_000

#: Precisions whose rounding (eps ≥ 1e-3) makes distinct scores tie: refused wherever ties are decided.
COARSE_DTYPES = (torch.float16, torch.bfloat16, *(getattr(torch, name) for name in (
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu") if hasattr(torch, name)))


def as_tensor(x, name: str, dtype: torch.dtype | None = None, device=None) -> Tensor:
    """A tensor from a tensor, NumPy array, list or number (dtype and device kept unless given).

    Raises:
        ValueError: anything non-numeric, ragged nested lists, complex numbers.
    """
    if isinstance(x, Tensor):
        t = x
    elif isinstance(x, np.ndarray | Sequence | float | int | np.generic):
        try:
            arr = np.asarray(x)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular numeric array ({e})") from None
        if arr.dtype.kind == "c":
            raise ValueError(f"{name} must be real, got complex dtype {arr.dtype}")
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric (bool, int or float), got NumPy dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    else:
        raise ValueError(f"{name} must be a torch tensor or a NumPy array, got {type(x).__name__}")
    if t.is_complex():
        raise ValueError(f"{name} must be real, got complex dtype {t.dtype}")
    if dtype is not None or device is not None:
        t = t.to(dtype=dtype or t.dtype, device=device or t.device)
    return t


def as_floating(x, name: str, *, integers: torch.dtype | None = None) -> Tensor:
    """`as_tensor`, floating: integers become `integers` (None: float64 for arrays and lists, NumPy's default,
    and torch's default dtype for integer tensors); floating tensors keep their dtype.

    Raises:
        ValueError: as `as_tensor`, and float16 / bfloat16, which cannot resolve ties.
    """
    z = as_tensor(x, name)
    if not z.is_floating_point():
        z = z.to(integers or (torch.get_default_dtype() if isinstance(x, Tensor) else torch.float64))
    if z.dtype in COARSE_DTYPES:
        raise ValueError(f"{name} of dtype {z.dtype} cannot resolve ties ({torch.finfo(z.dtype).eps:.0e} relative "
                         "precision makes distinct scores equal); convert them to float32 or float64")
    return z


def validate_A(A, d: int, dtype: torch.dtype, device) -> Tensor:
    """Return A as a (d, d) tensor, or raise ValueError if it is not symmetric positive definite."""
    if A is None:
        return torch.eye(d, dtype=dtype, device=device)
    A = as_tensor(A, "A", dtype=dtype, device=device)
    if A.shape != (d, d):
        raise ValueError(f"A must have shape ({d}, {d}) to match tokens of dimension {d}, got {tuple(A.shape)}")
    values = A.detach()  # the checks are not part of the graph when A requires grad
    if not torch.isfinite(values).all():
        raise ValueError("A contains NaN or inf")
    scale = values.abs().max().clamp(min=1)
    if not torch.allclose(values, values.T, rtol=0, atol=1e3 * torch.finfo(dtype).eps * float(scale)):
        raise ValueError("A must be symmetric (A != A.T)")
    smallest = torch.linalg.eigvalsh(values.to(torch.float64)).min().item()
    if smallest <= 0:
        raise ValueError(f"A must be positive definite; its smallest eigenvalue is {smallest:.3g}")
    return A


def validate_alpha(alpha, layers: int, dtype: torch.dtype, device) -> Tensor:
    """Return α as a (layers,) tensor, or raise ValueError unless every α_k is finite and > 0.

    A tensor α that requires grad keeps its graph (so gradients reach it through `simulate`).
    """
    if isinstance(alpha, bool | np.bool_):
        raise ValueError(f"alpha must be a number > 0, got {alpha!r}")
    a = as_tensor(alpha, "alpha")
    if a.dtype == torch.bool:
        raise ValueError("alpha must be numbers > 0, got a bool array")
    values = a.detach().to(torch.float64).reshape(-1).cpu()
    if values.numel() == 0:
        raise ValueError("alpha must be a scalar or one value per layer, got an empty array")
    if not torch.isfinite(values).all() or (values <= 0).any():
        bad = values[~(torch.isfinite(values) & (values > 0))][0].item()
        raise ValueError(f"alpha must be finite and > 0, got {bad}")
    if values.numel() not in (1, layers):
        raise ValueError(f"alpha must be a scalar or have one value per layer ({layers}), got {values.numel()} values")
    a = a.reshape(-1).to(dtype=dtype, device=device)
    return a.expand(layers) if a.numel() == 1 else a
