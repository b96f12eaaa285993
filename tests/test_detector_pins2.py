"""Second pass of the pins on the code that decides (issue #44 item 11): the gate's evidence functions and the
plateau test, each answer compared whole against values worked out by hand from the small records built here (each
test says how). Mutation testing (`make mutation-sample`) found their messages, boundaries and roundings read by no
test: a change to them passed the fast tier."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from yieldgate.analysis import data_detectors, learning_detectors
from yieldgate.analysis.compare import RunData
from yieldgate.analysis.data_detectors import data_exhaustion, duplicated_stream, mixture_drift, non_iid_stream
from yieldgate.analysis.detectors import CAUSES, Finding, NotRun, RunSignals, nonfinite_and_skipped
from yieldgate.analysis.learning_detectors import (
    early_warnings,
    schedule,
    throughput_altered_learning,
    undertrained,
)
from yieldgate.analysis.load import load_run
from yieldgate.analysis.plateau import Plateau, plateau
from yieldgate.analysis.results import KIND
from yieldgate.errors import InputError
from yieldgate.gate import evidence
from yieldgate.gate.policy import NewHardwareException, parse_policy
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest
from yieldgate.util.hashing import content_hash


def _manifest(**sections: Any) -> Manifest:
    return Manifest.model_validate(sections)


def _policy(prices: dict[str, float] | None = None, **requirements: Any) -> Any:
    data: dict[str, Any] = {
        "name": "p",
        "version": 1,
        "stages": [
            {"name": "s1", "tokens": 1000, "compute_share": 0.1},
            {"name": "s2", "tokens": 2000, "compute_share": 0.9},
        ],
        "requirements": {"min_yield_per_btok": 1.0, **requirements},
    }
    if prices is not None:
        data["prices"] = prices
    return parse_policy(data)


def _steps(n: int, **columns: Any) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(n), **columns})


def _evals(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "metric", "step", "value"])


def _run(name: str, steps: dict[str, list[float]] | None = None, manifest: Manifest | None = None) -> RunData:
    evals = pd.DataFrame(columns=["task", "metric", "step", "value", "higher_is_better"])
    return RunData(name=name, steps=pd.DataFrame(steps or {"step": [0]}), evals=evals, manifest=manifest)


# -- budgets and the workflow ----------------------------------------------------------------------------------


def test_budgets_group_runs_within_two_percent_of_each_group_s_first_budget():
    """a's probe says 1000 tokens; b has no probe and reached 1020 (1000 * 1.02: the same budget, `<=`); c reached
    1021, past 1020 measured from the group's first budget: a budget of its own. d's probe has no tokens and e's
    probe is not a mapping: both read the tokens they reached."""
    tokens = {"a": 5.0, "b": 1020.0, "c": 1021.0, "d": 2000.0, "e": 2040.0}
    metas: dict[str, dict[str, Any]] = {
        "e": {"probe": "x"},
        "d": {"probe": {"tokens": None}},
        "c": {},
        "b": {"probe": None},
        "a": {"probe": {"tokens": 1000}},
    }
    assert evidence.budgets(tokens, metas) == [(1000.0, ["a", "b"]), (1021.0, ["c"]), (2000.0, ["d", "e"])]


@pytest.mark.parametrize("reached", [{"a": 1.0}, {"a": 1.0, "b": 0.0}, {"a": 1.0, "b": math.nan}])
def test_a_run_without_tokens_is_refused_by_name(reached):
    """b reached no tokens (absent, 0, NaN): the gate cannot place it on a budget."""
    with pytest.raises(InputError) as err:
        evidence.budgets(reached, {"a": {}, "b": {}})
    assert str(err.value) == "run 'b' has recorded no tokens: the gate needs the tokens each run reached"


def test_the_workflow_leaves_out_what_resolved_on_a_seed_s_split():
    """The sources' unique and accepted tokens, the data's accepted tokens and the tokenizer's hash and bytes per
    token are left out; the seed and hardware are not workflow sections at all."""
    sections = {
        "seed": 3,
        "hardware": {"device_count": 2},
        "model": {"name": "m", "params": 100},
        "data": {
            "accepted_tokens": 5,
            "sources": [{"name": "a", "weight": 1.0, "unique_tokens": 10, "accepted_tokens": 3}],
            "tokenizer": {"name": "t", "content_hash": "x", "bytes_per_token": 4.0, "vocab_size": 50},
        },
    }
    m = _manifest(**sections)
    got = evidence.workflow(m)
    assert set(got) == {"data", "model", "optimisation"}
    assert got["optimisation"] is None
    assert got["model"]["params"] == 100
    assert got["data"]["sources"] == [{"name": "a", "weight": 1.0, "path": None, "domain": None, "shuffled_share": 0.0}]
    assert got["data"]["tokenizer"] == {"name": "t", "vocab_size": 50}
    assert "accepted_tokens" not in got["data"]
    # Another seed's split resolves to other counts: the same workflow, the same digest.
    other = {**sections, "seed": 4, "data": {**sections["data"], "accepted_tokens": 7}}
    other["data"]["sources"] = [{"name": "a", "weight": 1.0, "unique_tokens": 11, "accepted_tokens": 4}]
    other["data"]["tokenizer"] = {**sections["data"]["tokenizer"], "content_hash": "y", "bytes_per_token": 3.0}
    assert evidence.workflow(_manifest(**other)) == got
    assert evidence.workflow_digest(m) == content_hash(got, spaced=True)
    assert evidence.workflow_digest(m) != content_hash(got)
    assert evidence.workflow(None) == {}
    assert evidence.workflow_digest(None) is None


def test_manifest_fields_leave_out_the_resolution_fields_and_keep_the_sections_asked():
    a = _manifest(seed=1, hardware={"device_count": 2}, model={"name": "m", "params": 100})
    b = _manifest(seed=2, hardware={"device_count": 4}, model={"name": "m", "params": 200})
    a.data = b.data = None
    assert evidence.manifest_fields(a, b) == ["hardware.device_count", "model.params"]
    assert evidence.manifest_fields(a, b, ("model",)) == ["model.params"]
    assert evidence.manifest_fields(a, b, ("hardware", "library_versions")) == ["hardware.device_count"]
    c = _manifest(data={"sources": [{"name": "s", "weight": 1.0, "unique_tokens": 10}]})
    d = _manifest(data={"sources": [{"name": "s", "weight": 1.0, "unique_tokens": 20}]})
    assert evidence.manifest_fields(c, d) == []


# -- open faults -----------------------------------------------------------------------------------------------


def test_open_faults_are_the_blocking_causes_above_the_confidence_whole():
    """The default bar is 0.3: a finding at 0.3 is a note, one at 0.31 blocks, one without a confidence counts as
    certain; a data cause does not block unless asked."""
    findings = [
        {"run": "r1", "cause": "schedule", "confidence": 0.3, "start_step": 1, "end_step": 2},
        {
            "run": "r1",
            "cause": "schedule",
            "confidence": 0.31,
            "start_step": 3,
            "end_step": 4,
            "event": 7,
            "detector": "schedule",
            "advice": "lower it",
        },
        {"run": "r2", "cause": "infrastructure_stall", "start_step": 5},
        {"run": "r2", "cause": "data_exhaustion", "confidence": 0.9, "start_step": 6, "end_step": 8},
    ]
    policy = _policy()
    assert evidence.open_faults(findings, policy) == [
        {"event": 7, "run": "r1", "cause": "schedule", "detector": "schedule", "confidence": 0.31,
         "steps": [3, 4], "advice": "lower it"},
        {"event": None, "run": "r2", "cause": "infrastructure_stall", "detector": None, "confidence": None,
         "steps": [5, None], "advice": ""},
    ]  # fmt: skip
    assert [f["cause"] for f in evidence.open_faults(findings, policy, ["data_exhaustion"])] == ["data_exhaustion"]
    strict = _policy(diagnosis_confidence=0.9)
    assert [f["cause"] for f in evidence.open_faults(findings, strict)] == ["infrastructure_stall"]


# -- throughput, cost and a stage's price ----------------------------------------------------------------------


def test_tokens_per_s_is_the_last_logged_tokens_over_the_last_wall_time():
    """The last row has no wall time: the row before it decides (2000 tokens in 2 s)."""
    run = _run("r", {"step": [0, 1, 2], "tokens": [1000.0, 2000.0, 3000.0], "wall_s": [1.0, 2.0, math.nan]})
    assert evidence.tokens_per_s(run) == 1000.0
    assert evidence.tokens_per_s(_run("r", {"step": [0], "tokens": [5.0]})) is None
    assert evidence.tokens_per_s(_run("r", {"step": [0], "wall_s": [5.0]})) is None
    assert evidence.tokens_per_s(_run("r", {"step": [0, 1], "tokens": [5.0, 6.0], "wall_s": [0.0, 0.0]})) is None
    assert evidence.tokens_per_s(_run("r", {"step": [0], "tokens": [math.nan], "wall_s": [1.0]})) is None


def _timed(name: str, tps: float = 1000.0, manifest: Manifest | None = None, **extra: list[float]) -> RunData:
    return _run(name, {"step": [0, 1], "tokens": [0.0, 2 * tps], "wall_s": [0.0, 2.0], **extra}, manifest)


def test_the_cost_of_a_billion_tokens_reads_the_manifests_price_and_the_runs_rate():
    """Runs at 1000 and 3000 tokens/s (mean 2000) on 2 devices at $1.5 and 1 device at $4 (mean $3.5 an hour of
    the run): 1e9 / 2000 s = 138.9 h, at $3.5: $486.1."""
    hw = {"a": _manifest(hardware={"device_count": 2, "price_per_device_hour": 1.5}),
          "b": _manifest(hardware={"price_per_device_hour": 4.0})}  # fmt: skip
    runs = [_timed("a", 1000.0), _timed("b", 3000.0)]
    usd, how = evidence.cost_per_btok(runs, hw)
    assert usd == pytest.approx(1e9 / 2000 / 3600 * 3.5)
    assert how == "2,000 tokens/s at $3.5 per hour"
    no_price = "no price: set hardware.price_per_device_hour in the manifests"
    assert evidence.cost_per_btok(runs, {}) == (None, no_price)
    assert evidence.cost_per_btok(runs, {**hw, "b": _manifest(hardware={})}) == (None, no_price)
    assert evidence.cost_per_btok(runs, {**hw, "b": None}) == (None, no_price)
    untimed = [runs[0], _run("b")]
    assert evidence.cost_per_btok(untimed, hw) == (None, "no wall-clock time recorded: tokens/s unknown")


def test_throughput_is_the_mean_rate_and_the_most_devices_any_run_names():
    runs = [_timed("a", 1000.0, _manifest(hardware={"device_count": 2})), _timed("b", 2000.0), _timed("c", 3000.0)]
    metas = {"b": {"devices": {"count": 4}}}
    assert evidence.throughput(runs, metas) == (2000.0, 4)
    assert evidence.throughput(runs[2:], {}) == (3000.0, 1)
    assert evidence.throughput([runs[0], _run("d")], metas) == (None, 2)
    assert evidence.throughput([], {}) == (None, 1)


def test_the_hourly_price_is_the_policy_s_else_the_manifests_mean():
    priced = [_run("a", manifest=_manifest(hardware={"price_per_device_hour": 2.0})),
              _run("b", manifest=_manifest(hardware={"price_per_device_hour": 3.0})),
              _run("c")]  # fmt: skip
    assert evidence.hourly_price(priced, _policy(prices={"per_device_hour": 9.0})) == 9.0
    assert evidence.hourly_price(priced, _policy(prices={"per_kwh": 0.2})) == 2.5
    assert evidence.hourly_price(priced, _policy()) == 2.5
    unpriced = [*priced, _run("d", manifest=_manifest(hardware={}))]
    assert evidence.hourly_price(unpriced, _policy()) is None
    assert evidence.hourly_price([_run("c")], _policy()) is None


def test_a_stage_is_priced_in_device_hours_dollars_and_energy():
    """3.6e6 tokens at 1000 tokens/s on 2 devices: 1 h of wall time, 2 device-hours, at $5: $10. The runs spent
    1000 J over 2000 tokens (from their first logged row: 100 J at 0 tokens): 0.5 J a token, 1.8e6 J = 0.5 kWh,
    at $0.2 a kWh: $0.1."""
    energy = {"energy_j": [100.0, 1100.0]}
    runs = [_timed("a", 1000.0, _manifest(hardware={"device_count": 2}), **energy), _timed("b", 1000.0, **energy)]
    policy = _policy(prices={"per_device_hour": 5.0, "per_kwh": 0.2})
    assert evidence.stage_price(runs, {}, 3.6e6, policy) == {
        "tokens": 3.6e6,
        "tokens_per_s": 1000.0,
        "devices": 2,
        "device_hours": 2.0,
        "usd": 10.0,
        "usd_per_device_hour": 5.0,
        "kwh": pytest.approx(0.5),
        "energy_usd": pytest.approx(0.1),
        "missing": {},
    }
    no_kwh_price = evidence.stage_price(runs, {}, 3.6e6, _policy(prices={"per_device_hour": 5.0}))
    assert no_kwh_price["kwh"] == pytest.approx(0.5)
    assert no_kwh_price["energy_usd"] is None
    assert no_kwh_price["missing"] == {}
    assert evidence.stage_price([_run("c")], {}, 3.6e6, _policy()) == {
        "tokens": 3.6e6,
        "tokens_per_s": None,
        "devices": 1,
        "device_hours": None,
        "usd": None,
        "usd_per_device_hour": None,
        "kwh": None,
        "energy_usd": None,
        "missing": {
            "device_hours": "no wall-clock time recorded: tokens/s unknown",
            "usd": "no price: set prices.per_device_hour in the policy or hardware.price_per_device_hour",
            "kwh": "no energy recorded (energy_j) by the runs",
        },
    }
    # Timed and priced, but one run recorded no energy: no kWh, and only that is missing.
    mixed = evidence.stage_price([runs[0], _timed("b", 1000.0)], {}, 3.6e6, policy)
    assert (mixed["usd"], mixed["kwh"], mixed["energy_usd"]) == (10.0, None, None)
    assert mixed["missing"] == {"kwh": "no energy recorded (energy_j) by the runs"}
    assert evidence.stage_price([], {}, 3.6e6, policy)["missing"]["kwh"] == "no energy recorded (energy_j) by the runs"


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ({"tokens": [0.0, 2000.0], "energy_j": [100.0, 1100.0]}, 0.5),
        ({"tokens": [1000.0, 2000.0], "energy_j": [100.0, 100.0]}, 0.0),  # no energy spent: 0 J a token
        ({"tokens": [1000.0, 1000.0], "energy_j": [100.0, 200.0]}, None),  # no tokens between the rows
        ({"tokens": [0.0, 2000.0], "energy_j": [200.0, 100.0]}, None),  # a counter that went back
        ({"tokens": [0.0, 0.0], "energy_j": [0.0, 100.0]}, None),
        ({"tokens": [math.nan, math.nan], "energy_j": [1.0, 2.0]}, None),
        ({"tokens": [0.0, 2000.0]}, None),
        ({"energy_j": [0.0, 2000.0]}, None),
    ],
)
def test_joules_per_token_are_the_energy_over_the_tokens_between_the_first_and_last_rows(steps, expected):
    run = _run("r", {"step": [0, 1], **steps})
    assert evidence._joules_per_token(run) == expected


# -- regressions -----------------------------------------------------------------------------------------------


def test_regressions_are_the_final_value_against_the_best_per_task_mean_over_runs():
    """arc/acc (higher is better) peaks at 0.5 and ends at 0.4 in one run (0.1 worse) and ends at its best in the
    other (0): mean 0.05. hard/web reads its bpb alone (its loss is not read): lowest 1.0, last 1.3: 0.3 in the one
    run that has it. The validation tasks are not regressions; a task evaluated once has no best to fall from."""
    rows_a = [
        ("arc", "acc", 1, 0.3, True), ("arc", "acc", 2, 0.5, True), ("arc", "acc", 3, 0.4, True),
        ("hard/web", "bpb", 1, 1.2, False), ("hard/web", "bpb", 2, 1.0, False), ("hard/web", "bpb", 3, 1.3, False),
        ("hard/web", "loss", 1, 1.0, False), ("hard/web", "loss", 3, 9.0, False),
        ("val", "loss", 1, 2.0, False), ("val", "loss", 2, 3.0, False),
        ("val/web", "loss", 1, 2.0, False), ("val/web", "loss", 2, 3.0, False),
        ("once", "acc", 1, 0.5, True),
    ]  # fmt: skip
    rows_b = [("arc", "acc", 3, 0.6, True), ("arc", "acc", 1, 0.2, True), ("mmlu", "acc", 1, 0.3, True),
              ("mmlu", "acc", 2, 0.25, True), ("mmlu", "f1", 1, 0.5, True), ("mmlu", "f1", 2, 0.5, True)]  # fmt: skip
    cols = ["task", "metric", "step", "value", "higher_is_better"]

    def run(name: str, rows: list[tuple[Any, ...]]) -> RunData:
        return RunData(name=name, steps=pd.DataFrame({"step": [0]}), evals=pd.DataFrame(rows, columns=cols))

    got = evidence.regressions([run("a", rows_a), run("b", rows_b)])
    assert list(got) == ["arc/acc", "hard/web/bpb", "mmlu/acc", "mmlu/f1"]
    assert got == {
        "arc/acc": pytest.approx(0.05),
        "hard/web/bpb": pytest.approx(0.3),
        "mmlu/acc": pytest.approx(0.05),
        "mmlu/f1": 0.0,
    }


# -- the mixture's one line ------------------------------------------------------------------------------------


def test_a_mixture_s_small_sources_are_summed_into_others():
    """d at 0.01 is shown (at the bar); c and e (0.006 + 0.004) are summed; the shown ones go heaviest first."""
    mixture = {"b": 0.37, "c": 0.006, "a": 0.6, "d": 0.01, "e": 0.004}
    assert evidence._shown(mixture) == "a 0.60, b 0.37, d 0.01, others 0.01"
    assert evidence._shown({"a": 0.5, "b": 0.5}) == "b 0.50, a 0.50"
    assert evidence._shown({"a": 1.0, "z": 0.0}) == "a 1.00"


# -- the plateau test ------------------------------------------------------------------------------------------


def test_a_curve_too_short_to_judge_is_unresolved_with_its_count():
    """Three evaluations for the law before a start and four from it on, sharing the start: six at least."""
    x = np.arange(1.0, 6.0)
    assert plateau(x, 3.0 / x, 0.01) == Plateau(
        start=None,
        statistic=None,
        evaluations=0,
        unresolved="5 stable-phase evaluations: a plateau is judged over 4 or more after 3 or more on the law "
        "before it",
    )


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.nan, math.inf])
def test_six_evaluations_without_noise_to_judge_against_are_unresolved(sigma):
    x = np.arange(1.0, 7.0)
    got = plateau(x, 3.0 / x, sigma)
    assert got == Plateau(start=None, statistic=None, evaluations=0, unresolved="no evaluation noise to judge against")


def test_a_curve_that_never_learned_is_a_plateau_from_its_first_evaluation():
    x = np.arange(10.0, 110.0, 10.0)
    got = plateau(x, np.full(10, 2.0), 0.01)
    assert got == Plateau(start=10.0, statistic=None, evaluations=10)
    assert got.to_dict() == {"start": 10.0, "statistic": None, "evaluations": 10, "unresolved": None,
                             "axis": "tokens"}  # fmt: skip


def test_the_plateau_s_statistic_is_rounded_to_one_decimal_in_its_dict():
    assert Plateau(start=5.0, statistic=12.349, evaluations=4, axis="steps").to_dict() == {
        "start": 5.0,
        "statistic": 12.3,
        "evaluations": 4,
        "unresolved": None,
        "axis": "steps",
    }


# -- what the detectors read of a run ----------------------------------------------------------------------------


def test_a_run_s_epochs_come_from_its_step_unit_its_epoch_counter_or_its_tokens_over_its_unique_data():
    """Steps 3-7 counting epochs: 5 epochs. An imported epoch counter: its largest value. Else 800 tokens over
    100 + 300 unique: 2 epochs; a source with no unique count, no tokens or no unique data leave it unknown."""
    steps = pd.DataFrame({"step": [3, 4, 5, 6, 7], "tokens": [0.0, 200.0, 400.0, 800.0, math.nan]})
    assert RunSignals(steps=steps, meta={"step_unit": "epoch"}).epochs() == 5.0
    assert RunSignals(steps=steps.iloc[:0], meta={"step_unit": "epoch"}).epochs() is None
    counted = steps.assign(**{"imported/epoch": [1.0, 4.0, 2.0, math.nan, math.nan]})
    assert RunSignals(steps=counted, meta={"step_unit": "steps"}).epochs() == 4.0
    sources = [{"name": "a", "weight": 0.5, "unique_tokens": 100}, {"name": "b", "weight": 0.5, "unique_tokens": 300}]
    declared = _manifest(data={"sources": sources})
    assert RunSignals(steps=steps, manifest=declared).epochs() == 2.0
    assert RunSignals(steps=counted.assign(**{"imported/epoch": math.nan}), manifest=declared).epochs() == 2.0
    partly = _manifest(data={"sources": [sources[0], {"name": "b", "weight": 0.5}]})
    assert RunSignals(steps=steps, manifest=partly).epochs() is None
    assert RunSignals(steps=steps.drop(columns="tokens"), manifest=declared).epochs() is None
    assert RunSignals(steps=steps.assign(tokens=math.nan), manifest=declared).epochs() is None
    assert RunSignals(steps=steps, manifest=_manifest(model={"name": "m"})).epochs() is None
    assert RunSignals(steps=steps).epochs() is None


@pytest.mark.parametrize(
    ("resumes", "expected"),
    [
        ([], None),
        ([{"redone": {"step": 50}, "old": {"step": 80}}], 50),
        ([{"redone": {"step": 80}, "old": {"step": 80}}], None),  # relaunched where it stopped: nothing abandoned
        ([{"redone": {"step": 90}, "old": {"step": 80}}], None),
        ([{"redone": {"step": 50}, "old": {"step": 80}}, {"redone": {"step": 90}, "old": {"step": 95}}], 90),
        ([{"redone": {"step": 50}, "old": {"step": 80}}, {"redone": {"step": 99}, "old": {"step": 95}}], None),
        ([{"redone": {"step": 50}, "old": {"step": 80}}, {"redone": 7, "old": {"step": 95}}], 50),
        ([{"redone": {"step": 50}, "old": {"step": 80}}, {"redone": {"step": 9}}], 50),
        ([{"redone": {}, "old": {"step": 80}}], None),
        ([{"redone": {"step": 50}, "old": {}}], None),
    ],
)
def test_the_final_step_is_where_the_last_relaunch_stopped_short(resumes, expected):
    assert RunSignals(steps=_steps(3), resumes=resumes).final_step() == expected


def test_a_column_is_read_by_step_without_its_missing_rows_or_refused_in_one_line():
    sig = RunSignals(steps=pd.DataFrame({"step": [10, 20, 30], "lr": [1.0, math.nan, 3.0], "x": [math.nan] * 3}))
    got = sig.column("lr", "why")
    assert got.to_dict() == {10: 1.0, 30: 3.0}
    with pytest.raises(NotRun) as err:
        sig.column("x", "the Tracker records it")
    assert str(err.value) == "no 'x' recorded (the Tracker records it)"
    with pytest.raises(NotRun) as err:
        sig.column("grad_norm", "a log without it")
    assert str(err.value) == "no 'grad_norm' recorded (a log without it)"
    sig.steps["tokens/a"] = 1.0
    sig.steps["tokens/b"] = math.nan
    assert sig.prefixed("tokens/") == ["tokens/a"]


def test_the_validation_loss_of_a_task_is_its_loss_evaluations_by_step():
    evals = _evals(
        [("val", "loss", 30, 2.0), ("val", "loss", 10, 3.0), ("val", "acc", 20, 0.5), ("val/web", "loss", 20, 4.0)]
    )
    sig = RunSignals(steps=_steps(3), evals=evals)
    assert sig.val_loss().to_dict() == {10: 3.0, 30: 2.0}
    assert list(sig.val_loss().index) == [10, 30]
    assert sig.val_loss("val/web").to_dict() == {20: 4.0}
    assert sig.val_loss("arc").empty
    assert RunSignals(steps=_steps(3)).val_loss().empty


def test_a_finding_rounds_its_confidence_and_refuses_an_unknown_cause():
    f = Finding(cause="early_warning", start_step=1, end_step=2, confidence=0.12345, evidence={}, advice="a",
                detector="d")  # fmt: skip
    assert f.to_dict() == {"cause": "early_warning", "start_step": 1, "end_step": 2, "confidence": 0.123,
                           "severity": "low", "evidence": {}, "advice": "a", "detector": "d"}  # fmt: skip
    with pytest.raises(ValueError) as err:
        Finding(cause="gremlins", start_step=1, end_step=2, confidence=0.5, evidence={}, advice="", detector="d")
    assert str(err.value) == f"finding cause must be one of {', '.join(CAUSES)}, got 'gremlins'"


# -- a non-i.i.d. stream ---------------------------------------------------------------------------------------


def _alternating(n: int = 40, **extra: Any) -> pd.DataFrame:
    """100 tokens a step, all from source a on even steps and all from b on odd ones (each half of the whole)."""
    a = np.cumsum(np.where(np.arange(n) % 2 == 0, 100.0, 0.0))
    b = np.cumsum(np.where(np.arange(n) % 2 == 1, 100.0, 0.0))
    return _steps(n, loss=np.full(n, 2.0), **{"tokens/a": a, "tokens/b": b}, **extra)


def test_single_source_batches_far_above_iid_draws_are_a_non_iid_stream():
    """Sequences of 50 tokens: 2 samples a step, so i.i.d. draws give a one-source batch with probability
    0.5^2 + 0.5^2 = 0.5; every batch is one source (1.0): 0.5 above, confidence 0.5 + 0.5 / 2 = 0.75. The loss has
    20 values after the first 20: too few for its autocorrelation. The loss variance's median (NaN skipped) is read."""
    var = np.ones(40)
    var[:5] = math.nan
    var[5:8] = 9.0
    sig = RunSignals(
        steps=_alternating(**{"signals/loss_var": var}),
        manifest=_manifest(data={"sources": [{"name": "a", "weight": 1.0}], "sequence_length": 50}),
    )
    (found,) = non_iid_stream(sig)
    assert found.to_dict() == {
        "cause": "non_iid_stream",
        "start_step": 0,
        "end_step": 39,
        "confidence": 0.75,
        "severity": "high",
        "evidence": {"single_source_batches": 1.0, "expected_if_iid": 0.5, "loss_var_median": 1.0},
        "advice": "batches are not i.i.d. draws of the mixture: shuffle across sources and documents, and give every "
        "loader worker its own slice of one shared shuffle",
        "detector": "batch_composition",
    }


