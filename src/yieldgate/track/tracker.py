"""`Tracker`: the one object a training loop uses to record throughput and learning on one timeline.

    with Tracker("bs64-fp16", manifest="manifest.yaml", model=model, optimizer=opt, signals="full") as tr:
        for batch in tr.batches(loader):              # times the wait for data
            ...forward / backward / optimizer step...
            tr.step(tokens=n_tokens, samples=n, loss=loss, grad_norm=gn, sources={"web": n_web})
            if tr.due(every_tokens=5_000_000):
                tr.eval({"val/loss": v})

The training thread does as little as possible: it reads the clock, keeps host counters, and holds on to
device tensors (loss, gradient norms, signals) without moving them to the host. Every `log_every_steps`
steps (or `log_every_s` seconds, single process only) it starts one non-blocking copy of the stacked
tensors and hands the packet to a background writer (`writer.py`). No `.item()`, `.cpu()`, `.tolist()` or
collective runs in the per-step path.

The Tracker never raises into training once it runs: an error inside it is reported once (logging, with the
cause), counted in `faults`, and the run goes on. Configuration errors (a malformed manifest, a run name
already taken) are raised by the constructor, before the first step.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import math
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from torch import nn

from yieldgate.errors import InputError, LedgerRefused, NetworkFilesystem, RunInUse
from yieldgate.ledger import Ledger, default_location
from yieldgate.ledger.owners import Owner
from yieldgate.ledger.pg import masked
from yieldgate.manifest import Manifest, load_manifest, parse_manifest, with_hparams
from yieldgate.names import CHECKPOINT_KEY, check_run_name, readable_name, unsafe_character
from yieldgate.track import hardware
from yieldgate.track.batch_check import BatchCheckResult
from yieldgate.track.config import TrackerConfig
from yieldgate.track.derive import Derivation, Start
from yieldgate.track.packet import Pending, StepRow, Timer
from yieldgate.track.signals import (
    Busy,
    FlopCount,
    GradientSignals,
    activation_entropy,
    gns_estimate,
    sample_layers,
)
from yieldgate.track.throughput import flops_per_token, mfu
from yieldgate.track.writer import Writer

__all__ = ["Tracker", "TrackerConfig", "matmul_params"]

log = logging.getLogger("yieldgate.track")
T = TypeVar("T")

COUNTED_FLOPS = "counted: torch.utils.flop_counter over one training step (matmuls and convolutions)"
# Why MFU is not recorded, by `throughput.mfu`'s flag: said once when the run starts, kept in the run's meta.
_MFU_WHY = {
    "unknown_device": "unknown device {device!r} ({dtype}): give hardware.peak_flops in the manifest",
    "unknown_model": "unknown FLOPs per token: hand the model to the Tracker, or give model.flops_per_token in the "
    "manifest",
    "not_transformer": "the 6N + 12LHQT formula is for decoder transformers: give model.flops_per_token in the "
    "manifest, or hand the model to the Tracker to count them",
}


_live: weakref.WeakSet[Tracker] = weakref.WeakSet()
"""Trackers not yet closed: flushed at interpreter exit and on SIGTERM."""
_sigterm_installed = False
_holding = 0
"""Tracker calls under way that a SIGTERM must not cut (a packet being shipped, a close flushing)."""
_held: int | None = None
"""A SIGTERM that arrived during one: delivered again when the last of them returns."""
_holding_lock = threading.RLock()  # re-entrant: the handler may run (and close) inside a held block


def _close_live(status: str) -> None:
    for tracker in list(_live):
        tracker.close(status)


@atexit.register
def _at_exit() -> None:
    # The writer is a daemon thread: without this, rows still buffered at exit would be lost. No clean close
    # was recorded, so the run is `killed` (the data contract's name for it).
    _close_live("killed")


def _on_sigterm(previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        global _held
        if _holding:
            # The signal interrupted a packet half handed to the writer (its rows out of the Tracker, not yet
            # in the inbox) or a close flushing: flushing now would lose that packet, and ending the process
            # now would cut the flush. Held: `_whole` sends it again once the call is done.
            _held = signum
            return
        _close_live("killed")
        if callable(previous):
            previous(signum, frame)
        else:  # the default action: restore it and let the signal end the process as it would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler


def _whole(method: Any) -> Any:
    """Run a Tracker method to its end even when SIGTERM arrives inside it: the handler holds the signal
    and it is sent again when the method returns (its rows are then in the writer's hands, or flushed)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _holding, _held
        with _holding_lock:  # Trackers on several threads: a lost count would hold every later SIGTERM
            _holding += 1
        try:
            return method(*args, **kwargs)
        finally:
            with _holding_lock:
                _holding -= 1
                signum = _held if not _holding else None
                if signum is not None:
                    _held = None
            if signum is not None:
                os.kill(os.getpid(), signum)  # the handler runs on the main thread at its next bytecode

    return wrapper


def _install_sigterm() -> None:
    """Flush every live Tracker on SIGTERM (schedulers send it before killing a job), then do what the
    process would have done: the previous Python handler, or the default action. Main thread only; a
    process that ignores SIGTERM keeps ignoring it."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN or previous is None:
        return
    signal.signal(signal.SIGTERM, _on_sigterm(previous))
    _sigterm_installed = True


def _contained(method: Any) -> Any:
    """Run a Tracker method so that an error inside the tracker never reaches the training loop, and count
    the time it takes as the Tracker's own cost."""

    @functools.wraps(method)
    def wrapper(self: Tracker, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - contained by design: reported once and counted
            self._fault(method.__name__, exc)
            return None
        finally:
            self.busy.seconds += time.perf_counter() - start

    return wrapper


def _eval_key(name: Any) -> str | None:
    """`<task>/<metric>` for an eval key as given: itself, or the eval an importer would map the name to
    (`val_loss` -> `val/loss`); None when it names no evaluation."""
    from yieldgate.aliases import guess

    if not isinstance(name, str):
        return None
    task, _, metric = name.rpartition("/")
    if task and metric:
        return name
    target = guess(name)
    return target.key if target.kind == "eval" else None


def matmul_params(model: nn.Module) -> int:
    """N of 6N: unique parameters, less embedding tables used only as lookups. An embedding tied to an
    output projection (a Linear sharing its weight) counts once, since that matmul runs for every token."""
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    lookups = {
        id(m.weight): m.weight.numel()
        for m in model.modules()
        if isinstance(m, nn.Embedding) and id(m.weight) not in linear_weights
    }
    unique = {id(p): p.numel() for p in model.parameters()}
    return sum(n for pid, n in unique.items() if pid not in lookups)


def _model_shape(model: nn.Module | None, manifest: Manifest | None) -> dict[str, Any]:
    """N, L, H, Q, T for 6N + 12·L·H·Q·T, from the manifest first, then the model's own config."""
    shape: dict[str, Any] = {}
    mc = manifest.model if manifest else None
    if mc is not None:
        shape = {
            "flops_per_token": mc.flops_per_token,
            "n": mc.non_embedding_params,
            "layers": mc.layers,
            "heads": mc.heads,
            "head_dim": mc.head_dim or (mc.width // mc.heads if mc.width and mc.heads else None),
            "context": mc.context,
            "architecture": mc.architecture,
        }
    if model is not None:
        cfg = getattr(model, "cfg", None) or getattr(model, "config", None)
        get = lambda *names: next((getattr(cfg, k) for k in names if getattr(cfg, k, None) is not None), None)  # noqa: E731
        if cfg is not None:
            width = get("width", "hidden_size", "n_embd", "d_model")
            shape["layers"] = shape.get("layers") or get("layers", "num_hidden_layers", "n_layer", "num_layers")
            shape["heads"] = shape.get("heads") or get("heads", "num_attention_heads", "n_head")
            if not shape.get("head_dim") and width and shape["heads"]:
                shape["head_dim"] = width // shape["heads"]
            shape["context"] = shape.get("context") or get("context", "max_position_embeddings", "n_positions", "n_ctx")
        if not shape.get("n"):
            shape["n"] = matmul_params(model)
    shape.setdefault("architecture", "decoder_transformer")
    return shape


def _resume_point(step: Any, tokens: Any, samples: Any) -> dict[str, float]:
    """The checkpoint's point given to the constructor, checked: {} when none, else step and the counters given."""
    if step is None:
        if tokens is not None or samples is not None:
            raise InputError(
                "Tracker(tokens=..., samples=...) are the checkpoint's counters at its step: pass step= too"
            )
        return {}
    point: dict[str, float] = {}
    for name, value in (("step", step), ("tokens", tokens), ("samples", samples)):
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float, np.integer, np.floating))
            or not (math.isfinite(value) and value >= 0)
        ):
            raise InputError(f"Tracker({name}=...) must be a number >= 0, got {value!r}")
        point[name] = float(value)
    if point["step"] != int(point["step"]):
        raise InputError(f"Tracker(step=...) must be a whole number, got {step!r}")
    point["step"] = int(point["step"])
    return point


