from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yieldgate.analysis.points import to_per_byte
from yieldgate.analysis.yields import tranche_yields
from yieldgate.errors import InputError


def frames(losses, *, tokens=(0, 1e9, 2e9, 3e9), wall=True, cost=False, energy=False, extra=None):
    steps = pd.DataFrame({"step": [0, 100, 200, 300], "tokens": list(tokens)})
    if wall:
        steps["wall_s"] = [0.0, 3600.0, 7200.0, 14400.0]
    if cost:
        steps["cost_usd"] = [0.0, 10.0, 20.0, 40.0]
    if energy:
        steps["energy_j"] = [0.0, 3.6e6, 7.2e6, 10.8e6]
    rows = [
        {"step": s, "tokens": np.nan, "task": "val", "metric": "loss", "value": v, "higher_is_better": False}
        for s, v in zip(steps["step"], losses, strict=False)
    ]
    for key, values, hib in extra or []:
        task, _, metric = key.rpartition("/")
        rows += [
            {"step": s, "tokens": np.nan, "task": task, "metric": metric, "value": v, "higher_is_better": hib}
            for s, v in zip(steps["step"], values, strict=False)
            if v is not None
        ]
    return steps, pd.DataFrame(rows)


def test_yields_per_tranche_exactly():
    steps, evals = frames([3.0, 2.5, 2.3, 2.4], cost=True, energy=True)
    report = tranche_yields("r", steps, evals, devices=8)
    t = report.tranches
    assert [(x.start_tokens, x.end_tokens) for x in t] == [(0, 1e9), (1e9, 2e9), (2e9, 3e9)]
    assert [x.yield_per_btok for x in t] == pytest.approx([0.5, 0.2, -0.1])  # negative: learning went backwards
    assert t[0].yield_per_device_hour == pytest.approx(0.5 / 8)
    assert t[2].yield_per_device_hour == pytest.approx(-0.1 / 16)
    assert [x.yield_per_dollar for x in t] == pytest.approx([0.05, 0.02, -0.005])
    assert [x.yield_per_kwh for x in t] == pytest.approx([0.5, 0.2, -0.1])
    assert report.missing == {}


def test_missing_inputs_are_null_with_the_reason_and_price_fills_cost():
    steps, evals = frames([3.0, 2.5, 2.3, 2.2], wall=False)
    report = tranche_yields("r", steps, evals)
    assert all(x.yield_per_device_hour is None and x.yield_per_dollar is None for x in report.tranches)
    assert "wall-clock" in report.missing["yield_per_device_hour"] and "price" in report.missing["yield_per_dollar"]
    steps, evals = frames([3.0, 2.5, 2.3, 2.2])
    priced = tranche_yields("r", steps, evals, devices=2, price_per_device_hour=5.0)
    assert priced.tranches[0].yield_per_dollar == pytest.approx(0.5 / 10.0)


def test_capability_and_per_source_yields_and_disagreement():
    steps, evals = frames(
        [3.0, 2.5, 2.3, 2.2],
        extra=[
            ("val/code/loss", [4.0, 3.0, 2.9, 2.95], False),
            ("lambada_openai/acc", [0.20, 0.25, 0.24, None], True),
        ],
    )  # a standard error is never a series here: the ledger keeps it beside its metric (tests/test_ingest_lmeval.py)
    t = tranche_yields("r", steps, evals).tranches
    assert t[0].per_source["code"]["yield_per_btok"] == pytest.approx(1.0)
    assert t[2].per_source["code"]["yield_per_btok"] == pytest.approx(-0.05)
    assert t[0].capability["lambada_openai/acc"]["yield_per_btok"] == pytest.approx(0.05)
    assert t[1].capability["lambada_openai/acc"]["yield_per_btok"] == pytest.approx(-0.01)
    assert "lambada_openai/acc" not in t[2].capability  # not evaluated at the tranche's end: no figure
    assert t[0].disagreements == [] and t[1].disagreements == ["val/loss improved while lambada_openai/acc worsened"]


