"""One probe of a campaign's own trainer (`own_spec.TrainerSpec`): its folder, recipe file and manifest, the command
run (or the callable called) with the probe's environment, and what its end says.

The probe's process learns where to write from the environment (`ENV_RUN`, `ENV_LEDGER`, `ENV_MANIFEST`,
`ENV_CAMPAIGN`): a `Tracker()` given no run, ledger or manifest takes them, so a script that already uses the
Tracker (or the Hugging Face or Lightning callback) needs no change to become a probe. The worker that starts the
probe owns its run in the ledger (`Ledger.claim_run`) and hands that ownership to the script's Tracker (`ENV_OWNER`):
the run is live while the worker is, and a worker killed with the probe leaves a run the next campaign run takes over.

A probe ends `finished` when its process exits 0, the run holds its evaluation (`val/bpb`, or `val/<source>/bpb` for
each eval source) and no loss is NaN, held out or training (a training loss recorded NaN or infinite: a value never
recorded is no NaN); `failed` otherwise (a non-zero exit, a timeout, a NaN loss, a missing evaluation), with the tail
of its output in the run's meta (`output_tail`); `killed` when SIGTERM stopped it (a preemption: the next run of the
campaign trains it again).

The probe's manifest holds what the campaign says of it and nothing it does not: the model's shape and the context
only where the campaign file declares them (`models:`, `probe.context`; `ProbeSpec.declared`), since the script
builds its own model; the parameters the script's Tracker measured are written into it when the probe ends, where
the gate reads them (tokens per parameter). Each source's unique tokens are measured from its files where the recipe
names the tokenizer file the script uses (`data.source_counts`, cached), and otherwise are the recipe's own
(`unique_tokens:`): a count in a tokenizer the script does not use is not its tokens.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from yieldgate.errors import InputError, RunInUse
from yieldgate.ledger import Ledger, spills
from yieldgate.ledger.merge import copy_run
from yieldgate.ledger.owners import HEARTBEAT_EVERY_S, Owner
from yieldgate.manifest import Manifest, ModelConfig, Recipe
from yieldgate.probe.campaign.keeper import command_line
from yieldgate.probe.campaign.own_spec import ProbeJob, TrainerSpec, render, resolve_callable, tracker_import_problem
from yieldgate.probe.campaign.status import probe_status

__all__ = ["run_own_probe", "ENV_RUN", "ENV_LEDGER", "ENV_MANIFEST", "ENV_CAMPAIGN", "ENV_OWNER", "TAIL_CHARS"]

ENV_RUN = "YIELDGATE_RUN"
ENV_LEDGER = "YIELDGATE_LEDGER"
ENV_MANIFEST = "YIELDGATE_MANIFEST"
ENV_CAMPAIGN = "YIELDGATE_CAMPAIGN"
ENV_OWNER = "YIELDGATE_OWNER"
"""The worker's identity (JSON): the script's Tracker writes the run as the worker that owns it."""
TAIL_CHARS = 4000
"""Characters of a failed probe's output kept in its run's meta."""

Progress = Callable[[int, int], None]


class ProbeFailed(Exception):
    """The probe ended without a result: `status` (failed or killed), one line, the output's tail."""

    def __init__(self, message: str, tail: str = "", status: str = "failed") -> None:
        super().__init__(message)
        self.tail = tail
        self.status = status


