"""The Tracker's constructor, part by part, and the state its per-step path works on.

`Tracker.__init__` (tracker.py) runs these in order: the training thread's state (`_init_state`), the ranks
(`_join_ranks`), the run claimed in the ledger and where its counters start (`_start`, `resume.claim`), how MFU is
made and the notes kept with the run (`_plan_and_note`, `mfu.plan_mfu`), the hooks of the learning signals and the
optimizer timer (`_watch_learning`), and the writer thread with its derivation (`_make_writer`). The faults and
notes any part may report (`_fault`, `_unmeasured`, `_meta`) live here too. `Tracker` inherits them, as `Ledger`
inherits its parts (`ledger/store.py`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from yieldgate.errors import InputError, LedgerRefused, NetworkFilesystem, RunInUse
from yieldgate.ledger import Ledger, spills
from yieldgate.ledger.owners import Owner
from yieldgate.ledger.pg import masked
from yieldgate.manifest import Manifest, load_manifest, parse_manifest, with_hparams
from yieldgate.names import readable_name
from yieldgate.track import hardware
from yieldgate.track.config import TrackerConfig
from yieldgate.track.derive import Derivation, Start
from yieldgate.track.governed import Governed
from yieldgate.track.guard import live
from yieldgate.track.mfu import MFU_LOGGER, MfuPlan, plan_mfu
from yieldgate.track.packet import Pending, Timer
from yieldgate.track.resume import claim, start_at
from yieldgate.track.signals import Busy, FlopCount, GradientSignals, sample_layers
from yieldgate.track.writer import Writer

__all__ = ["TrackerSetup", "load_run_manifest", "from_environment"]

log = logging.getLogger("yieldgate.track")


class TrackerSetup:
    """What a Tracker is made of: its parts are set up here, in the constructor's order, and used by its
    per-step path (`Tracker.step`, `Tracker.eval`, `Tracker.close`)."""

    run: str
    """The run's name (None until rank 0 picks a free one while it creates the run, `_open_run`)."""
    config: TrackerConfig
    signals: Literal["throughput", "full"]
    location: str
    manifest: Manifest | None
    device: torch.device
    rank: int
    world: int
    _group: Any
    """The tracker's own gloo group (distributed runs), or None."""
    _pick_name: bool
    _step: int
    _numbered: bool
    """A step is recorded (or the run resumed at one): an explicit `step=` must come after `_step`."""
    _mfu: MfuPlan
    _writer: Writer
    _t0: float
    _last_step_t: float
    _last_ship_t: float
    _entropy_layers: dict[str, nn.Module]
    _model: nn.Module | None
    _governed: Governed | None
    """The gate inside the run (`policy=`), or None: ungoverned."""

    # -- the constructor's parts, in its order --------------------------------------------------------

    def _init_state(self, scaler: Any, optimizer: torch.optim.Optimizer | None) -> None:
        """The training thread's own state: fault counts, clocks, counters, what waits for the next packet."""
        self.faults = 0
        self.busy = Busy()
        """Seconds the Tracker spent on the training thread (its calls and hooks), for overhead reports."""
        self._reported: set[tuple[str, str]] = set()
        self.owner = Owner.this_process()
        self._scaler = scaler
        self._optimizer = optimizer
        self._closed = False
        self._started = False
        self._unmeasured_why: dict[str, str] = {}
        self._meta_due: dict[str, Any] = {}
        self._due_lock = threading.Lock()
        self._meta_lock = threading.Lock()
        self._meta_threads: list[threading.Thread] = []
        self._rebase = False
        """True until the first step, on a resumed run given no point: that step's `step=` may say where it
        restarted."""
        self._tokens_total = 0.0
        self._steps_taken = 0
        """Steps recorded by this process (a resumed run's earlier ones not counted)."""
        self._samples_total = 0.0
        self._source_totals: dict[str, float] = {}
        self._flops: FlopCount | None = None
        self._grad: GradientSignals | None = None
        self._opt_start: Any = None
        self._wait = 0.0
        self._batches_used = False
        self._checkpoint_s = 0.0
        self._pending = Pending()
        self._gns_state: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._entropy_ctx: Any = None
        self._entropy_store: dict[str, list[torch.Tensor]] | None = None
        self._due_marks: dict[tuple[str, int], int] = {}

    def _join_ranks(self) -> None:
        """Rank and world size, and the tracker's own gloo group when torch.distributed runs."""
        self.rank, self.world = 0, 1
        self._group = None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()
            # Our own gloo group with a short timeout: a dead rank fails our reduction, reported, instead of
            # hanging the run for the default 30 minutes.
            self._group = torch.distributed.new_group(
                backend="gloo", timeout=timedelta(seconds=self.config.dist_timeout_s)
            )

    def _start(self, resume: bool, takeover: bool, point: dict[str, float]) -> Start:
        """Rank 0 claims the run and learns where its counters start; every rank learns the run's name."""
        start = start_at(point)
        if self.rank == 0:
            start, self._rebase = self._open_run(resume, takeover, point)
        if self._pick_name and self._group is not None:
            # Once, before training: every rank learns the name rank 0 chose (over our gloo group, not the job's).
            chosen = [self.run]
            torch.distributed.broadcast_object_list(chosen, src=0, group=self._group)
            self.run = chosen[0]
        self._step = start.step
        self._numbered = self._step > 0 or bool(point)
        return start

    def _open_run(self, resume: bool, takeover: bool, point: dict[str, float]) -> tuple[Start, bool]:
        """Claim the run (creating it, or continuing it) and set apart what a resume supersedes, in one write
        transaction (`resume.claim`); a ledger that cannot be reached now is reported, and the run starts from
        `point` (the writer retries the ledger)."""
        here = os.path.abspath(self.location)

        def refuse_a_second_tracker() -> None:  # before the ledger, which may be unreachable
            if any(t.run == self.run and os.path.abspath(t.location) == here for t in list(live)):
                raise RunInUse(
                    f"run {self.run!r} in {masked(self.location)} is being written by another Tracker in "
                    "this process; close it first"
                )

        if not self._pick_name:
            refuse_a_second_tracker()
        try:
            with Ledger(self.location, durable=True) as ledger, ledger.transaction():
                if self._pick_name:  # in the claim's write transaction: no other writer takes the name meanwhile
                    asked = self.run
                    self.run = ledger.readable_name() if asked is None else ledger.free_name(asked)
                    if asked is not None and self.run != asked:
                        log.warning(
                            "yieldgate: run %r is in %s already: recording this one as %r (resume=True continues "
                            "it instead)",
                            asked,
                            masked(self.location),
                            self.run,
                        )
                    refuse_a_second_tracker()
                return claim(
                    ledger,
                    self.run,
                    owner=self.owner,
                    manifest=self.manifest,
                    resume=resume,
                    takeover=takeover,
                    point=point,
                )
        except (InputError, RunInUse, NetworkFilesystem, LedgerRefused):
            raise  # configuration errors: before the first step, never once training runs
        except Exception as exc:  # noqa: BLE001 - a locked or unwritable ledger must not stop training
            if self.run is None:  # the writer may still reach the ledger later: the run needs a name
                self.run = readable_name(int(time.time()) % 100_000)
            self._fault("opening the run", exc)
        return start_at(point), False

    def _plan_and_note(self, model: nn.Module | None) -> hardware.Telemetry:
        """How MFU is made (`mfu.plan_mfu`), and the notes rank 0 keeps with the run: MFU, the model's size,
        signals not measured, telemetry sources, devices. Returns the device telemetry the writer reads."""
        self._mfu = plan_mfu(model, self.manifest, self.device, world=self.world, run=self.run)
        if self._mfu.counting:
            self._flops = FlopCount()
        if self._mfu.why is not None:
            self._unmeasured("mfu", self._mfu.why)
        cuda = self.device.type == "cuda"
        # "cuda" with no index is the current device (`torch.cuda.set_device`), not device 0.
        index = self.device.index if self.device.index is not None or not cuda else torch.cuda.current_device()
        telemetry = hardware.Telemetry([index] if cuda else None)
        if self.rank == 0:
            self._meta("mfu", self._mfu.meta)
            if model is not None:  # `diagnose` weighs tokens per parameter with it (undertrained)
                params = sum({id(p): p.numel() for p in model.parameters()}.values())
                self._meta("model", {"params": params, "from": "tracker: the model handed over"})
            if self._unmeasured_why:
                self._meta("unmeasured", dict(self._unmeasured_why))
            self._meta(
                "telemetry",
                {
                    "sources": telemetry.sources,
                    "device": hardware.device_name(self.device),
                    **({"gpus": telemetry.uuids} if telemetry.uuids else {}),
                    **({"missing": telemetry.missing} if telemetry.missing else {}),
                },
            )
            self._meta("devices", {"count": self.world, "from": "tracker: processes of the run"})
        return telemetry

    def _govern_from(self, start: Start) -> None:
        """A governed run: the stage boundaries a resumed run had reached were decided before; rank 0 keeps the
        governor's note with the run (`governor` meta: what `yieldgate gate` reads to gate it as it was governed)."""
        if self._governed is None or self._governed.governor is None:
            return
        self._governed.governor.begin_at(start.step, start.tokens)
        if self.rank == 0:
            self._meta("governor", self._governed.governor.note())

    def _watch_learning(self, model: nn.Module | None, optimizer: torch.optim.Optimizer | None) -> tuple[str, ...]:
        """With signals="full", hooks on the model and optimizer for the learning signals; the optimizer timer.
        Returns the model's layer names, in the order of the per-layer signals."""
        layer_names: tuple[str, ...] = ()
        if self.signals == "full" and model is not None:
            self._grad = GradientSignals(
                model,
                optimizer,
                loss_averaged=self.config.loss_averaged,
                loss_scale=self._scale_tensor,
                busy=self.busy,
                sampled_microbatches=self.config.gns_microbatches or 1 << 30,
            )
            layer_names = tuple(self._grad.names)
            self._grad.layers_due = (self._step + 1) % self.config.layer_every == 0
            self._grad.small_due = self._gns_due(self._step + 1)
            self._entropy_layers = sample_layers(model, self.config.entropy_layers)
        self._model = model
        timing = self.config.optimizer_timing
        if optimizer is not None and (timing if timing is not None else self.signals == "full"):
            # Registered after the signal hooks' pre-step hook and before their post-step hook, so the timer
            # covers the optimizer's own work only (hooks run in registration order).
            optimizer.register_step_pre_hook(self.busy.wrap(self._opt_pre))
            optimizer.register_step_post_hook(self.busy.wrap(self._opt_post))
        return layer_names

    def _make_writer(self, start: Start, layer_names: tuple[str, ...], telemetry: hardware.Telemetry) -> Writer:
        """The writer thread (not started), with its derivation of the step records' columns."""
        self._t0 = self._last_step_t = self._last_ship_t = time.perf_counter()
        derivation = Derivation(
            self.config,
            start=start,
            t0=self._t0,
            manifest=self.manifest,
            world=self.world,
            layer_names=layer_names,
            full_signals=self.signals == "full",
            mfu=self._mfu,
            on_fault=self._fault,
        )
        writer = Writer(
            self.config,
            derivation,
            location=self.location,
            run=self.run if self.rank == 0 else None,
            owner=self.owner,
            manifest=self.manifest,
            telemetry=telemetry if self.rank == 0 else None,
            on_fault=self._fault,
            reduce=self._gather if self._group is not None else None,
            governed=self._governed if self.rank == 0 else None,
        )
        if self.rank == 0:  # where rows would spill, kept before any could: a killed writer's spill is found
            try:
                with Ledger(self.location, durable=True) as ledger:
                    spills.note_paths(ledger, self.run, writer.spill_files(), socket.gethostname())
            except Exception as exc:  # noqa: BLE001 - contained: the run goes on without the note
                self._fault("recording run meta", exc)
        return writer

    # -- what any part reports: notes kept with the run, signals not measured, faults -------------------

    def _meta(self, key: str, value: Any) -> None:
        try:
            with Ledger(self.location, durable=True) as ledger:
                ledger.set_meta(self.run, key, value)
        except Exception as exc:  # noqa: BLE001 - contained: the run goes on without the note
            self._fault("recording run meta", exc)

    def _count_flops(self, tokens: float) -> None:
        """One step of `FlopCount`: once a whole step is counted, MFU is recorded from the next rows on (the
        meta says so), or, when nothing was counted, it says why."""
        assert self._flops is not None
        counted = self._flops.step(tokens)
        if counted is None:
            return
        self._flops = None
        why = self._mfu.counted(counted, self._step)
        if why is not None:
            self._unmeasured("mfu", why)
        if self.rank == 0:
            self._meta_later("mfu", self._mfu.meta)

    def _unmeasured(self, signal: str, why: str) -> None:
        """A signal this run cannot record: said once (logging; MFU on its own logger, `MFU_LOGGER`, which a caller
        silences by name) and kept in the run's meta (`unmeasured`), where `yieldgate show` and `yieldgate diagnose`
        repeat it."""
        if self._unmeasured_why.get(signal) == why:
            return
        self._unmeasured_why[signal] = why
        logger = logging.getLogger(MFU_LOGGER) if signal == "mfu" else log
        logger.warning("yieldgate: %s not recorded for run %r: %s", signal, self.run, why)
        if self.rank == 0 and self._started:  # before that, the constructor writes the meta itself
            self._meta_later("unmeasured", dict(self._unmeasured_why))

    def _meta_later(self, key: str, value: Any) -> None:
        """A note kept with the run, written off the training thread (a ledger write may wait on a lock). Notes
        are written one at a time, so a key's latest value is the one stored; `_wait_for_meta` (at close) waits
        for them."""
        with self._due_lock:  # held only to touch the dict: never across a ledger write
            self._meta_due[key] = value
        self._meta_threads = [t for t in self._meta_threads if t.is_alive()]
        thread = threading.Thread(target=self._write_due_meta, name="yieldgate-meta", daemon=True)
        self._meta_threads.append(thread)
        thread.start()

    def _write_due_meta(self) -> None:
        with self._meta_lock:
            with self._due_lock:
                due, self._meta_due = self._meta_due, {}
            for key, value in due.items():
                self._meta(key, value)

    def _wait_for_meta(self, timeout: float) -> None:
        """Wait, `timeout` seconds at most in all, for the notes `_meta_later` is still writing: a run reads
        finished only with them stored."""
        deadline = time.monotonic() + timeout
        for thread in self._meta_threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _fault(self, where: str, exc: BaseException) -> None:
        self.faults += 1
        key = (where, type(exc).__name__)
        if key not in self._reported:
            self._reported.add(key)
            log.warning(
                "yieldgate tracker: %s failed (%s: %s); training goes on, further errors of this kind are "
                "counted, not repeated",
                where,
                type(exc).__name__,
                exc,
            )

    # -- hooks and callbacks the parts hand out --------------------------------------------------------

    def _scale_tensor(self) -> torch.Tensor | None:
        # GradScaler keeps its scale as a device tensor; get_scale() would call .item() (a sync).
        return getattr(self._scaler, "_scale", None) if self._scaler is not None else None

    def _opt_pre(self, *_: Any) -> None:
        self._opt_start = self._clock()

    def _opt_post(self, *_: Any) -> None:
        if self._opt_start is not None:
            self._pending.timers.append(
                Timer(len(self._pending.rows), "time/optimizer_s", self._opt_start, self._clock())
            )
            self._opt_start = None

    def _clock(self) -> Any:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _gns_due(self, step: int) -> bool:
        return step % self.config.gns_every == 0 or step % self.config.layer_every == 0

    def _gather(self, local: np.ndarray) -> np.ndarray:
        """All-gather this rank's [fields, rows] counters on the tracker's gloo group (writer thread)."""
        tensor = torch.from_numpy(local)
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        torch.distributed.all_gather(out, tensor, group=self._group)
        return torch.stack(out).numpy()


