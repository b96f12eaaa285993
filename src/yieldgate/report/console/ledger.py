"""Whole ledgers on the console: the file's check (`yieldgate check`), runs merged from another file (`merge`) and
a ledger copied whole (`ledger copy`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from yieldgate.report.console.lines import say

if TYPE_CHECKING:
    from yieldgate.ledger.check import CheckResult
    from yieldgate.ledger.copy import CopyResult
    from yieldgate.ledger.merge import MergeResult

__all__ = ["render_check", "render_copy", "render_merge"]


def render_check(result: CheckResult, console: Console) -> None:
    """`yieldgate check`: SQLite's complaints, each damaged block (by run and step range) and record (by run and
    what it is), the blocks written before checksums, and the verdict."""
    for message in result.integrity:
        say(console, f"sqlite: {message!r}")
    for d in result.damaged:
        steps = f" steps {d.first_step}-{d.last_step}" if d.first_step is not None else ""
        key = f" extra {d.key!r}" if d.key is not None else ""
        owner = f"run {d.run!r}" if d.run is not None else "the ledger"  # a campaign, a decision on no run
        say(console, f"damaged: {owner}{key}{steps}: {d.problem}")
    for name, blocks in result.unverified.items():
        say(console, f"unverified: run {name!r}: {blocks} blocks written before checksums")
    for spill in result.spills:
        say(console, f"{'missing' if spill.gone else 'waiting'}: {spill.hint}")
    verdict = "whole" if result.clean else ("DAMAGED" if result.integrity or result.damaged else "INCOMPLETE")
    say(
        console,
        f"{result.location}: {verdict} ({result.verified_blocks} blocks and {result.verified_records} records "
        "verified)",
    )


def render_merge(result: MergeResult, console: Console, source: object) -> None:
    """`yieldgate merge`: the step records each run brought in from `source`, and what they replaced."""
    for name, merged in result.runs.items():
        say(console, f"{name}: {merged.steps} step records merged from {source}")
        if merged.event is not None:
            say(
                console,
                f"{name}: REPLACED {_count(merged.replaced_steps, 'stored step')} and "
                f"{_count(merged.replaced_evals, 'evaluation')} with {source}'s; this ledger's are kept apart as "
                f"superseded (event #{merged.event})",
            )


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'s' * (n != 1)}"


def render_copy(result: CopyResult, console: Console) -> None:
    """`yieldgate ledger copy`: what was copied, and that the counts and digest were checked."""
    replaced = f", {result.replaced} records it held deleted first" if result.replaced else ""
    say(
        console,
        f"{result.source} -> {result.destination}: {result.rows['runs']} runs, "
        f"{sum(result.rows.values())} rows in {len(result.rows)} tables{replaced}; counts and digest "
        f"verified (sha256 {result.digest[:16]}), {result.seconds:.1f} s",
    )
