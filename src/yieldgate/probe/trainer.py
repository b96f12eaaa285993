"""The probe trainer: a small real training of the reference GPT on a resolved recipe, into the ledger.

Warmup-stable-decay schedule (constant learning rate, then a short cooldown: within-run yields stay
readable), the Tracker with full learning signals, fixed seeds (deterministic for a seed and thread count),
and a versioned eval portfolio: per source held-out loss, bits per byte and next-token accuracy, and two
hard slices, the held-out sequences of rarest tokens (top decile by mean token rarity) and the Folio-spelling
passages, because the first thing a faster pipeline breaks is the tail.

Fault hooks for the diagnosis work (all off by default) live in `Faults`.
"""

from __future__ import annotations

import math
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from yieldgate.data.recipe import ResolvedRecipe, SourceData
from yieldgate.errors import InputError
from yieldgate.manifest import EvalPortfolio, Hardware, Manifest, ModelConfig, Optimisation
from yieldgate.probe.cooldown import cooldown_probe, save_checkpoint
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.track import Tracker, TrackerConfig

__all__ = ["Faults", "ProbeConfig", "train_probe", "cooldown_probe", "run_steps", "PORTFOLIO"]

PORTFOLIO = ("probe", "1")  # name, version: bump the version when a task or metric changes


@dataclass(frozen=True, kw_only=True)
class Faults:
    """Injected faults, each off by default (for the diagnosis fault-injection suite)."""

    lr_multiplier: float = 1.0
    """Multiply the learning rate (x30: too high; /100: too low)."""
    no_warmup: bool = False
    """Start at the peak learning rate."""
    nan_at_step: int | None = None
    """Make this step's gradients NaN (the trainer skips the update, as a guarded trainer does)."""
    sleep_loader_s: float = 0.0
    """Seconds the data loader sleeps before each batch (an infrastructure stall)."""
    sleep_from_step: int = 1
    """First step whose batch the loader sleeps before (a stall that starts mid-run)."""
    unshuffled: bool = False
    """Present each source's windows in order, sources one after another (a non-i.i.d. stream)."""
    loop_examples: int | None = None
    """Sample only the first N windows, looping (the 'same 200 examples' failure)."""
    repeat_source: tuple[str, float] | None = None
    """(source, epochs): keep only as many of the source's windows as the budget passes `epochs` times. The
    manifest records the source's unique tokens as the windows kept: the run declares its small source."""
    corrupt_at_step: int | None = None
    """Replace this step's batch with uniformly random token ids (a corrupted shard)."""
    inf_at_steps: tuple[int, ...] = ()
    """Make these steps' gradients inf; with `ProbeConfig.loss_scaler` the scaler skips them and backs off."""
    drift_to: Mapping[str, float] | None = None
    """Source weights the mixture creeps to by the end of the run, linearly from the recipe's weights; the
    manifest keeps the recipe's weights (a pipeline letting drift through)."""