def test_a_stream_over_repeated_epochs_does_not_read_its_loss_autocorrelation():
    """800 + 800 unique tokens and 4000 drawn: 2.5 epochs. With one sample a step (sequences of 100 from the
    manifest's model context), i.i.d. draws are one source every time: no excess, no finding on composition."""
    sources = [{"name": "a", "weight": 0.5, "unique_tokens": 800}, {"name": "b", "weight": 0.5, "unique_tokens": 800}]
    steps = _alternating(60, tokens=100.0 * np.arange(1, 61))
    sig = RunSignals(steps=steps, manifest=_manifest(data={"sources": sources}, model={"name": "m", "context": 100}))
    assert non_iid_stream(sig) == []
    # The same with the context read from the sample counts (4000 tokens over 40 samples: 100 a sample).
    counted = _alternating(40, tokens=100.0 * np.arange(1, 41), samples=np.arange(1.0, 41.0))
    assert non_iid_stream(RunSignals(steps=counted)) == []
    with pytest.raises(NotRun) as err:
        non_iid_stream(RunSignals(steps=_alternating(40).drop(columns="loss")))
    assert str(err.value) == "no 'loss' recorded (a log without training loss)"


# -- the learning detectors' small pieces ----------------------------------------------------------------------


def test_the_slope_t_statistic_of_a_noisy_line_and_of_exact_ones():
    """0, 1, 0, 1: slope 0.2, intercept 0.2, residuals -0.2, 0.6, -0.6, 0.2 (sum of squares 0.8), se
    sqrt(0.8 / 2 / 5) = sqrt(0.08): t = 0.2 / sqrt(0.08) = 1 / sqrt(2). An exact line has no residual: its t is
    infinite with the slope's sign (in float arithmetic a residual of 1e-16 is left: t reads some 1e15), and 0 for
    a flat line at 0."""
    assert learning_detectors._slope_t(np.array([0.0, 1.0, 0.0, 1.0])) == pytest.approx(1 / math.sqrt(2))
    assert learning_detectors._slope_t(np.array([3.0, 4.0, 3.0, 4.0])) == pytest.approx(1 / math.sqrt(2))
    assert learning_detectors._slope_t(np.array([1.0, 0.0, 1.0, 0.0])) == pytest.approx(-1 / math.sqrt(2))
    assert learning_detectors._slope_t(np.array([1.0, 2.0, 3.0, 4.0])) > 1e12
    assert learning_detectors._slope_t(np.array([3.0, 2.0, 1.0])) < -1e12
    assert learning_detectors._slope_t(np.array([0.0, 0.0, 0.0, 0.0])) == 0.0


