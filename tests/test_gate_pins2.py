"""What the gate decides and says, pinned whole (issue #44 item 11): the rationale, every check with its detail, what
to run next, and the evidence's numbers, on the constructed campaign of `tests/support/gate_ledger.py` under the
example policy. Mutation testing (`make mutation-sample`) found that most changes no test told apart changed a
message, a key of the evidence or a rounding, which a test reading the decision alone does not see.

Every value below was checked by hand once against the numbers it comes from:

- three seeds of 146 steps of 1,024 tokens (149,504 tokens; the probes' budget 150,000), 0.05 s per step: 20,480
  tokens/s; at $0.5 per device-hour a billion tokens cost 1e9 / 20,480 / 3,600 x 0.5 = $6.7817, the pilot's 500,000
  tokens 0.006782 device-hours and $0.003391;
- the pilot gives the 31,000-parameter model 500,000 / 31,000 = 16.13 tokens per parameter, and passes the recipe's
  5,000,000 unique tokens 0.1 times;
- the clean recipe's forecast is 645 per billion tokens, its 80% interval [615, 676] (test_gate_rules.py), the mean
  of the three seeds' forecasts with Student's t (2 degrees of freedom) on their spread;
- the slow recipe learns a third as much: its upper bound 242 is below the bar of 250; the exhausted one has turned
  up, its interval the recent measured yields', about -1,985 per billion tokens.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy import stats as scipy_stats

from tests.support.gate_ledger import POLICY, Probe, campaign, power_law, turning
from yieldgate import api
from yieldgate.gate.draft import RecordedDecision
from yieldgate.gate.policy import parse_policy
from yieldgate.gate.supply import plan, stage_supply, worth
from yieldgate.ledger import Ledger
from yieldgate.manifest import Recipe

USD_PER_BTOK = 1e9 / 20_480 / 3600 * 0.5
"""What a billion tokens cost at 20,480 tokens/s and $0.5 per device-hour."""
HEAD = "pilot (500,000 tokens): "
FAULTS = (
    "no open non-data fault",
    True,
    "no diagnosis of schedule, damaged_update, infrastructure_stall above confidence 0.3 (the detectors ran on 3 runs)",
)
STALLS = ("no stall of unknown cause", True, "no plateau at constant LR without a cooldown after it")
SEEDS = ("seeds", True, "3 per budget, the policy needs 3")
PRICE = (
    "next stage's price",
    None,
    "pilot: 500,000 tokens, 0.00678 device-hours, $0.00339, ? kWh at the measured throughput, for a forecast {gain} "
    "drop in val/loss (no energy recorded (energy_j) by the runs)",
)
SUPPLY = ("data supply", True, "pilot passes good-text x0.1; the policy allows 4")
REGRESSION = ("no regression", True, "hard slices and capability tasks within 0.1 of their best")
PER_PARAM = ("tokens per parameter", True, "pilot: 16.1 tokens per parameter, the policy needs 10")
EXPLORING = ("workflow locked", None, "pilot is within the exploration share (20%)")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory) -> Path:
    return campaign(
        tmp_path_factory.mktemp("pins") / "g.db",
        {
            "good": Probe(curve=power_law()),
            "bad": Probe(curve=turning(), train=power_law(floor=1.5)),
            "slow": Probe(curve=power_law(drop=60)),
        },
    )


@pytest.fixture(scope="module")
def decided(ledger) -> dict[str, RecordedDecision]:
    """Each recipe gated once under the example policy (the detectors' run on its seeds is the slow part, and is
    kept by the runs' content for the gates under other policies below)."""
    return {r: _gate(ledger, f"camp/{r}") for r in ("good", "bad", "slow")}


def _policy(tmp_path: Path, **requirements: Any) -> str:
    spec = yaml.safe_load(POLICY.read_text())
    spec["requirements"].update(requirements)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def _gate(ledger: Path, target: str, policy: str = str(POLICY)) -> RecordedDecision:
    return api.gate(target, ledger=str(ledger), policy=policy, record=False)


def _checks(d: RecordedDecision) -> list[tuple[str, bool | None, str]]:
    return [(c.name, c.passed, c.detail) for c in d.checks]


def _price(gain: str) -> tuple[str, None, str]:
    return (PRICE[0], None, PRICE[2].format(gain=gain))


def test_the_clean_recipe_is_approved_with_every_check_and_number_said(decided):
    d = decided["good"]
    assert (d.decision, d.stage, d.next_stage, d.axis, d.policy) == (
        "approve",
        "probe",
        "pilot",
        "learning",
        "probe-scale@1",
    )
    assert d.rationale == (
        "approve " + HEAD + "forecast yield 645 per billion tokens, the 80% t-interval over 3 seeds of their fitted "
        "forecasts [615, 676], above 250 on 3 seeds; no open fault or regression"
    )
    assert d.what_to_run_next is None
    assert _checks(d) == [
        FAULTS,
        STALLS,
        SEEDS,
        ("optimistic bound above threshold", True, "upper 676 vs 250 per billion tokens"),
        _price("0.323"),
        ("lower bound above threshold", True, "lower 615 vs 250 per billion tokens"),
        SUPPLY,
        REGRESSION,
        PER_PARAM,
        EXPLORING,
    ]
    ev = d.evidence
    runs = ["camp/good/s0", "camp/good/s1", "camp/good/s2"]
    assert ev["runs"] == runs and ev["left_out"] == {} and ev["budgets"] == [{"tokens": 150_000.0, "runs": runs}]
    assert (ev["seeds"], ev["reached_tokens"], ev["next_stage_tokens"], ev["primary"]) == (
        3,
        150_000.0,
        500_000,
        "learning",
    )
    assert ev["open_diagnoses"] == [] and ev["undetermined_stalls"] == [] and ev["regressions"] == {}
    assert ev["shared_conditions"] == {
        "campaign": "camp",
        "recipes": ["bad", "good", "slow"],
        "conditions": [{"cause": "undertrained", "detector": "tokens_per_param"}],
    }
    assert ev["next_tokens_per_param"] == pytest.approx(500_000 / 31_000)
    assert ev["supply"] == {
        "stage": "pilot",
        "sources": [
            {
                "stage": "pilot",
                "source": "good-text",
                "drawn_tokens": 500_000.0,
                "unique_tokens": 5_000_000,
                "epochs": 0.1,
                "effective_tokens": 500_000.0,
                "stage_worth": 1.0,
            }
        ],
        "worth_measured": 1.0,
        "worth_next": 1.0,
        "discount": 1.0,
    }
    fc = ev["forecast"]
    point, (lo, hi) = fc["yield_per_btok"], fc["interval"]
    assert ev["cost_per_btok"] == pytest.approx(USD_PER_BTOK)
    assert ev["cost_basis"] == "20,480 tokens/s at $0.5 per hour"
    assert ev["yield_per_usd"]["yield_per_usd"] == pytest.approx(point / USD_PER_BTOK)
    assert ev["yield_per_usd"]["interval"] == pytest.approx([lo / USD_PER_BTOK, hi / USD_PER_BTOK])
    price = dict(ev["next_stage_price"])
    assert price.pop("missing") == {"kwh": "no energy recorded (energy_j) by the runs"}
    assert price == pytest.approx(
        {
            "tokens": 500_000.0,
            "tokens_per_s": 20_480.0,
            "devices": 1,
            "device_hours": 500_000 / 20_480 / 3600,
            "usd": 500_000 / 20_480 / 3600 * 0.5,
            "usd_per_device_hour": 0.5,
            "kwh": None,
            "energy_usd": None,
            "forecast_gain": point * 500_000 / 1e9,
        }
    )


def test_the_pooled_forecast_is_the_seeds_mean_with_student_t_on_their_spread(decided):
    """Three seeds' stable-phase forecasts pooled: the mean, and mean -+ t(0.9, 2 df) x se, se the square root of the
    larger of the seeds' variance and their own mean variance (each seed's 80% bootstrap interval read as +-z(0.9) of
    its standard error), over 3. Here the seeds' own intervals are the wider (the forecasts 636, 655, 646 spread by
    9.5; their own half-widths are 26-40)."""
    fc = decided["good"].evidence["forecast"]
    per_seed = [s["yield_per_btok"] for s in fc["per_seed"]]
    assert [s["run"] for s in fc["per_seed"]] == ["camp/good/s0", "camp/good/s1", "camp/good/s2"]
    assert [round(v) for v in per_seed] == [636, 655, 646]
    mean = sum(per_seed) / 3
    spread = sum((v - mean) ** 2 for v in per_seed) / 2
    z = scipy_stats.norm.ppf(0.9)
    own = sum(((s["interval"][1] - s["interval"][0]) / (2 * z)) ** 2 for s in fc["per_seed"]) / 3
    assert own > spread
    half = scipy_stats.t.ppf(0.9, 2) * math.sqrt(own / 3)
    assert fc["yield_per_btok"] == pytest.approx(mean, rel=1e-9)
    assert fc["interval"] == pytest.approx([mean - half, mean + half], rel=1e-9)
    assert fc["forecast"] == {"yield_per_btok": fc["yield_per_btok"], "interval": fc["interval"]}
    assert fc["capped_by_recent"] is False and fc["recent"]["yield_per_btok"] > fc["interval"][1]
    assert (fc["metric"], fc["at_tokens"], fc["next_tokens"], fc["level"], fc["notes"]) == (
        "val/loss",
        146 * 1024.0,
        500_000.0,
        0.8,
        [],
    )
    assert fc["method"] == "each seed's stable-phase fit, pooled over 3 seeds (mean, t-interval)"
    assert fc["interval_of"] == "the 80% t-interval over 3 seeds of their fitted forecasts"


def test_a_loss_that_turned_up_is_rejected_on_its_recent_yield(decided):
    d = decided["bad"]
    fc = d.evidence["forecast"]
    assert d.decision == "reject" and d.what_to_run_next is None
    assert d.rationale == (
        "reject " + HEAD + "even the optimistic bound of the forecast yield, -1,900 per billion tokens, below 250: the "
        "data is exhausted for this purpose (the loss has turned up)"
    )
    assert _checks(d) == [
        FAULTS,
        STALLS,
        SEEDS,
        ("optimistic bound above threshold", False, "upper -1,900 vs 250 per billion tokens"),
        _price("-0.992"),
    ]
    assert fc["capped_by_recent"] is True and fc["interval"] == fc["recent"]["interval"]
    assert fc["interval_of"] == "the 80% t-interval over 3 seeds of their recent measured yields"
    assert round(fc["yield_per_btok"]) == -1985 and 0 < fc["forecast"]["yield_per_btok"] < 250


def test_a_slow_recipe_is_rejected_below_the_bar_without_blaming_repetition(decided):
    d = decided["slow"]
    assert d.decision == "reject"
    assert d.rationale == (
        "reject "
        + HEAD
        + "even the optimistic bound of the forecast yield, 242 per billion tokens, below 250: the data "
        "is exhausted for this purpose"
    )
    assert _checks(d)[3] == ("optimistic bound above threshold", False, "upper 242 vs 250 per billion tokens")


@pytest.mark.parametrize(
    ("bar", "more"),
    [
        (630, 9),  # half-width 30.3 to shrink to a margin of 15.4: ceil(3 x (30.3 / 15.4)^2) - 3 = 9
        (660, 3),  # the point below the bar: no margin to aim at, the policy's seeds again
    ],
)
def test_an_interval_too_wide_holds_with_the_seeds_that_would_narrow_it(ledger, decided, tmp_path, bar, more):
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_btok=bar))
    assert d.decision == "hold"
    assert d.rationale == (
        "hold " + HEAD + "the interval is too wide: 645 per billion tokens, the 80% t-interval over 3 seeds of their "
        f"fitted forecasts [615, 676], threshold {bar}"
    )
    assert d.what_to_run_next == (
        f"run {more} more seeds at 150,000 tokens, or probes at 75,000 and 300,000 tokens to fit the final losses of "
        "three budgets"
    )
    assert _checks(d)[3] == ("optimistic bound above threshold", True, f"upper 676 vs {bar} per billion tokens")
    assert _checks(d)[5] == ("lower bound above threshold", False, f"lower 615 vs {bar} per billion tokens")


