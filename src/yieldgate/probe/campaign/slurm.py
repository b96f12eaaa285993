"""Executor `slurm`: each probe of a campaign's own trainer a Slurm job submitted through submitit (one job array by
default, at most `workers` of its tasks at once; `trainer.slurm: {array: false}` submits one job per probe), each job
running `run.run_probe` on its node. The ledger must be reachable from every node (a shared file system, or a
PostgreSQL URL). submitit's other parameters come from `trainer.slurm` (`slurm_partition`, `slurm_account`, ...)."""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from yieldgate.errors import InputError
from yieldgate.probe.campaign.spec import ProbeSpec

__all__ = ["run_slurm", "submitit_module", "make_executor", "once_watcher", "queue_states", "PURGED"]

log = logging.getLogger("yieldgate.probe")


def submitit_module() -> Any:
    try:
        import submitit
    except ImportError:
        raise InputError(
            "executor slurm needs submitit: pip install 'yieldgate[slurm]'", parameter="executor"
        ) from None
    return submitit


def make_executor(spec: ProbeSpec, *, workers: int, threads: int, gpus: int) -> tuple[Any, bool]:
    """(submitit's Slurm executor for the campaign's probes, whether to submit one job array)."""
    submitit = submitit_module()
    trainer = spec.trainer
    assert trainer is not None
    params = dict(trainer.slurm)
    array = bool(params.pop("array", True))
    folder = Path(trainer.outputs or "yieldgate-probes") / spec.campaign / "slurm" / "%j"
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    minutes = math.ceil(trainer.timeout / 60) + 5 if trainer.timeout else 24 * 60
    defaults: dict[str, Any] = {
        "timeout_min": minutes,
        "cpus_per_task": threads,
        "slurm_array_parallelism": workers,
        "name": f"yieldgate-{spec.campaign}",
    }
    if gpus:
        defaults["gpus_per_node"] = gpus
    try:
        executor.update_parameters(**{**defaults, **params})
    except (TypeError, ValueError) as exc:
        raise InputError(f"trainer.slurm: {exc}; use submitit's parameter names (slurm_partition, ...)") from None
    return executor, array


PURGED = "PURGED"
"""The state of a job neither sacct nor the controller knows any more: it ended (Slurm purges an ended job's record
`MinJobAge` seconds after its end) and, with no result written, failed."""


def queue_states(job_ids: set[str]) -> dict[str, dict[str, str]]:
    """The states of `job_ids` (`1234`, `1234_5` for an array's task) as the controller holds them (`squeue`), in the
    form submitit's watcher keeps sacct's (`{id: {"JobID": id, "State": state}}`); a job the controller answered for
    without listing it is `PURGED`. {} when squeue cannot answer (no squeue, the controller unreachable): the states
    stay unknown and the jobs are waited on."""
    mains = sorted({j.split("_")[0] for j in job_ids})
    command = ["squeue", "--noheader", "--array", "--states=all", "--format=%i|%T", f"--jobs={','.join(mains)}"]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0 and "Invalid job id" not in out.stderr:  # that one: none of them is held any more
        return {}
    listed = dict(line.strip().split("|", 1) for line in out.stdout.splitlines() if "|" in line)
    return {j: {"JobID": j, "State": listed.get(j, PURGED)} for j in job_ids}


