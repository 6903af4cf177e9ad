"""Turning what a caller passes (tensors, NumPy arrays, nested lists, numbers) into checked tensors.

One home for the refusals every entry point shares — `simulate` and the theory functions alike: non-numeric
or ragged input, complex numbers, and precisions whose rounding makes distinct scores tie.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["COARSE_DTYPES", "MAX_STEPS", "as_floating", "as_tensor"]

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