def test_too_few_seeds_hold_before_the_forecast_is_read(ledger, decided, tmp_path):
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_seeds=5))
    assert (d.decision, d.rationale, d.what_to_run_next) == (
        "hold",
        "hold " + HEAD + "3 seeds, the policy needs 5 for an interval",
        "run 2 more seeds at 150,000 tokens",
    )
    assert _checks(d) == [FAULTS, STALLS, ("seeds", False, "3 per budget, the policy needs 5")]


def test_the_yield_per_dollar_holds_below_its_lower_bound(ledger, decided, tmp_path):
    """Per dollar the interval is [615, 676] / 6.7817 = [90.69, 99.63]: a bar of 91 holds, one of 90 passes."""
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=91))
    assert d.decision == "hold"
    assert d.rationale == "hold " + HEAD + "the yield per dollar's lower bound 90.69 is below 91"
    assert d.what_to_run_next == "more seeds to narrow the interval, or cheaper hardware"
    assert ("yield per dollar", False, "lower 90.69 vs 91 per dollar (20,480 tokens/s at $0.5 per hour)") in _checks(d)
    passed = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=90))
    assert passed.decision == "approve"
    assert ("yield per dollar", True, "lower 90.69 vs 90 per dollar (20,480 tokens/s at $0.5 per hour)") in _checks(
        passed
    )