class Tracker:
    """Records a run's steps, learning signals and evals into the ledger from inside a training loop."""

    def __init__(
        self,
        run: str | None = None,
        *,
        manifest: Manifest | str | Path | Mapping[str, Any] | None = None,
        hparams: Mapping[str, Any] | None = None,
        ledger: str | Path | None = None,
        signals: Literal["throughput", "full"] = "throughput",
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        scaler: Any = None,
        config: TrackerConfig | None = None,
        resume: bool = False,
        takeover: bool = False,
        device: str | torch.device | None = None,
        step: int | None = None,
        tokens: float | None = None,
        samples: float | None = None,
        suffix_if_taken: bool = False,
    ) -> None:
        """`run` names the run; None gives it a readable unique name (`brisk-otter-7`, in `tracker.run`). A name
        already in the ledger is refused unless `resume` (below), or, with `suffix_if_taken`, the run is recorded
        under the first free `<run>-2`, `<run>-3`, ... (what a training script run again wants; the framework
        callbacks do this). The name is chosen in the transaction that creates the run, so two processes starting
        at once get two names.

        `hparams`: the hyper-parameters (a mapping, nested as you like: `vars(args)`, a config dict), kept as the
        manifest's `config` (merged over one the manifest has, these winning key by key at the top level), where
        `yieldgate show` prints them and `compare` counts a difference as a confounder. (`config` is the Tracker's
        own cadences, TrackerConfig.)

        `resume=True` continues a run already in the ledger. `step`, `tokens` and `samples` say where the
        run stands, from the checkpoint it restarts from (the step it completed and the counters then): records
        stored after `step` belong to work the restart threw away and are set apart (a `resume` event, see
        `Ledger.supersede`); the next step is `step + 1` and counters continue from the checkpoint's. Without
        `tokens`/`samples` they come from the ledger's record at or before `step`. Without `step`, the run
        continues from its last stored record, unless the loop's first `step(step=N)` says otherwise: then
        the run resumes after the stored record before N.

        One process writes a run: a run another live process is writing is refused (RunInUse, naming it), and
        one whose writer died without closing it is taken over only with `takeover=True` (see
        `yieldgate.ledger.owners`: dead means its process is gone, or no heartbeat for `STALE_AFTER_S`)."""
        if signals not in ("throughput", "full"):
            raise InputError(f"signals must be 'throughput' or 'full', got {signals!r}")
        point = _resume_point(step, tokens, samples)
        # None until rank 0 picks a free name while it creates the run (`_open_run`).
        self.run: str = check_run_name(run) if run is not None else None  # type: ignore[assignment]
        self._pick_name = run is None or (suffix_if_taken and not resume)
        self.config = config or TrackerConfig()
        self.signals = signals
        self.location = str(ledger) if ledger is not None else default_location()
        if isinstance(manifest, (str, Path)):
            manifest = load_manifest(manifest)
        elif isinstance(manifest, Mapping):
            manifest = parse_manifest(dict(manifest), origin="Tracker(manifest=...)")
        if hparams is not None:
            manifest = with_hparams(manifest, hparams, origin="Tracker(hparams=...)")
        self.manifest: Manifest | None = manifest
        self.faults = 0
        self.busy = Busy()
        """Seconds the Tracker spent on the training thread (its calls and hooks), for overhead reports."""
        self._reported: set[tuple[str, str]] = set()
        self.owner = Owner.this_process()
        self._scaler = scaler
        self._closed = False

        self.rank, self.world = 0, 1
        self._group = None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()
            # Our own gloo group with a short timeout: a dead rank fails our reduction, reported, instead of
            # hanging the run for the default 30 minutes.
            self._group = torch.distributed.new_group(
                backend="gloo", timeout=timedelta(seconds=self.config.dist_timeout_s)
            )

        param = next(iter(model.parameters()), None) if model is not None else None
        if device is not None:
            self.device = torch.device(device)
        else:
            self.device = param.device if param is not None else torch.device("cpu")
        base = {
            "step": point.get("step", 0),
            "tokens": point.get("tokens", 0.0),
            "samples": point.get("samples", 0.0),
            "wall_s": 0.0,
        }
        # True until the first step, on a resumed run given no point: that step's `step=` may say where it restarted.
        self._rebase = False
        if self.rank == 0:
            base, self._rebase = self._open_run(resume, takeover, point, base)
        if self._pick_name and self._group is not None:
            # Once, before training: every rank learns the name rank 0 chose (over our gloo group, not the job's).
            chosen = [self.run]
            torch.distributed.broadcast_object_list(chosen, src=0, group=self._group)
            self.run = chosen[0]
        self._step = int(base["step"])
        self._numbered = self._step > 0 or bool(point)
        """A step is recorded (or the run resumed at one): an explicit `step=` must come after `_step`."""
        self._tokens_total = 0.0
        self._samples_total = 0.0
        self._source_totals: dict[str, float] = {}

        self._flops: FlopCount | None = None
        self._fpt: float | None = None
        self._unmeasured_why: dict[str, str] = {}
        self._started = False
        mfu_of, self._mfu_meta = self._mfu_setup(model)
        telemetry = hardware.Telemetry([self.device.index or 0] if self.device.type == "cuda" else None)
        if self.rank == 0:
            self._meta("mfu", self._mfu_meta)
            if model is not None:  # `diagnose` weighs tokens per parameter with it (undertrained)
                params = sum({id(p): p.numel() for p in model.parameters()}.values())
                self._meta("model", {"params": params, "from": "tracker: the model handed over"})
            if self._unmeasured_why:
                self._meta("unmeasured", dict(self._unmeasured_why))
            self._meta("telemetry", {"sources": telemetry.sources, "device": hardware.device_name(self.device)})
            self._meta("devices", {"count": self.world, "from": "tracker: processes of the run"})

        self._grad: GradientSignals | None = None
        self._optimizer = optimizer
        self._opt_start: Any = None
        layer_names: tuple[str, ...] = ()
        if signals == "full" and model is not None:
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
        timing = self.config.optimizer_timing if self.config.optimizer_timing is not None else signals == "full"
        if optimizer is not None and timing:
            # Registered after the signal hooks' pre-step hook and before their post-step hook, so the timer
            # covers the optimizer's own work only (hooks run in registration order).
            optimizer.register_step_pre_hook(self.busy.wrap(self._opt_pre))
            optimizer.register_step_post_hook(self.busy.wrap(self._opt_post))

        self._t0 = time.perf_counter()
        start = Start(step=int(base["step"]), tokens=base["tokens"], samples=base["samples"], wall_s=base["wall_s"])
        derivation = Derivation(
            self.config,
            start=start,
            t0=self._t0,
            manifest=manifest,
            world=self.world,
            layer_names=layer_names,
            full_signals=signals == "full",
            mfu=mfu_of,
            on_fault=self._fault,
        )
        self._writer = Writer(
            self.config,
            derivation,
            location=self.location,
            run=self.run if self.rank == 0 else None,
            owner=self.owner,
            manifest=manifest,
            telemetry=telemetry if self.rank == 0 else None,
            on_fault=self._fault,
            reduce=self._gather if self._group is not None else None,
        )
        self._last_step_t = self._t0
        self._last_ship_t = self._t0
        self._wait = 0.0
        self._batches_used = False
        self._checkpoint_s = 0.0
        self._pending = Pending()
        self._gns_state: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._entropy_ctx: Any = None
        self._entropy_store: dict[str, list[torch.Tensor]] | None = None
        self._due_marks: dict[tuple[str, int], int] = {}
        self._writer.start()
        self._started = True
        _live.add(self)
        _install_sigterm()

    # -- setup ----------------------------------------------------------------------------------------

    def _open_run(
        self, resume: bool, takeover: bool, point: dict[str, float], base: dict[str, float]
    ) -> tuple[dict[str, float], bool]:
        """Claim the run (creating it, or continuing it) and set apart what a resume supersedes, in one write
        transaction; return where its counters start and whether the first explicit step may still move that
        point (a resumed run given no `step=`)."""
        here = os.path.abspath(self.location)

        def refuse_a_second_tracker() -> None:  # before the ledger, which may be unreachable
            if any(t.run == self.run and os.path.abspath(t.location) == here for t in list(_live)):
                raise RunInUse(
                    f"run {self.run!r} in {masked(self.location)} is being written by another Tracker in "
                    "this process; close it first"
                )

        if not self._pick_name:
            refuse_a_second_tracker()
        try:
            with Ledger(self.location, durable=True) as ledger, ledger.transaction():
                if self._pick_name:  # in the claim's write transaction: no other writer takes the name meanwhile
                    self.run = ledger.readable_name() if self.run is None else ledger.free_name(self.run)
                    refuse_a_second_tracker()
                exists = ledger.claim_run(
                    self.run, owner=self.owner, manifest=self.manifest, resume=resume, takeover=takeover
                )
                if not exists:
                    return base, False
                last = ledger.step_at(self.run, 1 << 62)
                if last is None:
                    return base, "step" not in point
                # Wall time and cost keep counting from the last record: the superseded work was paid for.
                wall = last["wall_s"] or 0.0
                if "step" not in point:
                    return {
                        "step": last["step"],
                        "tokens": last["tokens"] or 0.0,
                        "samples": last["samples"] or 0.0,
                        "wall_s": wall,
                    }, True
                at = ledger.step_at(self.run, int(point["step"])) or {"step": 0, "tokens": 0.0, "samples": 0.0}
                base = {
                    "step": point["step"],
                    "tokens": point.get("tokens", at["tokens"] or 0.0),
                    "samples": point.get("samples", at["samples"] or 0.0),
                    "wall_s": wall,
                }
                if at["step"] != point["step"] and "tokens" not in point:
                    log.warning(
                        "yieldgate: run %r resumes at step %d, but the ledger's last record before it is step "
                        "%d: tokens continue from that record's %g; pass tokens= from the checkpoint to be "
                        "exact",
                        self.run,
                        point["step"],
                        at["step"],
                        base["tokens"],
                    )
                ledger.supersede(
                    self.run, int(point["step"]), resume={k: base[k] for k in ("step", "tokens", "samples")}
                )
                return base, False
        except (InputError, RunInUse, NetworkFilesystem, LedgerRefused):
            raise  # configuration errors: before the first step, never once training runs
        except Exception as exc:  # noqa: BLE001 - a locked or unwritable ledger must not stop training
            if self.run is None:  # the writer may still reach the ledger later: the run needs a name
                self.run = readable_name(int(time.time()) % 100_000)
            self._fault("opening the run", exc)
        return base, False

    def note(self, key: str, value: Any) -> None:
        """Record how the run was made under `key` (a JSON value): `Ledger.meta(run)[key]` (rank 0 only)."""
        if self.rank == 0:
            self._meta(key, value)

    def record_batch_check(self, result: BatchCheckResult) -> None:
        """Keep a small-batch baseline check (`track.batch_check.batch_size_check`) with the run, where
        `yieldgate diagnose` reads it (cause `throughput_altered_learning` when it says learning was altered)."""
        self.note("batch_check", dataclasses.asdict(result))

    def _meta(self, key: str, value: Any) -> None:
        try:
            with Ledger(self.location, durable=True) as ledger:
                ledger.set_meta(self.run, key, value)
        except Exception as exc:  # noqa: BLE001 - contained: the run goes on without the note
            self._fault("recording run meta", exc)

    def _mfu_setup(self, model: nn.Module | None) -> tuple[Callable[[float], float | None], dict[str, Any]]:
        """The MFU of a tokens/s rate, and how it is made (the run's `mfu` meta). FLOPs per token come from the
        manifest, else from the PaLM formula on the model's shape, else, for a model the Tracker holds on a
        device with a known peak, from `FlopCount` over one step of the loop (`self._flops`)."""
        shape = _model_shape(model, self.manifest)
        fpt = shape.get("flops_per_token")
        formula = "given: model.flops_per_token in the manifest" if fpt is not None else None
        if fpt is None and all(shape.get(k) for k in ("n", "layers", "heads", "head_dim", "context")):
            fpt = flops_per_token(
                non_embedding_params=shape["n"],
                layers=shape["layers"],
                heads=shape["heads"],
                head_dim=shape["head_dim"],
                context=shape["context"],
            )
        hw = self.manifest.hardware if self.manifest else None
        precision = self.manifest.optimisation.precision if self.manifest and self.manifest.optimisation else None
        if precision is None or (precision == "fp32" and model is not None):
            dtype = next(iter(model.parameters())).dtype if model is not None else torch.float32
            tf32 = self.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32
            precision = hardware.dtype_name(dtype, tf32=tf32)
        name = (hw.device_kind if hw and hw.device_kind else None) or hardware.device_name(self.device)
        peak = hardware.peak_flops(name, precision, override=hw.peak_flops if hw else None)
        devices = hw.device_count if hw and hw.device_count > 1 else self.world
        if fpt is None and model is not None and peak is not None:
            formula = COUNTED_FLOPS
            self._flops = FlopCount()
        probe = mfu(
            tokens_per_s=0.0,
            flops_per_token=fpt,
            peak_flops=peak.flops if peak else None,
            devices=devices,
            dtype=precision,
            architecture=shape["architecture"],
            formula=formula,
        )
        meta = {
            "formula": probe.formula,
            "attention": probe.attention,
            "flops_per_token": fpt,
            "dtype": precision,
            "device": name,
            "devices": devices,
            "peak_flops": peak.flops if peak else None,
            "peak_source": peak.source if peak else None,
            "flag": probe.flag,
            "shape": {k: shape.get(k) for k in ("n", "layers", "heads", "head_dim", "context")},
        }
        if self._flops is not None:
            meta["flag"] = "counting"  # until the first whole step is counted
        elif probe.flag != "ok" or peak is None:
            self._unmeasured("mfu", _MFU_WHY.get(probe.flag, probe.flag).format(device=name, dtype=precision))
            return (lambda rate: None), meta
        self._fpt = fpt
        impossible, peak_flops = [False], peak.flops if peak else math.nan

        def of(rate: float) -> float | None:
            if self._fpt is None:
                return None
            value = mfu(
                tokens_per_s=rate,
                flops_per_token=self._fpt,
                peak_flops=peak_flops,
                devices=devices,
                dtype=precision,
                formula=formula,
            ).value
            if value is None and not impossible[0]:
                impossible[0] = True
                log.warning(
                    "yieldgate: MFU above 100%% for run %r (tokens/s %.3g); check the peak or the model "
                    "shape; such values are left out",
                    self.run,
                    rate,
                )
            return value

        return of, meta

    def _count_flops(self, tokens: float) -> None:
        """One step of `FlopCount`: once a whole step is counted, MFU is recorded from the next rows on (the
        meta says so), or, when nothing was counted, it says why."""
        assert self._flops is not None
        counted = self._flops.step(tokens)
        if counted is None:
            return
        self._flops = None
        meta = {
            **self._mfu_meta,
            "flops_per_token": counted or None,
            "counted_at_step": self._step,
            "flag": "ok" if counted else "unknown_model",
        }
        if counted:
            self._fpt = counted
        else:
            self._unmeasured(
                "mfu",
                "torch's FLOP counter saw no matmul in a training step (a compiled model?); give "
                "model.flops_per_token in the manifest",
            )
        self._mfu_meta = meta
        if self.rank == 0:  # off the training thread: a ledger write may wait on a lock
            threading.Thread(target=self._meta, args=("mfu", meta), name="yieldgate-meta", daemon=True).start()

    def _unmeasured(self, signal: str, why: str) -> None:
        """A signal this run cannot record: said once (logging) and kept in the run's meta (`unmeasured`), where
        `yieldgate show` and `yieldgate diagnose` repeat it."""
        if self._unmeasured_why.get(signal) == why:
            return
        self._unmeasured_why[signal] = why
        log.warning("yieldgate: %s not recorded for run %r: %s", signal, self.run, why)
        if self.rank == 0 and self._started:  # before that, the constructor writes the meta itself
            threading.Thread(
                target=self._meta, args=("unmeasured", dict(self._unmeasured_why)), name="yieldgate-meta", daemon=True
            ).start()

    # -- the per-step path ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def checkpoint(self) -> Iterator[None]:
        """Time a checkpoint save, `with tr.checkpoint(): torch.save(state, path)`: its seconds go into the record
        of the step just done as `time/checkpoint_s` (into the next step's when that record has left already),
        where goodput (`yieldgate show`) counts them as time not training."""
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            rows = self._pending.rows
            if rows and rows[-1].step == self._step:  # not shipped yet: the step it follows
                row = rows[-1]
                values = row.values = dict(row.values or {})
                values[CHECKPOINT_KEY] = values.get(CHECKPOINT_KEY, 0.0) + seconds
            else:
                self._checkpoint_s += seconds

    def batches(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield from `iterable`, timing each wait for the next batch (the step's `data_wait_s`)."""
        self._batches_used = True
        it = iter(iterable)
        while True:
            start = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            self._wait += time.perf_counter() - start
            yield batch

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

    @_contained
    def step(
        self,
        *,
        tokens: int,
        samples: int | None = None,
        loss: torch.Tensor | float | None = None,
        lr: float | None = None,
        grad_norm: torch.Tensor | float | None = None,
        clipped: bool | None = None,
        sources: Mapping[str, int] | None = None,
        sample_ids: Any = None,
        extras: Mapping[str, float | torch.Tensor] | None = None,
        step: int | None = None,
        data_wait_s: float | None = None,
    ) -> None:
        """Record one optimizer step: `tokens` and `samples` accepted in this step (on this rank), the loss,
        learning rate (default: the optimizer's first group), gradient norm (pre-clipping), per-source token
        counts and the ids (or content hashes) of the samples, for the stream-duplicate counter.

        `step` numbers the step as the framework does (default: one more than the last); `data_wait_s` gives
        the wait for data when the loop does not iterate through `batches()` (otherwise it stays unrecorded)."""
        now = time.perf_counter()
        # Arguments first, nothing changed yet: a step refused here leaves no trace in the counters. Once the step
        # counts, a bad optional value (an extra that is no number) is left out of its row and reported, and the
        # step's tokens still count: a row that never reaches the ledger is a gap, never an offset.
        n_tokens, n_samples = float(tokens), float(samples if samples is not None else 0)
        # A count that is no count (nan, inf, negative) would poison the running total for the rest of the run:
        # this step adds none, and says so.
        uncounted = [name for name, n in (("tokens", n_tokens), ("samples", n_samples)) if not 0 <= n < math.inf]
        n_tokens = n_tokens if "tokens" not in uncounted else 0.0
        n_samples = n_samples if "samples" not in uncounted else 0.0
        number = self._step + 1 if step is None else int(step)
        counts = {source: float(n) for source, n in sources.items()} if sources else None
        values, bad = {}, []
        if self._checkpoint_s:
            values[CHECKPOINT_KEY], self._checkpoint_s = self._checkpoint_s, 0.0
        for key, value in (("loss", loss), ("grad_norm", grad_norm), *(extras or {}).items()):
            if value is not None and not isinstance(value, torch.Tensor):
                try:
                    values[key] = float(value)
                except (TypeError, ValueError):
                    bad.append(key)
        rebase, self._rebase = self._rebase and step is not None, False
        # Running totals on the training thread (host floats), shipped with every row: the writer never sums
        # the rows it happens to receive.
        self._tokens_total += n_tokens
        self._samples_total += n_samples
        if counts:
            for source, n in counts.items():
                counts[source] = self._source_totals[source] = self._source_totals.get(source, 0.0) + n
        if step is not None and not rebase and (number < 0 or (self._numbered and number <= self._step)):
            # A step numbered at or before the last one recorded would replace it, or land before rows with more
            # tokens: its row is left out (a gap), its counts stay in the totals (never an offset).
            self._fault(
                "step numbering",
                InputError(
                    f"step {number} is not after step {self._step}, the last recorded: a Tracker's steps increase "
                    "(Tracker(resume=True, step=...) restarts from a checkpoint); its row is left out, its tokens "
                    "counted"
                ),
            )
            return
        self._step, self._numbered = number, True
        if data_wait_s is None and self._batches_used:
            data_wait_s = self._wait
        i = len(self._pending.rows)
        if lr is None and self._optimizer is not None:
            lr = self._optimizer.param_groups[0]["lr"]
        if isinstance(lr, torch.Tensor):
            self._pending.keep_step("lr", i, lr)
            lr = None
        row = StepRow(
            self._step,
            n_tokens,
            n_samples,
            now,
            now - self._last_step_t,
            data_wait_s,
            lr,
            None if clipped is None else float(clipped),
            counts,
            sample_ids,
            values or None,
            rebase=rebase,
            tokens_total=self._tokens_total,
            samples_total=self._samples_total,
        )
        for key, value in (("loss", loss), ("grad_norm", grad_norm), *(extras or {}).items()):
            if isinstance(value, torch.Tensor):
                self._pending.keep_step(key, i, value)
        scale = self._scale_tensor()
        if scale is not None:
            self._pending.keep_step("signals/loss_scale", i, scale.float().reshape(()).clone())
        self._pending.rows.append(row)
        if self._grad is not None:
            self._learning_signals(i, grad_norm, tokens)
        if bad:
            self._fault(
                "step",
                InputError(
                    f"step {number}: {', '.join(map(repr, bad))} must be numbers; left out "
                    "of the row, the step's tokens counted"
                ),
            )
        if uncounted:
            self._fault(
                "step counts",
                InputError(
                    f"step {number}: {' and '.join(uncounted)} must be counts >= 0, got "
                    + ", ".join(f"{n}={v!r}" for n, v in (("tokens", tokens), ("samples", samples)) if n in uncounted)
                    + "; this step adds none to the run's totals"
                ),
            )
        self._wait = 0.0
        due = len(self._pending.rows) >= self.config.log_every_steps
        if not due and self._group is None:
            due = now - self._last_ship_t >= self.config.log_every_s
        if due:
            self._ship()
        if self._flops is not None:
            self._count_flops(n_tokens)
        self._last_step_t = time.perf_counter()

    def _learning_signals(self, i: int, grad_norm: Any, tokens: int) -> None:
        assert self._grad is not None
        cfg = self.config
        norm = grad_norm if isinstance(grad_norm, (torch.Tensor, float, int)) else None
        sig = self._grad.collect(norm)
        k, small, big = sig["microbatches"], sig["small_sq"], sig["big_sq"]
        # b: tokens of one microbatch on this rank; B: tokens of the whole step over all ranks (per-rank tokens
        # x world size: GNS needs the batch the gradient was averaged over, not the accepted-token count).
        b, big_b = float(tokens) / max(k, 1), float(tokens) * self.world
        # Per-layer values are kept on layer steps only (and per-layer GNS smoothed over those steps); off them
        # the per-layer norms may exist (no pre-clip norm was passed) but are not recorded.
        layers = big if self._step % cfg.layer_every == 0 else None
        if small is not None and sig["big_total"] is not None and big_b > b > 0:
            self._pending.keep_step(
                "signals/gns", i, self._smoothed_gns("global", small.sum(), sig["big_total"], b, big_b)
            )
            if layers is not None:
                self._pending.keep_layers("signals/gns", i, self._smoothed_gns("layers", small, layers, b, big_b))
        elif k == 1 and self.world == 1:
            self._unmeasured(
                "signals/gns",
                "needs at least 2 microbatches (backward passes) per optimizer step, or "
                "several processes: this run has one",
            )
        if layers is not None:
            self._pending.keep_layers("signals/grad_norm", i, layers.sqrt())
        if sig["update_ratio"] is not None:
            self._pending.keep_layers("signals/update_ratio", i, sig["update_ratio"])
        # Arm the next step: weight snapshot and per-layer norms on layer steps; off them, |g_B|^2 comes from
        # the pre-clip norm the loop passes (no extra pass over the gradients).
        layer_step = (self._step + 1) % cfg.layer_every == 0
        self._grad.want_update_ratio(layer_step)
        self._grad.layers_due = layer_step
        self._grad.small_due = self._gns_due(self._step + 1)
        self._grad.total_from_norm = norm is not None
        if self._entropy_ctx is not None:
            self._entropy_ctx.__exit__(None, None, None)
            for name, values in (self._entropy_store or {}).items():
                if values:
                    self._pending.keep_entropy(name, i, torch.stack(values).mean())
            self._entropy_ctx = self._entropy_store = None
        if (self._step + 1) % cfg.entropy_every == 0 and self._entropy_layers:
            self._entropy_ctx = activation_entropy(self._entropy_layers, self.busy)
            self._entropy_store = self._entropy_ctx.__enter__()

    def _gns_due(self, step: int) -> bool:
        return step % self.config.gns_every == 0 or step % self.config.layer_every == 0

    def _smoothed_gns(self, key: str, small: torch.Tensor, big: torch.Tensor, b: float, big_b: float) -> torch.Tensor:
        """B_simple = tr(Σ)/|G|^2 from EMAs of numerator and denominator kept apart (DESIGN.md); NaN while the
        smoothed |G|^2 is not positive. Device tensors throughout."""
        est = gns_estimate(small, big, b, big_b)
        beta = self.config.gns_ema
        if key not in self._gns_state:
            self._gns_state[key] = (est.g2, est.trace)
        else:
            g2, tr = self._gns_state[key]
            self._gns_state[key] = (beta * g2 + (1 - beta) * est.g2, beta * tr + (1 - beta) * est.trace)
        g2, tr = self._gns_state[key]
        return torch.where(g2 > 0, tr / g2.clamp_min(1e-30), torch.full_like(g2, float("nan")))

    @_whole
    def _ship(self) -> None:
        """Start the host copy of buffered tensors and hand the packet to the writer."""
        # Non-blocking copies: the writer thread waits for them, the training thread never does.
        packet = self._pending.take(cuda=self.device.type == "cuda")
        self._last_ship_t = time.perf_counter()
        if packet.rows or packet.evals:
            self._writer.submit(packet)

    def _gather(self, local: np.ndarray) -> np.ndarray:
        """All-gather this rank's [fields, rows] counters on the tracker's gloo group (writer thread)."""
        tensor = torch.from_numpy(local)
        out = [torch.empty_like(tensor) for _ in range(self.world)]
        torch.distributed.all_gather(out, tensor, group=self._group)
        return torch.stack(out).numpy()

    @_contained
    def due(self, *, every_tokens: float | None = None, every_steps: int | None = None) -> bool:
        """True once each time this rank's tokens (x world size) or the step count pass a multiple of the
        interval: the place to evaluate. All ranks agree when their token counts are equal."""
        if every_steps is not None:
            return self._step % every_steps == 0
        if every_tokens is None or every_tokens <= 0:
            raise InputError(f"due() needs every_tokens > 0 or every_steps, got {every_tokens}")
        mark = int(self._tokens_total * self.world // every_tokens)
        key = ("tokens", int(every_tokens))
        if mark > self._due_marks.get(key, 0):
            self._due_marks[key] = mark
            return True
        return False

    @_contained
    def eval(self, metrics: Mapping[str, float | torch.Tensor], *, step: int | None = None) -> None:
        """Record eval results at the current step (`<task>/<metric>` keys: `val/loss`, `val/code/loss`,
        `lambada_openai/acc`; the names the importers read are taken too: `val_loss` and `eval_loss` are
        `val/loss`, `eval_accuracy` is `val/acc`). Tensors are moved to the host off the training thread. A key
        that names no evaluation is left out with one report; the others are kept."""
        at = self._step if step is None else int(step)
        if self._flops is not None:
            self._flops.spoil()
        values: dict[str, Any] = {}
        bad = []
        for name, value in metrics.items():
            key = _eval_key(name)
            if key is None:
                bad.append(name)
                continue
            unsafe = unsafe_character(key)
            if unsafe is not None:  # left out, reported; the call's other results are kept
                self._fault("eval", InputError(f"eval key {key!r} is not allowed: it holds {unsafe}; left out"))
                continue
            if isinstance(value, torch.Tensor):
                values[key] = self._pending.eval_value(value)
            else:
                values[key] = value
        if bad:
            self._fault(
                "eval",
                InputError(
                    f"eval key(s) {', '.join(map(repr, bad))} left out: a key is "
                    "'<task>/<metric>', e.g. 'val/loss' or 'arc_easy/acc'"
                ),
            )
        if not values:
            return
        self._pending.evals.append((at, values))
        if self._group is None:
            self._ship()
        # Distributed: the eval goes with the next regular packet, so that every rank ships the same packets
        # (their counters are gathered packet by packet) even when only rank 0 evaluates.

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

    # -- lifecycle ------------------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, Any]:
        """Faults contained; rows written, dropped and waiting in a spill file (and its path); seconds spent
        on the training thread."""
        return {
            "faults": self.faults,
            "written_rows": self._writer.written_rows,
            "dropped_rows": self._writer.dropped_rows,
            "spilled_rows": self._writer.spilled_rows,
            "spill_path": self._writer.spill_path,
            "busy_s": self.busy.seconds,
        }

    @_whole
    def close(self, status: str = "finished", *, reason: str | None = None) -> None:
        """Flush everything, stop the writer and record the run's status (with `reason`, what ended it, as a
        `fault` event)."""
        if self._closed:
            return
        self._closed = True
        _live.discard(self)
        try:
            flops, self._flops = self._flops, None
            if flops is not None:  # the run ended inside the counted step
                flops.close()
            self._ship()
        except Exception as exc:  # noqa: BLE001 - contained
            self._fault("close", exc)
        self._writer.close(status if self.rank == 0 else None, reason=reason)
        if self._checkpoint_s and self.rank == 0 and self._step:  # a save after the last step's record left
            try:
                with Ledger(self.location, durable=True) as ledger:
                    ledger.append_steps(self.run, {"step": [self._step], CHECKPOINT_KEY: [self._checkpoint_s]})
            except Exception as exc:  # noqa: BLE001 - contained
                self._fault("recording the last checkpoint save", exc)
        if self._group is not None:
            # Our gloo group goes now, not at interpreter exit, where destroying it with its threads still
            # joinable aborts the process ("terminate called without an active exception").
            try:
                torch.distributed.destroy_process_group(self._group)
            except (RuntimeError, ValueError) as exc:
                self._fault("closing the tracker's process group", exc)
            self._group = None
        if self._grad is not None:
            self._grad.remove()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close("finished")
        else:
            # What ended the run is kept with it (a dead rank's collective error, an OOM, a NaN guard).
            reason = f"{exc_type.__name__}: {str(exc).strip()}".splitlines()[0][:500]
            self.close("killed" if issubclass(exc_type, KeyboardInterrupt) else "failed", reason=reason)