def test_an_early_jump_is_a_rise_beyond_six_robust_deviations_of_the_step_changes():
    """Changes 1, -1, 1, -1, 7: median 1, absolute deviations 0, 2, 0, 2, 6 (median 2), robust sigma 2.9652: the
    rise of 7 is 6 above the median, not 6 * 2.9652. With changes 0, 0, 0, 0, 4 the spread is 0: any rise above the
    median is a jump, a fall never is; under four points nothing is read."""
    jump = learning_detectors._early_jump
    assert jump(np.array([0.0, 1.0, 0.0, 1.0, 0.0, 7.0])) is False
    assert jump(np.array([0.0, 1.0, 0.0, 1.0, 0.0, 19.0])) is True  # 19 - 1 = 18 > 17.79
    assert jump(np.array([1.0, 1.0, 1.0, 1.0, 1.0, 5.0])) is True
    assert jump(np.array([5.0, 5.0, 5.0, 5.0, 5.0, 1.0])) is False
    assert jump(np.array([1.0, 1.0, 5.0])) is False
    assert jump(np.array([1.0, 1.0, 1.0, 5.0])) is True


def test_the_untrained_loss_is_the_log_of_the_vocabulary():
    def sig(**sections: Any) -> RunSignals:
        return RunSignals(steps=_steps(3), manifest=_manifest(**sections) if sections else None)

    tokenizer = {"sources": [{"name": "a", "weight": 1.0}], "tokenizer": {"name": "t", "vocab_size": 100}}
    assert learning_detectors._untrained_loss(sig(model={"name": "m", "vocab_size": 50})) == math.log(50)
    assert learning_detectors._untrained_loss(sig(model={"name": "m", "vocab_size": 50}, data=tokenizer)) == math.log(
        50
    )
    assert learning_detectors._untrained_loss(sig(model={"name": "m"}, data=tokenizer)) == math.log(100)
    assert learning_detectors._untrained_loss(sig(data=tokenizer)) == math.log(100)
    assert learning_detectors._untrained_loss(sig(model={"name": "m", "vocab_size": 1})) is None
    assert learning_detectors._untrained_loss(sig(model={"name": "m"})) is None
    assert learning_detectors._untrained_loss(sig()) is None