def test_the_yield_per_dollar_rejects_below_its_upper_bound(ledger, decided, tmp_path):
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=100))
    assert d.decision == "reject" and d.rationale.startswith(
        "reject " + HEAD + "even the optimistic bound of the forecast yield, 99.63 per dollar, below 100: the data is "
        "exhausted for this purpose"
    )


def test_a_reject_on_price_alone_does_not_blame_repetition(ledger, decided, tmp_path):
    """The pilot passes its source 0.1 times (discount 1): a reject on the yield per dollar is the price's, and the
    rationale said `at pilot's repetition` (gate._rejected read the undiscounted upper bound against the per-token
    bar to decide whether repetition is to blame, whatever bar rejected); now each bar is read against itself."""
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=100))
    assert d.evidence["supply"]["discount"] == 1.0
    assert "repetition" not in d.rationale


def test_tokens_per_parameter_below_the_policy_holds_with_the_tokens_it_needs(ledger, decided, tmp_path):
    """17 tokens per parameter of 31,000 parameters: 527,000 tokens; the pilot gives 500,000 (16.1 each)."""
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_tokens_per_param=17))
    assert d.decision == "hold"
    assert d.rationale == "hold " + HEAD + "pilot would leave the model undertrained (16.1 tokens per parameter)"
    assert d.what_to_run_next == "give pilot at least 527,000 tokens, or a smaller model"
    assert ("tokens per parameter", False, "pilot: 16.1 tokens per parameter, the policy needs 17") in _checks(d)


