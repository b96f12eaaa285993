from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import threading
import time

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tests.support.claims import set_claim
from tests.support.helpers import CFG, batch
from tests.support.reliability import check
from yieldgate.errors import InputError, RunInUse
from yieldgate.ledger import Ledger
from yieldgate.probe.model import GPT, GPTConfig
from yieldgate.track import Tracker, TrackerConfig
from yieldgate.track.throughput import flops_per_token
from yieldgate.track.tracker import matmul_params


def train(
    tr: Tracker | None,
    model,
    opt,
    text,
    steps: int,
    *,
    micro: int = 1,
    seqs: int = 8,
    seed: int = 0,
    record=None,
    scaler=None,
    bad_step: int | None = None,
):
    rng = np.random.default_rng(seed)
    loader = (tr.batches if tr else iter)(range(steps))
    for i in loader:
        opt.zero_grad(set_to_none=True)
        for _ in range(micro):
            x, y = batch(text, rng, seqs)
            loss = model(x, y)[1]
            if bad_step == i:
                loss = loss * float("nan")
            ((scaler.scale(loss) if scaler else loss) / micro).backward()
        if scaler:
            scaler.unscale_(opt)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        (scaler.step(opt), scaler.update()) if scaler else opt.step()
        if record is not None:
            record.append((loss.detach().clone(), gn.detach().clone(), opt.param_groups[0]["lr"]))
        if tr is not None:
            tr.step(
                tokens=micro * seqs * CFG.context,
                samples=micro * seqs,
                loss=loss,
                grad_norm=gn,
                sources={"stdlib": micro * seqs * CFG.context},
                sample_ids=[i % 7],
            )