def test_activations_collapse_below_a_quarter_of_their_largest_entropy():
    """Width 16: ln 16 = 2.7726. A median entropy of 0.5 is 0.1803 of it (a collapse); 0.7 is 0.2525 (not)."""
    cols = {"signals/act_entropy/l0": [0.4, 0.5, 0.6], "signals/act_entropy/l1": [0.5, 0.5, 9.0]}
    m16 = _manifest(model={"name": "m", "width": 16})
    assert learning_detectors._entropy_collapse(RunSignals(steps=_steps(3, **cols), manifest=m16)) == 0.1803
    high = {k: [0.7] * 3 for k in cols}
    assert learning_detectors._entropy_collapse(RunSignals(steps=_steps(3, **high), manifest=m16)) is None
    m1 = _manifest(model={"name": "m", "width": 1})
    assert learning_detectors._entropy_collapse(RunSignals(steps=_steps(3, **cols), manifest=m1)) is None
    assert learning_detectors._entropy_collapse(RunSignals(steps=_steps(3, **cols))) is None
    assert learning_detectors._entropy_collapse(RunSignals(steps=_steps(3), manifest=m16)) is None


def test_undertrained_reads_the_tracker_s_model_and_stops_at_ten_tokens_per_parameter():
    """1,000 parameters (from the run's model meta): 5,000 tokens are 5 a parameter, confidence
    0.4 + 0.5 * (1 - 5 * 2 / 20) = 0.65; 10,000 are 10, not far below."""
    tokens = np.array([1000.0, 3000.0, 5000.0])
    sig = RunSignals(steps=pd.DataFrame({"step": [10, 20, 30], "tokens": tokens}), meta={"model": {"params": 1000}})
    assert [f.to_dict() for f in undertrained(sig)] == [
        {
            "cause": "undertrained",
            "start_step": 10,
            "end_step": 30,
            "confidence": 0.65,
            "severity": "high",
            "evidence": {"tokens": 5000.0, "params": 1000, "tokens_per_param": 5.0},
            "advice": "5.0 tokens per parameter, far below ~20: train longer or use a smaller model before reading "
            "its loss as the data's limit",
            "detector": "tokens_per_param",
        }
    ]
    sig.steps["tokens"] = tokens * 2
    assert undertrained(sig) == []
    with pytest.raises(NotRun) as err:
        undertrained(RunSignals(steps=sig.steps, manifest=_manifest(model={"name": "m"}), meta={"model": None}))
    assert str(err.value) == (
        "no parameter count: the manifest gives no model.params and no model was handed to the Tracker"
    )
    with pytest.raises(NotRun) as err:
        undertrained(RunSignals(steps=_steps(3), meta={"model": {"params": 10}}))
    assert str(err.value) == "no 'tokens' recorded (accepted tokens per step)"


