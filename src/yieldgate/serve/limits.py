"""How much work the dashboard does at once: concurrent reads of one thing share one computation, and the
computations running together read a bounded number of steps.

A run page of a million steps reads the run's step table (about 330 bytes a step while it is drawn) and draws it
down to a few hundred kilobytes. Fifty browsers asking at once must not read it fifty times: `Flights` makes the
requests for one key wait for the first one's answer (single-flight), and `Gate` lets the computations running at
once read at most `ServeLimits.steps_at_once` steps together (a weighted semaphore; a computation larger than
that runs alone), at most `ServeLimits.computations_at_once` of them. A request that finds the gate full waits up to
`ServeLimits.wait_s`, then is answered 503 with `Retry-After` (`Busy`), so memory stays bounded however many
clients come, and a cheap request is not slowed by a crowd of computations.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from yieldgate.errors import YieldgateError

__all__ = ["ServeLimits", "Busy", "Gate", "Flights", "Work"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ServeLimits:
    """What the dashboard allows itself at once (`create_app(limits=...)`)."""

    steps_at_once: int = 1_200_000
    """Steps the computations running at once (a run's plots, a live poll's curve, a comparison) may read together.
    A computation weighs its runs' steps (at least 1); one heavier than this runs when nothing else does. 1: one
    computation at a time."""
    computations_at_once: int = 1
    """Computations that may run at once, whatever their weight. The server's threads share one interpreter, so two
    analyses at once each take twice as long, and every cheap request (a page of runs, a cached plot) waits behind
    both for the interpreter: under 50 clients, small runs' plots computed side by side (each light in steps, so
    the step bound let them all in) held a page of the runs list 1.2 s that takes 0.05 s alone."""
    requests_at_once: int = 200
    """Requests answered at once (the server's threads). A request waiting at the gate, or for another request's
    computation, holds a thread while it waits: with anyio's default of 40, fifty clients left the cheap requests
    (a page of runs, a cached plot) queued for a thread behind those waiting for a computation."""
    wait_s: float = 5.0
    """How long a request waits for room at the gate before it is answered 503 with Retry-After."""
    cache_bytes: int = 64_000_000
    """Bytes of drawn plots (their JSON) kept for reloads; the least recently used go first. 0: none kept."""

    def __post_init__(self) -> None:
        if self.steps_at_once < 1:
            raise ValueError(f"steps_at_once must be >= 1, got {self.steps_at_once}")
        if self.requests_at_once < 1:
            raise ValueError(f"requests_at_once must be >= 1, got {self.requests_at_once}")
        if self.computations_at_once < 1:
            raise ValueError(f"computations_at_once must be >= 1, got {self.computations_at_once}")
        if not (math.isfinite(self.wait_s) and self.wait_s >= 0):
            raise ValueError(f"wait_s must be a finite number >= 0, got {self.wait_s}")
        if self.cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {self.cache_bytes}")

    @property
    def retry_after_s(self) -> int:
        """What a 503 tells the client to wait before asking again (whole seconds, at least 1)."""
        return max(1, math.ceil(self.wait_s))


def _libc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None (another C library, another system)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _libc_trim()


def release_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's `malloc_trim`; nothing elsewhere). A computation over
    a million steps frees ~300 MB in the arena of the thread that ran it, which glibc keeps for that arena: the next
    computation, on another of the server's threads, would add its own on top."""
    if _TRIM is not None:
        _TRIM(0)


class Busy(YieldgateError):
    """The dashboard's computations are at their bound and a request waited its time: 503, Retry-After."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Gate:
    """A weighted semaphore over steps and a count of computations: `hold(weight)` waits up to `wait_s` for the
    room, else raises Busy."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limits = limits
        self.in_use = 0
        """Steps held by the computations running now."""
        self.running = 0
        self.refused = 0
        """Requests answered Busy since the start."""
        self._room = threading.Condition()

    @contextmanager
    def hold(self, weight: int, what: str) -> Iterator[None]:
        """Room for a computation reading `weight` steps (clipped to 1..steps_at_once), and a place among the
        `computations_at_once`, for the `with` block."""
        weight = min(max(1, int(weight)), self.limits.steps_at_once)
        with self._room:
            if not self._room.wait_for(
                lambda: (
                    self.in_use + weight <= self.limits.steps_at_once
                    and self.running < self.limits.computations_at_once
                ),
                timeout=self.limits.wait_s,
            ):
                self.refused += 1
                raise Busy(
                    f"the dashboard is busy: {self.running} computation(s) reading {self.in_use:,} steps run now and "
                    f"{what} waited {self.limits.wait_s:g} s for room; ask again in {self.limits.retry_after_s} s",
                    self.limits.retry_after_s,
                )
            self.in_use += weight
            self.running += 1
        try:
            yield
        finally:
            release_memory()
            with self._room:
                self.in_use -= weight
                self.running -= 1
                self._room.notify_all()


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.waiting = 0
        self.value: Any = None
        self.error: BaseException | None = None


class Flights:
    """Single-flight: `run(key, compute)` computes once for every caller asking for `key` while it runs; the
    later callers wait for the first one's result (or its error) instead of computing it again."""

    def __init__(self) -> None:
        self._flights: dict[Any, _Flight] = {}
        self._lock = threading.Lock()
        self.shared = 0
        """Callers that got another caller's result since the start."""

    def waiting(self) -> int:
        """How many callers wait now for a computation another caller runs."""
        with self._lock:
            return sum(f.waiting for f in self._flights.values())

    def run(self, key: Any, compute: Callable[[], T]) -> T:
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
            else:
                flight.waiting += 1
                self.shared += 1
        if not leader:
            flight.done.wait()
            with self._lock:
                flight.waiting -= 1
            if flight.error is not None:
                raise flight.error
            return flight.value
        try:
            flight.value = compute()
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()
        return flight.value


class Work:
    """The gate and the flights of one app: `compute` is what every heavy read goes through."""

    def __init__(self, limits: ServeLimits | None = None) -> None:
        self.limits = limits or ServeLimits()
        self.gate = Gate(self.limits)
        self.flights = Flights()

    def compute(self, key: Any, weight: int, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, computed once for every request asking for `key` meanwhile, with room for `weight` steps at the
        gate (Busy when there is none within `wait_s`); `what` names it in that message."""

        def held() -> T:
            with self.gate.hold(weight, what):
                return fn()

        return self.flights.run(key, held)