def run_own_probe(
    spec: Any, ledger: str, *, progress: Progress | None = None, devices: str | None = None
) -> dict[str, Any]:
    """Run one probe of `spec.trainer` into the ledger (a `ProbeSpec`); never raises for a failing probe."""
    trainer: TrainerSpec = spec.trainer.anchored(Path.cwd())
    job = _job(spec, trainer, ledger)
    manifest = _manifest(spec, trainer)
    owner = Owner.this_process()
    try:
        with Ledger(ledger) as led, led.transaction():
            if probe_status(led, spec.run, spec.key) == "finished":
                return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": "finished by another process"}
            existed = led.claim_run(spec.run, owner=owner, resume=True, takeover=True, source="probe")
            before = led.meta(spec.run) if existed else {}
            led.create_run(spec.run, manifest=manifest, status="running", source="probe", if_exists="replace")
            led.set_meta(spec.run, "probe", spec.meta())
            # Trainings of this run, this one included: an earlier attempt's when it was the same probe (same key).
            same = (before.get("probe") or {}).get("key") == spec.key
            led.set_meta(spec.run, "attempts", (before.get("attempts", 0) if same else 0) + 1)
            led.set_meta(spec.run, "host", _host(devices))
    except RunInUse as exc:
        return {"run": spec.run, "key": spec.key, "status": "skipped", "reason": str(exc)}
    Path(job.probe_dir).mkdir(parents=True, exist_ok=True)
    Path(job.recipe_file).write_text(json.dumps(_recipe(spec, job.workdir), indent=2))
    Path(job.manifest_file).write_text(manifest.model_dump_json(exclude_none=True, indent=2))
    env = {
        **trainer.env,
        ENV_RUN: spec.run,
        ENV_LEDGER: ledger,
        ENV_MANIFEST: job.manifest_file,
        ENV_CAMPAIGN: spec.campaign,
        ENV_OWNER: json.dumps([owner.host, owner.pid, owner.started, owner.namespace]),
    }
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    started = time.perf_counter()
    try:
        if trainer.command is not None:
            command = render(trainer.command, job, quote=True)
            # A script that writes through a Tracker (no trainer.import) needs an interpreter that imports it, here
            problem = None if trainer.imports else tracker_import_problem(command, env, job.workdir)
            if problem is not None:
                raise ProbeFailed(problem)
            _run_command(trainer, job, env, ledger, spec, progress)
        else:
            with _captured(Path(job.probe_dir) / "output.log"):
                _run_callable(trainer, job, env)
        imported = _finish(spec, trainer, job, ledger)
    except ProbeFailed as exc:
        _record_end(ledger, spec.run, exc.status, str(exc), exc.tail)
        return {
            "run": spec.run,
            "key": spec.key,
            "status": "failed",
            "error": str(exc),
            "tail": exc.tail,
            "seconds": time.perf_counter() - started,
            "stopped": exc.status == "killed",
        }
    out = {"run": spec.run, "key": spec.key, "status": "finished", "seconds": time.perf_counter() - started}
    if imported:
        out["imported"] = imported
    return out


def _job(spec: Any, trainer: TrainerSpec, ledger: str) -> ProbeJob:
    probe_dir = Path(trainer.outputs or "yieldgate-probes") / spec.run
    return ProbeJob(
        recipe_file=str(probe_dir / "recipe.json"),
        recipe=spec.recipe_name,
        tokens=spec.tokens,
        seed=spec.seed,
        run=spec.run,
        model=spec.model.model_dump(),
        gpus=trainer.gpus,
        workdir=str(trainer.workdir),
        probe_dir=str(probe_dir),
        campaign=spec.campaign,
        ledger=ledger,
        manifest_file=str(probe_dir / "manifest.json"),
    )


def _recipe(spec: Any, workdir: str) -> dict[str, Any]:
    """The probe's resolved recipe, as its script reads it: the recipe (sources' paths absolute, relative ones taken
    from the workdir) with the probe's budget, seed and model, and the campaign's probe settings."""
    recipe: dict[str, Any] = spec.recipe.model_dump(mode="json", exclude_none=True)
    for source in recipe["sources"]:
        if source.get("path"):
            source["path"] = str(Path(workdir, Path(source["path"]).expanduser()))
    recipe["name"] = spec.recipe_name
    recipe["probe"] = {"tokens": spec.tokens, "seed": spec.seed, "model": spec.model.model_dump(), "run": spec.run}
    recipe["settings"] = spec.probe.model_dump()
    return recipe


