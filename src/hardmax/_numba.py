"""numba as hardmax uses it: `from hardmax._numba import numba` in every module that compiles or calls numba.

numba launches its thread pool once, at the first parallel kernel or the first `numba.get_num_threads` /
`set_num_threads` of the process, with the threading layer configured then. Left to itself it picks OpenMP here,
whose idle workers keep spinning after a kernel call and slow the PyTorch work that follows 3-4x (measured: a
softmax evaluation pass 4.4 s alone, 16.3 s right after a hardmax pass; the phase diagrams of `hardmax particles`
on one thread 42.6 s against 35.8 s). The work-queue layer has no spinning workers, and the kernels serialise their
calls (`dynamics._engines.kernel.KERNEL_LOCK`), which is all it requires. Importing numba through this module sets
the layer before anything can launch the pool — a sweep's worker pins numba's threads (`sweep.cluster.pin_threads`)
before it imports any kernel. Set NUMBA_THREADING_LAYER to choose another layer.
"""

from __future__ import annotations

import os

import numba

__all__ = ["numba"]

if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"
