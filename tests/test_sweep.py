"""Tests of `hardmax.sweep`: cells as data, the same table from every executor, resume after a kill, failures
recorded, bad specs refused before any work, no process left behind."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hardmax
from hardmax.sweep import TASKS, EmbeddedCluster, cells, key, load_spec, read_table, sweep, sweep_status

GRID = {"n": [4, 7], "layers": [6, 12], "causal": [False, True]}


def _rows(out: Path):
    """The table without the columns that say when and how long (they differ between runs)."""
    return read_table(out).drop_columns(["seconds", "finished"])


def _serial():
    return concurrent.futures.ThreadPoolExecutor(1)


def test_cells_are_typed_keyed_and_seeded_by_their_parameters():
    task = TASKS["simulate"]
    grid = cells(task, GRID)
    assert len(grid) == 8 and all(set(c) == set(task.parameters) for c in grid)
    again = cells(task, list(reversed([{k: c[k] for k in GRID} for c in grid])))
    assert {key(task, c): c["seed"] for c in grid} == {key(task, c): c["seed"] for c in again}  # not the order
    assert len({c["seed"] for c in grid}) == 8
    assert cells(task, [{"n": 4, "seed": 5}])[0]["seed"] == 5  # a seed given is kept


@pytest.mark.parametrize("grid, message", [
    ({"n": [4], "zz": [1]}, "takes no parameter 'zz'"),
    ({"layers": [3]}, "needs a value for 'n'"),
    ({"n": [4.5]}, "simulate.n must be an integer"),
    ({"n": [4], "causal": ["yes"]}, "simulate.causal must be true or false"),
    ({"n": []}, "grid parameter 'n' has no values"),
    ([{"n": 4}, {"n": 4}], "the same cell twice"),
    ("n=4", "a grid is a mapping"),
])
def test_a_bad_grid_is_refused_in_one_line_before_any_work(tmp_path, grid, message):
    with pytest.raises(ValueError, match=message):
        sweep("simulate", grid, out=tmp_path / "never", executor=_serial(), progress=False)
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        sweep("nope", {}, out=tmp_path, executor=_serial())


def test_a_spec_is_read_and_checked(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('task = "noop"\n[grid]\nx = [1, 2.5]\n[options]\nworkers = 2\n')
    task, grid, options = load_spec(spec)
    assert task.name == "noop" and [c["x"] for c in grid] == [1.0, 2.5] and options == {"workers": 2}
    for text, message in (('task = "noop"\n', "give either \\[grid\\]"), ('task = "noop"\n[grid\n', "not a TOML"),
                          ('task = "noop"\nwhat = 1\n[grid]\nx = [1]\n', "unknown key 'what'")):
        spec.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_spec(spec)


def test_the_serial_executor_and_a_process_pool_write_the_same_table(tmp_path):
    with _serial() as ex:
        first = sweep("simulate", GRID, out=tmp_path / "serial", executor=ex, progress=False)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as ex:
        second = sweep(hardmax.sweep.TASKS["simulate"], GRID, out=tmp_path / "pool", executor=ex, progress=False)
    assert (first.ran, second.ran, first.failed) == (8, 8, 0)
    assert _rows(tmp_path / "serial").equals(_rows(tmp_path / "pool"))
    table = _rows(tmp_path / "serial").to_pylist()
    assert all(r["passed"] for r in table) and {r["causal"] for r in table} == {False, True}
    # each row is what the task itself gives for its cell
    r = table[0]
    cell = {k: r[k] for k in TASKS["simulate"].parameters}
    assert TASKS["simulate"].function(**cell) == {k: r[k] for k in ("passed", "leaders", "distinct_limits")}


def test_resume_runs_only_the_missing_cells_and_ends_with_the_same_table(tmp_path):
    with _serial() as ex:
        sweep("simulate", GRID, out=tmp_path / "whole", executor=ex, progress=False)
        part = [c for c in cells(TASKS["simulate"], GRID)][:3]
        sweep("simulate", part, out=tmp_path / "resumed", executor=ex, progress=False)
        again = sweep("simulate", GRID, out=tmp_path / "resumed", executor=ex, progress=False, batch=2)
        assert (again.ran, again.skipped) == (5, 3)
        twice = sweep("simulate", GRID, out=tmp_path / "resumed", executor=ex, progress=False)
    assert twice.ran == 0 and twice.skipped == 8
    assert _rows(tmp_path / "whole").equals(_rows(tmp_path / "resumed"))
    assert sweep_status(tmp_path / "resumed") == {"task": "simulate", "cells": 8, "done": 8, "failed": 0,
                                                   "remaining": 0, "errors": []}
    with pytest.raises(ValueError, match="holds a sweep of task 'simulate', not 'noop'"):
        sweep("noop", {"x": [1]}, out=tmp_path / "whole", executor=_serial())


def test_a_failing_cell_is_recorded_with_its_error_and_the_sweep_goes_on(tmp_path):
    with _serial() as ex:
        result = sweep("noop", {"x": [1.0, 2.0], "fail": [False, True]}, out=tmp_path, executor=ex,
                       progress=False)
    assert (result.ran, result.failed) == (4, 2)
    rows = read_table(tmp_path).to_pylist()
    failed = [r for r in rows if r["fail"]]
    assert all(r["error"].startswith("ValueError: this cell fails on purpose") for r in failed)
    assert all(r["error"] is None and r["x"] in (1.0, 2.0) for r in rows if not r["fail"])
    status = sweep_status(tmp_path)
    assert (status["done"], status["failed"], status["remaining"]) == (2, 2, 0)


@pytest.mark.slow
def test_a_local_dask_cluster_of_two_workers_writes_the_same_table_and_leaves_no_process(tmp_path):
    import psutil

    from hardmax.sweep.cluster import _THREADS

    before = _children()
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
    with _serial() as ex:
        sweep("simulate", GRID, out=tmp_path / "serial", executor=ex, progress=False)
    assert _rows(tmp_path / "dask").equals(_rows(tmp_path / "serial"))
    time.sleep(0.5)
    assert not _children() - before


def _children() -> set[int]:
    """This process's live child processes (not multiprocessing's resource tracker, which lives as long as it)."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())}


