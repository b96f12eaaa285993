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
tensors and hands the packet (`packet.py`) to a background writer (`writer.py`), which derives the step
records' columns (`derive.py`) and writes them. No `.item()`, `.cpu()`, `.tolist()` or collective runs in the
per-step path.

The Tracker never raises into training once it runs: an error inside it is reported once (logging, with the
cause), counted in `faults`, and the run goes on (`guard.py`). Configuration errors (a malformed manifest, a run
name already taken) are raised by the constructor, before the first step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import torch
from torch import nn

from yieldgate.aliases import guess
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger, default_location
from yieldgate.manifest import Manifest
from yieldgate.names import CHECKPOINT_KEY, check_run_name, unsafe_character
from yieldgate.track.batch_check import BatchCheckResult
from yieldgate.track.config import TrackerConfig
from yieldgate.track.governed import governed
from yieldgate.track.guard import contained, install_sigterm, live, whole
from yieldgate.track.mfu import matmul_params
from yieldgate.track.packet import StepRow
from yieldgate.track.resume import resume_point
from yieldgate.track.setup import TrackerSetup, from_environment, load_run_manifest
from yieldgate.track.signals import ENTROPY_UNSEEN, activation_entropy, gns_estimate
from yieldgate.track.writer import CLOSE_BUSY_TIMEOUT_S

if TYPE_CHECKING:
    from yieldgate.gate.draft import RecordedDecision

__all__ = ["Tracker", "TrackerConfig", "matmul_params"]

log = logging.getLogger("yieldgate.track")
T = TypeVar("T")


def _number(what: str, value: Any) -> float:
    """A step's count as a float, or an InputError naming the argument: the step is then refused whole."""
    try:
        return float(value)
    except (TypeError, ValueError):
        shown = repr(value)
        raise InputError(
            f"{what} must be a number, got {shown if len(shown) <= 60 else shown[:59] + '…'}; the step is left out"
        ) from None


def _eval_key(name: Any) -> str | None:
    """`<task>/<metric>` for an eval key as given: itself, or the eval an importer would map the name to
    (`val_loss` -> `val/loss`); None when it names no evaluation. `guess` is imported with this module: imported
    here, at the first `Tracker.eval`, it cost that call 30-120 ms on the training thread."""
    if not isinstance(name, str):
        return None
    task, _, metric = name.rpartition("/")
    if task and metric:
        return name
    target = guess(name)
    return target.key if target.kind == "eval" else None