def test_tranche_tokens_merges_evaluations():
    steps, evals = frames([3.0, 2.5, 2.3, 2.2])
    t = tranche_yields("r", steps, evals, tranche_tokens=2e9).tranches
    assert [(x.start_tokens, x.end_tokens) for x in t] == [(0, 3e9)]
    assert t[0].yield_per_btok == pytest.approx(0.8 / 3)


def test_no_such_metric_names_what_there_is():
    steps, evals = frames([3.0, 2.5, 2.3, 2.2])
    with pytest.raises(InputError, match="no evaluations of val/bpb; it has: val/loss"):
        tranche_yields("r", steps, evals, metric="bpb")


def test_per_byte_converts_loss_and_tokens():
    steps, evals = frames([3.0, 2.5, 2.3, 2.2])
    ev, st = to_per_byte(evals, steps, 4.0, "r")
    assert ev["metric"].unique().tolist() == ["bpb"]
    assert ev["value"].iloc[0] == pytest.approx(3.0 / math.log(2) / 4.0)
    assert st["tokens"].iloc[-1] == 12e9
    with pytest.raises(InputError, match="bytes_per_token"):
        to_per_byte(evals, steps, None, "r")


def test_energy_sampled_between_evaluations_is_read_at_them():
    """The Tracker records cumulative energy once per flush, rarely at an eval step: it is read between
    the nearest readings (a cumulative counter), and never beyond them."""
    steps, evals = frames([3.0, 2.5, 2.3, 2.2])
    steps = pd.concat(
        [steps, pd.DataFrame({"step": [50, 150, 250], "tokens": [5e8, 1.5e9, 2.5e9], "energy_j": [0.0, 3.6e6, 7.2e6]})]
    ).sort_values("step")
    t = tranche_yields("r", steps, evals).tranches
    # energy at steps 100 and 200 is 1.8e6 and 5.4e6 J: 1 kWh in the middle tranche; steps 0 and 300 lie
    # outside the readings, so the first and last tranches have no figure.
    assert t[1].yield_per_kwh == pytest.approx(0.2)
    assert t[0].yield_per_kwh is None and t[2].yield_per_kwh is None


def test_tranches_carry_the_evaluation_noise_band_and_say_which_are_within_it():
    """Eight evaluations on a straight line with alternating noise ±0.01: `fit.eval_noise` measures it over the
    seven trained ones (step 0 left out: `fit.learning_noise`), each tranche's band is ± t(0.9, 5)·σ·√2 around its
    gain (stats.evaluation_difference), and a tranche whose gain is smaller than that is within noise."""
    from yieldgate.analysis.fit import eval_noise
    from yieldgate.analysis.stats import t_quantile

    n = 8
    tokens = np.arange(n) * 1e9
    values = 3.0 - 0.1 * np.arange(n) + 0.01 * (-1.0) ** np.arange(n)
    values[-1] = values[-2] + 0.001  # the last tranche: no gain beyond the noise
    steps = pd.DataFrame({"step": np.arange(n) * 100, "tokens": tokens, "lr": [1e-3] * 6 + [0.95e-3, 0.5e-3]})
    evals = pd.DataFrame(
        {
            "step": steps["step"],
            "tokens": np.nan,
            "task": "val",
            "metric": "loss",
            "value": values,
            "higher_is_better": False,
        }
    )
    report = tranche_yields("r", steps, evals)
    sigma = eval_noise(tokens[1:], values[1:])
    half = t_quantile(0.9, n - 3) * sigma * math.sqrt(2)
    assert report.eval_noise == pytest.approx(sigma) and report.level == 0.9
    first = report.tranches[0]
    gain = values[0] - values[1]
    assert first.band == pytest.approx((gain - half, gain + half))
    assert first.yield_band == pytest.approx((gain - half, gain + half))  # 1e9 tokens per tranche
    assert [t.within_noise for t in report.tranches] == [False] * 6 + [True]
    # The LR at the end of the 6th tranche is 95% of its peak, of the 7th 50%: only the 7th spans the decay.
    assert [t.spans_lr_decay for t in report.tranches] == [False] * 6 + [True]
    out = report.to_dict()
    assert out["eval_noise"] == pytest.approx(sigma) and out["tranches"][6]["within_noise"] is True
    assert out["tranches"][0]["band"] == first.band
    # Three evaluations or fewer: no band, with the reason; no LR recorded: the decay is unknown.
    steps, evals = frames([3.0, 2.5])[0].iloc[:2], frames([3.0, 2.5])[1].iloc[:2]
    short = tranche_yields("r", steps, evals)
    assert short.tranches[0].band is None and short.tranches[0].within_noise is None
    assert "three or more" in short.missing["band"] and short.tranches[0].spans_lr_decay is None