@dataclass(frozen=True, kw_only=True)
class ProbeConfig:
    """One probe: budget, model, optimisation and seed."""

    tokens: int
    """Token budget."""
    seed: int = 0
    """Seed of the model init, the sampler and the eval draw."""
    batch_size: int = 16
    """Sequences per step."""
    microbatches: int = 2
    """Accumulation microbatches per step (two batch sizes per step: what the gradient noise scale needs)."""
    context: int = 64
    """Tokens per sequence."""
    layers: int = 2
    width: int = 64
    heads: int = 4
    lr: float = 3e-3
    """Peak learning rate."""
    warmup_frac: float = 0.05
    """Share of steps warming up."""
    decay_frac: float = 0.2
    """Share of steps in the final linear cooldown (to 10% of the peak)."""
    evals: int = 8
    """Evaluations over the budget (plus one at step 0)."""
    eval_sequences: int = 32
    """Held-out sequences per source per evaluation (drawn from token positions: see `eval_documents`)."""
    eval_documents: int | None = None
    """Score this many whole held-out documents per source instead of `eval_sequences` windows: every token of
    each but its first, so the text scored is the same whatever the tokenizer. Windows drawn at token positions
    fall on different text under two recipes' tokenizers, and with a few dozen windows the difference of text
    outweighs the difference of data between close recipes; bits per byte on the same bytes does not."""
    eval_seed: int | None = None
    """Seed of the eval draw (None: `seed`). A campaign fixes it, so its probes differ by seed in training only and
    are scored on the same held-out sequences."""
    threads: int | None = None
    """torch threads (None: leave as is)."""
    eval_sources: tuple[str, ...] = ()
    """Sources whose held-out text makes the overall `val/loss`, `val/bpb` and the hard slices (empty: every
    source's): a campaign's common yardstick, so recipes that train on different sources are scored on the same
    text. Per-source evaluations (`val/<source>/...`) are made for every source either way."""
    loss_scaler: bool = False
    """Train through a dynamic loss scaler (torch.amp.GradScaler), as fp16 training does: a step with inf or
    NaN gradients is skipped and the scale backs off (recorded as `signals/loss_scale`, `signals/skipped_steps`)."""
    checkpoint: bool = True
    """Save the model, optimizer, loss-scaler and sampler state at the end of the probe (`probe.cooldown`: a file
    beside the ledger, about 12 bytes per parameter), so that a cooldown can continue it."""
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        for name in (
            "tokens",
            "batch_size",
            "microbatches",
            "context",
            "layers",
            "width",
            "heads",
            "evals",
            "eval_sequences",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"probe.{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_documents is not None and self.eval_documents < 1:
            raise InputError(f"probe.eval_documents must be >= 1 (or None), got {self.eval_documents}")
        if self.batch_size % self.microbatches:
            raise InputError(
                f"probe.batch_size ({self.batch_size}) must be a multiple of microbatches ({self.microbatches})"
            )
        if not 0 <= self.warmup_frac + self.decay_frac <= 1:
            raise InputError(
                f"probe.warmup_frac + decay_frac must be within [0, 1], got {self.warmup_frac} + {self.decay_frac}"
            )


def wsd(step: int, steps: int, cfg: ProbeConfig) -> float:
    """Warmup-stable-decay learning rate at `step` (1-based) of `steps`."""
    warm = 0 if cfg.faults.no_warmup else max(1, round(cfg.warmup_frac * steps))
    decay = round(cfg.decay_frac * steps)
    peak = cfg.lr * cfg.faults.lr_multiplier
    if step <= warm:
        return peak * step / warm
    if step > steps - decay:
        frac = (step - (steps - decay)) / max(decay, 1)
        return peak * (1.0 - 0.9 * frac)
    return peak


class _Sampler:
    """Windows of context + 1 tokens at fixed offsets of each source; sources drawn by weight."""

    def __init__(self, data: ResolvedRecipe, cfg: ProbeConfig, steps: int) -> None:
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.names = [n for n, s in data.sources.items() if len(s.train) > cfg.context + 1]
        if not self.names:
            raise InputError(f"no source has more than {cfg.context + 1} training tokens")
        self.tokens = {n: data.sources[n].train for n in self.names}
        weights = np.array([data.sources[n].weight for n in self.names], dtype=float)
        self.p = weights / weights.sum()
        self.p_end = self.p
        if cfg.faults.drift_to is not None:
            unknown = sorted(set(cfg.faults.drift_to) - set(self.names))
            if unknown:
                raise InputError(
                    f"faults.drift_to names unknown sources {', '.join(unknown)}; sources: {', '.join(self.names)}"
                )
            end = np.array([cfg.faults.drift_to.get(n, 0.0) for n in self.names], dtype=float)
            self.p_end = end / end.sum()
        self.windows: dict[str, np.ndarray] = {}
        for n in self.names:
            count = (len(self.tokens[n]) - 1) // cfg.context
            order = np.arange(count) if cfg.faults.unshuffled else self.rng.permutation(count)
            self.windows[n] = order
        if cfg.faults.repeat_source is not None:
            name, epochs = cfg.faults.repeat_source
            if name not in self.windows:
                raise InputError(
                    f"faults.repeat_source names unknown source {name!r}; sources: {', '.join(self.names)}"
                )
            share = self.p[self.names.index(name)]
            needed = max(1, int(steps * cfg.batch_size * share / epochs))
            self.windows[name] = self.windows[name][:needed]
        self.cursor = dict.fromkeys(self.names, 0)
        self.total = steps * cfg.batch_size
        self.drawn = 0
        curriculum = data.recipe.curriculum
        self.ordered = cfg.faults.unshuffled or curriculum.kind == "ordered_by_source"
        # Staged curriculum: (sequences drawn at which the stage ends, source probabilities of the stage).
        self.stages = []
        for stage in curriculum.stages if curriculum.kind == "staged" else []:
            w = np.array([stage.weights.get(n, 0.0) for n in self.names], dtype=float)
            if w.sum() <= 0:
                raise InputError(
                    f"curriculum stage ending at {stage.end(self.total * cfg.context):,.0f} tokens gives no weight "
                    f"to any source with data ({', '.join(self.names)})"
                )
            self.stages.append((stage.end(self.total * cfg.context) / cfg.context, w / w.sum()))

    def _source(self) -> int:
        if self.ordered:  # sources one after another, each for its share of the budget
            edges = np.cumsum(self.p) * self.total
            return min(int(np.searchsorted(edges, self.drawn, side="right")), len(self.names) - 1)
        frac = min(self.drawn / self.total, 1.0)  # a cooldown continuing the probe draws past its budget
        p = (1.0 - frac) * self.p + frac * self.p_end  # the recipe's weights, unless a drift fault creeps away
        if self.stages:  # the stage the stream is in; after the last one, the recipe's weights (as `plan` counts)
            p = next((w for end, w in self.stages if self.drawn < end), p)
        return int(self.rng.choice(len(self.names), p=p))

    def state(self) -> dict[str, Any]:
        """Where the stream stands: the generator's state, each source's cursor and the sequences drawn."""
        return {"rng": self.rng.bit_generator.state, "cursor": dict(self.cursor), "drawn": self.drawn}

    def load_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.cursor = dict(state["cursor"])
        self.drawn = int(state["drawn"])

    def batch(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, int], list[int]]:
        t = self.cfg.context
        rows, counts, ids = [], dict.fromkeys(self.names, 0), []
        for _ in range(self.cfg.batch_size):
            k = self._source()
            name = self.names[k]
            order = self.windows[name]
            limit = min(len(order), self.cfg.faults.loop_examples or len(order))
            w = int(order[self.cursor[name] % limit])
            self.cursor[name] += 1
            self.drawn += 1
            rows.append(self.tokens[name][w * t : w * t + t + 1])
            counts[name] += t
            ids.append(k << 32 | w)
        arr = torch.from_numpy(np.stack(rows).astype(np.int64))
        return arr[:, :-1], arr[:, 1:], counts, ids