def _counting_local_clusters(monkeypatch) -> list:
    """distributed.LocalCluster, counted: the list gets one entry per cluster started."""
    import distributed

    started = []

    class Counted(distributed.LocalCluster):
        def __init__(self, *args, **kwargs):
            started.append(kwargs.get("n_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(distributed, "LocalCluster", Counted)
    return started


@pytest.mark.slow
def test_a_cluster_started_early_is_warmed_shared_by_two_sweeps_and_closed(tmp_path, monkeypatch):
    """`EmbeddedCluster(...).start()` returns while the cluster starts; its workers run the task's warm-up cell (the
    phase cells' imports and kernels are loaded before any sweep); two sweeps run on it (one cluster started) and
    write the serial tables; the with-block closes it, and no process is left."""
    from hardmax.sweep.cluster import _THREADS

    started = _counting_local_clusters(monkeypatch)
    before = _children()
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
    with _serial() as ex:
        for i, grid in enumerate(grids):
            sweep("phase_cell", grid, out=tmp_path / f"serial{i}", executor=ex, progress=False)
            assert _rows(tmp_path / f"dask{i}").drop_columns(["solve_seconds"]).equals(
                _rows(tmp_path / f"serial{i}").drop_columns(["solve_seconds"]))
    time.sleep(0.5)
    assert not _children() - before


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


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_killed_driver_resumes_to_the_uninterrupted_table(tmp_path, sig):
    """`hardmax sweep` killed mid-run (Ctrl-C, or kill -9 of the driver): the same command again runs only the missing
    cells, and the table is the uninterrupted one."""
    spec = tmp_path / "s.toml"
    spec.write_text('task = "noop"\n[grid]\nx = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\nsleep = [0.3]\n'
                    '[options]\nbatch = 1\nworkers = 2\n')
    out = tmp_path / "out"
    command = [sys.executable, "-m", "hardmax", "sweep", str(spec), "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(out.glob("part-*.parquet"))) < 2:
        time.sleep(0.1)
    assert len(list(out.glob("part-*.parquet"))) >= 2, proc.communicate(timeout=60)[0]
    os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    proc.wait(timeout=60)
    if sig == signal.SIGKILL:  # the workers of a killed driver: gone with its session
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    done = len(read_table(out))
    assert 2 <= done < 12
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{12 - done} run now, {done} found done" in again.stdout
    with _serial() as ex:
        sweep("noop", {"x": [float(x) for x in range(1, 13)], "sleep": [0.3]}, out=tmp_path / "whole", executor=ex,
              progress=False)
    assert _rows(out).drop_columns(["version"]).equals(_rows(tmp_path / "whole").drop_columns(["version"]))


@pytest.mark.slow
def test_a_worker_killed_mid_cell_loses_nothing(tmp_path):
    """kill -9 of one worker process of the local cluster while its cells run: Dask runs them again elsewhere, and
    the table is complete, each cell once."""
    import threading

    import psutil

    me = psutil.Process()
    killed = []

    def kill_one():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            workers = [p for p in me.children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]
            if len(list((tmp_path / "out").glob("part-*.parquet"))) >= 1 and workers:
                workers[0].kill()
                killed.append(workers[0].pid)
            time.sleep(0.05)

    thread = threading.Thread(target=kill_one)
    thread.start()
    result = sweep("noop", {"x": [float(x) for x in range(16)], "sleep": [0.25]}, out=tmp_path / "out", workers=2,
                   batch=1, progress=False)
    thread.join()
    assert killed, "no worker process was found to kill"
    table = read_table(tmp_path / "out").to_pylist()
    assert result.failed == 0 and sorted(r["x"] for r in table) == [float(x) for x in range(16)]


def test_the_cli_says_what_a_sweep_holds_and_refuses_bad_input(tmp_path, capsys):
    from hardmax.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text('task = "noop"\n[[cells]]\nx = 1.0\n[[cells]]\nx = 2.0\nfail = true\n')
    code = main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert code == 1  # a cell failed: recorded, and said
    assert main(["sweep", "--status", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "2 cells: 1 done, 1 failed, 0 remaining" in out and "fails on purpose" in out
    spec.write_text('task = "noop"\n[grid]\nx = [1]\nzz = [2]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "never")]) == 2
    assert "takes no parameter 'zz'" in capsys.readouterr().err and not (tmp_path / "never").exists()
    assert main(["sweep", "--status", str(tmp_path / "nothing")]) == 2


def test_a_phase_diagram_from_a_sweep_is_the_cells_diagrams_and_draws(tmp_path):
    """`phase_cell` rows back into the PhaseDiagram `hardmax particles` draws: each β's row is phase_diagram([β])."""
    import torch

    from hardmax.experiments.particles import phase_diagram, phase_table
    from hardmax.sweep.plots import curve, phase_diagram_of, phase_heatmap

    grid = {"beta": [0.0, 2.0, 6.0], "starts": [6], "n": [8], "steps": [40], "seed": [3]}
    with _serial() as ex:
        sweep("phase_cell", grid, out=tmp_path, executor=ex, progress=False)
    diagram = phase_diagram_of(read_table(tmp_path))
    for i, beta in enumerate(grid["beta"]):
        alone = phase_diagram([beta], starts=6, n=8, d=3, steps=40, seed=3)
        assert torch.equal(diagram.single[i], alone.single[0]) and torch.equal(diagram.times, alone.times)
        assert torch.equal(diagram.mean_clusters[i], alone.mean_clusters[0])
    assert "β \\ t" in phase_table(diagram)
    assert phase_heatmap(read_table(tmp_path)).axes and curve(read_table(tmp_path), "beta", "single_final").axes
    with pytest.raises(ValueError, match="no column 'nope'"):
        curve(read_table(tmp_path), "beta", "nope")


def test_a_batch_whose_first_cell_fails_keeps_the_results_of_the_others(tmp_path):
    with _serial() as ex:
        result = sweep("noop", [{"x": 1.0, "fail": True}, {"x": 2.0}, {"x": 3.0}], out=tmp_path, executor=ex,
                       batch=3, progress=False)
    assert (result.done, result.failed, result.ran) == (2, 1, 3)
    rows = {r["x"]: r for r in read_table(tmp_path).to_pylist()}
    assert rows[2.0]["result_x"] == 2.0 and rows[3.0]["result_x"] == 3.0 and rows[1.0]["result_x"] is None


def test_progress_says_failed_and_left(tmp_path, capsys):
    with _serial() as ex:
        sweep("noop", {"x": [1.0, 2.0, 3.0], "fail": [False, True]}, out=tmp_path, executor=ex, batch=2)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("sweep noop: 6/6 cell (100 %)") and "3 failed, 0 left" in last, last


def test_ctrl_c_cancels_what_was_submitted_and_the_same_call_finishes(tmp_path, monkeypatch):
    """Ctrl-C (SIGINT to the driver) in the middle: the batches finished are in the table, the rest is cancelled (not
    run behind the caller's back), and the same sweep again runs only what is missing."""
    from hardmax.sweep.tasks import Task

    ran = []

    def interrupt(x: float) -> dict:
        ran.append(x)
        time.sleep(0.3)
        if x == 3.0:
            os.kill(os.getpid(), signal.SIGINT)  # the driver's Ctrl-C, while it waits for this batch
            time.sleep(0.3)
        return {"y": 2 * x}

    monkeypatch.setitem(TASKS, "interrupt", Task("interrupt", interrupt, {"x": (float, 0.0)}))
    grid = {"x": [float(x) for x in range(8)]}
    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(KeyboardInterrupt):
        sweep("interrupt", grid, out=tmp_path, executor=ex, batch=1, progress=False)
    assert set(ran) <= {0.0, 1.0, 2.0, 3.0, 4.0}  # what was waiting was cancelled
    assert {0.0, 1.0, 2.0} <= {r["x"] for r in read_table(tmp_path).to_pylist()} <= {0.0, 1.0, 2.0, 3.0}
    monkeypatch.setitem(TASKS, "interrupt", Task("interrupt", lambda x: {"y": 2 * x}, {"x": (float, 0.0)}))
    with _serial() as ex:
        again = sweep("interrupt", grid, out=tmp_path, executor=ex, progress=False)
    assert again.ran + again.skipped == 8 and again.skipped >= 3 and again.done == 8
    assert sorted(r["y"] for r in read_table(tmp_path).to_pylist()) == [2 * x for x in grid["x"]]


def test_an_executor_that_is_not_one_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="executor must be an EmbeddedCluster, a distributed.Client or a concurrent"):
        sweep("noop", {"x": [1.0]}, out=tmp_path / "never", executor=object())
    with pytest.raises(ValueError, match="workers must be an integer ≥ 1"):
        sweep("noop", {"x": [1.0]}, out=tmp_path / "never", workers=0)
    assert not (tmp_path / "never").exists()


def test_batches_are_submitted_a_window_at_a_time_and_the_table_is_whole(tmp_path):
    """The driver keeps two batches per worker and two more in flight, submitting the next as one is written: it
    never holds the rows of every finished batch (a cheap task's 100,000 rows did), and every cell still runs once."""
    outstanding, most = set(), [0]

    class Counting(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            outstanding.add(future)  # submitted, and not yet written
            most[0] = max(most[0], len(outstanding))
            return future

    import hardmax.sweep.store as store

    write = store.write_part

    def written(out, rows):  # a batch is on disk: it is no longer the driver's
        write(out, rows)
        outstanding.difference_update({f for f in outstanding if f.done()})

    grid = {"x": [float(x) for x in range(40)]}
    with Counting(1) as ex:
        store.write_part = written
        try:
            result = sweep("noop", grid, out=tmp_path, executor=ex, batch=2, progress=False)
        finally:
            store.write_part = write
    assert result.ran == 40 and most[0] <= 2 * 1 + 2 + 1  # the window, and the one submitted as one is written
    assert sorted(r["x"] for r in read_table(tmp_path).to_pylist()) == grid["x"]