def load_run_manifest(
    manifest: Manifest | str | Path | Mapping[str, Any] | None, hparams: Mapping[str, Any] | None
) -> Manifest | None:
    """The run's manifest, from a path, a mapping or a `Manifest`, with `hparams` kept as its `config`."""
    if isinstance(manifest, (str, Path)):
        manifest = load_manifest(manifest)
    elif isinstance(manifest, Mapping):
        manifest = parse_manifest(dict(manifest), origin="Tracker(manifest=...)")
    if hparams is not None:
        manifest = with_hparams(manifest, hparams, origin="Tracker(hparams=...)")
    return manifest


def from_environment(
    run: str | None, manifest: Any, resume: bool, takeover: bool
) -> tuple[str | None, Any, bool, bool, Owner | None]:
    """A Tracker given no run inside a campaign's probe (`YIELDGATE_RUN` set: `probe.campaign.own`) writes that
    run: it continues the run the campaign made (resume), with the manifest of `YIELDGATE_MANIFEST` unless given
    one, as the worker that owns the run (`YIELDGATE_OWNER`). The ledger is `YIELDGATE_LEDGER`'s already
    (`default_location`). Returns (run, manifest, resume, takeover, owner): as given outside a probe."""
    import json

    env_run = os.environ.get("YIELDGATE_RUN")
    if run is not None or not env_run:
        return run, manifest, resume, takeover, None
    if manifest is None and os.environ.get("YIELDGATE_MANIFEST"):
        manifest = os.environ["YIELDGATE_MANIFEST"]
    owner = None
    if os.environ.get("YIELDGATE_OWNER"):
        host, pid, started, namespace = json.loads(os.environ["YIELDGATE_OWNER"])
        owner = Owner(host, int(pid), float(started), namespace)
    return env_run, manifest, True, True, owner
