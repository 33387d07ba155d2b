"""Running a grid's cells: in this process, in local processes, or on Ray.

Every executor runs the same function, `run_cell`, on the same cells; only
the order in which cells finish differs, and rows are put back in cell
order, so the table does not depend on the executor. Finished cells are
recorded as they arrive (`results.write_cell`) and skipped on a re-run.
"""

from __future__ import annotations

import _thread
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rackwise.errors import MissingExtraError, RackwiseError
from rackwise.experiments import results
from rackwise.experiments.grid import Cell

RAY_INIT_TIMEOUT_S = 60.0

Task = tuple[Cell, "Path | None"]
OnDone = Callable[[Cell, str], None]  # (cell, "ran" | "cached" | "skipped" | "failed")


def run_cell(cell: Cell, run_dir: Path | None = None) -> dict[str, Any]:
    """Simulate one cell; return its figures, ``{"skipped": why}`` when an optional
    extra is missing, or ``{"error": message}`` for a bad run.

    Args:
        cell: The cell.
        run_dir: Where to write the run's results folder (None: nowhere).
    """
    from rackwise.metrics.summary import summarize
    from rackwise.run import execute, save

    started = time.perf_counter()
    try:
        result, _ = execute(cell.config)
    except MissingExtraError as exc:
        return {"skipped": str(exc)}
    except RackwiseError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    wall_time_s = time.perf_counter() - started
    if run_dir is not None:
        save(result, cell.config, run_dir)
    figures = summarize(result.records, result.timeline, result.topology.n_gpus)
    return {**figures, "n_gpus": result.topology.n_gpus, "n_steps": result.n_steps,
            "wall_time_s": round(wall_time_s, 3)}


@dataclass(frozen=True)
class SweepOutcome:
    """What a sweep did: the table (cell order) and how many cells went each way."""

    table: pd.DataFrame
    path: Path
    n_ran: int
    n_cached: int
    n_skipped: int
    n_failed: int
    wall_time_s: float


def run_cells(cells: Sequence[Cell], out_dir: str | Path, *, jobs: int = 1,
              use_ray: bool = False, ray_address: str | None = None, resume: bool = True,
              run_dirs: Callable[[Cell], Path | None] | None = None,
              on_done: OnDone | None = None) -> SweepOutcome:
    """Run the cells not finished yet and write ``OUT/results.parquet``.

    Args:
        cells: The grid (`grid.expand`).
        out_dir: The results folder (see `results`).
        jobs: Processes (or Ray CPUs for a private Ray instance) at once; 1 runs
            in this process.
        use_ray: Run on Ray: a private local instance, or the cluster at ``ray_address``.
        ray_address: A running Ray cluster (``auto``, ``HOST:PORT``, ``ray://...``).
        resume: Reuse finished cells found in ``out_dir``.
        run_dirs: Where each cell writes its results folder (default ``OUT/runs/<key>``).
        on_done: Called after each cell, in this process.
    """
    started = time.perf_counter()
    out = Path(out_dir)
    run_dirs = run_dirs or (lambda cell: out / "runs" / cell.key)
    figures: dict[str, dict[str, Any]] = {}
    status: dict[str, str] = {}
    tasks: list[Task] = []
    for cell in cells:
        if cell.skip_reason is not None:
            status[cell.key] = "skipped"
            continue
        cached = results.read_cell(out, cell) if resume else None
        if cached is not None:
            figures[cell.key], status[cell.key] = cached, "cached"
        else:
            tasks.append((cell, run_dirs(cell)))
    for cell in cells:
        if status.get(cell.key) in ("skipped", "cached") and on_done is not None:
            on_done(cell, status[cell.key])
    executor = (_on_ray(tasks, jobs, ray_address) if use_ray or ray_address
                else _in_processes(tasks, jobs) if jobs > 1 else _in_this_process(tasks))
    for cell, found in executor:
        if "skipped" in found:
            status[cell.key], figures[cell.key] = "skipped", found
        elif "error" in found:
            status[cell.key], figures[cell.key] = "failed", found
        else:
            results.write_cell(out, cell, found)
            status[cell.key], figures[cell.key] = "ran", found
        if on_done is not None:
            on_done(cell, status[cell.key])
    rows = []
    for cell in cells:
        state = status[cell.key]
        found = figures.get(cell.key, {})
        reason = cell.skip_reason or found.get("skipped") or found.get("error")
        shown = None if state in ("skipped", "failed") else found
        rows.append(results.row_of(cell, shown, "ok" if state in ("ran", "cached") else state,
                                   reason))
    table = results.gather(rows)
    path = results.write_table(out, table)
    counts = {name: sum(1 for s in status.values() if s == name)
              for name in ("ran", "cached", "skipped", "failed")}
    return SweepOutcome(table, path, counts["ran"], counts["cached"], counts["skipped"],
                        counts["failed"], time.perf_counter() - started)


