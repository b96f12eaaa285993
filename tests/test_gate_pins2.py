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
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy import stats as scipy_stats

from tests.support.gate_ledger import POLICY, Probe, campaign, power_law, turning
from yieldgate import api
from yieldgate.gate.draft import RecordedDecision

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


def test_the_clean_recipe_is_approved_with_every_check_and_number_said(ledger):
    d = _gate(ledger, "camp/good")
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


def test_the_pooled_forecast_is_the_seeds_mean_with_student_t_on_their_spread(ledger):
    """Three seeds' stable-phase forecasts pooled: the mean, and mean -+ t(0.9, 2 df) x se, se the square root of the
    larger of the seeds' variance and their own mean variance (each seed's 80% bootstrap interval read as +-z(0.9) of
    its standard error), over 3. Here the seeds' own intervals are the wider (the forecasts 636, 655, 646 spread by
    9.5; their own half-widths are 26-40)."""
    fc = _gate(ledger, "camp/good").evidence["forecast"]
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


def test_a_loss_that_turned_up_is_rejected_on_its_recent_yield(ledger):
    d = _gate(ledger, "camp/bad")
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


def test_a_slow_recipe_is_rejected_below_the_bar_without_blaming_repetition(ledger):
    d = _gate(ledger, "camp/slow")
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
def test_an_interval_too_wide_holds_with_the_seeds_that_would_narrow_it(ledger, tmp_path, bar, more):
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


def test_too_few_seeds_hold_before_the_forecast_is_read(ledger, tmp_path):
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_seeds=5))
    assert (d.decision, d.rationale, d.what_to_run_next) == (
        "hold",
        "hold " + HEAD + "3 seeds, the policy needs 5 for an interval",
        "run 2 more seeds at 150,000 tokens",
    )
    assert _checks(d) == [FAULTS, STALLS, ("seeds", False, "3 per budget, the policy needs 5")]


def test_the_yield_per_dollar_holds_below_its_lower_bound_and_rejects_below_its_upper(ledger, tmp_path):
    """Per dollar the interval is [615, 676] / 6.7817 = [90.69, 99.63]: a bar of 91 holds, one of 100 rejects."""
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
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=100))
    assert d.decision == "reject" and d.rationale.startswith(
        "reject " + HEAD + "even the optimistic bound of the forecast yield, 99.63 per dollar, below 100: the data is "
        "exhausted for this purpose"
    )


@pytest.mark.xfail(
    strict=True, reason="a reject on price alone blames the next stage's repetition, though nothing is discounted"
)
def test_a_reject_on_price_alone_does_not_blame_repetition(ledger, tmp_path):
    """The pilot passes its source 0.1 times (discount 1): a reject on the yield per dollar is the price's, and the
    rationale says `at pilot's repetition` (gate._rejected reads the undiscounted upper bound against the per-token
    bar to decide whether repetition is to blame, whatever bar rejected)."""
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_yield_per_usd=100))
    assert d.evidence["supply"]["discount"] == 1.0
    assert "repetition" not in d.rationale


def test_tokens_per_parameter_below_the_policy_holds_with_the_tokens_it_needs(ledger, tmp_path):
    """17 tokens per parameter of 31,000 parameters: 527,000 tokens; the pilot gives 500,000 (16.1 each)."""
    d = _gate(ledger, "camp/good", _policy(tmp_path, min_tokens_per_param=17))
    assert d.decision == "hold"
    assert d.rationale == "hold " + HEAD + "pilot would leave the model undertrained (16.1 tokens per parameter)"
    assert d.what_to_run_next == "give pilot at least 527,000 tokens, or a smaller model"
    assert ("tokens per parameter", False, "pilot: 16.1 tokens per parameter, the policy needs 17") in _checks(d)