def test_the_yield_table_shows_the_band_and_the_notes(cli, ledger_path, monkeypatch):
    from yieldgate.ledger import EvalRecord, Ledger

    monkeypatch.setenv("COLUMNS", "200")  # one line per row

    with Ledger(ledger_path) as led:
        led.create_run("r")
        n = 8
        led.append_steps(
            "r", {"step": np.arange(n) * 100, "tokens": np.arange(n) * 1e9, "lr": np.array([1e-3] * 7 + [0.5e-3])}
        )
        values = 3.0 - 0.1 * np.arange(n) + 0.01 * (-1.0) ** np.arange(n)
        values[-1] = values[-2]
        led.append_evals(
            "r",
            [EvalRecord(step=int(s * 100), task="val", metric="loss", value=float(v)) for s, v in enumerate(values)],
        )
    out = cli("yield", "r").stdout
    assert "noise band (90%)" in out and "within noise, LR decay" in out and "evaluation noise:" in out
    rows = cli.json("yield", "r")
    assert rows[-1]["within_noise"] is True and rows[-1]["spans_lr_decay"] is True and len(rows[0]["yield_band"]) == 2


def _law_run(led, name, losses, tokens):
    from yieldgate.ledger import EvalRecord

    led.create_run(name)
    led.append_steps(name, {"step": np.arange(len(tokens)) * 100, "tokens": tokens, "lr": np.full(len(tokens), 1e-3)})
    led.append_evals(
        name, [EvalRecord(step=i * 100, task="val", metric="loss", value=float(v)) for i, v in enumerate(losses)]
    )


def test_each_tranche_against_the_law_its_own_run_or_a_baseline_expects(cli, ledger_path, monkeypatch):
    """A run exactly on loss = 2 + 50 * tokens^-0.3 learns 1x its own law in every tranche. A run on the same curve
    at half the pace (its loss at D tokens is the baseline's at D/2) needs twice the baseline's tokens for every
    drop: 0.5x against the baseline's law, compared at equal loss, and 1x against its own. At equal tokens it would
    read 2^0.3 = 1.23x "on the baseline's law" (the flatter stretch of the baseline's curve at D set against its own
    steeper one at D/2): the lagging pipeline called faster that issue #31 found."""
    from yieldgate.analysis.runs import yield_report
    from yieldgate.ledger import Ledger

    monkeypatch.setenv("COLUMNS", "220")
    tokens = np.geomspace(1e6, 1e8, 9)
    law = 2.0 + 50.0 * tokens**-0.3
    with Ledger(ledger_path) as led:
        _law_run(led, "base", law, tokens)
        _law_run(led, "half", 2.0 + 50.0 * (tokens / 2) ** -0.3, tokens)
        own = yield_report(led, "base")
        against = yield_report(led, "half", expected_from="base")
        itself = yield_report(led, "half")
    assert [t.vs_expected for t in own.tranches] == pytest.approx([1.0] * 8, rel=1e-3)
    assert own.law["run"] == "base" and own.law["beta"] == pytest.approx(0.3, rel=1e-3) and own.law["poor"] is None
    assert [t.vs_expected for t in against.tranches] == pytest.approx([0.5] * 8, rel=1e-3)
    assert [t.vs_expected for t in itself.tranches] == pytest.approx([1.0] * 8, rel=1e-3)
    out = cli("yield", "half", "--expected-from", "base").stdout
    assert "vs law" in out and "0.5x" in out and "base's law loss = 2 + 50" in out
    assert cli.json("yield", "half", "--expected-from", "base")[0]["vs_expected"] == pytest.approx(0.5, rel=1e-3)
    err = cli("yield", "half", "--expected-from", "nope", code=2).stderr
    assert err.count("\n") == 1 and "nope" in err