def test_a_batch_check_is_read_only_where_it_says_whether_learning_was_altered():
    with pytest.raises(NotRun) as err:
        throughput_altered_learning(RunSignals(steps=_steps(3), meta={"batch_check": {"tokens": 5}}))
    assert str(err.value) == (
        "no small-batch baseline check recorded for this run (run meta 'batch_check', the fields of "
        "track.batch_check.BatchCheckResult)"
    )
    assert throughput_altered_learning(RunSignals(steps=_steps(3), meta={"batch_check": {"altered": False}})) == []
    (found,) = throughput_altered_learning(
        RunSignals(steps=_steps(0), meta={"batch_check": {"altered": True, "tokens": 7}})
    )
    assert (found.start_step, found.end_step, found.evidence) == (
        0,
        0,
        {
            "relative_loss": None,
            "standard_error": None,
            "baseline_learning_per_token": None,
            "candidate_learning_per_token": None,
            "tokens": 7,
        },
    )


def test_early_warnings_need_a_learning_signal():
    few = {"signals/gns": [1.0] * 7 + [math.nan], "clipped": [1.0] * 39 + [math.nan]}
    with pytest.raises(NotRun) as err:
        early_warnings(RunSignals(steps=_steps(40, **{k: v + [math.nan] * (40 - len(v)) for k, v in few.items()})))
    assert str(err.value) == "no learning signals recorded (signals/gns, act_entropy, update_ratio, clipped)"


# -- a plateau at the peak LR ----------------------------------------------------------------------------------


def _plateau_run(n: int, **extra: Any) -> tuple[pd.DataFrame, np.ndarray]:
    """Loss 5.0 over steps 0-4, 3.0 over 5-15, then flat at 2.0 +-0.001 alternating; LR 1e-5 at step 0, the peak
    1e-3 up to step 159. The peak phase is steps 1-159, its first tenth (15 steps) skipped: 16-159, 144 steps, four
    quarters of 36 with means of 2.0; it learned nothing after 3.0 of progress before it (ratio 0), over more than a
    quarter of the run: a plateau."""
    steps = np.arange(n)
    loss = np.where(steps < 5, 5.0, np.where(steps < 16, 3.0, 2.0 + 0.001 * (-1.0) ** steps))
    lr = np.where(steps == 0, 1e-5, np.where(steps < 160, 1e-3, 1e-4))
    frame = _steps(n, loss=loss, lr=lr, **extra)
    return frame, loss


def _plateau_evidence(loss: np.ndarray) -> dict[str, Any]:
    fit = scipy_stats.linregress(np.arange(72, dtype=float), loss[88:160])  # the phase's second half
    return {
        "peak_lr": 1e-3,
        "loss_start": 5.0,
        "peak_phase_first_quarter": 2.0,
        "peak_phase_last_quarter": 2.0,
        "progress_ratio": 0.0,
        "second_half_slope_t": round(float(fit.slope / fit.stderr), 2),
    }


