"""Tests of `hardmax.sweep.run`: the same table from every executor, resume after a kill (of the driver or of a
worker), failures recorded and the sweep going on, Ctrl-C, progress, and the submission window.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from sweep_cases import GRID, rows_without_times, serial_executor

import hardmax
from hardmax.sweep import TASKS, cells, read_table, sweep, sweep_status


def test_the_serial_executor_and_a_process_pool_write_the_same_table(tmp_path):
    with serial_executor() as ex:
        first = sweep("simulate", GRID, out=tmp_path / "serial", executor=ex, progress=False)
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as ex:
        second = sweep(hardmax.sweep.TASKS["simulate"], GRID, out=tmp_path / "pool", executor=ex, progress=False)
    assert (first.ran, second.ran, first.failed) == (8, 8, 0)
    assert rows_without_times(tmp_path / "serial").equals(rows_without_times(tmp_path / "pool"))
    table = rows_without_times(tmp_path / "serial").to_pylist()
    assert all(r["passed"] for r in table) and {r["causal"] for r in table} == {False, True}
    # each row is what the task itself gives for its cell
    r = table[0]
    cell = {k: r[k] for k in TASKS["simulate"].parameters}
    assert TASKS["simulate"].function(**cell) == {k: r[k] for k in ("passed", "leaders", "distinct_limits")}


def test_resume_runs_only_the_missing_cells_and_ends_with_the_same_table(tmp_path):
    with serial_executor() as ex:
        sweep("simulate", GRID, out=tmp_path / "whole", executor=ex, progress=False)
        part = [c for c in cells(TASKS["simulate"], GRID)][:3]
        sweep("simulate", part, out=tmp_path / "resumed", executor=ex, progress=False)
        again = sweep("simulate", GRID, out=tmp_path / "resumed", executor=ex, progress=False, batch=2)
        assert (again.ran, again.skipped) == (5, 3)
        twice = sweep("simulate", GRID, out=tmp_path / "resumed", executor=ex, progress=False)
    assert twice.ran == 0 and twice.skipped == 8
    assert rows_without_times(tmp_path / "whole").equals(rows_without_times(tmp_path / "resumed"))
    assert sweep_status(tmp_path / "resumed") == {"task": "simulate", "cells": 8, "done": 8, "failed": 0,
                                                   "remaining": 0, "errors": []}
    with pytest.raises(ValueError, match="holds a sweep of task 'simulate', not 'noop'"):
        sweep("noop", {"x": [1]}, out=tmp_path / "whole", executor=serial_executor())


def test_a_failing_cell_is_recorded_with_its_error_and_the_sweep_goes_on(tmp_path):
    with serial_executor() as ex:
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
    with serial_executor() as ex:
        sweep("noop", {"x": [float(x) for x in range(1, 13)], "sleep": [0.3]}, out=tmp_path / "whole", executor=ex,
              progress=False)
    whole = rows_without_times(tmp_path / "whole")
    assert rows_without_times(out).drop_columns(["version"]).equals(whole.drop_columns(["version"]))


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


def test_a_batch_whose_first_cell_fails_keeps_the_results_of_the_others(tmp_path):
    with serial_executor() as ex:
        result = sweep("noop", [{"x": 1.0, "fail": True}, {"x": 2.0}, {"x": 3.0}], out=tmp_path, executor=ex,
                       batch=3, progress=False)
    assert (result.done, result.failed, result.ran) == (2, 1, 3)
    rows = {r["x"]: r for r in read_table(tmp_path).to_pylist()}
    assert rows[2.0]["result_x"] == 2.0 and rows[3.0]["result_x"] == 3.0 and rows[1.0]["result_x"] is None


def test_progress_says_failed_and_left(tmp_path, capsys):
    with serial_executor() as ex:
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
    with serial_executor() as ex:
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