def test_a_law_fitted_on_a_flat_run_sets_nothing_against_and_says_why(ledger_path):
    """A baseline that learned nothing (its loss wobbles around 3.0) fits a law that expects almost no gain, against
    which any tranche read thousands of times its due. It is marked poor (flat) and no tranche is set against it."""
    from yieldgate.analysis.runs import yield_report
    from yieldgate.ledger import Ledger

    tokens = np.geomspace(1e6, 1e8, 9)
    flat = 3.0 + 0.002 * (-1.0) ** np.arange(9)
    flat[-3:] -= 0.003  # a hint of a trend, so the fit has an exponent to find
    with Ledger(ledger_path) as led:
        _law_run(led, "flat", flat, tokens)
        _law_run(led, "good", 2.0 + 50.0 * tokens**-0.3, tokens)
        report = yield_report(led, "good", expected_from="flat")
    assert "flat" in report.law["poor"]
    assert all(t.vs_expected is None for t in report.tranches)
    assert "flat" in report.missing["vs_expected"]


def test_no_law_where_none_fits_says_why():
    from yieldgate.analysis.runs import yield_report
    from yieldgate.ledger import Ledger

    with Ledger(":memory:") as led:
        _law_run(led, "two", [3.0, 2.5], np.array([1e6, 2e6]))
        report = yield_report(led, "two")
    assert report.law is None and report.tranches[0].vs_expected is None
    assert "at least 3 evaluations" in report.missing["vs_expected"]


def test_a_law_fitted_across_an_lr_decay_says_so():
    from yieldgate.analysis.runs import yield_report
    from yieldgate.ledger import EvalRecord, Ledger

    tokens = np.geomspace(1e6, 1e8, 9)
    with Ledger(":memory:") as led:
        led.create_run("cosine")
        led.append_steps(
            "cosine",
            {"step": np.arange(9) * 100, "tokens": tokens, "lr": 1e-3 * 0.5 * (1 + np.cos(np.pi * np.arange(9) / 8))},
        )
        led.append_evals(
            "cosine",
            [
                EvalRecord(step=i * 100, task="val", metric="loss", value=float(v))
                for i, v in enumerate(2.0 + 50.0 * tokens**-0.3)
            ],
        )
        report = yield_report(led, "cosine")
    assert "fitted across the decay" in report.law["poor"]
    assert any("read vs_expected with care" in n for n in report.notes)


REAL = Path(__file__).parent / "data" / "real"