def _manifest(spec: Any, trainer: TrainerSpec) -> Manifest:
    """The probe's manifest: its recipe (with the tokenizer's content hash where it is a file on disk, and each
    source's unique tokens where they can be measured, `_counted`), the model's shape and the context only where the
    campaign declares them (`ProbeSpec.declared`), and the seed, budget and trainer in its config."""
    recipe = spec.recipe.model_copy(deep=True)
    declared = set(spec.declared)
    shape: dict[str, int] = {}
    if "model" in declared:
        m = spec.model
        shape.update(layers=m.layers, width=m.width, heads=m.heads, head_dim=m.width // m.heads)
    if "context" in declared:
        recipe.sequence_length = shape["context"] = spec.probe.context
    workdir = Path(trainer.workdir or ".")
    if recipe.tokenizer is not None and recipe.tokenizer.content_hash is None:
        where = recipe.tokenizer.path or recipe.tokenizer.name
        recipe.tokenizer.content_hash = _content_hash(workdir / where)
    return Manifest(
        name=spec.run,
        data=_counted(recipe, workdir),
        model=ModelConfig.model_validate(shape) if shape else None,
        config={
            "seed": spec.seed,
            "tokens": spec.tokens,
            "recipe": spec.recipe_name,
            "trainer": trainer.command or trainer.call,
        },
    )


def _counted(recipe: Recipe, workdir: Path) -> Recipe:
    """`recipe` with each source on disk that gives no `unique_tokens` measured (`data.source_counts.measured`, after
    the recipe's filters and dedup, cached by the files' size and time), where the recipe names its tokenizer file
    (`tokenizer.path`): the script's tokens. Without one the built-in BPE would count tokens the script never sees,
    so the sources are left as they are (the gate says their supply is unknown); so are they where the tokenizer or a
    file cannot be read."""
    from yieldgate.data.source_counts import measured

    if recipe.tokenizer is None or recipe.tokenizer.path is None:
        return recipe
    located = recipe.model_copy(deep=True)
    assert located.tokenizer is not None and located.tokenizer.path is not None  # a copy of the recipe's
    located.tokenizer.path = str(workdir / Path(located.tokenizer.path).expanduser())
    for source in located.sources:
        if source.path:
            source.path = str(workdir / Path(source.path).expanduser())
    try:
        counted = measured(located)
    except (InputError, OSError, ValueError):
        return recipe  # an unreadable tokenizer or file: the script's own failure will say so, not its manifest
    out = recipe.model_copy(deep=True)
    for source, count in zip(out.sources, counted.sources, strict=True):
        source.unique_tokens, source.documents = count.unique_tokens, count.documents
    return out


def _content_hash(path: Path) -> str | None:
    """sha256 of a tokenizer on disk: a file's bytes; a Hugging Face tokenizer folder's `tokenizer.json` (the hash
    `data.recipe.team_tokenizer` gives the same tokenizer); another folder's files in name order. None when `path`
    is none."""
    import hashlib

    path = path.expanduser()
    if path.is_dir() and (path / "tokenizer.json").is_file():
        path = path / "tokenizer.json"
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(path).as_posix().encode() if path.is_dir() else b"")
        digest.update(f.read_bytes())
    return digest.hexdigest()


