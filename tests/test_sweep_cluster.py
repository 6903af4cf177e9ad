"""Tests of `hardmax.sweep.cluster`: the embedded Dask cluster writes the serial table, is shared and warmed,
says why it cannot start, listens on the loopback only, and leaves no process behind.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
from sweep_cases import GRID, children, counting_local_clusters, rows_without_times, serial_executor

from hardmax.sweep import EmbeddedCluster, sweep


@pytest.mark.slow
def test_a_local_dask_cluster_of_two_workers_writes_the_same_table_and_leaves_no_process(tmp_path):
    import psutil

    from hardmax.sweep.cluster import _THREADS

    before = children()
    environment = {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")}
    with EmbeddedCluster(1) as cluster:  # the embedded cluster listens on the loopback interface only
        link = cluster.client.dashboard_link
        # distributed writes the workers' pre-spawn environment into this process's: the caller's is put back (a
        # NUMBA_NUM_THREADS left at 1 broke every later numba compilation of the process, 67 tests of a CI run)
        assert {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")} == environment
        me = psutil.Process()
        listening = {c.laddr.ip for p in [me, *me.children(recursive=True)]
                     for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        assert listening == {"127.0.0.1"} and link.startswith("http://127.0.0.1:")
    result = sweep("simulate", GRID, out=tmp_path / "dask", workers=2, progress=False)
    assert result.ran == 8 and result.dashboard and result.dashboard.startswith("http://127.0.0.1:")
    with serial_executor() as ex:
        sweep("simulate", GRID, out=tmp_path / "serial", executor=ex, progress=False)
    assert rows_without_times(tmp_path / "dask").equals(rows_without_times(tmp_path / "serial"))
    time.sleep(0.5)
    assert not children() - before


@pytest.mark.slow
def test_a_cluster_started_early_is_warmed_shared_by_two_sweeps_and_closed(tmp_path, monkeypatch):
    """`EmbeddedCluster(...).start()` returns while the cluster starts; its workers run the task's warm-up cell (the
    phase cells' imports and kernels are loaded before any sweep); two sweeps run on it (one cluster started) and
    write the serial tables; the with-block closes it, and no process is left."""
    from hardmax.sweep.cluster import _THREADS

    started = counting_local_clusters(monkeypatch)
    before = children()
    environment = {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")}
    grids = [{"beta": [0.5, 4.0, 9.0], "starts": [3], "steps": [20], "d": [d], "seed": [1]} for d in (2, 3)]
    with EmbeddedCluster(2, warm="phase_cell").start() as cluster:
        loaded = cluster.client.run(lambda: "hardmax.experiments.particles" in sys.modules)
        assert list(loaded.values()) == [True, True]
        assert {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")} == environment
        for i, grid in enumerate(grids):
            result = sweep("phase_cell", grid, out=tmp_path / f"dask{i}", executor=cluster, progress=False)
            assert result.ran == 3 and result.failed == 0
    assert started == [2]
    with serial_executor() as ex:
        for i, grid in enumerate(grids):
            sweep("phase_cell", grid, out=tmp_path / f"serial{i}", executor=ex, progress=False)
            assert rows_without_times(tmp_path / f"dask{i}").drop_columns(["solve_seconds"]).equals(
                rows_without_times(tmp_path / f"serial{i}").drop_columns(["solve_seconds"]))
    time.sleep(0.5)
    assert not children() - before


def test_a_cluster_closed_from_two_threads_at_once_closes_once_and_leaves_no_process():
    """`close` from the thread of a command's last sweep and from the command's own thread (its with-block's end) at
    the same time: both return once the cluster is closed, and no process is left."""
    import threading

    before = children()
    cluster = EmbeddedCluster(1).start()
    assert cluster.client is not None
    other = threading.Thread(target=cluster.close)
    other.start()
    cluster.close()
    other.join(timeout=60)
    assert not other.is_alive()
    with pytest.raises(RuntimeError, match="this cluster was closed"):
        assert cluster.client is None
    time.sleep(0.5)
    assert not children() - before


def test_a_cluster_that_cannot_start_says_why_where_it_is_used(tmp_path, monkeypatch):
    """A failed background start is raised by `client` (and by the sweep that needs it), in the caller's thread; the
    caller's environment is put back; closing it is harmless."""
    import distributed

    from hardmax.sweep.cluster import _THREADS

    def broken(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", broken)
    environment = {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")}
    with EmbeddedCluster(1).start() as cluster:
        with pytest.raises(RuntimeError, match="could not start its workers .Nanny failed to start"):
            sweep("noop", {"x": [1.0]}, out=tmp_path, executor=cluster, progress=False)
        with pytest.raises(RuntimeError, match="if __name__ == '__main__'"):
            assert cluster.client is not None
    assert {name: os.environ.get(name) for name in (*_THREADS, "PYTHONHASHSEED")} == environment
    with pytest.raises(ValueError, match="workers must be an integer ≥ 1, got 0"):
        EmbeddedCluster(0)


def test_a_worker_pinning_its_threads_starts_numbas_work_queue_not_openmp():
    """`pin_threads` in a fresh worker process, before any kernel is imported, starts numba's pool with the layer
    hardmax chooses (`hardmax._numba`: work-queue); numba's own default here, OpenMP, left spinning workers that made
    the phase cells 13-19 % slower on a sweep's worker than in one process."""
    import subprocess

    code = ("from hardmax.sweep.cluster import pin_threads; pin_threads(-1); import numba, torch; "
            "print(numba.threading_layer(), numba.get_num_threads(), torch.get_num_threads())")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["workqueue", "1", "1"]