def test_a_plateau_with_no_cooldown_is_stalled_with_both_causes_named():
    frame, loss = _plateau_run(160)
    (found,) = schedule(RunSignals(steps=frame))
    candidates = [
        {
            "cause": "schedule",
            "why": "the loss sits at the noise floor the constant LR sets; a lower LR would go lower",
        },
        {"cause": "data_exhaustion", "why": "the data has no more to teach this model"},
    ]
    assert found.to_dict() == {
        "cause": "stalled",
        "start_step": 16,
        "end_step": 159,
        "confidence": 0.5,
        "severity": "high",
        "evidence": {**_plateau_evidence(loss), "candidates": candidates, "experiment": learning_detectors.COOLDOWN},
        "advice": "learning stalled at constant LR from step 16, cause undetermined: schedule or data_exhaustion; "
        f"to tell them apart, {learning_detectors.COOLDOWN}: a drop means the schedule was the limit, no drop means "
        "the data",
        "detector": "plateau",
    }
    # Three epochs over the data (its own counter) make the data the likelier limit: named first, with its epochs.
    (repeated,) = schedule(RunSignals(steps=frame.assign(**{"imported/epoch": 3.0})))
    assert repeated.evidence["candidates"] == [
        {"cause": "data_exhaustion", "why": "the data has no more to teach this model (3 epochs over it)"},
        candidates[0],
    ]
    assert repeated.advice.startswith("learning stalled at constant LR from step 16, cause undetermined: "
                                      "data_exhaustion or schedule; ")  # fmt: skip
    (once,) = schedule(RunSignals(steps=frame.assign(**{"imported/epoch": 1.0})))
    assert once.evidence["candidates"][0] == {
        "cause": "schedule",
        "why": "the loss sits at the noise floor the constant LR sets; a lower LR would go lower",
    }
    assert once.evidence["candidates"][1]["why"] == "the data has no more to teach this model (1 epochs over it)"


def test_a_plateau_that_falls_once_the_lr_cools_down_was_the_schedule():
    """Steps 160-169 run at 0.9e-3 (below the peak phase's 95%, above half the peak: no cooldown yet) at 2.0; from
    170 the LR is 1e-4 and the loss falls from 1.95 by 0.005 a step to 1.805 at 199. The cooldown's last 30 // 4 = 7
    losses (1.835-1.805) average 1.82: a drop of 0.18 from the plateau's last quarter (2.0). Its standard error: the
    step noise (the alternation's step-to-step spread 0.002 over sqrt 2, 0.0014142) times sqrt(1/36 + 1/7): 0.00058."""
    frame, loss = _plateau_run(200)
    frame.loc[160:169, "lr"] = 0.9e-3
    frame.loc[160:169, "loss"] = 2.0
    frame.loc[170:, "loss"] = 1.95 - 0.005 * np.arange(30)
    (found,) = schedule(RunSignals(steps=frame))
    assert found.to_dict() == {
        "cause": "schedule",
        "start_step": 16,
        "end_step": 199,
        "confidence": 0.8,
        "severity": "high",
        "evidence": {
            **_plateau_evidence(loss),
            "cooldown_from_step": 170,
            "cooldown_drop": 0.18,
            "cooldown_drop_se": 0.00058,
        },
        "advice": "the loss plateaued at the peak LR and fell by 0.18 once the LR cooled down: the LR's noise floor "
        "was the limit; lower the peak LR or cool down earlier",
        "detector": "plateau_cooldown",
    }


def test_a_plateau_that_a_linked_cooldown_run_does_not_lower_was_the_data():
    """The run stops at step 159. Two linked cooldown runs: the last one listed branched off at step 10, before the
    plateau began at 16 (it says nothing about it: skipped); the other cools down over steps 170-189 at 1.999. Its
    last 5 losses average 1.999: a drop of 0.001, within 3 standard errors of 0.0014142 * sqrt(1/36 + 1/5) =
    0.00067."""
    frame, loss = _plateau_run(160)
    cooled = pd.DataFrame({"step": np.arange(170, 190), "loss": 1.999, "lr": 1e-4})
    early = pd.DataFrame({"step": np.arange(10, 40), "loss": 1.0, "lr": 1e-4})
    (found,) = schedule(RunSignals(steps=frame, cooldowns={"cool": cooled, "early": early}))
    assert found.to_dict() == {
        "cause": "data_exhaustion",
        "start_step": 16,
        "end_step": 189,
        "confidence": 0.7,
        "severity": "high",
        "evidence": {
            **_plateau_evidence(loss),
            "cooldown_from_step": 170,
            "cooldown_drop": 0.001,
            "cooldown_drop_se": 0.00067,
            "cooldown_run": "cool",
        },
        "advice": "the loss plateaued at the peak LR and did not fall in the cooldown run 'cool' (by 0.001, within 3 "
        "standard errors of 0.00067): the data (for this model), not the schedule, is the limit; add fresh data "
        "before more compute",
        "detector": "plateau_cooldown",
    }


def test_one_sample_a_step_is_enough_to_read_the_context_from():
    """4000 tokens over at most 1 sample: a context of 4000 tokens (the manifest gives none)."""
    sig = RunSignals(steps=_steps(3, tokens=[1000.0, 2000.0, 4000.0], samples=[0.0, 1.0, math.nan]))
    assert data_detectors._context(sig) == 4000.0
    with pytest.raises(NotRun) as err:
        data_detectors._context(RunSignals(steps=_steps(3, tokens=[1.0, 2.0, 3.0], samples=[0.0, 0.0, 0.0])))
    assert str(err.value) == "no sequence length (manifest) or sample counts to turn tokens into samples"


# -- the new-hardware exception's last two conditions ----------------------------------------------------------


@pytest.fixture(scope="module")
def new_hardware(tmp_path_factory) -> tuple[Ledger, list[RunData]]:
    """Two seeds of one recipe on the reference hardware (`ref`) and the same two on another device (`new`): the
    same curves, evaluation for evaluation (their last at 149,504 tokens), 20,480 tokens/s each."""
    from tests.support.gate_ledger import Probe, campaign, power_law

    web = {"data": {"sources": [{"name": "web", "weight": 1.0}]}}
    path = campaign(
        tmp_path_factory.mktemp("hw") / "h.db",
        {"ref": Probe(curve=power_law(), manifest=web),
         "new": Probe(curve=power_law(), manifest={**web, "hardware": {"device_kind": "gpu-x"}})},
        seeds=2,
    )  # fmt: skip
    led = Ledger(path)
    return led, [load_run(led, f"camp/new/s{i}") for i in range(2)]


def _exception(led: Ledger, runs: list[RunData]) -> dict[str, Any]:
    manifests = {r.name: led.manifest(r.name) for r in runs}
    exc = NewHardwareException(reference="camp/ref/*")
    return evidence.hardware_exception(led, runs, manifests, exc, "val/loss")


def test_the_exception_needs_the_target_s_wall_clock_time(new_hardware):
    led, runs = new_hardware
    untimed = [dataclasses.replace(r, steps=r.steps.drop(columns="wall_s")) for r in runs]
    out = _exception(led, untimed)
    assert (out["applies"], out["reason"], out["differs"]) == (
        False,
        "no wall-clock time recorded: tokens/s unknown",
        [],
    )
    assert "tokens_per_s" not in out


def test_the_worst_departure_is_the_one_furthest_past_its_allowance(new_hardware):
    """Both seeds' last evaluation (149,504 tokens, an aligned point) raised by 0.03: the seeds' spread is
    unchanged, so every compared point allows the tolerance 0.02; the others differ by 0 (0.02 inside), the last by
    0.03 (0.01 past it): that one is the departure named."""
    led, runs = new_hardware

    def raised(r: RunData) -> RunData:
        evals = r.evals.copy()
        evals.loc[evals["step"] == evals["step"].max(), "value"] += 0.03
        return dataclasses.replace(r, evals=evals)

    out = _exception(led, [raised(r) for r in runs])
    assert (out["applies"], out["reason"]) == (
        False,
        "the loss curve departs from the reference by +0.0300 at 149,504 tokens (allowed ±0.0200)",
    )
    compared = [p for p in out["curve"]["points"] if not p["identical_by_construction"]]
    assert [p["allowed"] for p in compared] == [0.02] * 5
    assert [p["diff"] for p in compared[:4]] == [0.0] * 4