# -- the new-hardware exception ------------------------------------------------------------------------------------

WEB = {"data": {"sources": [{"name": "web", "weight": 1.0, "unique_tokens": 5_000_000}]}}
GPU = {**WEB, "hardware": {"device_kind": "gpu-x", "device_count": 1, "price_per_device_hour": 2.0}}


@pytest.fixture(scope="module")
def hardware(tmp_path_factory) -> dict[str, RecordedDecision]:
    """The reference recipe on the CPU; the same on a new device (`new`), at half its speed (`slowhw`: 0.1 s a step,
    10,240 tokens/s), with another LR (`lr`), and with a loss 20 (tokens + 2000)^-0.5 higher (`off`); each gated
    once under the example policy with the exception, the CPU runs its reference."""
    import tests.support.gate_ledger as support

    tmp = tmp_path_factory.mktemp("hw")
    path = campaign(
        tmp / "h.db",
        {
            "ref": Probe(curve=power_law(), manifest=WEB),
            "new": Probe(curve=power_law(), manifest=GPU),
            "lr": Probe(curve=power_law(), manifest={**GPU, "optimisation": {"lr": 1e-3}}),
            "off": Probe(curve=power_law(drop=200), manifest=GPU),
        },
    )
    seconds, support.SECONDS_PER_STEP = support.SECONDS_PER_STEP, 0.1
    try:
        campaign(tmp / "h.db", {"slowhw": Probe(curve=power_law(), manifest=GPU)})
    finally:
        support.SECONDS_PER_STEP = seconds
    spec = yaml.safe_load(POLICY.read_text())
    spec["exception"] = {
        "kind": "new_hardware",
        "reference": "camp/ref/*",
        "loss_tolerance": 0.02,
        "throughput_tolerance": 0.05,
    }
    (tmp / "policy.yaml").write_text(yaml.safe_dump(spec))
    return {r: _gate(path, f"camp/{r}", str(tmp / "policy.yaml")) for r in ("new", "slowhw", "lr", "off", "ref")}


