"""The embedded Dask cluster a sweep runs on by default: `EmbeddedCluster(workers)`.

    with EmbeddedCluster(2, warm="phase_cell").start() as cluster:    # starts in the background, workers warmed
        ...                                                            # the caller's other work meanwhile
        sweep("phase_cell", grid, out=a, executor=cluster)             # several sweeps, one cluster
        sweep("phase_cell", other, out=b, executor=cluster)
                                                                       # closed: no process left

A LocalCluster of processes on 127.0.0.1 (scheduler, workers, nannies and the dashboard), one thread each, the
numerical libraries' threads pinned to one per worker before it starts (its environment) and when it runs a batch
(`pin_threads`). `sweep(..., executor=None)` makes one for the sweep and closes it; a command that runs several
sweeps starts one early, so that the workers' start and imports overlap the command's other work, and shares it.
What lives elsewhere: running the batches (`run`), the tasks and their warm-up cells (`tasks`).
"""

from __future__ import annotations

import os
import threading

__all__ = ["EmbeddedCluster", "pin_threads"]

_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def pin_threads(driver: int) -> None:
    """One thread for torch and numba in a worker process (never in the driver's own process, whose settings are
    its caller's: a serial executor runs batches there). The environment (OMP, MKL, OpenBLAS, numba) of the local
    cluster's workers is set before they start (`EmbeddedCluster`); numba's and torch's pools are set here, in the
    worker, because a worker does not read them from its environment once started (dask/distributed#9075)."""
    if os.getpid() == driver:
        return
    import torch

    from hardmax._numba import numba  # its threading layer chosen before the pool starts

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    if numba.get_num_threads() != 1:
        numba.set_num_threads(1)


def _warm(task: str, cell: dict, driver: int) -> None:
    """Run `cell` of `task` in a worker, its threads pinned as for a batch: what its cells import and compile loads."""
    from hardmax.sweep.tasks import TASKS

    pin_threads(driver)
    TASKS[task].function(**cell)


class EmbeddedCluster:
    """A LocalCluster of `workers` processes (default: the cores) and its Client, started at once (`client`, or a
    with-block) or in the background (`start()`), closed by `close()` or the end of the with-block.

    warm: a task (or its name) whose warm-up cell (`Task.warm`) each worker runs once as the cluster starts, so that
        the imports and compiled kernels its cells need are loaded before the first batch arrives.
    The same object may serve several sweeps (`sweep(..., executor=cluster)`); they wait for its start.
    """

    def __init__(self, workers: int | None = None, *, warm=None):
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be an integer ≥ 1, got {workers!r}")
        from hardmax.sweep.grid import task_named

        self.workers = workers or os.cpu_count() or 1
        self.warm = task_named(warm) if isinstance(warm, str) else warm
        self._client = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing = threading.Lock()
        self._closed = False

    def start(self) -> EmbeddedCluster:
        """Start the cluster in a background thread and return at once (`client` waits for it)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this cluster was closed")
            if self._thread is not None or self._client is not None:
                return self
            # distributed writes the workers' environment into this process's for the time of their start (see
            # `_start`): this process's own thread pools read theirs when torch (and numpy, OpenBLAS) load, so they
            # load here first, where the environment is still the caller's
            import torch

            torch.get_num_threads()
            self._thread = threading.Thread(target=self._start_recording, name="hardmax-cluster-start", daemon=True)
            self._thread.start()
        return self

    @property
    def client(self):
        """The `distributed.Client`, once the cluster is up (started now in this thread when `start` was not called);
        the start's error, if it failed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this cluster was closed")
            thread = self._thread
            if thread is None and self._client is None and self._error is None:
                self._start_recording()
        if thread is not None:
            thread.join()
        if self._error is not None:
            raise self._error
        return self._client

    @property
    def dashboard(self) -> str | None:
        """The Dask dashboard's link (None before the start)."""
        return None if self._client is None else self._client.dashboard_link

    def close(self) -> None:
        """Close the client and the cluster (its workers and nannies end); waits for a start under way, and for a
        close under way in another thread (a command may close its cluster from the thread of its last sweep)."""
        self._closed = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._closing:
            client = self._client
            if client is not None:
                cluster = client.cluster
                try:
                    client.close()
                finally:
                    cluster.close()
                self._client = None  # closed (a close that raised leaves it to the next one)

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start_recording(self) -> None:
        try:
            self._client = self._start()
        except BaseException as e:  # re-raised by `client`, in the caller's thread
            self._error = e

    def _start(self):
        import dask
        from distributed import Client, LocalCluster, wait

        # distributed sets the pre-spawn environment in *this* process's os.environ and leaves it there: put the
        # caller's back once the workers are up (a NUMBA_NUM_THREADS left at 1 makes the driver's next numba
        # compilation raise "Cannot set NUMBA_NUM_THREADS ... once the threads have been launched"), and leave numba's
        # out of it: a worker that the nanny restarts later would set it again here; its pool is pinned in the worker
        # (`pin_threads`). PYTHONHASHSEED is distributed's own (the same hashes in every worker).
        pinned = {name: "1" for name in _THREADS if name != "NUMBA_NUM_THREADS"}
        saved = {name: os.environ.get(name) for name in (*pinned, "PYTHONHASHSEED")}
        with dask.config.set({"distributed.nanny.pre-spawn-environ": pinned, "distributed.worker.daemon": False}):
            try:
                # everything on the loopback interface: scheduler, workers, nannies and the dashboard
                cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40)
            except RuntimeError as e:
                raise RuntimeError(f"the local Dask cluster could not start its workers ({e}); a script that runs "
                                   "a sweep on it must call it under `if __name__ == '__main__':` (the workers are "
                                   "new processes that import the script)") from None
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
        client = Client(cluster)
        if self.warm is not None and self.warm.warm is not None:
            # one warm-up cell per worker, in its thread as a batch runs (its threads pinned): its imports and kernels
            wait([client.submit(_warm, self.warm.name, self.warm.warm, os.getpid(), workers=[address],
                                allow_other_workers=False, pure=False)
                  for address in client.scheduler_info()["workers"]])
        return client