@pytest.mark.slow
def test_an_epoch_counted_run_is_labelled_per_epoch(cli, ledger_path, monkeypatch):
    """Keras' CSVLogger file (a real run: one row per epoch, no token count) and YOLO's results.csv count epochs, not
    optimizer steps: the tranches are spans of epochs with yields per epoch, in `yield`'s table and --json, the
    notebook's table, `forecast` and `compare`, and no figure or note says "per 1k steps"."""
    from yieldgate import api
    from yieldgate.report.notebook import result_html

    monkeypatch.setenv("COLUMNS", "200")
    keras = REAL / "keras-csvlogger-amazon-reviews-training_log.csv"
    for run in ("keras", "keras2"):
        cli("import", "table", str(keras), "--run", run)
    cli("import", "table", str(REAL / "yolo11-seg-gallstone-results.csv"), "--run", "yolo")
    with keras.open() as f:  # the file's own numbers, read without yieldgate
        val_loss = [float(row["val_loss"]) for row in csv.DictReader(f)]
    tranches = cli.json("yield", "keras")
    assert [t["yield_per_epoch"] for t in tranches] == pytest.approx([a - b for a, b in itertools.pairwise(val_loss)])
    assert all(t["yield_per_kstep"] is None for t in tranches)
    assert [(t["start_step"], t["end_step"]) for t in tranches] == [(e, e + 1) for e in range(5)]
    table = cli("yield", "keras").stdout
    assert "per epoch" in table and "epochs" in table and "spans of epochs" in table and "1k steps" not in table
    yolo = cli.json("yield", "yolo")[-1]
    assert yolo["yield_per_epoch"] is not None and yolo["yield_per_kstep"] is None
    assert all("yield_per_epoch" in c and "yield_per_kstep" not in c for c in yolo["capability"].values())
    assert "per epoch" in cli("forecast", "keras", "--next-steps", "2").stdout
    assert cli.json("compare", "keras", "keras2")["aligned_on"] == "epochs"
    report = api.yields("keras", ledger=ledger_path)
    assert report.axis == "epochs" and report.per == "per epoch"
    page = result_html(report)
    assert "per epoch" in page and "1k steps" not in page
    # This Keras run is a binary review classifier: its loss is a cross-entropy per review, not per token. A run that
    # counts no tokens has its loss labelled as logged, in the table, the notebook and the report's axes.
    assert report.unit == "the loss as logged" and "(the loss as logged)" in table
    assert "nats/token" not in table + page
    figures = cli("report", "keras", "--output", str(ledger_path.parent / "keras.html")).stdout
    assert "nats/token" not in (ledger_path.parent / "keras.html").read_text(), figures


def _switching(versions, losses, steps_at=(0, 100, 200, 300, 400, 500)):
    """A run whose val/loss evaluations switch portfolio version mid-run (one version per evaluation)."""
    steps = pd.DataFrame({"step": list(steps_at), "tokens": [s * 1e7 for s in steps_at]})
    evals = pd.DataFrame(
        [
            {
                "step": s,
                "tokens": np.nan,
                "task": "val",
                "metric": "loss",
                "value": v,
                "higher_is_better": False,
                "portfolio": "held-out",
                "portfolio_version": ver,
            }
            for s, v, ver in zip(steps_at, losses, versions, strict=True)
        ]
    )
    return steps, evals


def test_a_portfolio_version_change_starts_a_new_curve_and_no_tranche_spans_it():
    # v2 reads 0.5 nats lower than v1 for the same model: today the tranche 200-300 across the switch reads as a
    # gain of 0.6 nats (0.5 of it the change of ruler)
    steps, evals = _switching(["v1", "v1", "v1", "v2", "v2", "v2"], [4.0, 3.5, 3.3, 2.7, 2.6, 2.55])
    report = tranche_yields("r", steps, evals)
    assert [(t.start_step, t.end_step) for t in report.tranches] == [(0, 100), (100, 200), (300, 400), (400, 500)]
    assert [t.yield_per_btok for t in report.tranches] == pytest.approx([0.5, 0.2, 0.1, 0.05])
    switch = [n for n in report.notes if "portfolio changed" in n]
    assert len(switch) == 1
    assert "held-out v1 to held-out v2 at step 300" in switch[0] and "step 200 to step 300" in switch[0]
    assert "not computed" in switch[0]


def test_a_step_evaluated_with_both_versions_loses_no_tranche():
    steps, evals = _switching(["v1", "v1", "v1", "v2", "v2"], [4.0, 3.5, 3.3, 2.8, 2.7], (0, 100, 200, 200, 300))
    steps = steps.drop_duplicates("step")
    report = tranche_yields("r", steps, evals)
    assert [(t.start_step, t.end_step) for t in report.tranches] == [(0, 100), (100, 200), (200, 300)]
    assert [t.loss_start for t in report.tranches] == pytest.approx([4.0, 3.5, 2.8])
    assert any("both were evaluated at step 200" in n for n in report.notes)


def test_no_two_evaluations_of_one_version_is_refused():
    steps, evals = _switching(["v1", "v2"], [4.0, 3.0], (0, 100))
    with pytest.raises(InputError, match="no two evaluations of val loss with one portfolio version"):
        tranche_yields("r", steps, evals)