class _Seq(NamedTuple):
    """One held-out row of the eval portfolio."""

    ids: np.ndarray
    """context + 1 token ids (a document's last row padded with 0)."""
    scored: np.ndarray
    """(context,) bool: which next-token predictions count."""
    nbytes: float
    """UTF-8 bytes of the scored tokens (for bits per byte)."""
    folio: bool


class _Portfolio:
    """The eval portfolio's fixed held-out sequences, drawn once per probe: `eval_sequences` windows per source
    at token positions, or (`eval_documents`) whole documents, the same text under any tokenizer."""

    def __init__(self, data: ResolvedRecipe, cfg: ProbeConfig) -> None:
        eval_seed = cfg.seed if cfg.eval_seed is None else cfg.eval_seed
        rng = np.random.default_rng(10_000 + eval_seed)
        t = cfg.context
        vocab = data.tokenizer.get_vocab_size()
        counts = np.bincount(np.concatenate([s.train for s in data.sources.values()]), minlength=vocab) + 1
        rarity = -np.log(counts / counts.sum())
        self.sets: dict[str, list[_Seq]] = {}
        self.documents: dict[str, list[int]] = {}
        """Source -> the held-out documents scored whole (`eval_documents`), by index."""
        for name, src in data.sources.items():
            if cfg.eval_documents:
                # Its own generator per source (seeded by the source's name): the same documents whatever other
                # sources the recipe has.
                pick = np.random.default_rng([10_000 + eval_seed, zlib.crc32(name.encode())]).permutation(
                    len(src.held_out)
                )[: cfg.eval_documents]
                self.documents[name] = sorted(int(i) for i in pick)
                seqs = [row for i in self.documents[name] for row in _document_rows(data, src, i, t)]
            else:
                seqs = []
                for doc, nbytes, tags in zip(src.held_out, src.held_out_bytes, src.held_out_tags, strict=True):
                    bpt = nbytes / max(len(doc), 1)
                    for w in range((len(doc) - 1) // t):
                        seqs.append(_Seq(doc[w * t : w * t + t + 1], np.ones(t, dtype=bool), bpt * t, "folio" in tags))
                if seqs:
                    seqs = [seqs[i] for i in sorted(rng.permutation(len(seqs))[: cfg.eval_sequences])]
            if seqs:
                self.sets[name] = seqs
        unknown = sorted(set(cfg.eval_sources) - set(data.sources))
        if unknown:
            raise InputError(f"eval_sources names sources the recipe lacks: {', '.join(unknown)}")
        self.common = [n for n in self.sets if not cfg.eval_sources or n in cfg.eval_sources]
        everything = [s for n in self.common for s in self.sets[n]]
        if not everything:
            raise InputError("no held-out sequences: the recipe's sources need more held-out text than one context")
        score = np.array([rarity[s.ids[1:]][s.scored].mean() for s in everything])
        cut = np.quantile(score, 0.9)
        self.hard = {
            "rare": [s for s, r in zip(everything, score, strict=True) if r >= cut],
            "folio": [s for s in everything if s.folio],
        }

    def tasks(self) -> list[str]:
        keys = ["val/loss", "val/bpb"] + [f"val/{n}/{m}" for n in self.sets for m in ("loss", "bpb", "acc")]
        return keys + [f"hard/{h}/{m}" for h, seqs in self.hard.items() if seqs for m in ("loss", "bpb")]

    @torch.no_grad()
    def evaluate(self, model: GPT) -> dict[str, float]:
        model.eval()
        out: dict[str, float] = {}
        total_nll = total_tok = total_bits_bytes = 0.0

        def score(seqs: list[_Seq]) -> tuple[float, float, float, int, float]:
            arr = torch.from_numpy(np.stack([s.ids for s in seqs]).astype(np.int64))
            scored = torch.from_numpy(np.stack([s.scored for s in seqs]))  # (n, t)
            logits, _ = model(arr[:, :-1])
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), arr[:, 1:], reduction="none")  # (n, t)
            n = int(scored.sum())
            total = nll[scored].sum().item()
            acc = (logits.argmax(-1) == arr[:, 1:])[scored].float().mean().item()
            return total, acc, sum(s.nbytes for s in seqs), n, total / n

        for name, seqs in self.sets.items():
            nll, acc, nbytes, n, mean = score(seqs)
            out[f"val/{name}/loss"] = mean
            out[f"val/{name}/bpb"] = nll / math.log(2) / nbytes
            out[f"val/{name}/acc"] = acc
            if name in self.common:
                total_nll, total_tok, total_bits_bytes = total_nll + nll, total_tok + n, total_bits_bytes + nbytes
        out["val/loss"] = total_nll / total_tok
        out["val/bpb"] = total_nll / math.log(2) / total_bits_bytes
        for hard, seqs in self.hard.items():
            if seqs:
                nll, _, nbytes, _, mean = score(seqs)
                out[f"hard/{hard}/loss"] = mean
                out[f"hard/{hard}/bpb"] = nll / math.log(2) / nbytes
        model.train()
        return out