# ---------------------------------------------------------------------------- executors
def _in_this_process(tasks: Sequence[Task]) -> Iterator[tuple[Cell, dict[str, Any]]]:
    for cell, run_dir in tasks:
        yield cell, run_cell(cell, run_dir)


def _in_processes(tasks: Sequence[Task], jobs: int) -> Iterator[tuple[Cell, dict[str, Any]]]:
    if not tasks:
        return
    # spawn, not fork: the parent may run threads (a progress bar), and a forked
    # child could inherit a lock some thread held.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        pending = {pool.submit(run_cell, cell, run_dir): cell for cell, run_dir in tasks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: pending[f].key):
                yield pending.pop(future), future.result()


def _on_ray(tasks: Sequence[Task], jobs: int,
            address: str | None) -> Iterator[tuple[Cell, dict[str, Any]]]:
    if not tasks:
        return
    if address is None:
        # A private instance for this sweep: no auth token written to ~/.ray, and
        # nothing listening beyond loopback (see docs/experiments.md). Ray reads
        # these when imported, so they are set first.
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        init_kwargs: dict[str, Any] = {"num_cpus": max(1, jobs), "include_dashboard": False}
    else:
        init_kwargs = {"address": address}
    try:
        import ray
    except ImportError:
        raise MissingExtraError("sweeping on Ray needs the ray extra: pip install 'rackwise[ray]'") from None
    _ray_init(ray, init_kwargs, RAY_INIT_TIMEOUT_S, address or "a private local instance")
    try:
        remote = ray.remote(num_cpus=1)(run_cell)
        pending = {remote.remote(cell, run_dir): cell for cell, run_dir in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                yield pending.pop(ref), ray.get(ref)
    finally:
        ray.shutdown()


def _ray_init(ray: Any, kwargs: dict[str, Any], timeout_s: float, where: str) -> None:
    """``ray.init`` that gives up after ``timeout_s``: a driver that cannot reach a head
    may otherwise wait for many minutes.

    ``ray.init`` stays on the calling thread: the Ray processes a private instance
    starts die with the thread that started them. A watchdog thread interrupts
    the wait instead (only possible from the main thread).
    """
    expired = threading.Event()
    finished = threading.Event()

    def watchdog() -> None:
        if not finished.wait(timeout_s):
            expired.set()
            _thread.interrupt_main()

    if threading.current_thread() is threading.main_thread():
        threading.Thread(target=watchdog, name="ray-init-watchdog", daemon=True).start()
    try:
        ray.init(log_to_driver=False, configure_logging=False, **kwargs)
    except KeyboardInterrupt:
        if not expired.is_set():
            raise
        raise RayConnectError(
            f"could not start or reach Ray at {where} within {timeout_s:.0f} s") from None
    except Exception as exc:  # Ray raises many types; the message is what matters
        first = str(exc).splitlines()[0] if str(exc) else repr(exc)
        raise RayConnectError(f"could not start or reach Ray at {where}: {first}") from None
    finally:
        finished.set()


class RayConnectError(RackwiseError):
    """Ray could not be started or reached."""