def once_watcher(submitit: Any) -> Any:
    """submitit's sacct watcher, with sacct's standard error kept from the terminal and each distinct line of it said
    once (a warning of logger `yieldgate.probe`): submitit runs sacct at every poll, its error inherited.

    The states of jobs sacct does not tell of are asked of the controller (`queue_states`): on a cluster without
    accounting (`AccountingStorageType=accounting_storage/none`) sacct tells of none, so a job that died without a
    result (killed, out of memory, its node lost) stayed `UNKNOWN` to submitit, and the campaign waited for it
    forever."""

    class OnceWatcher(submitit.slurm.slurm.SlurmInfoWatcher):
        def __init__(self) -> None:
            super().__init__(delay_s=600)  # submitit's own SlurmJob.watcher's
            handle, self.errors = tempfile.mkstemp(prefix="yieldgate-sacct-", suffix=".err")
            os.close(handle)
            self.said: set[str] = set()

        def _make_command(self) -> list[str] | None:
            command = super()._make_command()
            if command is None:
                return None
            return ["sh", "-c", 'f=$1; shift; exec "$@" 2>>"$f"', "sh", self.errors, *command]

        def update(self) -> None:
            self._output = b""  # what this call of sacct prints (submitit keeps the last successful call's)
            super().update()
            told = set(self.read_info(self._output)) if self._output else set()
            untold = {j for j in self._registered - self._finished if j not in told}
            if untold:
                self._info_dict.update(queue_states(untold))
                self._finished.update(j for j in untold if self.is_done(j, mode="cache"))
            self._say_errors()

        def _say_errors(self) -> None:
            try:
                with open(self.errors, "r+", encoding="utf-8", errors="replace") as f:
                    text = f.read()
                    f.truncate(0)
            except OSError:
                return
            for line in filter(None, (line.strip() for line in text.splitlines())):
                if line not in self.said:
                    self.said.add(line)
                    log.warning(f"slurm: {line} (said once; submitit asks sacct at every poll)")

    return OnceWatcher()


def _slurm_task(spec: dict[str, Any], ledger: str, threads: int) -> dict[str, Any]:
    import os

    from yieldgate.probe.campaign.run import run_probe

    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    result = run_probe(ProbeSpec.from_json(spec), ledger, threads=threads)
    if result.get("stopped"):
        # Stopped by SIGTERM: Slurm preempting or requeuing the job (`scontrol requeue`). This attempt leaves no
        # result: the job ends by the signal, so a requeued job's next attempt gives the probe's one result (it was
        # counted as a failure at once, and trained again beside it), and a cancelled one fails it.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return result


def run_slurm(
    todo: list[ProbeSpec],
    ledger: str,
    *,
    workers: int,
    threads: int,
    gpus: int,
    fail: Callable[[list[ProbeSpec], str, str], Iterator[dict[str, Any]]],
) -> Iterator[dict[str, Any]]:
    """Submit the probes, then yield each one's result as its job ends; a job that dies fails its probe."""
    if not todo:
        return
    submitit = submitit_module()
    logging.getLogger("submitit").setLevel(logging.ERROR)  # no accounting (sacct) on a small cluster: said each poll
    # sacct's own standard error ("Slurm accounting storage is disabled") went to the terminal at every poll: each
    # distinct line is said once. Jobs find their watcher on their class; the campaign's are made below.
    job_class, watcher = submitit.slurm.slurm.SlurmJob, once_watcher(submitit)
    job_class.watcher, before = watcher, job_class.watcher
    jobs: list[Any] = []
    try:
        executor, array = make_executor(todo[0], workers=workers, threads=threads, gpus=gpus)
        args = [s.to_json() for s in todo]
        if array:
            jobs = executor.map_array(_slurm_task, args, [ledger] * len(todo), [threads] * len(todo))
        else:
            jobs = [executor.submit(_slurm_task, a, ledger, threads) for a in args]
        by_job = {job.job_id: spec for job, spec in zip(jobs, todo, strict=True)}
        for job in submitit.helpers.as_completed(jobs, poll_frequency=1.0):
            spec = by_job[job.job_id]
            try:
                yield job.result()
            except Exception as exc:  # noqa: BLE001 - the job died (cancelled, node lost, out of memory)
                yield from fail([spec], ledger, f"Slurm job {job.job_id} failed: {str(exc).splitlines()[-1]}")
    except (KeyboardInterrupt, GeneratorExit):
        for job in jobs:  # interrupted: the probes left are cancelled, their runs train again next time
            job.cancel(check=False)
        raise
    finally:
        job_class.watcher = before
        Path(watcher.errors).unlink(missing_ok=True)