HOLDS = (
    "new-hardware exception",
    None,
    "holds: only hardware differs and the loss curve matches the reference within noise; throughput decides",
)


def test_the_same_recipe_on_new_hardware_is_decided_by_its_throughput(hardware):
    d = hardware["new"]
    assert (d.decision, d.axis, d.what_to_run_next) == ("approve", "throughput", None)
    assert d.rationale == "approve " + HEAD + "same recipe on new hardware, same learning curve, x1.000 tokens/s"
    assert _checks(d) == [
        FAULTS,
        STALLS,
        HOLDS,
        ("throughput not worse", True, "20,480 vs 20,480 tokens/s (x1.000, floor x0.95)"),
    ]
    exc = d.evidence["exception"]
    assert exc["reference"] == ["camp/ref/s0", "camp/ref/s1", "camp/ref/s2"]
    assert (exc["applies"], exc["differs"], "reason" in exc) == (True, [], False)
    assert exc["tokens_per_s"] == pytest.approx(20_480) and exc["reference_tokens_per_s"] == pytest.approx(20_480)
    assert exc["throughput_ratio"] == pytest.approx(1.0)
    assert (exc["curve"]["level"], exc["curve"]["loss_tolerance"]) == (0.8, 0.02)
    compared = [p for p in exc["curve"]["points"] if not p["identical_by_construction"]]
    assert compared and all(p["diff"] == 0 and p["allowed"] == 0.02 for p in compared)


def test_new_hardware_at_half_the_speed_holds_on_throughput(hardware):
    d = hardware["slowhw"]
    assert (d.decision, d.axis) == ("hold", "throughput")
    assert d.rationale == "hold " + HEAD + "the new hardware moves x0.500 the reference's tokens/s (floor x0.95)"
    assert d.what_to_run_next == "find the throughput loss (data wait, precision, layout) first"
    assert _checks(d)[-1] == ("throughput not worse", False, "10,240 vs 20,480 tokens/s (x0.500, floor x0.95)")


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("lr", "the manifest differs from the reference beyond hardware: optimisation.lr"),
        # 20 / sqrt(31,900) = 0.112 apart at the first point compared, the evaluations interpolated linearly there
        ("off", "the loss curve departs from the reference by +0.1135 at 29,901 tokens (allowed ±0.0200)"),
        ("ref", "the target is its own reference"),
    ],
)
def test_the_exception_ends_with_its_reason_and_learning_decides(hardware, target, reason):
    d = hardware[target]
    assert (d.decision, d.axis) == ("approve", "learning")
    assert d.rationale.endswith(f"; no open fault or regression; new-hardware exception ended: {reason}")
    assert _checks(d)[2] == ("new-hardware exception", None, f"ended: {reason}; learning decides")
    assert (d.evidence["exception"]["applies"], d.evidence["exception"]["reason"]) == (False, reason)


# -- past exploration: the workflow lock, and what a recorded decision keeps --------------------------------------


@pytest.fixture(scope="module")
def locked(tmp_path_factory) -> tuple[Path, str, RecordedDecision]:
    """The pilot takes 90% of the compute (the full stage the last 2%): past the exploration share of 20%, the
    workflow is locked to the one approved earlier for the target. The first decision, approved, recorded."""
    tmp = tmp_path_factory.mktemp("lock")
    path = campaign(tmp / "w.db", {"good": Probe(curve=power_law())})
    spec = yaml.safe_load(POLICY.read_text())
    spec["stages"][2]["compute_share"], spec["stages"][3]["compute_share"] = 0.9, 0.02
    (tmp / "policy.yaml").write_text(yaml.safe_dump(spec))
    first = api.gate("camp/good", ledger=str(path), policy=str(tmp / "policy.yaml"), record=True)
    return path, str(tmp / "policy.yaml"), first


def test_past_exploration_the_first_approval_fixes_the_workflow_and_is_stored_whole(locked):
    path, _, first = locked
    assert first.decision == "approve" and first.id == 1
    lock = ("workflow locked", True, "no earlier approval for this target: this decision fixes its workflow")
    assert _checks(first)[-1] == lock
    assert first.evidence["locked"] == lock[2]
    (stored,) = api.decisions("camp/good", ledger=str(path))
    assert (stored["target"], stored["decision"], stored["stage"], stored["rationale"], stored["policy_hash"]) == (
        "camp/good",
        "approve",
        "pilot",
        first.rationale,
        first.policy_hash,
    )
    kept = stored["evidence"]
    assert (kept["reached_stage"], kept["axis"], kept["what_to_run_next"]) == ("probe", "learning", None)
    assert (kept["policy_name"], kept["policy_version"]) == ("probe-scale", "1")
    assert (kept["workflow"], kept["runs"]) == (first.evidence["workflow"], first.evidence["runs"])
    assert kept["checks"] == [{"name": n, "passed": p, "detail": t} for n, p, t in _checks(first)]


