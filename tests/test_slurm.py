"""Executor `slurm`'s poll of sacct (issue #43 item 9): on a cluster without accounting, submitit's sacct printed
"Slurm accounting storage is disabled" to the terminal at every poll. Each distinct line of sacct's standard error
is now said once (logger `yieldgate.probe`), and the job states sacct prints are still read. A `sacct` script on
PATH stands in for Slurm's."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

submitit = pytest.importorskip("submitit", reason="the slurm extra (submitit) is not installed")

from yieldgate.probe.campaign.slurm import once_watcher  # noqa: E402 - after the skip

DISABLED = "sacct: error: Slurm accounting storage is disabled"


def fake_sacct(folder: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    script = folder / "sacct"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def polls(watcher, n: int) -> None:
    for _ in range(n):
        watcher.update()


def test_accounting_disabled_is_said_once_whatever_the_polls(tmp_path, monkeypatch, caplog, capfd):
    fake_sacct(tmp_path, f'echo "{DISABLED}" >&2\necho "sacct: error: another line" >&2\nexit 1', monkeypatch)
    logging.getLogger("submitit").setLevel(logging.ERROR)  # as run_slurm does: submitit's own warning each poll
    watcher = once_watcher(submitit)
    watcher.register_job("4242")
    with caplog.at_level(logging.WARNING, logger="yieldgate.probe"):
        polls(watcher, 5)
    Path(watcher.errors).unlink()
    said = [r.getMessage() for r in caplog.records if r.name == "yieldgate.probe"]
    assert watcher.num_calls == 5
    assert len(said) == 2 and DISABLED in said[0] and "another line" in said[1], said
    assert DISABLED not in capfd.readouterr().err  # not on the terminal, from any of the five polls


def test_the_job_states_sacct_prints_are_still_read(tmp_path, monkeypatch, caplog):
    fake_sacct(tmp_path, 'echo "JobID|State|NodeList"\necho "4242|RUNNING|node1"', monkeypatch)
    watcher = once_watcher(submitit)
    watcher.register_job("4242")
    with caplog.at_level(logging.WARNING, logger="yieldgate.probe"):
        polls(watcher, 2)
    Path(watcher.errors).unlink()
    assert watcher.get_state("4242", mode="cache") == "RUNNING"
    assert [r for r in caplog.records if r.name == "yieldgate.probe"] == []