def _document_rows(data: ResolvedRecipe, src: SourceData, i: int, t: int) -> list[_Seq]:
    """Held-out document `i` of `src` as rows of t + 1 tokens (the last padded), every token but the first scored
    once; its bytes are the document's less its first token's (a byte-level BPE token's string has one character
    per byte), so two tokenizers score the same bytes."""
    doc, folio = src.held_out[i], "folio" in src.held_out_tags[i]
    if len(doc) < 2:
        return []
    first = len(data.tokenizer.id_to_token(int(doc[0])))
    rows = []
    for start in range(0, len(doc) - 1, t):
        piece = doc[start : start + t + 1]
        ids = np.zeros(t + 1, dtype=doc.dtype)
        ids[: len(piece)] = piece
        rows.append(_Seq(ids, np.arange(t) < len(piece) - 1, 0.0, folio))
    share = (src.held_out_bytes[i] - first) / (len(doc) - 1)  # bytes per scored token, spread evenly over the rows
    return [row._replace(nbytes=share * int(row.scored.sum())) for row in rows]


def probe_manifest(
    data: ResolvedRecipe,
    cfg: ProbeConfig,
    model: GPT,
    portfolio: _Portfolio,
    *,
    schedule: str = "wsd",
    lr: float | None = None,
    unique_tokens: dict[str, int] | None = None,
) -> Manifest:
    """The probe's manifest; `schedule` and `lr` (default `cfg.lr`) name a cooldown's own; `unique_tokens`
    replaces the recipe's count of the sources named (a repeat fault's window)."""
    recipe = data.recipe.model_copy(deep=True)
    recipe.sequence_length = cfg.context
    for s in recipe.sources:
        if unique_tokens and s.name in unique_tokens:
            s.unique_tokens = unique_tokens[s.name]
    return Manifest(
        data=recipe,
        model=ModelConfig(
            name="probe-gpt",
            params=sum(p.numel() for p in model.parameters()),
            non_embedding_params=model.non_embedding_params(),
            layers=cfg.layers,
            width=cfg.width,
            heads=cfg.heads,
            head_dim=cfg.width // cfg.heads,
            context=cfg.context,
            vocab_size=model.cfg.vocab_size,
        ),
        optimisation=Optimisation(
            optimizer="adamw",
            lr=cfg.lr if lr is None else lr,
            schedule=schedule,
            batch_size=cfg.batch_size,
            microbatch_size=cfg.batch_size // cfg.microbatches,
            grad_accumulation=cfg.microbatches,
            grad_clip=1.0,
            precision="fp32",
        ),
        hardware=Hardware(device_kind="cpu", device_count=1),
        evals=EvalPortfolio(
            name=PORTFOLIO[0] if cfg.eval_documents is None else f"{PORTFOLIO[0]}-documents",
            version=PORTFOLIO[1],
            tasks=portfolio.tasks(),
        ),
        library_versions={"torch": torch.__version__, "python": sys.version.split()[0]},
        seed=cfg.seed,
    )