def test_two_seeds_at_one_budget_pool_their_own_fits_and_name_the_interval_so(new_hardware):
    """One budget: each seed's stable-phase fit, pooled; the interval named is over the 2 seeds, of their fitted
    forecasts or, where the measured yield's upper bound is the lower, of their recent measured yields."""
    led, runs = new_hardware
    data = {r.name: r for r in runs}
    groups = [(149_504.0, [r.name for r in runs])]
    out = evidence.forecast_yield(data, groups, 1e6, 0.8, "val/loss")
    assert out["method"] == "each seed's stable-phase fit, pooled over 2 seeds (mean, t-interval)"
    assert (out["metric"], out["at_tokens"], out["next_tokens"], out["level"]) == ("val/loss", 149_504.0, 1e6, 0.8)
    capped = out["capped_by_recent"]
    named = "recent measured yields" if capped else "fitted forecasts"
    assert out["interval_of"] == f"the 80% t-interval over 2 seeds of their {named}"
    chosen = out["recent"] if capped else out["forecast"]
    assert capped == (out["recent"]["interval"][1] < out["forecast"]["interval"][1])
    assert [out["yield_per_btok"], out["interval"]] == [chosen["yield_per_btok"], chosen["interval"]]
    assert [p["run"] for p in out["per_seed"]] == ["camp/new/s0", "camp/new/s1"]
    assert all(
        set(p)
        == {"run", "yield_per_btok", "interval", "recent_yield_per_btok", "recent_interval", "fit", "stable_phase"}
        and len(p["interval"]) == 2
        and p["interval"][0] <= p["yield_per_btok"] <= p["interval"][1]
        and len(p["recent_interval"]) == 2
        for p in out["per_seed"]
    )
    one = evidence.forecast_yield(data, [(149_504.0, ["camp/new/s0"])], 1e6, 0.8, "val/loss")
    assert one["method"] == "each seed's stable-phase fit, pooled over 1 seed (mean, t-interval)"
    named = "recent measured yield" if one["capped_by_recent"] else "fitted forecast"
    assert one["interval_of"] == f"one seed's {named}, 80% interval"


def test_a_mixture_is_cited_only_for_runs_of_one_results_campaign(new_hardware):
    led, _ = new_hardware
    two = {"a": {KIND: {"campaign": "x"}}, "b": {KIND: {"campaign": "y"}}}
    assert evidence.mixture_citation(led, two, "val/loss") == (None, None)
    assert evidence.mixture_citation(led, {"a": {}, "b": {KIND: None}}, "val/loss") == (None, None)


def test_skips_five_steps_apart_merge_and_a_scale_not_yet_or_no_longer_logged_is_none():
    """The skip counter rises at 10 (to 1), 15 (2) and 21 (3): 15 is 5 after 10 (one span, 2 skipped, confidence
    0.8), 21 is 6 after 15 (a span of its own, 1 skipped, 0.7). The loss scale is logged over steps 12-20 only
    (1024, then 512 from 15, 256 at 20): none before the first span, 512 at its end; the last before the second
    (256), none after it."""
    skipped = np.zeros(30)
    skipped[10:], skipped[15:], skipped[21:] = 1.0, 2.0, 3.0
    scale = np.full(30, math.nan)
    scale[12:15], scale[15:20], scale[20] = 1024.0, 512.0, 256.0
    sig = RunSignals(steps=_steps(30, **{"signals/skipped_steps": skipped, "signals/loss_scale": scale}))
    assert [(f.start_step, f.end_step, f.confidence, f.evidence) for f in nonfinite_and_skipped(sig)] == [
        (10, 15, 0.8, {"skipped_steps": 2, "loss_scale_before": None, "loss_scale_after": 512.0}),
        (21, 21, 0.7, {"skipped_steps": 1, "loss_scale_before": 256.0, "loss_scale_after": None}),
    ]


def test_evaluations_without_values_are_not_read_for_non_finite_ones():
    sig = RunSignals(steps=_steps(3, loss=[1.0, 2.0, 3.0]), evals=pd.DataFrame({"task": ["val"], "step": [1]}))
    assert nonfinite_and_skipped(sig) == []
    evals = _evals(
        [("val", "loss", 1_000, math.nan), ("val", "loss", 2_500, math.inf), ("arc", "acc", 1_500, -math.inf)]
    )
    found = nonfinite_and_skipped(RunSignals(steps=_steps(3), evals=evals))
    assert [f.advice.split(": the weights")[0] for f in found] == [
        "arc/acc evaluated to NaN or infinity at step 1,500",
        "val/loss evaluated to NaN or infinity at 2 evaluations, steps 1,000-2,500",
    ]


# -- a missing warm-up -----------------------------------------------------------------------------------------


def _no_warmup_run(first_lr: float = 1e-3, manifest: Manifest | None = None, **extra: Any) -> RunSignals:
    """100 steps at the peak LR 1e-3 from the first (or `first_lr` there), the loss falling 0.01 a step from 3.0: a
    healthy descent (no early jump, far from slow, no plateau), so only the warm-up is read."""
    lr = np.full(100, 1e-3)
    lr[0] = first_lr
    return RunSignals(steps=_steps(100, loss=3.0 - 0.01 * np.arange(100), lr=lr, **extra), manifest=manifest)


WARM_UP = "warm up over the first ~1-5% of steps"


@pytest.mark.parametrize(
    ("first_lr", "vocab", "clipped", "confidence", "extra", "advice"),
    [
        # Every early step clipped: unstable early, a finding whatever the start.
        (1e-3, None, 1.0, 0.85, {}, f"no warm-up: the first step ran at the peak LR; {WARM_UP}"),
        # ln 40 = 3.689: 80% of it is 2.951, and the first loss (3.0) is above: from scratch.
        (1e-3, 40, None, 0.6, {}, f"no warm-up: the first step ran at the peak LR; {WARM_UP}"),
        # A ramp that starts at 60% of the peak: a short warm-up, a note.
        (6e-4, None, None, 0.3, {}, f"a short warm-up: the first step ran at 60% of the peak LR; {WARM_UP}"),
        # ln 50 = 3.912: 80% of it is 3.130, above the first loss: not from scratch, a note.
        (
            1e-3,
            50,
            0.5,
            0.3,
            {"first_loss": 3.0, "untrained_loss": 3.912},
            "a note: the first step ran at the peak LR (no warm-up), and the loss shows no early instability and did "
            "not start untrained (a fine-tune needs little warm-up): nothing says the schedule cost this run",
        ),
        (
            1e-3,
            None,
            None,
            0.3,
            {"first_loss": 3.0, "untrained_loss": None},
            "a note: the first step ran at the peak LR (no warm-up), and the loss shows no early instability and is "
            "not known to start untrained (a fine-tune needs little warm-up): nothing says the schedule cost this run",
        ),
    ],
)
def test_a_missing_warm_up_is_a_finding_where_the_run_was_unstable_or_untrained(
    first_lr, vocab, clipped, confidence, extra, advice
):
    """The first tenth is steps 0-9 (its clipped share: the `clipped` mean there; 0.5 is not over half); the span
    read is steps 0-10."""
    columns = {} if clipped is None else {"clipped": np.full(100, clipped)}
    manifest = None if vocab is None else _manifest(model={"name": "m", "vocab_size": vocab})
    found = schedule(_no_warmup_run(first_lr, manifest, **columns))
    assert [f.to_dict() for f in found] == [
        {
            "cause": "schedule",
            "start_step": 0,
            "end_step": 10,
            "confidence": confidence,
            "severity": "high",
            "evidence": {
                "peak_lr": 1e-3,
                "first_lr": first_lr,
                "early_loss_jump": False,
                "early_clipped_share": clipped,
                **extra,
            },
            "advice": advice,
            "detector": "no_warmup",
        }
    ]


