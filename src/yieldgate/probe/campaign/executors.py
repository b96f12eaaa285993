"""Running a campaign: the probes the ledger lacks (resumption), in local worker processes, as Ray tasks or as Slurm
jobs (`slurm`), each through `run.run_probe`; a worker that dies fails only the probes it had begun. A campaign's own
trainer is checked before anything is written (`own_spec.preflight`); with `trainer.gpus`, each local probe gets its
own devices (CUDA_VISIBLE_DEVICES), a Ray task or Slurm job asks for them."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from yieldgate.errors import InputError, ProbesFailed, check_choice
from yieldgate.ledger import Ledger
from yieldgate.manifest import Source
from yieldgate.probe.campaign.run import probe_statuses, record_failure, run_probe
from yieldgate.probe.campaign.spec import Campaign, ProbeSpec, plan
from yieldgate.probe.campaign.workers import Lost, run_in_workers

if TYPE_CHECKING:
    from yieldgate.analysis.campaign import CampaignSummary

__all__ = [
    "CampaignRun",
    "CampaignProbes",
    "Progress",
    "run_campaign",
    "preflight_campaign",
    "pending",
    "cores",
    "quiet_mfu_warnings",
    "MFU_LOGGER",
]


@dataclass
class CampaignRun:
    """What one `run_campaign` call did."""

    campaign: str
    planned: int
    skipped: list[str]
    """Runs already in the ledger (finished, same key)."""
    finished: list[str]
    failed: dict[str, str]
    """Run -> error."""
    seconds: float
    imported: dict[str, str] = field(default_factory=dict)
    """Run -> what was imported into it (a trainer that writes no Tracker records: `trainer.import`)."""

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if not self.imported:  # as before for a campaign that imports nothing
            out.pop("imported")
        return out


@dataclass(frozen=True)
class CampaignProbes:
    """What `yieldgate probe` did: the probes it trained, skipped and lost (`run`), and the campaign's rankings over
    every finished probe (`summary`, as stored with the campaign)."""

    run: CampaignRun
    summary: CampaignSummary

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run.to_dict(), "summary": self.summary.to_dict()}


Progress = Callable[[str, int, int], None]
"""(run, step, steps) -> None, a few times a second per training probe."""


def pending(ledger: Ledger, specs: list[ProbeSpec]) -> tuple[list[ProbeSpec], list[str]]:
    """(probes to train, runs to skip): a probe is done when its run is finished with the same key."""
    status = probe_statuses(ledger)
    todo = [s for s in specs if status.get((s.run, s.key)) != "finished"]
    skip = [s.run for s in specs if status.get((s.run, s.key)) == "finished"]
    return todo, skip


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_campaign(
    campaign: Campaign,
    ledger: str,
    *,
    executor: Literal["local", "ray", "slurm"] = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: Progress | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    extra: Sequence[ProbeSpec] = (),
) -> CampaignRun:
    """Train the campaign's probes that the ledger lacks; see the module docstring. `progress` hears from
    probes in training; `on_result` gets one result per planned probe (status skipped, finished or failed).
    `extra`: probes beyond the campaign's plan, trained with it (its leave-one-out probes, `ablation_plan`).
    ProbesFailed when every probe trained failed and none of the campaign's is finished (each failure is stored)."""
    check_choice("executor", executor, ("local", "ray", "slurm"))
    if executor == "ray":
        _ray()  # a missing Ray is said before anything is written
    campaign = preflight_campaign(campaign, executor)
    gpus = campaign.trainer.gpus if campaign.trainer is not None else 0
    ledger = str(Path(ledger).resolve()) if "://" not in ledger else ledger
    specs = plan(campaign) + list(extra)
    with Ledger(ledger) as led:
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
        todo, skipped = pending(led, specs)
    workers = max(1, min(workers or cores(), len(todo) or 1))
    threads = max(1, cores() // workers)
    out = CampaignRun(campaign=campaign.name, planned=len(specs), skipped=skipped, finished=[], failed={}, seconds=0.0)
    started = time.perf_counter()
    if on_result is not None:  # every planned probe gets a result: skipped, finished or failed
        for name in skipped:
            on_result({"run": name, "status": "skipped"})
    run = {"local": _run_local, "ray": _run_ray, "slurm": _run_slurm}[executor]
    for result in run(todo, ledger, workers=workers, threads=threads, address=address, progress=progress, gpus=gpus):
        if result["status"] == "finished":
            out.finished.append(result["run"])
            if result.get("imported"):
                out.imported[result["run"]] = result["imported"]
        elif result["status"] == "skipped":  # trained by another process running the same campaign
            out.skipped.append(result["run"])
        else:
            out.failed[result["run"]] = result["error"]
        if on_result is not None:
            on_result(result)
    out.seconds = time.perf_counter() - started
    if out.failed and not out.finished and not out.skipped:
        first, error = next(iter(out.failed.items()))
        raise ProbesFailed(
            f"campaign {campaign.name!r}: all {len(out.failed)} probe(s) failed, nothing to rank; the first, "
            f"{first}: {error} (each failure is in its run's meta: yieldgate show RUN)"
        )
    return out


def preflight_campaign(campaign: Campaign, executor: str = "local") -> Campaign:
    """The campaign with its own trainer's relative paths taken from the current folder, after every check that can
    be made before a probe starts (`own_spec.preflight`, the sources' files, the executor's needs); InputError, one
    line naming the field and the fix, otherwise."""
    check_choice("executor", executor, ("local", "ray", "slurm"))
    if campaign.trainer is None:
        if executor == "slurm":
            raise InputError("executor slurm runs a campaign's own trainer: add trainer: to the campaign file")
        return campaign
    from yieldgate.probe.campaign.own_spec import preflight

    trainer = campaign.trainer.anchored(Path.cwd())
    preflight(trainer)
    for name, recipe in campaign.recipes.items():
        for i, source in enumerate(recipe.sources):
            if source.path:
                _check_source_data(source, Path(trainer.workdir or "."), f"recipes.{name}.sources[{i}]")
    if executor == "slurm":
        from yieldgate.probe.campaign.slurm import submitit_module

        submitit_module()
    if executor == "local" and trainer.gpus:
        device_groups(trainer.gpus)  # enough devices here
    if executor == "local" and trainer.command is not None and trainer.imports is None:
        from yieldgate.probe.campaign.own_spec import tracker_import_problem

        problem = tracker_import_problem(trainer.command, trainer.env, str(trainer.workdir))  # the workers' machine
        if problem is not None:
            raise InputError(problem)
    return campaign.model_copy(update={"trainer": trainer})


def _check_source_data(source: Source, workdir: Path, field: str) -> None:
    """The source's path exists; where it holds records yieldgate reads (JSON-lines, Parquet, `datasets`), their text
    field is there (`data.sources.check_source`). A format only the team's own loader reads is its script's to check."""
    from yieldgate.data.sources import check_source, source_format

    assert source.path is not None
    path = workdir / Path(source.path).expanduser()
    if not path.exists():
        raise InputError(
            f"{field}.path {source.path!r} does not exist (relative paths are taken from {workdir}); fix the path"
        )
    resolved = source.model_copy(update={"path": str(path)})
    try:
        fmt = source_format(resolved)
    except InputError:
        return
    if fmt != "text":
        try:
            check_source(resolved)
        except InputError as exc:
            raise InputError(f"{field}: {exc}") from None


MFU_LOGGER = "yieldgate.track.mfu"
"""The Tracker's logger for its one warning that a run records no MFU, and for nothing else."""


def _worker_init(threads: int) -> None:
    # Before torch loads in this process: its thread pools size themselves from these.
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    logging.getLogger(MFU_LOGGER).setLevel(logging.ERROR)  # this process only runs probes: for good


@contextmanager
def quiet_mfu_warnings() -> Iterator[None]:
    """A CPU has no known peak FLOP/s, so every probe would warn that MFU is not recorded: each run's meta
    (`mfu`) keeps the reason, and the terminal keeps the campaign's progress. The Tracker says it on its own
    logger (`MFU_LOGGER`), raised above WARNING while this lasts and put back after; every other warning shows."""
    logger = logging.getLogger(MFU_LOGGER)
    before = logger.level
    logger.setLevel(max(before, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(before)


def device_groups(gpus: int) -> list[str]:
    """This machine's GPUs (CUDA_VISIBLE_DEVICES where set, else as many as torch sees) in groups of `gpus`, each
    one probe's CUDA_VISIBLE_DEVICES; InputError when there are fewer than `gpus`."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
    else:
        try:
            import torch

            ids = [str(i) for i in range(torch.cuda.device_count())]
        except ImportError:
            ids = []
    if len(ids) < gpus:
        raise InputError(
            f"trainer.gpus is {gpus} but this machine has {len(ids)} GPU(s) visible; set trainer.gpus to at most "
            f"{len(ids)}, or run on a cluster (executor ray or slurm)",
            parameter="executor",
        )
    return [",".join(ids[i : i + gpus]) for i in range(0, len(ids) - gpus + 1, gpus)]


def _reporter(run: str, queue: Any) -> Callable[[int, int], None]:
    """A probe's per-step progress, put on `queue` (a process manager's or a Ray queue) as (run, step, steps) a few
    times a second, not once per step; a queue that has gone away costs the probe nothing."""
    last = [0.0]

    def report(step: int, steps: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.25 or step == steps:
            last[0] = now
            try:
                queue.put_nowait((run, step, steps))
            except Exception:  # noqa: BLE001 - the campaign's terminal is gone or full: the probe trains on
                pass

    return report


def _local_task(spec: dict[str, Any], ledger: str, threads: int, queue: Any, slots: Any = None) -> dict[str, Any]:
    probe = ProbeSpec.from_json(spec)
    devices = slots.get() if slots is not None else None  # a group of GPUs free now, given back after
    try:
        return run_probe(probe, ledger, threads=threads, progress=_reporter(probe.run, queue), devices=devices)
    finally:
        if slots is not None:
            slots.put(devices)


def _run_local(
    todo: list[ProbeSpec],
    ledger: str,
    *,
    workers: int,
    threads: int,
    address: str | None,
    progress: Progress | None,
    gpus: int = 0,
) -> Iterator[dict[str, Any]]:
    """Probes in worker processes (spawned: no state copied from the caller; `workers.run_in_workers`: a worker that
    dies fails its own probe only); with `gpus`, at most one probe per group of GPUs at once."""
    import multiprocessing as mp

    if not todo:
        return
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        queue = manager.Queue()
        slots = None
        if gpus:
            groups = device_groups(gpus)
            workers = min(workers, len(groups))
            slots = manager.Queue()
            for group in groups:
                slots.put(group)
        stop = threading.Event()
        relay = threading.Thread(target=_relay, args=(queue, stop, progress), daemon=True)
        relay.start()
        tasks = [(s.to_json(), ledger, threads, queue, slots) for s in todo]
        by_run = {s.run: s for s in todo}
        results = run_in_workers(ctx, tasks, workers, _local_task, _worker_init, (threads,))
        try:
            for result in results:
                if not isinstance(result, Lost):
                    yield result
                    continue
                # Its worker died (killed, out of memory): this probe alone fails; the other workers train on.
                spec = by_run[ProbeSpec.from_json(result.task[0]).run]
                how = f", exit code {result.exitcode}" if result.exitcode is not None else ""
                why = f"the worker process died during the probe (killed or out of memory{how})"
                yield from _fail([spec], ledger, why)
        except (KeyboardInterrupt, GeneratorExit):
            # Interrupted: nothing more starts, and the probes in training stop now (their runs end `killed`, and
            # the next run of the campaign trains them again).
            _stop_workers()
            raise
        finally:
            results.close()
            stop.set()
            relay.join(timeout=2)


def _fail(specs: list[ProbeSpec], ledger: str, error: str) -> Iterator[dict[str, Any]]:
    for spec in specs:
        record_failure(ledger, spec, error)
        yield {"run": spec.run, "key": spec.key, "status": "failed", "error": error}


def _stop_workers() -> None:
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            child.terminate()
        except psutil.Error:
            pass


def _relay(queue: Any, stop: threading.Event, progress: Progress | None) -> None:
    import queue as q

    while not stop.is_set():
        try:
            run, step, steps = queue.get(timeout=0.2)
        except (q.Empty, EOFError, OSError):
            continue
        except Exception:  # noqa: BLE001 - the queue (a Ray actor) is gone: no more progress to relay
            return
        if progress is not None:
            progress(run, step, steps)


def _ray_task(spec: dict[str, Any], ledger: str, threads: int, queue: Any) -> dict[str, Any]:
    _worker_init(threads)
    probe = ProbeSpec.from_json(spec)
    return run_probe(probe, ledger, threads=threads, progress=_reporter(probe.run, queue))


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("executor ray needs Ray: pip install 'yieldgate[ray]'", parameter="executor") from None
    return ray


def _run_ray(
    todo: list[ProbeSpec],
    ledger: str,
    *,
    workers: int,
    threads: int,
    address: str | None,
    progress: Progress | None,
    gpus: int = 0,
) -> Iterator[dict[str, Any]]:
    """Probes as Ray tasks on a running cluster (`address`), or on a local Ray instance started here (bound
    to 127.0.0.1, no dashboard) with `workers` x `threads` CPUs. The ledger must be reachable from every
    node (a shared file system, or a ledger URL). Each task asks for `threads` CPUs and `gpus` GPUs."""
    ray = _ray()
    if not todo:
        return
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(
                num_cpus=workers * threads, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1"
            )
    from ray.util.queue import Queue

    stop = threading.Event()
    relay = None
    try:
        queue = Queue()  # an actor: the tasks on every node report their steps to it, the relay reads it here
        relay = threading.Thread(target=_relay, args=(queue, stop, progress), daemon=True)
        relay.start()
        task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(_ray_task)
        refs = {task.remote(s.to_json(), ledger, threads, queue): s for s in todo}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            spec = refs.pop(done[0])
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayError as exc:  # the task's worker died
                yield from _fail([spec], ledger, f"Ray task failed: {str(exc).splitlines()[0]}")
    finally:
        stop.set()
        if relay is not None:
            relay.join(timeout=2)
        if started_here:
            ray.shutdown()


def _run_slurm(
    todo: list[ProbeSpec],
    ledger: str,
    *,
    workers: int,
    threads: int,
    address: str | None,
    progress: Progress | None,
    gpus: int = 0,
) -> Iterator[dict[str, Any]]:
    from yieldgate.probe.campaign.slurm import run_slurm

    yield from run_slurm(todo, ledger, workers=workers, threads=threads, gpus=gpus, fail=_fail)