@pytest.mark.slow  # a real training of tens of steps: the full tier
def test_ledger_rows_equal_the_loop_row_for_row(text, tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    record: list = []
    path = tmp_path / "l.db"
    with Tracker("run", ledger=path, model=model, optimizer=opt, manifest={"optimisation": {"grad_clip": 1.0}}) as tr:
        train(tr, model, opt, text, 53, record=record)
    with Ledger(path, readonly=True) as led:
        steps = led.steps("run")
        assert led.run_info("run")["status"] == "finished"
        extras = led.extras("run")
    assert steps["step"].tolist() == list(range(1, 54))
    tokens = 8 * CFG.context
    assert steps["tokens"].tolist() == [tokens * (i + 1) for i in range(53)]
    assert steps["samples"].tolist() == [8.0 * (i + 1) for i in range(53)]
    assert steps["loss"].tolist() == [float(loss) for loss, _, _ in record]
    assert steps["grad_norm"].tolist() == [float(g) for _, g, _ in record]
    assert steps["clipped"].tolist() == [float(float(g) > 1.0) for _, g, _ in record]
    assert steps["lr"].tolist() == [lr for _, _, lr in record]
    assert (steps["wall_s"].diff().dropna() > 0).all() and (steps["step_s"] > 0).all()
    assert steps["tokens_per_s"].iloc[:3].isna().all() and (steps["tokens_per_s"].iloc[5:] > 0).all()
    source = extras[extras.key == "tokens/stdlib"]["value"].tolist()
    assert source == steps["tokens"].tolist()
    repeat = extras[extras.key == "stream/repeat_rate"]["value"].tolist()
    assert repeat[:7] == [0.0] * 7 and repeat[7:] == [1.0] * 46  # ids cycle through 7 values


def _count_host_syncs(monkeypatch) -> dict[str, int]:
    counts = {"item": 0, "tolist": 0, "cpu": 0, "__float__": 0, "numpy": 0}
    main = threading.main_thread()
    for name in counts:
        original = getattr(torch.Tensor, name)

        def wrapper(self, *args, _name=name, _original=original, **kwargs):
            if threading.current_thread() is main:
                counts[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, wrapper)
    return counts


@pytest.mark.slow
def test_the_step_path_moves_nothing_to_the_host(text, tmp_path, monkeypatch):
    """No .item(), .tolist(), .cpu(), float() or .numpy() on tensors from the training thread: the loop with
    the Tracker (full signals, 4 microbatches, evals) makes exactly as many as the same loop without it."""
    results = []
    for tracked in (False, True):
        torch.manual_seed(0)
        model = GPT(CFG)
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
        with monkeypatch.context() as m:
            counts = _count_host_syncs(m)
            if tracked:
                with Tracker(
                    "sync",
                    ledger=tmp_path / "s.db",
                    signals="full",
                    model=model,
                    optimizer=opt,
                    config=TrackerConfig(entropy_every=7),
                ) as tr:
                    for step in range(3):
                        train(tr, model, opt, text, 10, micro=4, seqs=2, seed=step)
                        tr.eval({"val/loss": torch.tensor(1.0)})
            else:
                for step in range(3):
                    train(None, model, opt, text, 10, micro=4, seqs=2, seed=step)
            results.append(dict(counts))
    assert results[1] == results[0]
    with Ledger(tmp_path / "s.db", readonly=True) as led:
        assert len(led.steps("sync")) == 30 and len(led.evals("sync")) == 3
        keys = set(led.extras("sync")["key"])
    assert {
        "signals/gns",
        "signals/grad_norm/blocks.0.qkv",
        "signals/update_ratio/blocks.1.mlp.0",
        "signals/act_entropy/blocks.0",
        "signals/loss_var",
    } - keys == {"signals/loss_var"}  # 30 < window


@pytest.mark.slow  # a real training, 2.5 s
def test_nan_is_recorded_and_faults_are_contained(text, tmp_path, caplog):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    path = tmp_path / "n.db"
    with Tracker("nan", ledger=path, model=model, optimizer=opt) as tr:
        train(tr, model, opt, text, 5, bad_step=2)
        tr.step(tokens="many")  # a bad value: reported, counted, never raised
        tr.step(tokens="many")
        assert tr.stats["faults"] == 2
    assert sum("tr" in r.message and "failed" in r.message for r in caplog.records) == 1
    with Ledger(path, readonly=True) as led:
        loss = led.steps("nan", ["loss"], nullable=True)["loss"].array
    assert np.isnan(loss._data[2]) and not loss._mask[2]


def test_an_unwritable_ledger_never_stops_training(text, tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Tracker(
        "lost",
        ledger=tmp_path / "missing-dir" / "x.db",
        model=model,
        optimizer=opt,
        config=TrackerConfig(flush_every_s=0.05),
    ) as tr:
        train(tr, model, opt, text, 12)
    assert tr.stats["faults"] >= 1 and tr.stats["written_rows"] == 0


def test_a_script_run_twice_makes_a_second_run_and_says_so(tmp_path, caplog):
    """As W&B and MLflow do: the second `Tracker("quickstart")` records `quickstart-2` (said in one line) instead of
    crashing with "already exists"; the first run is untouched."""
    path = tmp_path / "q.db"
    for _ in range(2):
        with Tracker("quickstart", ledger=path) as tr:
            for step in range(1, 4):
                tr.step(tokens=128, loss=3.0 - step * 0.1)
    assert tr.run == "quickstart-2"
    said = [r.getMessage() for r in caplog.records if "already" in r.getMessage()]
    assert said == [
        f"yieldgate: run 'quickstart' is in {path} already: recording this one as 'quickstart-2' "
        "(resume=True continues it instead)"
    ]
    with Ledger(path, readonly=True) as led:
        assert list(led.runs()["name"]) == ["quickstart", "quickstart-2"]
        assert len(led.steps("quickstart")) == 3 and len(led.steps("quickstart-2")) == 3


def test_resume_continues_steps_and_tokens(text, tmp_path):
    path = tmp_path / "r.db"
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Tracker("r", ledger=path) as tr:
        train(tr, model, opt, text, 5)
    with pytest.raises(InputError, match="already exists.*resume=True"):
        Tracker("r", ledger=path, suffix_if_taken=False)
    with Tracker("r", ledger=path, resume=True) as tr:
        train(tr, model, opt, text, 3)
    with Ledger(path, readonly=True) as led:
        steps = led.steps("r")
    assert steps["step"].tolist() == list(range(1, 9))
    assert steps["tokens"].iloc[-1] == 8 * 8 * CFG.context
    assert steps["wall_s"].is_monotonic_increasing


def _loop(tr: Tracker, steps: range, tokens: dict[int, int], *, numbered: bool, evals: tuple[int, ...] = ()) -> None:
    """A cheap loop whose step s accepts 1000 + 7·s tokens; `tokens[s]` is its own running total at s."""
    for s in steps:
        tokens[s] = tokens.get(s - 1, 0) + 1000 + 7 * s
        tr.step(
            tokens=1000 + 7 * s,
            samples=2,
            loss=1.0 / s,
            extras={"signals/pad": float(s)},
            **({"step": s} if numbered else {}),
        )
        if s in evals:
            tr.eval({"val/loss": 2.0 / s})


@pytest.mark.parametrize("given", ["checkpoint", "first step"])
def test_resume_from_an_older_checkpoint_sets_the_later_rows_apart(tmp_path, given):
    """A job dies at step 30, its last checkpoint is from step 20: the restart recomputes 21..30. The run's
    steps are the loop's own timeline, tokens equal to the loop's running total at every step; the 10 rows of
    thrown-away work are kept apart (a `resume` event and `superseded`), never spliced into the curve."""
    path = tmp_path / "ckpt.db"
    first: dict[int, int] = {}
    with Tracker("r", ledger=path) as tr:
        _loop(tr, range(1, 31), first, numbered=given == "first step", evals=(10, 25))
    point = {"step": 20, "tokens": first[20], "samples": 40} if given == "checkpoint" else {}
    second = {s: first[s] for s in range(1, 21)}
    with Tracker("r", ledger=path, resume=True, **point) as tr:
        _loop(tr, range(21, 36), second, numbered=given == "first step")
    with Ledger(path, readonly=True) as led:
        steps = led.steps("r")
        pad = led.extras("r", ["signals/pad"])
        evals = led.evals("r")
        events = led.events("r", kind="resume")
        apart = led.superseded("r")
    assert steps["step"].tolist() == list(range(1, 36))
    assert steps["tokens"].tolist() == [second[s] for s in range(1, 36)]
    assert steps["samples"].tolist() == [2.0 * s for s in range(1, 36)]
    assert pad["step"].tolist() == list(range(1, 36)) and pad["value"].tolist() == [float(s) for s in range(1, 36)]
    assert steps["wall_s"].is_monotonic_increasing
    assert evals["step"].tolist() == [10]  # the eval at 25 belonged to the thrown-away work
    assert len(events) == 1
    body = events["body"].iloc[0]
    assert body["old"] == {"step": 30, "tokens": first[30]}
    assert body["resume"] == {"step": 20, "tokens": first[20], "samples": 40.0}
    assert body["superseded"]["steps"] == 10 and [e["step"] for e in body["superseded"]["evals"]] == [25]
    assert apart["step"].tolist() == list(range(21, 31))
    assert apart["tokens"].tolist() == [first[s] for s in range(21, 31)]
    check(
        "job restarted from a checkpoint older than the ledger's last row",
        "steps and tokens follow the checkpoint (equal to the loop's own total at every step); the rows of the "
        "recomputed steps are set apart as a `resume` event, never spliced in",
        "0",
    )


def test_a_resume_point_is_checked_before_anything_is_written(tmp_path):
    with pytest.raises(InputError, match="pass step= too"):
        Tracker("x", ledger=tmp_path / "x.db", tokens=5)
    with pytest.raises(InputError, match=r"Tracker\(step=...\) must be a number >= 0, got -1"):
        Tracker("x", ledger=tmp_path / "x.db", step=-1)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow  # a real training of tens of steps: the full tier
def test_mfu_and_cost_with_a_peak_override(text, tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    path = tmp_path / "m.db"
    manifest = {"hardware": {"device_kind": "cpu", "peak_flops": 1e12, "price_per_device_hour": 3.6}}
    with Tracker("m", ledger=path, model=model, optimizer=opt, manifest=manifest) as tr:
        train(tr, model, opt, text, 30)
    with Ledger(path, readonly=True) as led:
        steps = led.steps("m")
        meta = led.meta("m")["mfu"]
    fpt = flops_per_token(non_embedding_params=matmul_params(model), layers=2, heads=4, head_dim=16, context=32)
    assert meta["flops_per_token"] == fpt and meta["peak_flops"] == 1e12 and meta["flag"] == "ok"
    assert "override" in meta["peak_source"] and meta["dtype"] == "fp32"
    ok = steps["tokens_per_s"].notna()
    np.testing.assert_allclose(steps.loc[ok, "mfu"], steps.loc[ok, "tokens_per_s"] * fpt / 1e12)
    np.testing.assert_allclose(steps["cost_usd"], steps["wall_s"] / 3600 * 3.6)


def test_unknown_device_records_no_mfu_and_says_why(tmp_path, caplog):
    model = GPT(CFG)
    with Tracker("u", ledger=tmp_path / "u.db", model=model) as tr:
        tr.step(tokens=10)
        tr.step(tokens=10, step=7, data_wait_s=0.25)
    assert caplog.text.count("mfu not recorded") == 1 and "unknown device 'cpu'" in caplog.text
    with Ledger(tmp_path / "u.db", readonly=True) as led:
        assert led.meta("u")["mfu"]["flag"] == "unknown_device"
        assert "give hardware.peak_flops in the manifest" in led.meta("u")["unmeasured"]["mfu"]
        steps = led.steps("u")
    assert steps["mfu"].isna().all()
    # Without batches() the wait for data is unknown, not zero; a framework may number steps itself.
    assert steps["step"].tolist() == [1, 7] and np.isnan(steps["data_wait_s"][0]) and steps["data_wait_s"][1] == 0.25


class _ByteMLP(torch.nn.Module):
    """A next-byte model from the last 8 bytes: no transformer shape, no config, so no FLOPs formula applies."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(256, 16)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(8 * 16, 64), torch.nn.GELU(), torch.nn.Linear(64, 256))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self.mlp(self.emb(x).flatten(1)), y)


@pytest.mark.slow  # a real training of tens of steps: the full tier
def test_mfu_of_a_model_no_formula_describes_is_counted_once_over_a_whole_step(text, tmp_path):
    """FLOPs per token from torch's FLOP counter over one whole step (two microbatches), an evaluation inside the
    first counted step making it count the next one instead; MFU recorded from then on with the count."""
    torch.manual_seed(0)
    model = _ByteMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)

    def windows(n):
        starts = rng.integers(0, len(text) - 9, size=n)
        x = torch.from_numpy(np.stack([text[s : s + 8] for s in starts]).astype(np.int64))
        return x, torch.from_numpy(text[starts + 8].astype(np.int64))

    def one_step():
        for _ in range(2):
            (model(*windows(32)) / 2).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    with FlopCounterMode(display=False) as counter:
        one_step()
    expected = counter.get_total_flops() / 64
    manifest = {"hardware": {"device_kind": "cpu", "peak_flops": 1e11}}
    with Tracker("mlp", ledger=tmp_path / "m.db", model=model, optimizer=opt, manifest=manifest) as tr:
        for i in range(40):
            one_step()
            tr.step(tokens=64, samples=64)
            if i == 0:
                with torch.no_grad():
                    tr.eval({"val/loss": model(*windows(256))})
    with Ledger(tmp_path / "m.db", readonly=True) as led:
        meta, steps = led.meta("mlp"), led.steps("mlp")
    mfu_meta = meta["mfu"]
    assert mfu_meta["flops_per_token"] == expected and mfu_meta["counted_at_step"] == 3, mfu_meta
    assert mfu_meta["flag"] == "ok" and mfu_meta["formula"].startswith("counted: torch.utils.flop_counter")
    assert "mfu" not in meta.get("unmeasured", {})
    late = steps[(steps["step"] > 10) & steps["tokens_per_s"].notna()]
    assert len(late) > 20 and late["mfu"].notna().all()
    np.testing.assert_allclose(late["mfu"], late["tokens_per_s"] * expected / 1e11)
    assert steps["loss"].isna().all() and steps["tokens"].iloc[-1] == 40 * 64


def test_a_signal_that_cannot_be_computed_says_why_once_and_show_repeats_it(text, tmp_path, caplog, cli_for):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Tracker("one", ledger=tmp_path / "g.db", model=model, optimizer=opt, signals="full") as tr:
        train(tr, model, opt, text, 4)
    assert caplog.text.count("signals/gns not recorded") == 1 and "needs at least 2 microbatches" in caplog.text
    with Ledger(tmp_path / "g.db", readonly=True) as led:
        assert "needs at least 2 microbatches" in led.meta("one")["unmeasured"]["signals/gns"]
        assert "signals/gns" not in led.extra_keys("one")
    cli = cli_for(tmp_path / "g.db")
    shown = cli("show", "one").stdout
    assert "not recorded: signals/gns: needs at least 2 microbatches" in shown
    assert "not recorded: mfu: unknown device 'cpu'" in shown
    told = cli.json("diagnose", "one")
    assert "needs at least 2 microbatches" in told["unmeasured"]["signals/gns"]
    # No manifest: tokens per parameter still weighed, with the parameters of the model the Tracker held.
    params = sum(p.numel() for p in model.parameters())
    under = next(f for f in told["findings"] if f["cause"] == "undertrained")
    assert under["evidence"]["params"] == params and under["evidence"]["tokens"] == 4 * 8 * CFG.context


def test_close_waits_for_the_notes_still_being_written(text, tmp_path, monkeypatch):
    """A note found during training (here: GNS cannot be measured) is written off the training thread, and a
    slow write (a ledger busy for a second) is still stored when `close` returns. CI once read the run between
    the two."""
    release, during_training = threading.Event(), []

    def slow_meta(self, key, value):
        if key == "unmeasured" and self._started:
            assert release.wait(30), "the training loop waited for the note"
            time.sleep(1.0)
        original(self, key, value)

    original = Tracker._meta
    monkeypatch.setattr(Tracker, "_meta", slow_meta)
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Tracker("slow", ledger=tmp_path / "s.db", model=model, optimizer=opt, signals="full") as tr:
        train(tr, model, opt, text, 4)  # returns with the note's write still held back
        during_training = list(tr._unmeasured_why)
        release.set()
    assert during_training == ["mfu", "signals/gns"]
    with Ledger(tmp_path / "s.db", readonly=True) as led:
        assert "needs at least 2 microbatches" in led.meta("slow")["unmeasured"]["signals/gns"]
        assert led.run_info("slow")["status"] == "finished"


def test_flops_per_token_matches_torch_flop_counter():
    """6N + 12·L·H·Q·T against torch.utils.flop_counter on the reference model. On CPU the counter does not
    see inside scaled_dot_product_attention, so the attention matmuls are counted on an explicit version."""
    cfg = GPTConfig(vocab_size=256, context=64, layers=3, width=96, heads=6)
    model = GPT(cfg)
    b, t, q = 2, cfg.context, cfg.width // cfg.heads
    x = torch.randint(0, cfg.vocab_size, (b, t))
    with FlopCounterMode(display=False) as counter:
        model(x, x)[1].backward()
    qk = torch.randn(b, cfg.heads, t, q, requires_grad=True)
    v = torch.randn(b, cfg.heads, t, q, requires_grad=True)
    with FlopCounterMode(display=False) as attn:
        (torch.softmax(qk @ qk.transpose(-1, -2), -1) @ v).sum().backward()
    counted = (counter.get_total_flops() + cfg.layers * attn.get_total_flops()) / (b * t)
    formula = flops_per_token(
        non_embedding_params=matmul_params(model), layers=cfg.layers, heads=cfg.heads, head_dim=q, context=t
    )
    # N also holds biases and LayerNorm weights, which the counter (matmuls only) leaves out.
    assert abs(formula / counted - 1) < 0.03, (formula, counted)


def test_loss_scale_and_skipped_steps(text, tmp_path):
    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    path = tmp_path / "amp.db"
    with Tracker("amp", ledger=path, model=model, optimizer=opt, scaler=scaler, signals="full") as tr:
        train(tr, model, opt, text, 8, scaler=scaler, bad_step=3)
    with Ledger(path, readonly=True) as led:
        ex = led.extras("amp", ["signals/loss_scale", "signals/skipped_steps"])
    scale = ex[ex.key == "signals/loss_scale"]["value"].tolist()
    skipped = ex[ex.key == "signals/skipped_steps"]["value"].tolist()
    assert scale[:3] == [1024.0] * 3 and scale[3:] == [512.0] * 5
    assert skipped == [0, 0, 0, 1, 1, 1, 1, 1]


def test_config_is_validated_with_the_field_name():
    with pytest.raises(InputError, match="TrackerConfig.log_every_steps must be >= 1, got 0"):
        TrackerConfig(log_every_steps=0)
    with pytest.raises(InputError, match="signals must be"):
        Tracker("x", ledger=":memory:", signals="some")


def test_the_throughput_window_is_validated_with_the_field_name():
    # Before, these reached Throughput() inside the Tracker's constructor as a ValueError naming no field.
    with pytest.raises(InputError, match=r"TrackerConfig.throughput_window must be >= 2, got 1"):
        TrackerConfig(throughput_window=1)
    with pytest.raises(InputError, match=r"TrackerConfig.throughput_skip must be >= 0, got -1"):
        TrackerConfig(throughput_skip=-1)


def test_every_config_field_has_its_docstring_and_the_old_import_works():
    import ast
    import dataclasses
    import inspect

    import yieldgate.track.config as config_module
    from yieldgate.track.tracker import TrackerConfig as via_tracker

    assert via_tracker is TrackerConfig is config_module.TrackerConfig
    (cls,) = [
        n
        for n in ast.parse(inspect.getsource(config_module)).body
        if isinstance(n, ast.ClassDef) and n.name == "TrackerConfig"
    ]
    documented = {
        field.target.id
        for field, doc in zip(cls.body, cls.body[1:], strict=False)
        if isinstance(field, ast.AnnAssign)
        and isinstance(field.target, ast.Name)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and isinstance(doc.value.value, str)
    }
    assert documented == {f.name for f in dataclasses.fields(TrackerConfig)}


def test_online_diagnosis_writes_a_spike_while_the_run_goes_on(tmp_path):
    path = tmp_path / "online.db"
    rng = np.random.default_rng(0)
    config = TrackerConfig(online_diagnosis_every_s=0.2, flush_every_s=0.1, log_every_steps=5)
    with Tracker("spiky", ledger=path, config=config) as tr:
        for step in range(1, 301):
            loss = 30.0 if step == 200 else 3.0 - step * 1e-3 + rng.normal(0, 0.01)
            tr.step(tokens=1024, samples=8, loss=loss, grad_norm=1.0 + rng.normal(0, 0.01))
            time.sleep(0.002)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # seen while the run is still open, not at close
            with Ledger(path, readonly=True) as led:
                events = led.events("spiky", kind="diagnosis", state="open")
            if len(events):
                break
            time.sleep(0.1)
    with Ledger(path, readonly=True) as led:
        bodies = led.events("spiky", kind="diagnosis")["body"].tolist()
    # one step at 10x the loss, back the next step: an outlier batch (a transient spike), not a damaged update
    spikes = [
        b for b in bodies if b["source"] == "tracker" and b["cause"] == "transient_spike" and b["start_step"] == 200
    ]
    assert len(spikes) == 1, bodies  # found once, not once per detector run


# -- one owner per run: writers in other processes (spawned: nothing copied from the test process) ----------


def _start(ledger: str, run: str, go, results, resume: bool) -> None:
    go.wait(60)
    try:
        with Tracker(run, ledger=ledger, resume=resume, suffix_if_taken=False):
            results.put("accepted")
    except (InputError, RunInUse) as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def _hold(ledger: str, run: str, ready, release) -> None:
    with Tracker(run, ledger=ledger, config=TrackerConfig(flush_every_s=0.1)) as tr:
        tr.step(tokens=128)
        ready.set()
        release.wait(60)


@pytest.mark.slow
def test_two_processes_starting_one_run_at_once_one_is_refused(tmp_path):
    ctx = mp.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_start, args=(str(tmp_path / "o.db"), "same", go, results, False)) for _ in range(2)]
    for p in procs:
        p.start()
    time.sleep(3)  # both have imported torch and wait at the start line
    go.set()
    outcomes = sorted((results.get(timeout=120) for _ in procs), key=lambda o: o != "accepted")
    for p in procs:
        p.join(30)
    assert outcomes[0] == "accepted" and outcomes[1].startswith("InputError: run 'same' already exists"), outcomes
    check(
        "two processes start one run at the same instant (suffix_if_taken=False; by default the second is name-2)",
        "one is accepted; the other is refused: `run 'same' already exists …; pass resume=True to continue it`",
        "0",
    )


@pytest.mark.slow
def test_a_second_writer_is_refused_while_the_first_lives(tmp_path):
    path = str(tmp_path / "live.db")
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(path, "held", ready, release))
    holder.start()
    try:
        assert ready.wait(120)
        for takeover in (False, True):  # takeover never takes a live writer's run
            with pytest.raises(RunInUse, match=f"being written by host .*, pid {holder.pid} .*last heartbeat"):
                Tracker("held", ledger=path, resume=True, takeover=takeover)
        with sqlite3.connect(path) as db:
            beat = db.execute("SELECT heartbeat_at FROM runs WHERE name = 'held'").fetchone()[0]
        assert time.time() - beat < 2  # the writer stamps it at its flushes
    finally:
        release.set()
        holder.join(60)
    with Tracker("held", ledger=path, resume=True) as tr:  # closed cleanly: free to continue
        tr.step(tokens=128)
    with Ledger(path, readonly=True) as led:
        assert led.steps("held")["step"].tolist() == [1, 2]
    check(
        "a second `resume=True` writer while the first still writes",
        "refused, naming the owner (host, pid, start time, last heartbeat), with `takeover=True` too",
        "0",
    )


@pytest.mark.slow
def test_a_dead_writers_run_is_taken_over_only_when_asked(tmp_path):
    path = str(tmp_path / "dead.db")
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(path, "crashed", ready, release))
    holder.start()
    assert ready.wait(120)
    holder.kill()  # SIGKILL: no close, the run stays `running` with the dead process as owner
    holder.join(30)
    with pytest.raises(RunInUse, match=f"pid {holder.pid} .*its process is gone.*takeover=True"):
        Tracker("crashed", ledger=path, resume=True)
    with Tracker("crashed", ledger=path, resume=True, takeover=True) as tr:
        tr.step(tokens=128)
    with Ledger(path, readonly=True) as led:
        body = led.events("crashed", kind="warning")["body"].tolist()
    assert len(body) == 1 and f"pid {holder.pid}" in body[0]["takeover"]["from"]
    check(
        "the run's writer was SIGKILLed; a new one starts with `resume=True`",
        "refused (its process is gone) until `takeover=True`; the takeover is kept as a `warning` event",
        "0",
    )


def test_another_hosts_writer_is_dead_once_its_heartbeat_is_stale(tmp_path):
    from yieldgate.ledger.owners import STALE_AFTER_S

    path = str(tmp_path / "host.db")
    Tracker("far", ledger=path).close()
    for age, refused in ((5.0, True), (STALE_AFTER_S + 5, False)):
        with Ledger(path) as led:  # the status through the ledger: it is checksummed, the writer's claim is not
            led.set_status("far", "running")
        # a writer on another node, last heard of `age` seconds ago
        set_claim(path, "far", host="node-7", pid=4242, started=1.0, heartbeat=time.time() - age)
        if refused:
            with pytest.raises(RunInUse, match="host node-7, pid 4242"):
                Tracker("far", ledger=path, resume=True, takeover=True)
        else:
            Tracker("far", ledger=path, resume=True, takeover=True).close()


def test_a_writer_whose_run_was_taken_over_spills_everything_and_says_so_once(tmp_path, caplog):
    """Issue #46, item 3: a writer frozen past the stale limit finds its run taken over on waking. It writes nothing
    more into the run, and keeps every row it still has and every later one in its spill file (before: 84% of a
    frozen writer's steps dropped without a word); said at ERROR level, once."""
    path = str(tmp_path / "taken.db")
    with Tracker("t", ledger=path, config=TrackerConfig(flush_every_s=0.05, log_every_steps=1)) as tr:
        tr.step(tokens=128)
        time.sleep(0.3)
        set_claim(path, "t", host="node-7", pid=4242, started=1.0)  # another process judged it dead, took the run
        for _ in range(5):
            tr.step(tokens=128)
        time.sleep(0.3)
        for _ in range(3):  # after it knows: straight to the spill file
            tr.step(tokens=128)
    stats = tr.stats
    assert stats["dropped_rows"] == 0 and stats["spilled_rows"] == 8 and stats["faults"] >= 1, stats
    with Ledger(path, readonly=True) as led:
        assert led.steps("t")["step"].tolist() == [1] and led.run_info("t")["status"] == "running"
    with Ledger(stats["spill_path"], readonly=True) as side:
        assert side.steps("t")["step"].tolist() == list(range(2, 10))
        assert side.steps("t")["tokens"].tolist() == [128.0 * s for s in range(2, 10)]
    said = [r for r in caplog.records if r.levelname == "ERROR" and "TAKEN OVER" in r.getMessage()]
    assert len(said) == 1 and stats["spill_path"] in said[0].getMessage(), [r.getMessage() for r in said]
    check(
        "a Tracker frozen past the stale limit wakes to find its run taken over",
        "it writes nothing more into the run; every row it still had and every later one go to its spill file "
        "(`yieldgate merge` brings them in once the other writer closes), said once at ERROR level with the file's "
        "path; before: all 8 dropped, counted in `dropped_rows` only",
        "0",
    )


def test_dropped_rows_are_gaps_never_an_offset(tmp_path):
    """A writer queue of one packet, shipped every step, collected every 0.2 s: most packets are dropped. Every
    stored step still holds the loop's own running totals (tokens, samples, tokens per source) exactly, and a
    step whose extra is refused still counts its tokens."""
    path = tmp_path / "drops.db"
    rng = np.random.default_rng(0)
    total = samples = 0
    expected: dict[int, tuple[int, int]] = {}
    config = TrackerConfig(queue_size=1, log_every_steps=1, flush_every_s=0.2)
    with Tracker("d", ledger=path, config=config) as tr:
        for step in range(1, 401):
            n, k = int(rng.integers(1, 5000)), int(rng.integers(1, 9))
            total, samples = total + n, samples + k
            expected[step] = (total, samples)
            tr.step(
                tokens=n,
                samples=k,
                sources={"web": n},
                loss=1.0,
                extras={"signals/pad": "not a number" if step == 7 else 1.0},
            )
            time.sleep(0.0005)
        dropped = tr.stats["dropped_rows"]
    with Ledger(path, readonly=True) as led:
        steps = led.steps("d")
        web = led.extras("d", ["tokens/web"]).set_index("step")["value"]
    stored = steps["step"].tolist()
    assert dropped > 50 and len(stored) == 400 - dropped and tr.stats["faults"] >= 2
    assert steps["tokens"].tolist() == [float(expected[s][0]) for s in stored]
    assert steps["samples"].tolist() == [float(expected[s][1]) for s in stored]
    assert web.loc[stored].tolist() == [float(expected[s][0]) for s in stored]
    check(
        "writer queue full (a queue of one packet): most rows dropped",
        "dropped rows are counted gaps; tokens and samples at every stored step equal the loop's own running "
        "total exactly",
        "the dropped rows (counted in `tr.stats`)",
    )


def test_a_run_whose_writer_stopped_is_shown_stale_or_crashed(tmp_path, cli_for):
    """Computed at read time from the owner and its heartbeat: a writer on another node unheard of for longer than
    STALE_AFTER_S is `stale`; one on this host whose process is gone is `crashed`; the recorded status stays."""
    from yieldgate.ledger.owners import STALE_AFTER_S

    path = tmp_path / "shown.db"
    for name in ("far", "near", "fresh"):
        Tracker(name, ledger=path).close()
    owners = {
        "far": ("node-7", 4242, time.time() - STALE_AFTER_S - 5),
        "near": (os.uname().nodename, 2**22 + 17, time.time()),  # above Linux's pid_max: no such process
        "fresh": ("node-7", 4242, time.time() - 2),
    }
    with Ledger(path) as led:  # the status through the ledger: it is checksummed, the writer's claim is not
        for name in owners:
            led.set_status(name, "running")
    for name, (host, pid, beat) in owners.items():
        set_claim(path, name, host=host, pid=pid, started=1.0, heartbeat=beat)
    with Ledger(path, readonly=True) as led:
        runs = led.runs().set_index("name")
    assert runs["status"].to_dict() == {"far": "stale", "near": "crashed", "fresh": "running"}
    assert (runs["recorded_status"] == "running").all()
    shown = {r["name"]: r["status"] for r in cli_for(path).json("runs")}
    assert shown == {"far": "stale", "near": "crashed", "fresh": "running"}


def test_a_live_writer_is_not_called_crashed_when_the_clock_is_stepped():
    """A process's start time in Unix seconds moves with the host's clock (NTP stepping a new machine's clock
    moved it by a second under CI, and a live Tracker's run showed `crashed`): only a process that started after
    the owner's last heartbeat holds a reused pid."""
    import psutil

    from yieldgate.ledger.owners import REUSED_AFTER_S, Owner, liveness

    me = Owner.this_process()
    started = psutil.Process().create_time()
    for step in (-30.0, -1.5, 1.5, 30.0):  # the clock stepped after the owner recorded its start
        assert liveness(Owner(me.host, me.pid, started - step), time.time()) == "live"
    # This pid, owned by a run last heard of before this process started: reused.
    gone = Owner(me.host, me.pid, started - 100.0)
    assert liveness(gone, started - REUSED_AFTER_S - 1.0) == "crashed"
    assert liveness(gone, None) == "crashed"


def test_one_bad_key_loses_nothing_else(tmp_path):
    """A mistyped key at step 11 (an extra that is no number, an eval key that names nothing) is left out with
    one report; every other column of that step, its other evals and every later step are kept, and the
    importers' names (`val_loss`, `eval_accuracy`) are evals."""
    ledger = str(tmp_path / "l.db")
    with Tracker("bad", ledger=ledger) as tr:
        for s in range(1, 21):
            extras = {"imported/note": "oops" if s == 11 else 1.0}
            tr.step(tokens=100, loss=3.0 - s / 100, extras=extras)
            if s in (10, 11, 20):
                tr.eval({"val_loss": 2.5, "eval_accuracy": 0.5, "no such key": 1.0})
        faults = tr.faults
    assert faults >= 2
    with Ledger(ledger, readonly=True) as led:
        steps = led.steps("bad")
        assert steps["step"].tolist() == list(range(1, 21)) and steps["tokens"].tolist()[-1] == 2000
        assert steps["loss"].notna().all()
        note = led.extras("bad", ["imported/note"])
        assert note["step"].tolist() == [s for s in range(1, 21) if s != 11]
        evals = led.evals("bad")
        assert sorted(set(zip(evals["task"], evals["metric"], strict=True))) == [("val", "acc"), ("val", "loss")]
        assert sorted(set(evals["step"])) == [10, 11, 20]
        assert led.runs().set_index("name").loc["bad", "status"] == "finished"


def test_a_tensor_of_several_values_loses_only_its_own_value(tmp_path, caplog):
    """A per-sample loss not reduced (shape [2]) at one step made every held tensor unstackable: the run kept
    0 of its 20 steps and its close failed. Now that value alone is left out (one line naming its shape); a
    tensor of one value in any shape ([1]) is a number; every step is kept."""
    with Tracker("t", ledger=tmp_path / "t.db") as tr:
        for s in range(1, 21):
            loss = {5: torch.tensor([1.0, 2.0]), 6: torch.tensor([0.5])}.get(s, torch.tensor(1.0 / s))
            lr = torch.tensor([0.1, 0.2]) if s == 7 else torch.tensor(0.1)
            tr.step(tokens=100, loss=loss, lr=lr, extras={"signals/v": torch.ones(3) if s == 8 else torch.ones(())})
    with Ledger(tmp_path / "t.db", readonly=True) as led:
        steps = led.steps("t")
        v = led.extras("t", ["signals/v"])
    assert steps["step"].tolist() == list(range(1, 21)) and steps["tokens"].iloc[-1] == 2000
    assert steps.set_index("step")["loss"].isna().tolist() == [s == 5 for s in range(1, 21)]
    assert steps.set_index("step").loc[6, "loss"] == 0.5 and steps["lr"].isna().sum() == 1
    assert v["step"].tolist() == [s for s in range(1, 21) if s != 8]
    said = [r.getMessage() for r in caplog.records]
    assert any("'loss' (a tensor of shape [2]: reduce it, e.g. .mean())" in m for m in said), said
    check(
        "`tr.step(loss=...)` given a tensor of several values (a per-sample loss not reduced)",
        "that value alone left out of its row, said once with its shape; every step kept (before: 0 of 20 steps "
        "kept, the close failed)",
        "0",
    )


def test_an_eval_value_that_is_no_number_loses_only_itself(tmp_path, caplog):
    """An eval of a tensor of several values lost the whole call's results (reshape's RuntimeError); one given as
    text failed in the writer and took the other results of its call with it. Now each is left out, named."""
    with Tracker("t", ledger=tmp_path / "t.db") as tr:
        tr.step(tokens=100, loss=3.0)
        tr.eval({"val/loss": torch.tensor([1.0, 2.0]), "val/acc": 0.5})
        tr.step(tokens=100, loss=2.9)
        tr.eval({"val/loss": torch.tensor([2.5]), "val/acc": "high"})
    with Ledger(tmp_path / "t.db", readonly=True) as led:
        evals = led.evals("t")
    assert sorted(zip(evals["step"], evals["metric"], evals["value"], strict=True)) == [
        (1, "acc", 0.5),
        (2, "loss", 2.5),
    ]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "'val/loss' (a tensor of shape [2]: reduce it, e.g. .mean()) must be numbers; left out" in said, said


def test_a_count_that_is_no_number_is_named_and_its_step_left_out(tmp_path, caplog):
    """`tokens=None` or a source's count given as text: the step is refused whole (its counts never half added),
    said in one line naming the argument, not as float()'s TypeError."""
    with Tracker("t", ledger=tmp_path / "t.db") as tr:
        tr.step(tokens=None, loss=3.0)
        tr.step(tokens=100, loss=2.9, sources={"web": 60, "code": "forty"})
        tr.step(tokens=100, loss=2.8, sources={"web": 60, "code": 40})
        assert tr.stats["faults"] == 2
    with Ledger(tmp_path / "t.db", readonly=True) as led:
        steps = led.steps("t")
    assert steps["step"].tolist() == [1] and steps["tokens"].tolist() == [100.0]
    said = [r.getMessage() for r in caplog.records]
    assert any("tokens must be a number, got None; the step is left out" in m for m in said), said


def test_a_step_numbered_backwards_or_a_count_that_is_no_count_never_bends_the_totals(tmp_path, caplog):
    """`step=5` twice replaced the first row, `step=3` after it landed before rows with more tokens, and one
    `tokens=nan` made every later row's tokens NaN. Now: a row numbered at or before the last is left out with its
    tokens still counted (a gap, not an offset), and a count that is nan or negative adds none, each said once."""
    with Tracker("t", ledger=tmp_path / "t.db") as tr:
        tr.step(tokens=100, loss=3.0, step=5)
        tr.step(tokens=100, loss=2.9, step=5)
        tr.step(tokens=100, loss=2.8, step=3)
        tr.step(tokens=float("nan"), loss=2.75)
        tr.step(tokens=-4, samples=float("inf"), loss=2.72)
        tr.step(tokens=100, loss=2.7)
        assert tr.stats["faults"] == 4
    with Ledger(tmp_path / "t.db", readonly=True) as led:
        steps = led.steps("t")
    assert steps["step"].tolist() == [5, 6, 7, 8]
    assert steps["tokens"].tolist() == [100.0, 300.0, 300.0, 400.0]
    assert steps["loss"].tolist() == [3.0, 2.75, 2.72, 2.7]
    said = [r.getMessage() for r in caplog.records]
    assert sum("step 5 is not after step 5" in m for m in said) == 1
    assert sum("tokens must be counts >= 0, got tokens=nan" in m for m in said) == 1
    check(
        "`tr.step(step=N)` at or before the last step, or `tokens=nan` / negative",
        "the misnumbered row left out with its tokens counted, a bad count adds none; each said once; later rows exact",
        "2 (the misnumbered rows)",
    )


@pytest.mark.slow  # a real training, 2 s
def test_the_mfu_warning_has_its_own_logger_so_a_caller_can_silence_it_by_name(text, tmp_path, caplog):
    # A caller that knows a run records no MFU (a CPU probe campaign) silences that warning by its logger's name,
    # `yieldgate.track.mfu`, never by its text; every other warning of the Tracker still shows.
    import logging

    torch.manual_seed(0)
    model = GPT(CFG)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    quiet = logging.getLogger("yieldgate.track.mfu")
    quiet.disabled = True
    try:
        with (
            caplog.at_level(logging.WARNING),
            Tracker("quiet", ledger=tmp_path / "q.db", model=model, optimizer=opt, signals="full") as tr,
        ):
            train(tr, model, opt, text, 2)
    finally:
        quiet.disabled = False
    said = [(r.name, r.getMessage().split(":")[1]) for r in caplog.records if "not recorded" in r.getMessage()]
    assert said == [("yieldgate.track", " signals/gns not recorded for run 'quiet'")]
    with Ledger(tmp_path / "q.db", readonly=True) as led:  # the run still keeps why
        assert "unknown device 'cpu'" in led.meta("quiet")["unmeasured"]["mfu"]