def test_past_exploration_the_approved_workflow_unchanged_passes(locked):
    path, policy, _ = locked
    again = api.gate("camp/good", ledger=str(path), policy=policy, record=False)
    assert _checks(again)[-1] == ("workflow locked", True, "the workflow approved in decision #1 is unchanged")


def test_past_exploration_a_workflow_changed_since_its_approval_holds(locked, tmp_path):
    """An approval stored after the first, of the same target on another LR: the runs' workflow is no longer it."""
    path, policy, first = locked
    copy = tmp_path / "w.db"
    shutil.copy(path, copy)
    fields = dict(first.evidence["workflow_fields"])
    fields["optimisation"] = {**fields["optimisation"], "lr": 1e-3}
    with Ledger(copy) as led:
        led.add_decision(
            "camp/good",
            "approve",
            evidence={"workflow": "an-older-one", "workflow_fields": fields},
            rationale="approved on another LR",
        )
    d = api.gate("camp/good", ledger=str(copy), policy=policy, record=False)
    why = "the workflow changed since decision #2 approved it (optimisation.lr)"
    assert d.decision == "hold" and d.rationale == "hold " + HEAD + why
    assert d.what_to_run_next == "restore the approved workflow, or explore the change as a new target"
    assert _checks(d)[-1] == ("workflow locked", False, why)


# -- open diagnoses -------------------------------------------------------------------------------------------------


def test_open_diagnoses_hold_each_cause_named_once_with_its_runs_and_events(tmp_path):
    path = campaign(tmp_path / "d.db", {"good": Probe(curve=power_law())})
    with Ledger(path) as led:
        body = {"cause": "schedule", "confidence": 0.9, "detector": "lr_too_high", "advice": "lower the LR"}
        led.add_event("camp/good/s0", "diagnosis", body, start_step=50, end_step=60)
        led.add_event("camp/good/s0", "diagnosis", body, start_step=80, end_step=90)
        led.add_event("camp/good/s2", "diagnosis", body, start_step=50, end_step=60)
        stall = {"cause": "infrastructure_stall", "confidence": 0.9, "detector": "stall_data_wait", "advice": ""}
        led.add_event("camp/good/s1", "diagnosis", stall, start_step=10, end_step=20)
        low = {"cause": "damaged_update", "confidence": 0.3, "detector": "skipped_steps", "advice": "a note"}
        led.add_event("camp/good/s1", "diagnosis", low, start_step=10, end_step=20)
    d = _gate(path, "camp/good")
    assert d.decision == "hold"
    assert d.rationale == (
        "hold "
        + HEAD
        + "open infrastructure_stall, schedule diagnosis: a learning problem that is not the data's fault"
    )
    assert d.what_to_run_next == (
        "fix the infrastructure_stall and schedule (lower the LR), rerun, and run `yieldgate diagnose` again; the "
        "yield of these runs says nothing about the data"
    )
    assert _checks(d) == [
        (
            "no open non-data fault",
            False,
            "open: schedule on camp/good/s0 (events 1, 2), camp/good/s2 (event 3); infrastructure_stall on "
            "camp/good/s1 (event 4)",
        ),
        STALLS,
        SEEDS,
    ]
    assert [(f["run"], f["event"], f["cause"]) for f in d.evidence["open_diagnoses"]] == [
        ("camp/good/s0", 1, "schedule"),
        ("camp/good/s0", 2, "schedule"),
        ("camp/good/s1", 4, "infrastructure_stall"),
        ("camp/good/s2", 3, "schedule"),
    ]


# -- the data supply and the repetition discount --------------------------------------------------------------------

R_STAR = 15.4


