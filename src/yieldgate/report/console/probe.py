"""Probes and diagnoses on the console: a run's diagnosis with its evidence (`yieldgate diagnose`), a probe's final
evaluation (`train`), the small-batch baseline check (`batch-check`), and a campaign while it trains and once it has
(`probe`)."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from yieldgate.report.console.campaign import render_campaign
from yieldgate.report.console.lines import evidence_lines, say
from yieldgate.report.console.progress import PlainProgress, progress_bar
from yieldgate.report.console.tables import print_table
from yieldgate.report.format import fmt

if TYPE_CHECKING:
    from yieldgate.analysis.diagnose import Diagnosis
    from yieldgate.probe.batch import BatchCheckSetup
    from yieldgate.probe.campaign.executors import CampaignProbes, CampaignRun
    from yieldgate.track.batch_check import BatchCheckResult

__all__ = [
    "CampaignProgress",
    "render_batch_check",
    "render_campaign_probes",
    "render_campaign_run",
    "render_campaign_status",
    "render_diagnosis",
    "render_training",
]


BLOCKS_BELOW = 100
"""Terminal columns under which `render_diagnosis` prints each finding as a block instead of a five-column table (at
80 columns the table wrapped its advice at 11 characters, a 50-line column)."""


def render_diagnosis(result: Diagnosis, console: Console, run: str) -> None:
    """`yieldgate diagnose`: each finding with its steps, confidence, advice and evidence (a table; below
    `BLOCKS_BELOW` columns, one block per finding), then the detectors that did not run and why, the notes, and the
    signals the run did not record."""
    if not result.findings:
        say(console, f"{run}: no finding from the detectors that ran")
    elif console.width < BLOCKS_BELOW:
        say(console, f"{run}: diagnosis")
        for f in result.findings:
            say(console, f"{f.cause}: steps {f.start_step}-{f.end_step}, confidence {f.confidence:.2f}")
            _indented(console, f"advice: {f.advice}", 2)
            say(console, "  evidence:")
            for line in evidence_lines(f.evidence):
                _indented(console, line, 4)
    else:
        table = Table("cause", "steps", "confidence", "advice", "evidence", title=f"{run}: diagnosis")
        for f in result.findings:
            steps, evidence = f"{f.start_step}-{f.end_step}", "\n".join(evidence_lines(f.evidence))
            table.add_row(f.cause, steps, f"{f.confidence:.2f}", f.advice, evidence)
        print_table(console, table)
    for entry in result.not_run:
        say(console, f"not run: {entry['detector']}: {entry['reason']}")
    for note in result.notes:
        say(console, f"note: {note}")
    for signal, why in result.unmeasured.items():
        say(console, f"not recorded: {signal}: {why}")


def _indented(console: Console, text: str, by: int) -> None:
    """`text` as written, every line of it (wrapped at words to the terminal's width) `by` columns in."""
    from rich.text import Text

    for line in Text(text).wrap(console, max(console.width - by, 20)):
        say(console, " " * by + line.plain.rstrip())


def render_training(final: dict[str, float], console: Console, run: str) -> None:
    """`yieldgate train`: the probe's final evaluation, one row per eval key."""
    table = Table("eval", "value", title=f"{run}: final evaluation")
    for key, value in final.items():
        table.add_row(key, fmt(value))
    print_table(console, table)


def render_batch_check(
    result: BatchCheckResult, console: Console, setup: BatchCheckSetup, run: str | None = None
) -> None:
    """`yieldgate batch-check`: learning per token of the baseline and the candidate, their raw gradient norms and
    the noise-corrected one, the verdict, and the run it was kept with."""
    b, k = setup.candidate_batch, setup.accumulation
    table = Table("", "baseline", "candidate", title=f"learning per token over {result.tokens:,} tokens")
    table.add_row("config", f"batch {setup.baseline_batch}, fp32", f"batch {b} = {k} x {b // k}, {setup.precision}")
    table.add_row(
        "held-out loss drop per seed",
        ", ".join(map(fmt, result.baseline_learning)),
        ", ".join(map(fmt, result.candidate_learning)),
    )
    table.add_row(
        "learning per token", fmt(result.baseline_learning_per_token), fmt(result.candidate_learning_per_token)
    )
    norms = result.grad_norms
    table.add_row(
        f"raw |g|^2 (batch of {norms['b_tokens']:,} vs {norms['B_tokens']:,} tokens)",
        fmt(norms["raw_sq_b"]),
        fmt(norms["raw_sq_B"]),
    )
    print_table(console, table)
    if "noise_corrected_sq" in norms:
        say(
            console,
            f"noise-corrected |G|^2 {fmt(norms['noise_corrected_sq'])}, tr(Sigma) {fmt(norms['trace_sigma'])}: "
            "the raw gap between batch sizes is the noise term tr(Sigma)/b (McCandlish et al. 2018)",
        )
    say(console, result.verdict)
    if run is not None:
        say(console, f"kept with run {run!r}: yieldgate diagnose {run} reads it")


def render_campaign_run(done: CampaignRun, console: Console) -> None:
    """What `yieldgate probe` trained: probes trained, skipped and failed, with each failure's error."""
    say(
        console,
        f"{done.campaign}: {len(done.finished)} probes trained, {len(done.skipped)} already in the ledger, "
        f"{len(done.failed)} failed ({done.seconds:.0f} s)",
    )
    for run, error in done.failed.items():
        say(console, f"failed: {run}: {error}")
    for run, source in done.imported.items():
        say(console, f"imported: {run}: its script wrote no Tracker records; read from {source}")


def render_campaign_probes(result: CampaignProbes, console: Console, err: Console) -> None:
    """`yieldgate probe`: what it trained on `err` (beside its progress), then the campaign's rankings."""
    render_campaign_run(result.run, err)
    render_campaign(result.summary.to_dict(), console)


TAIL_LINES = 12
"""Lines of a failed probe's output shown by `yieldgate campaign NAME`."""


def render_campaign_status(status: dict[str, Any], console: Console, name: str) -> None:
    """`yieldgate campaign NAME` while the campaign is not complete: its probes done, running, failed and left, each
    failure with its error and its output's last lines."""
    say(
        console,
        f"{name}: {status['done']} of {status['planned']} probes done, {status['running']} running, "
        f"{status['failed']} failed, {status['killed']} stopped by SIGTERM, {status['left']} left"
        + (
            "; `yieldgate probe` on its file trains the failed, stopped and left ones"
            if status["done"] < status["planned"]
            else ""
        ),
    )
    for run in status["running_runs"]:
        say(console, f"running: {run}")
    for run, failure in status["failures"].items():
        say(console, f"failed: {run}: {failure['error']}")
        for line in failure["tail"].rstrip().splitlines()[-TAIL_LINES:]:
            console.print(f"    {line}", markup=False, highlight=False)


class CampaignProgress:
    """A campaign's progress: on a terminal, one bar for the whole campaign and one per probe in training; elsewhere,
    a line as each probe ends and every 30 s (`progress.PlainProgress`). Entered, it gives `(step, result)`:
    run_campaign's `progress` and `on_result`. `transient`: the bars cleared once done; `ledger`: where the probes
    go (`yieldgate serve` shows them live)."""

    def __init__(
        self, console: Console, total: int, *, quiet: bool = False, transient: bool = False, ledger: str | None = None
    ) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

        self.bar = progress_bar(
            console,
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            quiet=quiet,
            transient=transient,
            ledger=ledger,
        )
        # Off a terminal, each probe's end is one line (`result`), and the bars are said only every 30 s.
        self.overall = self.bar.add_task("probes", total=total, lines=False)
        self.total, self.done = total, 0
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> tuple[Any, Any]:
        self.bar.__enter__()
        return self.step, self.result

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.__exit__(exc_type, exc, tb)

    def step(self, run: str, step: int, steps: int) -> None:
        if run not in self.tasks:
            self.tasks[run] = self.bar.add_task(f"  {run}", total=steps, lines=False)
        self.bar.update(self.tasks[run], completed=step, total=steps)

    def result(self, result: dict[str, Any]) -> None:
        task = self.tasks.pop(result["run"], None)
        if task is not None:
            self.bar.remove_task(task)
        self.done += 1
        self.bar.advance(self.overall)
        if isinstance(self.bar, PlainProgress):
            seconds = f", {result['seconds']:.0f} s" if result.get("seconds") is not None else ""
            self.bar.print(f"{result['run']}: {result['status']}{seconds} ({self.done} of {self.total} probes)")