def test_a_first_step_below_half_the_peak_is_a_warm_up():
    assert schedule(_no_warmup_run(4.99e-4)) == []
    (at_half,) = schedule(_no_warmup_run(5e-4))  # at half the peak: a short warm-up
    assert (at_half.confidence, at_half.advice) == (
        0.3,
        f"a short warm-up: the first step ran at 50% of the peak LR; {WARM_UP}",
    )


def test_the_mixture_regression_is_cited_in_one_line_whole(tmp_path, cli, ledger_path):
    """Twelve mixtures of code and prose at N = 1,000 (`tests/test_gate_mixture.py`'s table): the line names the
    model, the 12 mixtures, N, the rho, the proposal (heaviest first), the prediction and its 90% interval, and says
    what it is not."""
    from tests.test_gate_mixture import mixtures_table

    cli("import", "results", str(mixtures_table(tmp_path / "r.csv", 12)), "--campaign", "mix")
    led = Ledger(ledger_path)
    run = "mix/m03/s0/n1000"
    cited, line = evidence.mixture_citation(led, {run: led.meta(run)}, "val/loss")
    assert cited is not None
    assert (cited["campaign"], cited["metric"], cited["available"], cited["runs"], cited["params"], cited["level"]) == (
        "mix",
        "val/loss",
        True,
        12,
        1000,
        0.9,
    )
    lo, hi = cited["interval"]
    shown = ", ".join(f"{s} {w:.2f}" for s, w in sorted(cited["mixture"].items(), key=lambda sw: -sw[1]))
    assert line == (
        f"campaign mix: {cited['model']} fit over 12 mixtures at N = 1,000 (cross-validated rho {cited['cv_rho']:.3f})"
        f" proposes {shown}, val/loss predicted {cited['predicted']:.4g} [{lo:.4g}, {hi:.4g}] at 90% (at N = 1,000: "
        "it ranks mixtures, it does not forecast the large run)"
    )
    assert evidence.mixture_citation(led, {run: led.meta(run)}, "val/acc") == (None, None)


# -- the data detectors' refusals and bars ---------------------------------------------------------------------


def _drawn(a: float, b: float, n: int = 10, **sections: Any) -> RunSignals:
    """Two sources drawn at a and b tokens a step over n steps, under a manifest of equal weights (`sections`)."""
    steps = _steps(n, **{"tokens/a": a * np.arange(1, n + 1), "tokens/b": b * np.arange(1, n + 1)})
    data = {"sources": [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 1.0}], **sections}
    return RunSignals(steps=steps, manifest=_manifest(data=data))


def test_mixture_drift_needs_fifty_samples_a_shuffled_recipe_and_its_weights():
    """10 steps of 10 + 10 tokens: 200 tokens; sequences of 4 make 50 samples (enough), of 5 make 40 (too few).
    Drawn at the weights (a half each): no drift."""
    assert mixture_drift(_drawn(10.0, 10.0, sequence_length=4)) == []
    with pytest.raises(NotRun) as err:
        mixture_drift(_drawn(10.0, 10.0, sequence_length=5))
    assert str(err.value) == "40 samples seen: too few to measure shares"
    with pytest.raises(NotRun) as err:
        mixture_drift(_drawn(10.0, 10.0, sequence_length=4, curriculum={"kind": "ordered_by_source"}))
    assert str(err.value) == "curriculum 'ordered_by_source': the intended share changes by design"
    with pytest.raises(NotRun) as err:
        mixture_drift(RunSignals(steps=_drawn(10.0, 10.0).steps))
    assert str(err.value) == "no manifest recipe: the intended weights are unknown"
    with pytest.raises(NotRun) as err:
        mixture_drift(RunSignals(steps=_steps(10, loss=np.ones(10))))
    assert str(err.value) == "no per-source token counts (tokens/<source>) recorded"


def test_a_source_drawn_exactly_four_times_is_not_exhausted():
    """a: 100 unique tokens, 40 drawn a step over 10 steps: 4 epochs, at the bar (more than 4 is exhaustion); b: 50
    unique, 21 a step: 4.2 epochs, exhausted from step 9 (4.2 at the last step; 3.78 at the one before)."""
    steps = _steps(10, **{"tokens/a": 40.0 * np.arange(1, 11), "tokens/b": 21.0 * np.arange(1, 11)})
    sources = [{"name": "a", "weight": 0.5, "unique_tokens": 100}, {"name": "b", "weight": 0.5, "unique_tokens": 50}]
    (found,) = data_exhaustion(RunSignals(steps=steps, manifest=_manifest(data={"sources": sources})))
    worth = math.exp(-3.2 / 15.4)
    assert (found.start_step, found.end_step, found.evidence["source"], found.evidence["epochs"]) == (9, 9, "b", 4.2)
    assert found.evidence["next_token_worth"] == round(worth, 3)
    assert found.confidence == pytest.approx(1 - worth)
    # b's own validation loss over six evaluations: its second half (2.7, 2.75, 2.8) rose by 0.1 from its first to
    # its last, and ends above its lowest: 0.1 more confidence.
    evals = _evals([("val/b", "loss", k, v) for k, v in enumerate([3.0, 2.9, 2.8, 2.7, 2.75, 2.8])])
    (seen,) = data_exhaustion(RunSignals(steps=steps, evals=evals, manifest=_manifest(data={"sources": sources})))
    assert seen.evidence["val_change_second_half"] == 0.1
    assert seen.confidence == pytest.approx(1 - worth + 0.1)
    with pytest.raises(NotRun) as err:
        data_exhaustion(RunSignals(steps=steps, manifest=_manifest(data={"sources": [{"name": "a", "weight": 1}]})))
    assert str(err.value) == "the manifest declares no unique tokens per source (data.sources[].unique_tokens)"


def test_a_repeat_rate_at_five_percent_over_what_the_data_explains_is_not_a_duplicated_stream():
    rate = {"stream/repeat_rate": np.full(20, 0.05)}
    assert duplicated_stream(RunSignals(steps=_steps(20, **rate))) == []


def test_a_plateau_is_never_also_the_lr_too_low():
    """The plateau run with a start of 2.1 (not 5.0 and 3.0) and a cooldown over steps 160-199 falling from 1.99 by
    0.001 a step: over the run the loss fell by (2.1 - 1.9595) / 2.1 = 6.7% (under 10%), and its last quarter still
    falls far beyond its noise, the signs of an LR too low; but the run stalled at its peak LR (the cooldown says it
    was the schedule), and a stalled run is not read for a slow descent."""
    frame, _ = _plateau_run(200)
    frame.loc[:15, "loss"] = 2.1
    frame.loc[160:, "loss"] = 1.99 - 0.001 * np.arange(40)
    assert [f.detector for f in schedule(RunSignals(steps=frame))] == ["plateau_cooldown"]


def test_a_loss_that_moves_in_runs_is_a_non_iid_stream_without_source_counts():
    """A loss swinging 0.1 around 2.0 with a period of 16 steps: over its 80 steps after the first 20, a rolling
    median over 21 steps (more than a period) is about 2.0, so the residuals are the swing, whose lag-1
    autocorrelation is about cos(2 pi / 16) = 0.92 (above 0.45): confidence 0.4 + rho - 0.45. Without per-source
    counts the evidence says the batches were not checked."""
    loss = 2.0 + 0.1 * np.sin(2 * np.pi * np.arange(100) / 16)
    (found,) = non_iid_stream(RunSignals(steps=_steps(100, loss=loss)))
    rho = found.evidence["loss_autocorr_lag1"]
    assert 0.85 < rho < 0.97
    assert found.evidence == {
        "note": "no per-source counts: batch composition not checked",
        "loss_autocorr_lag1": rho,
    }
    assert (found.start_step, found.end_step, found.detector) == (0, 99, "batch_composition")
    assert found.confidence == pytest.approx(0.4 + rho - 0.45, abs=1e-3)