def _effective(drawn: float, unique: float) -> float:
    """Muennighoff et al. (2023), eq. 5, written out: D' = U + U R* (1 - e^(-(D/U - 1)/R*)) past one epoch."""
    return drawn if drawn <= unique else unique + unique * R_STAR * (1 - math.exp(-(drawn / unique - 1) / R_STAR))


def _recipe(*sources: dict[str, Any]) -> Recipe:
    return Recipe.model_validate({"sources": list(sources)})


def test_a_stage_s_supply_is_each_source_s_share_passed_over_its_unique_tokens():
    """Weights 3:1, 200,000 and 50,000 unique tokens, a stage from 150,000 to 500,000 tokens: `a` draws 375,000
    (1.875 epochs, 112,500 of them before the stage), `b` 125,000 (2.5 epochs, 37,500 before); an unknown source
    drawn from makes the stage's worth unknown."""
    recipe = _recipe(
        {"name": "a", "weight": 3.0, "unique_tokens": 200_000}, {"name": "b", "weight": 1.0, "unique_tokens": 50_000}
    )
    rows = [r.to_dict() for r in stage_supply(recipe, "pilot", 150_000, 500_000)]
    gained_a = _effective(375_000, 200_000) - _effective(112_500, 200_000)
    gained_b = _effective(125_000, 50_000) - _effective(37_500, 50_000)
    assert rows == [
        {
            "stage": "pilot",
            "source": "a",
            "drawn_tokens": 375_000.0,
            "unique_tokens": 200_000,
            "epochs": 1.875,
            "effective_tokens": pytest.approx(_effective(375_000, 200_000)),
            "stage_worth": pytest.approx(gained_a / 262_500),
        },
        {
            "stage": "pilot",
            "source": "b",
            "drawn_tokens": 125_000.0,
            "unique_tokens": 50_000,
            "epochs": 2.5,
            "effective_tokens": pytest.approx(_effective(125_000, 50_000)),
            "stage_worth": pytest.approx(gained_b / 87_500),
        },
    ]
    assert worth(recipe, 150_000, 500_000) == pytest.approx((gained_a + gained_b) / 350_000)
    assert worth(recipe, 0, 100_000) == 1.0  # both within their first epoch
    assert worth(recipe, 100_000, 100_000) is None  # nothing drawn
    unknown = _recipe({"name": "a", "weight": 1.0, "unique_tokens": 200_000}, {"name": "c", "weight": 1.0})
    assert worth(unknown, 0, 100_000) is None
    assert stage_supply(unknown, "s", 0, 100_000)[1].to_dict() == {
        "stage": "s",
        "source": "c",
        "drawn_tokens": 50_000.0,
        "unique_tokens": None,
        "epochs": None,
        "effective_tokens": None,
        "stage_worth": None,
    }


def test_the_plan_names_the_first_stage_a_source_passes_the_policy_s_epochs_at():
    """100,000 unique tokens: the probe's 150,000 pass them 1.5 times, the pilot's 500,000 5 times (over 4: grow to
    125,000), the full stage's 2,000,000 20 times (named once, at the pilot)."""
    policy = parse_policy(yaml.safe_load(POLICY.read_text()))
    recipe = _recipe({"name": "tiny", "weight": 1.0, "unique_tokens": 100_000})
    out = plan(recipe, policy.stages, max_epochs=4, params=31_000)
    assert (out["max_epochs"], out["params"], out["r_star"]) == (4, 31_000, 15.4)
    assert out["grow"] == [
        {"source": "tiny", "stage": "pilot", "epochs": 5.0, "unique_tokens": 100_000, "needed_unique_tokens": 125_000.0}
    ]
    assert [(s["stage"], s["start_tokens"], s["tokens"], s["tokens_per_param"]) for s in out["stages"]] == [
        ("scout", 0.0, 50_000, 50_000 / 31_000),
        ("probe", 50_000, 150_000, 150_000 / 31_000),
        ("pilot", 150_000, 500_000, 500_000 / 31_000),
        ("full", 500_000, 2_000_000, 2_000_000 / 31_000),
    ]
    assert [[(r["epochs"], r["over_limit"]) for r in s["sources"]] for s in out["stages"]] == [
        [(0.5, False)],
        [(1.5, False)],
        [(5.0, True)],
        [(20.0, True)],
    ]
    assert out["stages"][0]["worth"] == 1.0
    assert out["stages"][2]["worth"] == pytest.approx(
        (_effective(500_000, 100_000) - _effective(150_000, 100_000)) / 350_000
    )
    assert plan(recipe, policy.stages)["grow"] == []
    assert plan(recipe, policy.stages)["stages"][0]["tokens_per_param"] is None