def train_probe(
    data: ResolvedRecipe,
    cfg: ProbeConfig,
    *,
    run: str,
    ledger: str,
    progress: Callable[[int, int], None] | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Train one probe into the ledger as `run`; return its final evaluation. `resume`: the run may exist
    already (empty, made by the caller with its meta)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    steps = math.ceil(cfg.tokens / (cfg.batch_size * cfg.context))
    model = GPT(
        GPTConfig(
            vocab_size=data.tokenizer.get_vocab_size(),
            context=cfg.context,
            layers=cfg.layers,
            width=cfg.width,
            heads=cfg.heads,
        )
    )
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    sampler = _Sampler(data, cfg, steps)
    portfolio = _Portfolio(data, cfg)
    repeated = cfg.faults.repeat_source[0] if cfg.faults.repeat_source is not None else None
    manifest = probe_manifest(
        data,
        cfg,
        model,
        portfolio,
        unique_tokens=None if repeated is None else {repeated: len(sampler.windows[repeated]) * cfg.context},
    )
    scaler = torch.amp.GradScaler("cpu") if cfg.loss_scaler else None
    eval_at = set(np.linspace(0, steps, cfg.evals + 1).round().astype(int).tolist())
    parts = _Parts(model=model, opt=opt, scaler=scaler, sampler=sampler, portfolio=portfolio)
    with Tracker(
        run,
        ledger=ledger,
        manifest=manifest,
        model=model,
        optimizer=opt,
        scaler=scaler,
        signals="full",
        config=TrackerConfig(log_every_s=5.0),
        resume=resume,
    ) as tr:
        tr.note("recipe", data.stats)  # what filters and dedup removed, per source
        tr.eval(portfolio.evaluate(model), step=0)
        final = run_steps(tr, parts, cfg, range(1, steps + 1), lambda step: wsd(step, steps, cfg), eval_at, progress)
        if cfg.checkpoint:
            tr.note(
                "checkpoint",
                save_checkpoint(parts, cfg, data, ledger=ledger, run=run, step=steps, lr=wsd(steps, steps, cfg)),
            )
    return final


@dataclass
class _Parts:
    """What a probe's steps change: model, optimizer, loss scaler, sampler; and the fixed eval portfolio."""

    model: GPT
    opt: torch.optim.Optimizer
    scaler: Any
    sampler: _Sampler
    portfolio: _Portfolio


def run_steps(
    tr: Tracker,
    parts: _Parts,
    cfg: ProbeConfig,
    numbers: range,
    lr_of: Callable[[int], float],
    eval_at: set[int],
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """Train the steps `numbers` (LR `lr_of(step)`), evaluating at the steps of `eval_at`; return the last
    evaluation. Shared by a probe and its cooldown (`probe.cooldown`)."""
    model, opt, scaler, sampler, portfolio = parts.model, parts.opt, parts.scaler, parts.sampler, parts.portfolio
    vocab = model.cfg.vocab_size
    final: dict[str, Any] = {}
    for done, step in enumerate(numbers, start=1):
        start = time.perf_counter()
        if cfg.faults.sleep_loader_s and step >= cfg.faults.sleep_from_step:
            time.sleep(cfg.faults.sleep_loader_s)
        x, y, counts, ids = sampler.batch()
        wait = time.perf_counter() - start
        if cfg.faults.corrupt_at_step == step:
            noise = torch.randint(0, vocab, (x.shape[0], x.shape[1] + 1), generator=torch.Generator().manual_seed(step))
            x, y = noise[:, :-1], noise[:, 1:]
        for group in opt.param_groups:
            group["lr"] = lr_of(step)
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros(())
        for xm, ym in zip(x.chunk(cfg.microbatches), y.chunk(cfg.microbatches), strict=True):
            _, part = model(xm, ym)
            part_loss = part / cfg.microbatches
            (scaler.scale(part_loss) if scaler else part_loss).backward()
            loss += part.detach() / cfg.microbatches
        bad = (
            float("nan")
            if cfg.faults.nan_at_step == step
            else float("inf")
            if step in cfg.faults.inf_at_steps
            else None
        )
        if bad is not None:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.fill_(bad)
        if scaler:
            scaler.unscale_(opt)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler:  # skips the step on inf/NaN gradients and backs the scale off
            scaler.step(opt)
            scaler.update()
        # A guarded trainer skips a non-finite update. This is a host sync on purpose: probes are small.
        elif torch.isfinite(grad_norm):
            opt.step()
        tr.step(
            tokens=cfg.batch_size * cfg.context,
            samples=cfg.batch_size,
            loss=loss,
            grad_norm=grad_norm,
            sources=counts,
            sample_ids=ids,
            data_wait_s=wait,
        )
        if step in eval_at:
            final = portfolio.evaluate(model)
            tr.eval(final)
        if progress is not None:
            progress(done, len(numbers))
    return final
