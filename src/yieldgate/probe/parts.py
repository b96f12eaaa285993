"""What a probe's steps change and read: the sampler of training windows (`Sampler`), the fixed eval portfolio of
held-out sequences with its hard slices (`Portfolio`), and the bundle a step loop takes (`Parts`)."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from yieldgate.data.recipe import ResolvedRecipe, SourceData
from yieldgate.data.sampler import WindowStream
from yieldgate.errors import InputError
from yieldgate.probe.config import ProbeConfig
from yieldgate.probe.model import GPT

__all__ = ["Sampler", "Portfolio", "Parts", "Seq"]


class Sampler(WindowStream):
    """The recipe's stream (`data.sampler.WindowStream`) with the probe's faults, as torch batches."""

    def __init__(self, data: ResolvedRecipe, cfg: ProbeConfig, steps: int) -> None:
        self.cfg = cfg
        if cfg.faults.drift_to is not None:
            names = WindowStream.usable(data, cfg.context)
            unknown = sorted(set(cfg.faults.drift_to) - set(names))
            if unknown and names:
                raise InputError(
                    f"faults.drift_to names unknown sources {', '.join(unknown)}; sources: {', '.join(names)}"
                )
        super().__init__(
            data,
            context=cfg.context,
            batch_size=cfg.batch_size,
            sequences=steps * cfg.batch_size,
            seed=cfg.seed,
            in_order=cfg.faults.unshuffled,
            end_weights=cfg.faults.drift_to,
            loop_windows=cfg.faults.loop_examples,
        )
        if cfg.faults.repeat_source is not None:
            name, epochs = cfg.faults.repeat_source
            if name not in self.windows:
                raise InputError(
                    f"faults.repeat_source names unknown source {name!r}; sources: {', '.join(self.names)}"
                )
            share = self.p[self.names.index(name)]
            needed = max(1, int(steps * cfg.batch_size * share / epochs))
            self.windows[name] = self.windows[name][:needed]

    def batch(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, int], list[int]]:
        rows, counts, ids = self.draw()
        arr = torch.from_numpy(rows.astype(np.int64))
        return arr[:, :-1], arr[:, 1:], counts, ids


class Seq(NamedTuple):
    """One held-out row of the eval portfolio."""

    ids: np.ndarray
    """context + 1 token ids (a document's last row padded with 0)."""
    scored: np.ndarray
    """(context,) bool: which next-token predictions count."""
    nbytes: float
    """UTF-8 bytes of the scored tokens (for bits per byte)."""
    folio: bool


class Portfolio:
    """The eval portfolio's fixed held-out sequences, drawn once per probe: `eval_sequences` windows per source
    at token positions, or (`eval_documents`) whole documents, the same text under any tokenizer."""

    def __init__(self, data: ResolvedRecipe, cfg: ProbeConfig) -> None:
        eval_seed = cfg.seed if cfg.eval_seed is None else cfg.eval_seed
        rng = np.random.default_rng(10_000 + eval_seed)
        t = cfg.context
        vocab = data.tokenizer.get_vocab_size()
        counts = np.bincount(np.concatenate([s.train for s in data.sources.values()]), minlength=vocab) + 1
        rarity = -np.log(counts / counts.sum())
        self.sets: dict[str, list[Seq]] = {}
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
                        seqs.append(Seq(doc[w * t : w * t + t + 1], np.ones(t, dtype=bool), bpt * t, "folio" in tags))
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

        def score(seqs: list[Seq]) -> tuple[float, float, float, int, float]:
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


def _document_rows(data: ResolvedRecipe, src: SourceData, i: int, t: int) -> list[Seq]:
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
        rows.append(Seq(ids, np.arange(t) < len(piece) - 1, 0.0, folio))
    share = (src.held_out_bytes[i] - first) / (len(doc) - 1)  # bytes per scored token, spread evenly over the rows
    return [row._replace(nbytes=share * int(row.scored.sum())) for row in rows]


@dataclass
class Parts:
    """What a probe's steps change: model, optimizer, loss scaler, sampler; and the fixed eval portfolio."""

    model: GPT
    opt: torch.optim.Optimizer
    scaler: Any
    sampler: Sampler
    portfolio: Portfolio