def _host(devices: str | None) -> dict[str, Any]:
    """Where the probe runs: the host, the Ray node or the Slurm job when there is one, and its devices."""
    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        import ray

        if ray.is_initialized():
            out["node"] = ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURMD_NODENAME"):
        if os.environ.get(key):
            out[key.lower()] = os.environ[key]
    if devices is not None:
        out["devices"] = devices
    return out


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_CHARS))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _run_command(
    trainer: TrainerSpec, job: ProbeJob, env: dict[str, str], ledger: str, spec: Any, progress: Progress | None
) -> None:
    """The command in its own process group, its output in `<probe_dir>/output.log`; ProbeFailed when it fails."""
    assert trainer.command is not None
    command = render(trainer.command, job, quote=True)
    log = Path(job.probe_dir) / "output.log"
    deadline = time.monotonic() + trainer.timeout if trainer.timeout else math.inf
    with open(log, "wb") as out:
        out.write(f"$ {command}\n".encode())
        out.flush()
        # Through a keeper (`keeper.py`): killed with the worker, the command's whole group goes with it, and the
        # timeout is held there too (a minute past the worker's own, which stops it first while the worker lives).
        backstop = trainer.timeout + 60.0 if trainer.timeout else None
        proc = subprocess.Popen(
            command_line(command, backstop),
            cwd=trainer.workdir,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with _forward_sigterm(proc):
            rc = _wait(proc, deadline, ledger, spec, progress)
    if rc is None:
        raise ProbeFailed(f"timed out after {trainer.timeout:g} s (trainer.timeout); stopped", _tail(log))
    if rc > 128:  # the shell reports a command killed by signal N as 128 + N
        rc = 128 - rc
    if rc == -signal.SIGTERM:
        raise ProbeFailed(
            "stopped by SIGTERM (preempted); run the campaign again to train it", _tail(log), status="killed"
        )
    if rc != 0:
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        raise ProbeFailed(f"the trainer {how}; its output's tail is kept (yieldgate campaign NAME)", _tail(log))


def _wait(
    proc: subprocess.Popen[bytes], deadline: float, ledger: str, spec: Any, progress: Progress | None
) -> int | None:
    """The exit status, or None after stopping it at `deadline`; meanwhile stamps the run's heartbeat (a script with
    no Tracker writes none) and reports tokens done to `progress`."""
    owner, beat = Owner.this_process(), [time.monotonic()]
    while True:
        try:
            return proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            _stop(proc)
            return None
        if time.monotonic() - beat[0] >= HEARTBEAT_EVERY_S:  # the run is live while the worker waits on it
            beat[0] = time.monotonic()
            _heartbeat(ledger, spec.run, owner)
        if progress is not None:
            progress(min(_tokens_done(ledger, spec.run), spec.tokens), spec.tokens)


def _heartbeat(ledger: str, run: str, owner: Owner) -> None:
    try:
        with Ledger(ledger) as led:
            led.heartbeat(run, owner)
    except Exception:  # noqa: BLE001 - best effort: a busy ledger is retried at the next beat
        pass


def _tokens_done(ledger: str, run: str) -> int:
    try:
        with Ledger(ledger, readonly=True) as led:
            steps = led.steps(run, ["tokens"])
        return int(steps["tokens"].max()) if len(steps) and steps["tokens"].notna().any() else 0
    except Exception:  # noqa: BLE001 - progress is best effort: the ledger may be busy
        return 0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the probe's process group, SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def _forward_sigterm(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """A SIGTERM to the worker (a preemption) goes on to the probe's process group, which stops cleanly."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: Any) -> None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _captured(log: Path) -> Iterator[None]:
    """This process's stdout and stderr (file descriptors 1 and 2) go to `log` while it lasts: the callable's output
    is the probe's, kept like a command's."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _run_callable(trainer: TrainerSpec, job: ProbeJob, env: dict[str, str]) -> None:
    """The callable, in this process with the probe's environment; its error (and a timeout, in the main thread)
    as ProbeFailed with the traceback's tail."""
    import traceback

    assert trainer.call is not None
    fn = resolve_callable(trainer.call)
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with _alarm(trainer.timeout):
            fn(job)
    except _Timeout:
        raise ProbeFailed(f"timed out after {trainer.timeout:g} s (trainer.timeout)") from None
    except Exception as exc:  # noqa: BLE001 - the probe's failure, recorded
        traceback.print_exc()
        tail = traceback.format_exc()[-TAIL_CHARS:]
        raise ProbeFailed(
            f"the trainer raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", tail
        ) from None
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Timeout(Exception):
    pass


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    import threading

    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _merge_spills(led: Ledger, run: str) -> None:
    """Rows the trainer's Tracker left in a spill file on this host (the ledger was locked past its close's wait):
    its process has ended, so they are brought in now, as `yieldgate merge` would, by this process, which owns the
    probe's run (and handed it to the Tracker)."""
    for waiting in spills.waiting_spills(led, [run]):
        if waiting.steps > 0 and not waiting.gone:
            with Ledger(waiting.path, readonly=True) as side:
                copy_run(led, side, run, owner=Owner.this_process())


def _finish(spec: Any, trainer: TrainerSpec, job: ProbeJob, ledger: str) -> str | None:
    """After a clean exit: import what the script wrote (`trainer.import`), check the run holds its evaluation and
    no NaN loss, and end it `finished`. Returns what was imported (None: the script wrote through a Tracker)."""
    imported = None
    if trainer.imports is not None:
        imported = _import(trainer, job, ledger, spec.run)
    tail = _tail(Path(job.probe_dir) / "output.log")
    with Ledger(ledger) as led:
        _merge_spills(led, spec.run)
        evals = led.evals(spec.run)
        steps = led.steps(spec.run, ["tokens"])
        keys = [f"val/{s}/bpb" for s in spec.eval_sources] or ["val/bpb"]
        have = {f"{t}/{m}" for t, m in zip(evals["task"], evals["metric"], strict=True)} if len(evals) else set()
        if steps.empty and evals.empty:
            raise ProbeFailed(
                "the trainer wrote nothing to the ledger: use yieldgate's Tracker() (it reads the probe's run from "
                "the environment) or declare trainer.import: with the file it writes",
                tail,
            )
        missing = [k for k in keys if k not in have]
        if missing:
            raise ProbeFailed(
                f"missing evaluation: the run holds no {', '.join(missing)}; the script must evaluate "
                "(tr.eval({'val/bpb': ...}))",
                tail,
            )
        scored = evals[(evals["task"] + "/" + evals["metric"]).isin([*keys, "val/loss"])]["value"]
        if scored.isna().any() or not scored.map(math.isfinite).all():
            raise ProbeFailed("NaN loss: the training diverged (an evaluation is NaN or infinite)", tail)
        diverged = _diverged(led.steps(spec.run, ["loss"], nullable=True))
        if diverged is not None:
            raise ProbeFailed(f"NaN loss: the training diverged ({diverged})", tail)
        status = led.run_records(spec.run, totals=False)[0]["recorded_status"]
        if status in ("failed", "killed"):
            raise ProbeFailed(f"the trainer's Tracker ended the run {status}", tail, status=status)
        _measured_model(led, spec.run)
        led.set_status(spec.run, "finished")
        if imported:
            led.set_meta(spec.run, "imported_from", imported)
    return imported


def _diverged(steps: pd.DataFrame) -> str | None:
    """Where the training loss was recorded NaN or infinite, in words (None: never). `steps` holds `step` and `loss`
    as nullable floats (`Ledger.steps(nullable=True)`): <NA> is a loss never recorded, which is no divergence."""
    loss = steps["loss"].array
    bad = ~loss.isna() & ~np.isfinite(loss.to_numpy(dtype="float64", na_value=0.0))
    if not bad.any():
        return None
    first = int(np.argmax(bad))
    return (
        f"the training loss is {float(loss[first])} at step {int(steps['step'].iloc[first]):,}, and non-finite at "
        f"{int(bad.sum()):,} of {int((~loss.isna()).sum()):,} steps recorded"
    )


def _measured_model(led: Ledger, run: str) -> None:
    """The parameters of the model the script's Tracker was handed (its `model` meta) into the run's manifest, where it
    records none: a campaign declares at most the model's shape, and the gate reads `model.params`."""
    params = (led.meta(run).get("model") or {}).get("params")
    manifest = led.manifest(run)
    if not isinstance(params, int) or params < 1 or manifest is None:
        return
    if manifest.model is not None and manifest.model.params is not None:
        return
    model = (manifest.model or ModelConfig()).model_copy(update={"params": params})
    led.set_manifest(run, manifest.model_copy(update={"model": model}))


def _import(trainer: TrainerSpec, job: ProbeJob, ledger: str, run: str) -> str:
    """Import the file the script wrote into the probe's run (the ingest API `yieldgate import` uses)."""
    from yieldgate.ingest import ImportOptions, import_run

    assert trainer.imports is not None
    source = render(trainer.imports.path, job, quote=False)
    source = source if Path(source).is_absolute() else str(Path(trainer.workdir or ".") / source)
    if not Path(source).exists():
        raise ProbeFailed(
            f"trainer.import.path {source!r} does not exist after the trainer exited; fix the path or the script",
            _tail(Path(job.probe_dir) / "output.log"),
        )
    with Ledger(ledger) as led:
        led.set_status(run, "imported")  # the worker's own run: the import's live-writer check passes
        try:
            import_run(led, trainer.imports.kind, [source], ImportOptions(run=run, replace=True))
        except Exception as exc:  # noqa: BLE001 - an unreadable output fails the probe, with why
            raise ProbeFailed(f"import of {source!r} failed: {str(exc).splitlines()[0]}") from None
    return f"{trainer.imports.kind}: {source}"


def _record_end(ledger: str, run: str, status: str, error: str, tail: str) -> None:
    with Ledger(ledger) as led, led.transaction():
        led.set_status(run, status)
        led.set_meta(run, "error", error)
        led.set_meta(run, "output_tail", tail)
        led.release_claim(run)  # a trainer of this attempt still alive writes the run no more
