"""Progress off a terminal (issue #43 item 4): with the output going to a file (CI, `tee`, a Slurm log) the demo printed
nothing for eight minutes, rich's bars having nothing to redraw on. There, every long command says a plain line as
each run ends, and every 30 s while nothing else is said, and its first line names `yieldgate serve`."""

from __future__ import annotations

import io
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from yieldgate.report.console import CampaignProgress, WorkProgress
from yieldgate.report.console.progress import PlainProgress, live, progress_bar

STAMP = re.compile(r"^\[(\d+)m(\d\d)s\] ")


def file_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80), out


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_a_console_that_is_a_file_gets_plain_lines_not_bars():
    console, _ = file_console()
    assert not live(console) and isinstance(progress_bar(console), PlainProgress)


def test_the_first_line_names_serve_on_the_ledger_and_every_line_is_stamped():
    console, out = file_console()
    with PlainProgress(console, ledger="/data/team.db") as bar:
        task = bar.add_task("probes", total=3)
        bar.advance(task)
    said = lines(out)
    assert "`yieldgate --ledger /data/team.db serve` shows the runs live" in said[0]
    assert all(STAMP.match(line) for line in said), said
    assert said[-1].endswith("probes: 1 of 3")


def test_a_url_ledger_is_named_without_its_password():
    console, out = file_console()
    with PlainProgress(console, ledger="postgresql://me:secret@db/yg"):
        pass
    assert "secret" not in out.getvalue() and "postgresql://me:" in out.getvalue()


@settings(max_examples=50, deadline=None)
@given(
    runs=st.integers(1, 12),
    steps=st.lists(st.integers(1, 400), min_size=1, max_size=12),
)
def test_one_line_per_finished_probe_and_none_per_step(runs, steps):
    """A campaign of `runs` probes, each reporting its steps to the end: one line per probe, as it ends, with its
    status and the count of probes done; none for its steps."""
    console, out = file_console()
    with CampaignProgress(console, runs) as (step, result):
        for i in range(runs):
            total = steps[i % len(steps)]
            for s in range(1, total + 1):
                step(f"camp/r{i}", s, total)
            result({"run": f"camp/r{i}", "status": "finished", "seconds": 1.0})
    said = [STAMP.sub("", line) for line in lines(out)[1:]]
    assert said == [f"camp/r{i}: finished, 1 s ({i + 1} of {runs} probes)" for i in range(runs)]


def test_a_silent_stretch_gets_a_line_of_each_task_under_way():
    """Nothing said for `every` seconds: a line per task under way with how far it is, a probe's (said only so)
    included; a task that is done is not repeated."""
    console, out = file_console()
    with PlainProgress(console, every=0.2) as bar:
        done = bar.add_task("pipeline-a: training", total=10)
        bar.update(done, completed=10)
        task = bar.add_task("pipeline-b: training", total=300)
        bar.update(task, completed=120)
        probe = bar.add_task("camp/r0", total=59, lines=False)
        bar.update(probe, completed=12)
        deadline = time.monotonic() + 10
        while len(lines(out)) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
    said = [STAMP.sub("", line) for line in lines(out)[1:]]
    assert said[:2] == ["pipeline-a: training: 10 of 10", "pipeline-b: training: 120 of 300"]
    assert said[2:6] == ["pipeline-b: training: 120 of 300", "camp/r0: 12 of 59"] * 2, said


def test_work_progress_says_each_stage_and_each_finished_training():
    """`train` and `batch-check`: a line per stage (a new description) and per training done, and the bar's end."""
    console, out = file_console()
    with WorkProgress(console, ledger="y.db") as bar:
        bar.update("r/s0: preparing data")
        bar.update("r/s0: training", completed=0, total=6)
        for done in range(1, 7):
            bar.update(completed=done, total=6)
            bar.finished(f"{done} of 6 trainings done")
    said = [STAMP.sub("", line) for line in lines(out)[1:]]
    assert said[:2] == ["r/s0: preparing data", "r/s0: training: 0 of 6"]
    assert [line for line in said if "trainings done" in line] == [f"{d} of 6 trainings done" for d in range(1, 7)]
    assert "r/s0: training: 6 of 6" in said


def test_work_progress_says_nothing_before_its_first_update():
    """An error raised before the work begins (a file that does not validate) prints alone."""
    console, out = file_console()
    with WorkProgress(console):
        pass
    assert out.getvalue() == ""


def test_work_that_writes_no_runs_does_not_name_serve():
    """`audit A B` writes no run: its first line says how progress is shown, and no `yieldgate serve`."""
    console, out = file_console()
    with WorkProgress(console) as bar:
        bar.update("reading the input", completed=0, total=3)
    assert "progress: a line as each run ends" in out.getvalue() and "serve" not in out.getvalue()