class Tracker(TrackerSetup):
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
        suffix_if_taken: bool = True,
        policy: Any = None,
    ) -> None:
        """`run` names the run; None gives it a readable unique name (`brisk-otter-7`, in `tracker.run`). A name
        already in the ledger is recorded as a new run under the first free `<run>-2`, `<run>-3`, ... (a training
        script run again makes a second run, as W&B and MLflow do; said in one line), unless `resume` (below)
        continues it; `suffix_if_taken=False` refuses a taken name instead. The name is chosen in the transaction
        that creates the run, so two processes starting at once get two names.

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
        `yieldgate.ledger.owners`: dead means its process is gone, or no heartbeat for `STALE_AFTER_S`).

        `policy` (a policy file's path, its content as a mapping, or a `Policy`; None: `$YIELDGATE_POLICY` where
        set) governs the run: at each evaluation the stage gate decides on it, off the training thread, and a hold
        sets `should_stop` (`gate/live.py`). A policy that cannot govern the run is refused here."""
        if signals not in ("throughput", "full"):
            raise InputError(f"signals must be 'throughput' or 'full', got {signals!r}")
        point = resume_point(step, tokens, samples)
        run, manifest, resume, takeover, owner = from_environment(run, manifest, resume, takeover)
        # None until rank 0 picks a free name while it creates the run (`_open_run`).
        self.run: str = check_run_name(run) if run is not None else None  # type: ignore[assignment]
        self._pick_name = run is None or (suffix_if_taken and not resume and not takeover)
        self.config = config or TrackerConfig()
        self.signals = signals
        self.location = str(ledger) if ledger is not None else default_location()
        self.manifest = load_run_manifest(manifest, hparams)
        self._init_state(scaler, optimizer)
        self._governed = governed(policy, self.manifest, self._fault)  # refused before the run is made
        if owner is not None:  # a campaign's probe: the run is written as the worker that owns it
            self.owner = owner
        self._join_ranks()
        param = next(iter(model.parameters()), None) if model is not None else None
        if device is not None:
            self.device = torch.device(device)
        else:
            self.device = param.device if param is not None else torch.device("cpu")
        start = self._start(resume, takeover, point)
        telemetry = self._plan_and_note(model)
        self._govern_from(start)
        layer_names = self._watch_learning(model, optimizer)
        self._writer = self._make_writer(start, layer_names, telemetry)
        self._writer.start()
        self._started = True
        live.add(self)
        install_sigterm()

    # -- notes kept with the run ----------------------------------------------------------------------

    def note(self, key: str, value: Any) -> None:
        """Record how the run was made under `key` (a JSON value): `Ledger.meta(run)[key]` (rank 0 only)."""
        if self.rank == 0:
            self._meta(key, value)

    def record_batch_check(self, result: BatchCheckResult) -> None:
        """Keep a small-batch baseline check (`track.batch_check.batch_size_check`) with the run, where
        `yieldgate diagnose` reads it (cause `throughput_altered_learning` when it says learning was altered)."""
        self.note("batch_check", dataclasses.asdict(result))

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

    @contained
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
        n_tokens, n_samples = _number("tokens", tokens), _number("samples", samples if samples is not None else 0)
        # A count that is no count (nan, inf, negative) would poison the running total for the rest of the run:
        # this step adds none, and says so.
        uncounted = [name for name, n in (("tokens", n_tokens), ("samples", n_samples)) if not 0 <= n < math.inf]
        n_tokens = n_tokens if "tokens" not in uncounted else 0.0
        n_samples = n_samples if "samples" not in uncounted else 0.0
        number = self._step + 1 if step is None else int(step)
        counts = {source: _number(f"sources[{source!r}]", n) for source, n in sources.items()} if sources else None
        named = (("loss", loss), ("grad_norm", grad_norm), *(extras or {}).items())
        values, bad = self._host_values(named)
        rebase, self._rebase = self._rebase and step is not None, False
        self._count(n_tokens, n_samples, counts)
        self._steps_taken += 1
        if step is not None and not rebase and (number < 0 or (self._numbered and number <= self._step)):
            self._misnumbered(number)
            return
        self._step, self._numbered = number, True
        if data_wait_s is None and self._batches_used:
            data_wait_s = self._wait
        i = len(self._pending.rows)
        if lr is None and self._optimizer is not None:
            lr = self._optimizer.param_groups[0]["lr"]
        if isinstance(lr, torch.Tensor):
            if lr.numel() == 1:
                self._pending.keep_step("lr", i, lr.reshape(()))
            else:
                bad.append(f"'lr' (a tensor of shape {list(lr.shape)})")
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
        self._keep_tensors(i, named)
        self._pending.rows.append(row)
        if self._grad is not None:
            self._learning_signals(i, grad_norm, tokens)
        self._report_step(number, bad, uncounted, tokens, samples)
        self._wait = 0.0
        if self._ship_due(now):
            self._ship()
        if self._flops is not None:
            self._count_flops(n_tokens)
        self._last_step_t = time.perf_counter()

    def _ship_due(self, now: float) -> bool:
        """Every `log_every_steps` steps, or `log_every_s` seconds in a single process (ranks ship on steps only:
        their counters are gathered packet by packet)."""
        if len(self._pending.rows) >= self.config.log_every_steps:
            return True
        return self._group is None and now - self._last_ship_t >= self.config.log_every_s

    def _host_values(self, named: Iterable[tuple[str, Any]]) -> tuple[dict[str, float], list[str]]:
        """The step's values given as host numbers, by key (with a checkpoint save's seconds waiting for a row),
        and those that are no numbers (named, a tensor of several values with its shape). Tensors of one value
        are left for `_keep_tensors`."""
        values: dict[str, float] = {}
        bad = []
        if self._checkpoint_s:
            values[CHECKPOINT_KEY], self._checkpoint_s = self._checkpoint_s, 0.0
        for key, value in named:
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:  # its size is metadata: no host sync (a per-sample loss not reduced)
                    bad.append(f"{key!r} (a tensor of shape {list(value.shape)}: reduce it, e.g. .mean())")
            elif value is not None:
                try:
                    values[key] = float(value)
                except (TypeError, ValueError):
                    bad.append(repr(key))
        return values, bad

    def _count(self, tokens: float, samples: float, counts: dict[str, float] | None) -> None:
        """Add a step to the running totals on the training thread (host floats), shipped with every row: the
        writer never sums the rows it happens to receive. `counts` (per source) become the sources' totals."""
        self._tokens_total += tokens
        self._samples_total += samples
        if counts:
            for source, n in counts.items():
                counts[source] = self._source_totals[source] = self._source_totals.get(source, 0.0) + n

    def _misnumbered(self, number: int) -> None:
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

    def _keep_tensors(self, i: int, named: Iterable[tuple[str, Any]]) -> None:
        """Hold the step's device values for row `i`, and GradScaler's scale (all without a host sync)."""
        for key, value in named:
            if isinstance(value, torch.Tensor) and value.numel() == 1:  # others: left out (`_host_values`)
                self._pending.keep_step(key, i, value.reshape(()))
        scale = self._scale_tensor()
        if scale is not None:
            self._pending.keep_step("signals/loss_scale", i, scale.float().reshape(()).clone())

    def _report_step(self, number: int, bad: list[str], uncounted: list[str], tokens: Any, samples: Any) -> None:
        if bad:
            self._fault(
                "step",
                InputError(
                    f"step {number}: {', '.join(bad)} must be numbers; left out of the row, the step's tokens counted"
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
        self._sample_entropy(i)

    def _sample_entropy(self, i: int) -> None:
        """Keep the activation entropy sampled over the step just done; arm the sampling of the next one when due."""
        if self._entropy_ctx is not None:
            self._entropy_ctx.__exit__(None, None, None)
            stores = self._entropy_store or {}
            for name, values in stores.items():
                if values:
                    self._pending.keep_entropy(name, i, torch.stack(values).mean())
            if not any(stores.values()):
                self._unmeasured("signals/act_entropy", ENTROPY_UNSEEN)
            self._entropy_ctx = self._entropy_store = None
        if (self._step + 1) % self.config.entropy_every == 0 and self._entropy_layers:
            self._entropy_ctx = activation_entropy(self._entropy_layers, self.busy)
            self._entropy_store = self._entropy_ctx.__enter__()

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

    @whole
    def _ship(self) -> None:
        """Start the host copy of buffered tensors and hand the packet to the writer."""
        # Non-blocking copies: the writer thread waits for them, the training thread never does.
        packet = self._pending.take(cuda=self.device.type == "cuda")
        self._last_ship_t = time.perf_counter()
        if packet.rows or packet.evals:
            self._writer.submit(packet)

    @contained
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

    @contained
    def eval(self, metrics: Mapping[str, float | torch.Tensor], *, step: int | None = None) -> None:
        """Record eval results at the current step (`<task>/<metric>` keys: `val/loss`, `val/code/loss`,
        `lambada_openai/acc`; the names the importers read are taken too: `val_loss` and `eval_loss` are
        `val/loss`, `eval_accuracy` is `val/acc`). Tensors are moved to the host off the training thread. A key
        that names no evaluation is left out with one report; the others are kept."""
        at = self._step if step is None else int(step)
        if self._flops is not None:
            self._flops.spoil()
        values: dict[str, Any] = {}
        bad, unusable = [], []
        for name, value in metrics.items():
            key = _eval_key(name)
            if key is None:
                bad.append(name)
                continue
            unsafe = unsafe_character(key)
            if unsafe is not None:  # left out, reported; the call's other results are kept
                self._fault("eval", InputError(f"eval key {key!r} is not allowed: it holds {unsafe}; left out"))
                continue
            if isinstance(value, torch.Tensor) and value.numel() == 1:
                values[key] = self._pending.eval_value(value)
            elif isinstance(value, torch.Tensor):
                unusable.append(f"{key!r} (a tensor of shape {list(value.shape)}: reduce it, e.g. .mean())")
            else:
                try:
                    values[key] = float(value)
                except (TypeError, ValueError):
                    unusable.append(f"{key!r} (got {type(value).__name__})")
        if unusable:
            self._fault("eval", InputError(f"eval value(s) {', '.join(unusable)} must be numbers; left out"))
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

    # -- lifecycle ------------------------------------------------------------------------------------

    @property
    def should_stop(self) -> bool:
        """The run's governor (`policy=`) held it and its policy says `on_hold: stop`: end the loop (the callbacks
        stop their trainers). Set at the evaluation that decided, off the training thread; False when ungoverned."""
        return self._governed is not None and self._governed.should_stop

    @property
    def decision(self) -> RecordedDecision | None:
        """The last decision the run's governor stored (its id, rationale, evidence); None before one, or ungoverned."""
        return self._governed.decision if self._governed is not None else None

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

    @whole
    def close(self, status: str = "finished", *, reason: str | None = None) -> None:
        """Flush everything, stop the writer and record the run's status (with `reason`, what ended it, as a
        `fault` event)."""
        if self._closed:
            return
        self._closed = True
        live.discard(self)
        if self.rank == 0 and self._steps_taken and not self._tokens_total:
            log.warning(
                "yieldgate: run %r recorded no tokens (tokens=0 on all %d steps): it has no token axis, so no yield "
                "per token and no compare at equal tokens; give tr.step(tokens=...) the tokens each step trained on",
                self.run,
                self._steps_taken,
            )
        try:
            flops, self._flops = self._flops, None
            if flops is not None:  # the run ended inside the counted step
                flops.close()
            self._ship()
        except Exception as exc:  # noqa: BLE001 - contained
            self._fault("close", exc)
        self._wait_for_meta(CLOSE_BUSY_TIMEOUT_S)
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
