"""numba as hardmax uses it: `from hardmax._numba import numba` in every module that compiles or calls numba.

numba launches its thread pool once, at the first parallel kernel or the first `numba.get_num_threads` /
`set_num_threads` of the process, with the threading layer configured then. Left to itself it picks OpenMP here,
whose idle workers keep spinning after a kernel call and slow the PyTorch work that follows 3-4x (measured: a
softmax evaluation pass 4.4 s alone, 16.3 s right after a hardmax pass; the phase diagrams of `hardmax particles`
on one thread 42.6 s against 35.8 s). The work-queue layer has no spinning workers, and the kernels serialise their
calls (`parallel`), which is all it requires. Importing numba through this module sets
the layer before anything can launch the pool — a sweep's worker pins numba's threads (`sweep.cluster.pin_threads`)
before it imports any kernel. Set NUMBA_THREADING_LAYER to choose another layer.
"""

from __future__ import annotations

import contextlib
import os
import threading

import numba

__all__ = ["LOCK", "numba", "parallel"]

if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"

#: numba's parallel kernels must not be launched from two threads at once with its work-queue threading layer (the
#: process aborts: "Concurrent access has been detected"): every parallel kernel runs under this lock (each call
#: already uses every core), so threads (the explorer's server, a user's pool) may call `simulate`,
#: `leader_layers`, `check_theorem`, `cluster_counts`, ... at once.
LOCK = threading.Lock()


@contextlib.contextmanager
def parallel(count: int):
    """Run a parallel kernel on `count` of numba's threads (at most its pool's), under `LOCK`; numba's thread count
    restored after."""
    with LOCK:
        previous = numba.get_num_threads()
        numba.set_num_threads(max(1, min(count, numba.config.NUMBA_NUM_THREADS)))
        try:
            yield
        finally:
            numba.set_num_threads(previous)