@pytest.fixture(scope="module")
def supply(tmp_path_factory) -> Path:
    """The clean curve on a source of 100,000 unique tokens (`tiny`), on one whose size is not recorded (`open`), and
    with no data section in the manifests at all (`nodata`)."""
    return campaign(
        tmp_path_factory.mktemp("supply") / "s.db",
        {
            "tiny": Probe(
                curve=power_law(), manifest={"data": {"sources": [{"name": "tiny", "unique_tokens": 100_000}]}}
            ),
            "open": Probe(curve=power_law(), manifest={"data": {"sources": [{"name": "open"}]}}),
            "nodata": Probe(curve=power_law(), manifest={"data": None}),
        },
    )


def test_a_source_the_pilot_passes_past_max_epochs_holds_with_the_tokens_it_must_grow_to(supply):
    d = _gate(supply, "camp/tiny")
    assert d.decision == "hold"
    assert d.rationale == "hold " + HEAD + "pilot would pass tiny 5 times (the policy allows 4)"
    assert d.what_to_run_next == "grow tiny to at least 125,000 unique tokens (it holds 100,000), or lower its weight"
    assert ("data supply", False, "pilot passes tiny x5; the policy allows 4") in _checks(d)


def test_the_forecast_is_discounted_by_the_worth_of_the_pilot_s_repeated_tokens(supply, tmp_path):
    """Measured on 150,000 tokens of 100,000 (1.5 epochs), the pilot's next 350,000 pass them up to 5 times: the
    forecast yield is multiplied by the worth of the pilot's new tokens over that of the tokens measured."""
    d = _gate(supply, "camp/tiny", _policy(tmp_path, max_epochs=10))
    seen = _effective(150_000, 100_000) / 150_000
    coming = (_effective(500_000, 100_000) - _effective(150_000, 100_000)) / 350_000
    factor = coming / seen
    assert (round(seen, 3), round(coming, 3), round(factor, 3)) == (0.995, 0.866, 0.871)
    sup = d.evidence["supply"]
    assert (sup["worth_measured"], sup["worth_next"], sup["discount"]) == pytest.approx((seen, coming, factor))
    note = (
        "repetition discount",
        None,
        "pilot's tokens are worth x0.866 new ones, the tokens measured x0.995: the forecast yield is discounted x0.871 "
        "(Muennighoff et al. 2023)",
    )
    assert note in _checks(d)
    fc = d.evidence["forecast"]
    assert d.rationale.startswith(
        f"approve {HEAD}forecast yield {fc['yield_per_btok'] * factor:,.0f} per billion tokens (discounted for "
        "repetition), the 80% t-interval"
    )
    upper = fc["interval"][1] * factor
    assert (
        "optimistic bound above threshold",
        True,
        f"upper {upper:,.0f} vs 250 per billion tokens (discounted for repetition)",
    ) in _checks(d)


def test_a_source_of_unknown_size_is_not_discounted_and_holds_the_supply_check(supply):
    d = _gate(supply, "camp/open")
    assert d.decision == "hold"
    assert d.rationale == "hold " + HEAD + "the unique tokens of open are unknown"
    assert d.what_to_run_next == "record data.sources[].unique_tokens in the manifests"
    assert (
        "repetition discount",
        None,
        "unique tokens unknown for open: the forecast yield is not discounted for repetition (record "
        "data.sources[].unique_tokens)",
    ) in _checks(d)
    assert ("data supply", False, "unique tokens unknown for open") in _checks(d)
    assert d.evidence["supply"]["discount"] == 1.0 and d.evidence["supply"]["worth_measured"] is None


def test_a_target_without_a_recipe_is_not_discounted_and_holds_the_supply_check(supply):
    d = _gate(supply, "camp/nodata")
    assert d.decision == "hold" and "supply" not in d.evidence
    assert d.rationale == "hold " + HEAD + "the data supply is unknown"
    assert d.what_to_run_next == "record the recipe (manifest `data`) with the runs"
    assert ("data supply", False, "the target's recipe is unknown (no manifest, or several workflows)") in _checks(d)
    assert "repetition discount" not in [c[0] for c in _checks(d)]
