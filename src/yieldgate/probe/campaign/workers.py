"""The local executor's worker processes: long-lived (a worker resolves each recipe once and keeps torch loaded), each
with a pipe of its own, one probe at a time.

A process pool (`concurrent.futures.ProcessPoolExecutor`) breaks whole when one worker dies: every other worker is
terminated with it, so killing one worker failed the probe another worker was training too, and that probe trained
again. Here a worker that dies takes only its own probe: `run` yields it as lost (the caller records its failure),
a new worker takes its place, and the others train on.
"""

from __future__ import annotations

import multiprocessing.connection as mpc
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

__all__ = ["Lost", "run_in_workers"]


@dataclass(frozen=True)
class Lost:
    """A task whose worker died before it answered (killed, out of memory)."""

    task: Any
    exitcode: int | None


def _serve(conn: Any, init: Callable[..., None], init_args: tuple[Any, ...], work: Callable[..., Any]) -> None:
    """A worker: `init(*init_args)` once, then `work(*task)` for each task received, its result sent back."""
    init(*init_args)
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        conn.send(work(*task))


class _Worker:
    def __init__(self, ctx: Any, init: Callable[..., None], init_args: tuple[Any, ...], work: Callable[..., Any]):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, init, init_args, work), daemon=True)
        self.process.start()
        child.close()
        self.task: Any = None

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.terminate()


def run_in_workers(
    ctx: Any,
    tasks: list[Any],
    workers: int,
    work: Callable[..., Any],
    init: Callable[..., None],
    init_args: tuple[Any, ...] = (),
) -> Generator[Any, None, None]:
    """`work(*task)` for each of `tasks` in `workers` processes of `ctx` (spawned), each result as it comes, in any
    order; a task whose worker died is yielded as `Lost` (and its worker replaced). Closing the generator stops the
    workers (a task in progress is ended with its process)."""
    pending = list(tasks)
    pool = [_Worker(ctx, init, init_args, work) for _ in range(min(workers, len(pending)))]
    try:
        while pending or any(w.task is not None for w in pool):
            for w in pool:
                if w.task is None and pending:
                    w.task = pending.pop(0)
                    w.conn.send(w.task)
            busy = [w for w in pool if w.task is not None]
            ready = set(mpc.wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for i, w in enumerate(pool):
                if w.task is None or not (w.conn in ready or w.process.sentinel in ready):
                    continue
                try:
                    result = w.conn.recv() if w.conn.poll() else None
                except (EOFError, OSError):
                    result = None
                if result is not None:
                    w.task = None
                    yield result
                    continue
                w.process.join(timeout=5)
                lost = Lost(w.task, w.process.exitcode)
                pool[i] = _Worker(ctx, init, init_args, work)  # the others train on
                yield lost
    finally:
        for w in pool:
            w.stop()
