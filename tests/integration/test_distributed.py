"""DDP with 2 processes on gloo (CPU): global counters from all ranks, rank 0 writes, a dead rank is reported."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tests.support.helpers import CFG, batch, stdlib_corpus
from tests.support.reliability import check
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT
from yieldgate.track import Tracker, TrackerConfig

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

SEQS = {0: 8, 1: 4}  # uneven ranks: counted as they are, not as rank 0 x world size


def _worker(rank: int, init_file: str, ledger: str, steps: int, die_at: int | None) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=2, timeout=timedelta(seconds=15)
    )
    text, _, _ = stdlib_corpus(300_000)
    torch.manual_seed(0)
    model = DistributedDataParallel(GPT(CFG))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(rank)
    with Tracker(
        "ddp", ledger=ledger, model=model, optimizer=opt, signals="full", config=TrackerConfig(dist_timeout_s=15)
    ) as tr:
        for step in range(steps):
            if rank == 1 and step == die_at:
                os._exit(3)  # the rank dies without a word
            x, y = batch(text, rng, SEQS[rank])
            loss = model(x, y)[1]
            opt.zero_grad()
            loss.backward()
            opt.step()
            tr.step(tokens=SEQS[rank] * CFG.context, samples=SEQS[rank], loss=loss)
            if rank == 0 and step % 10 == 9:
                tr.eval({"val/loss": loss})
    dist.destroy_process_group()


def _run(tmp_path: Path, steps: int, die_at: int | None) -> list[int | None]:
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_worker, args=(r, str(tmp_path / "init"), str(tmp_path / "d.db"), steps, die_at))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=90)
    for p in procs:
        if p.is_alive():
            p.kill()
    return [p.exitcode for p in procs]


def test_ddp_counts_every_rank_and_rank_0_writes(tmp_path):
    assert _run(tmp_path, 25, None) == [0, 0]
    with Ledger(tmp_path / "d.db", readonly=True) as led:
        runs = led.runs()
        steps = led.steps("ddp")
        extras = led.extras("ddp")
        evals = led.evals("ddp")
    assert runs["name"].tolist() == ["ddp"] and runs["status"].tolist() == ["finished"]
    per_step = (SEQS[0] + SEQS[1]) * CFG.context
    assert steps["step"].tolist() == list(range(1, 26))
    assert steps["tokens"].tolist() == [per_step * s for s in range(1, 26)]
    assert steps["samples"].tolist() == [12.0 * s for s in range(1, 26)]
    keys = set(extras["key"])
    assert {"dist/tokens_per_s/min", "dist/tokens_per_s/max", "dist/step_s/max", "signals/gns"} <= keys
    assert evals["step"].tolist() == [10, 20]
    assert evals["tokens"].tolist() == [per_step * 10, per_step * 20]


def test_a_dead_rank_is_reported_not_waited_on(tmp_path):
    start = time.monotonic()
    codes = _run(tmp_path, 40, die_at=12)
    assert time.monotonic() - start < 80
    assert codes[1] == 3 and codes[0] != 0  # rank 0's next collective fails instead of hanging
    with Ledger(tmp_path / "d.db", readonly=True) as led:
        assert led.run_info("ddp")["status"] == "failed"
        assert 10 <= led.run_info("ddp")["last_step"] <= 13
        stored = len(led.steps("ddp"))
        (fault,) = led.events("ddp", kind="fault").itertuples(index=False)
    # What ended the run is kept with it: the collective's error (gloo: the peer closed the connection).
    assert fault.body["status"] == "failed" and fault.body["error"].startswith(("RuntimeError", "DistBackendError"))
    assert 10 <= fault.start_step <= 13
    # Both ranks completed steps 1..12 before rank 1 died; rank 0 keeps what it reduced across ranks.
    assert 12 - stored <= 2
    check(
        "DDP with 2 ranks, rank 1 dies mid-run (gloo)",
        "rank 0's next collective fails within the timeout "
        "instead of hanging; rank 0 marks the run `failed` and keeps the error as a `fault` event",
        "≤ 2 of the 12 steps both ranks completed",
    )
