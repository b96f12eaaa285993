"""What the gate's planning and governing code decides and says, pinned whole (issue #44 item 11, second pass):
the code no fast test ran before (the supply-limited branch of `gate/sizing.py`, the governor's notes and its budgets
read live in `gate/live.py`, a target's probe and recipe read from a file in `gate/plan.py`), the rules of
`requirements.py`, `policy.py`, `findings.py`, `shared.py` and `draft.py` read whole, and boundaries no case sat on.
Mutation testing (`make mutation-sample`) found these paths' changes untold apart. Two of these tests found bugs, since
fixed: a source of no unique tokens refused as a FLOP budget, and `_epochs` failing on a source never drawn from.

The laws here are written by hand, not fitted, so that every number has a closed form:

- L = 1.5 + 100/N^0.5 + 100/D^0.25 (alpha = 0.5, beta = 0.25, A = B = 100): G = (alpha A / (beta B))^(1/(alpha+beta))
  = 2^(4/3); at C = 6e12 FLOPs (C/6 = 1e12) the optimum is N = G (C/6)^(1/3) = 25,198.4, D = (C/6)/N = 39,685,026,
  D/N = 1,574.9; the D that a supply S allows is reached at C = 6 (S G)^(3/2), with N = G (S G)^(1/2);
- L = 1.5 + 100/N^0.5 + 100/D^0.5 (symmetric): G = 1, N = D = (C/6)^(1/2), D/N = 1 at every budget.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import scipy.stats  # noqa: F401  the gate imports it on first use: a second of import, timed as no test's
import yaml

from tests.support.gate_ledger import Probe, campaign, manifest_of, no_warmup, power_law, write_probe
from yieldgate import EvalRecord
from yieldgate.analysis.records import RunRecords
from yieldgate.analysis.scaling import ScalingLaw
from yieldgate.errors import InputError
from yieldgate.gate import findings as gate_findings
from yieldgate.gate.draft import Bounds, Check, Decision, Draft, RecordedDecision
from yieldgate.gate.findings import _answered, _content_key, _step, _steps, run_findings, target_findings
from yieldgate.gate.gate import _throughput_decision, gate
from yieldgate.gate.live import Governor, _stage_of, _unspent_line, governable, load
from yieldgate.gate.plan import _sizes, _target_probe, plan_target, target_recipe
from yieldgate.gate.policy import Policy, Stage, parse_policy
from yieldgate.gate.requirements import _epochs, _tokens_per_param, _workflow
from yieldgate.gate.shared import Shared, _probe, is_shared, shared_conditions
from yieldgate.gate.sizing import _flops_for_params, _flops_for_tokens, campaign_law, sizing, supply_tokens
from yieldgate.gate.supply import stage_supply
from yieldgate.gate.target import TargetEvidence
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest, Recipe

G = 2 ** (4 / 3)
"""The asymmetric law's G = (alpha A / (beta B))^(1/(alpha + beta)) = 2^(1/0.75)."""


def _law(*, beta: float = 0.25, sizes: tuple[int, int] = (10_000, 100_000)) -> ScalingLaw:
    """A law written by hand (module docstring): no bootstrap replicates, so every interval is the estimate itself."""
    return ScalingLaw(
        E=1.5,
        A=100.0,
        alpha=0.5,
        B=100.0,
        beta=beta,
        intervals={},
        level=0.8,
        sizes=list(sizes),
        points=12,
        probes=4,
        resampled="probes",
        boots=0,
        noise=0.0,
        rmse=0.0,
    )


def _recipe(*sources: dict[str, Any]) -> Recipe:
    return Recipe.model_validate({"sources": list(sources)})


WEB_CODE = _recipe(
    {"name": "web", "weight": 3.0, "unique_tokens": 1_000_000},
    {"name": "code", "weight": 1.0, "unique_tokens": 1_000_000},
    {"name": "held", "weight": 0.0},  # drawn from not at all: its unknown supply limits nothing
)
"""At 2 epochs web (3/4 of the stream) runs out first: at 2,000,000 / 0.75 = 2,666,667 tokens; code at 8,000,000."""
SUPPLY = 2_000_000 / 0.75


def test_supply_tokens_is_where_the_first_source_passes_its_epochs():
    assert supply_tokens(WEB_CODE, 2.0) == pytest.approx(SUPPLY, rel=1e-9)
    assert supply_tokens(WEB_CODE, 4.0) == pytest.approx(2 * SUPPLY, rel=1e-9)
    one = _recipe({"name": "web", "unique_tokens": 1_000})
    assert supply_tokens(one, 1.0) == pytest.approx(1_000, rel=1e-9)
    assert supply_tokens(one, 1.0) <= 1_000  # the bisection keeps the end within the supply
    # A source drawn from with no unique-token count: the supply is unknown.
    assert supply_tokens(_recipe({"name": "web", "unique_tokens": 1_000}, {"name": "x", "weight": 0.5}), 4.0) is None
    # Past 1e18 tokens (the bisection's top) the supply is unbounded; a source of no tokens supplies none.
    assert supply_tokens(_recipe({"name": "web", "unique_tokens": 10**18}), 4.0) == math.inf
    assert supply_tokens(_recipe({"name": "web", "unique_tokens": 0}), 4.0) == 0.0
    assert supply_tokens(_recipe({"name": "web", "unique_tokens": 1}), 1.0) == pytest.approx(1.0)


def test_the_flops_whose_optimum_is_a_size_or_a_token_count_invert_the_optimum():
    law = _law()
    assert _flops_for_tokens(law, SUPPLY) == pytest.approx(6 * (SUPPLY * G) ** 1.5, rel=1e-12)
    assert _flops_for_params(law, 25_198.42099789745) == pytest.approx(6e12, rel=1e-12)
    assert law.optimal(_flops_for_tokens(law, 1e6))["tokens"] == pytest.approx(1e6, rel=1e-12)
    assert law.optimal(_flops_for_params(law, 5e4))["params"] == pytest.approx(5e4, rel=1e-12)


def _flops_entry(law: ScalingLaw, recipe: Recipe | None, max_epochs: float | None) -> dict[str, Any]:
    out = sizing(law, [], params=None, flops=6e12, recipe=recipe, max_epochs=max_epochs)
    assert out["params"] is None and out["stages"] == [] and "flops_refused" not in out
    assert out["law"] == law.to_dict()
    return out


N_OPT, D_OPT = G * 1e4, 1e12 / (G * 1e4)
LOSS_OPT = 1.5 + 100 / N_OPT**0.5 + 100 / D_OPT**0.25


def _common(entry: dict[str, Any]) -> None:
    """The optimum at 6e12 FLOPs of the asymmetric law, its (degenerate) intervals and its predicted loss."""
    assert entry["flops"] == 6e12
    assert entry["params"] == pytest.approx(N_OPT, rel=1e-12)
    assert entry["tokens"] == pytest.approx(D_OPT, rel=1e-12)
    assert entry["tokens_per_param"] == pytest.approx(1e12 / N_OPT**2, rel=1e-12)
    iv = entry["intervals"]
    assert iv["params"] == pytest.approx((N_OPT, N_OPT)) and iv["tokens"] == pytest.approx((D_OPT, D_OPT))
    assert iv["tokens_per_param"] == pytest.approx((D_OPT / N_OPT,) * 2)
    p = entry["prediction"]
    assert p["params"] == pytest.approx(N_OPT) and p["tokens"] == pytest.approx(D_OPT)
    assert p["loss"] == pytest.approx(LOSS_OPT, rel=1e-12) and p["interval"] == pytest.approx((LOSS_OPT, LOSS_OPT))
    assert p["level"] == 0.8


def test_a_supply_short_of_the_optimum_names_the_size_it_trains_compute_optimally():
    out = _flops_entry(_law(), WEB_CODE, 2.0)
    assert out["notes"] == ["no planned model size (the target's manifest gives no model.non_embedding_params)"]
    entry = out["flops"]
    _common(entry)
    assert set(entry) == {
        "flops", "params", "tokens", "tokens_per_param", "intervals", "prediction", "max_epochs", "supply_tokens",
        "undertrained", "advice", "supply_params", "supply_flops",
    }  # fmt: skip
    assert entry["max_epochs"] == 2.0
    assert entry["supply_tokens"] == pytest.approx(SUPPLY, rel=1e-9)
    assert entry["supply_flops"] == pytest.approx(6 * (SUPPLY * G) ** 1.5, rel=1e-8)  # 1.045e11
    assert entry["supply_params"] == pytest.approx(G * (SUPPLY * G) ** 0.5, rel=1e-8)  # 6,532
    # 2,666,667 / 25,198 = 106 tokens per parameter, under half the optimum's 1,575: undertrained.
    assert bool(entry["undertrained"]) is True
    assert entry["advice"] == (
        "the compute-optimal model (N = 25,198) needs 39,685,026 tokens; the sources supply 2,666,667 within 2 epochs, "
        "106 tokens per parameter against the fitted optimum's 1.57e+03: grow the sources, or train N = 6,532 "
        "(compute-optimal for that supply at 1.05e+11 FLOPs)"
    )


def test_a_supply_whose_optimal_size_is_far_outside_the_probes_names_none():
    # Probes of 100,000 to 1,000,000: sizes from 10,000 to 10,000,000 are named; the supply's 6,532 is not.
    out = _flops_entry(_law(sizes=(100_000, 1_000_000)), WEB_CODE, None)
    entry = out["flops"]
    _common(entry)
    assert entry["max_epochs"] == 4.0  # EPOCHS_FRESH, the policy giving none
    assert entry["supply_tokens"] == pytest.approx(2 * SUPPLY, rel=1e-9)
    assert entry["supply_params"] is None
    assert entry["supply_flops"] == pytest.approx(6 * (2 * SUPPLY * G) ** 1.5, rel=1e-8)
    assert bool(entry["undertrained"]) is True  # 212 tokens per parameter against 1,575 / 2
    assert entry["advice"] == (
        "the compute-optimal model (N = 25,198) needs 39,685,026 tokens; the sources supply 5,333,333 within 4 epochs, "
        "212 tokens per parameter against the fitted optimum's 1.57e+03: grow the sources (the size compute-optimal "
        "for that supply lies more than 10x outside the probed sizes: not named)"
    )


def test_a_supply_that_suffices_or_is_unknown_gives_no_advice():
    plenty = _recipe({"name": "web", "unique_tokens": 40_000_000})  # 160,000,000 tokens at 4 epochs
    entry = _flops_entry(_law(), plenty, None)["flops"]
    _common(entry)
    assert entry["supply_tokens"] == pytest.approx(160_000_000, rel=1e-9)
    assert (entry["undertrained"], entry["advice"]) == (False, None)
    assert "supply_params" not in entry and "supply_flops" not in entry
    out = _flops_entry(_law(), _recipe({"name": "web"}), 4.0)
    assert out["notes"][1:] == ["token supply unknown (data.sources[].unique_tokens): not checked against D_opt"]
    assert (out["flops"]["supply_tokens"], out["flops"]["undertrained"], out["flops"]["advice"]) == (None, False, None)
    # No recipe at all: the supply is not asked, and the note says it was not checked.
    out = _flops_entry(_law(), None, 4.0)
    assert out["flops"]["supply_tokens"] is None and len(out["notes"]) == 2


def test_a_supply_just_short_of_the_optimum_is_not_undertrained():
    # Symmetric law: D_opt = N_opt = 1e6 at 6e12 FLOPs, D/N = 1; a supply of 800,000 tokens (200,000 unique at 4
    # epochs) is 0.8 tokens per parameter, above half the optimum's 1: short of D_opt but not undertrained.
    law = _law(beta=0.5, sizes=(100_000, 1_000_000))
    entry = _flops_entry(law, _recipe({"name": "web", "unique_tokens": 200_000}), 4.0)["flops"]
    assert entry["params"] == pytest.approx(1e6) and entry["tokens"] == pytest.approx(1e6)
    assert bool(entry["undertrained"]) is False
    assert entry["supply_params"] == pytest.approx(800_000, rel=1e-8)
    assert entry["supply_flops"] == pytest.approx(6 * 800_000**2, rel=1e-8)
    assert entry["advice"] == (
        "the compute-optimal model (N = 1,000,000) needs 1,000,000 tokens; the sources supply 800,000 within 4 epochs, "
        "0.8 tokens per parameter against the fitted optimum's 1: grow the sources, or train N = 800,000 "
        "(compute-optimal for that supply at 3.84e+12 FLOPs)"
    )


def test_stages_against_the_planned_size_and_the_undertrained_boundary():
    # Symmetric law: the optimum's D/N is 1 at every compute, so a stage is undertrained below 0.5 tokens per
    # parameter (the boundary itself has no exact float case: D/N is 1 exactly only where N D is a square).
    law = _law(beta=0.5)
    stages = [
        Stage(name=n, tokens=t, compute_share=0.1) for n, t in (("pilot", 400_000), ("half", 600_000), ("full", 2e6))
    ]
    out = sizing(law, stages, params=1_000_000, flops=None, recipe=None, max_epochs=None)
    assert (out["params"], out["flops"], out["notes"]) == (1_000_000, None, [])
    assert "flops_refused" not in out
    rows = out["stages"]
    assert [r["stage"] for r in rows] == ["pilot", "half", "full"]
    assert [r["tokens"] for r in rows] == [400_000, 600_000, 2_000_000]
    assert [r["tokens_per_param"] for r in rows] == [0.4, 0.6, 2.0]
    assert [r["optimal_tokens_per_param"] for r in rows] == pytest.approx([1.0, 1.0, 1.0])
    assert [bool(r["undertrained"]) for r in rows] == [True, False, False]
    assert rows[0]["advice"] == (
        "pilot would leave the model undertrained (0.4 tokens per parameter, far below the fitted optimum's 1 at its "
        "compute): give it more tokens or a smaller model"
    )
    assert rows[1]["advice"] is None and rows[2]["advice"] is None
    loss = 1.5 + 100 / 1000 + 100 / 400_000**0.5
    assert rows[0]["prediction"]["loss"] == pytest.approx(loss, rel=1e-12)
    assert rows[0]["prediction"]["params"] == 1e6 and rows[0]["prediction"]["tokens"] == 4e5


def test_the_extrapolation_limit_is_inclusive_and_its_refusal_names_the_budgets_that_are_not():
    # Symmetric law over probes of 100,000 to 1,000,000: N = (C/6)^(1/2) is named from 10,000 (C = 6e8) to
    # 10,000,000 (C = 6e14), both ends included.
    law = _law(beta=0.5, sizes=(100_000, 1_000_000))
    for flops, n in ((6e8, 1e4), (6e14, 1e7)):
        out = sizing(law, [], params=None, flops=flops, recipe=None, max_epochs=None)
        assert "flops_refused" not in out and out["flops"]["params"] == pytest.approx(n)
    for flops, n in ((6e16, "100,000,000"), (6e6, "1,000")):
        out = sizing(law, [], params=None, flops=flops, recipe=None, max_epochs=None)
        reason = (
            f"no compute-optimal size for {flops:.3g} FLOPs: the law puts it at N = {n}, more than 10x outside the "
            "probed sizes (N = 100,000 to 1,000,000); probe sizes nearer it, or plan a budget of 6e+08 to 6e+14 FLOPs"
        )
        assert out["flops"] is None and out["flops_refused"] == {"flops": flops, "reason": reason}
        assert out["notes"] == [
            "no planned model size (the target's manifest gives no model.non_embedding_params)",
            reason,
        ]


def test_a_law_not_identified_refuses_with_its_reason():
    law = _law()
    law.unidentified = "E fitted to ~0 (at its bound): probe more sizes"
    out = sizing(law, [], params=None, flops=6e12, recipe=WEB_CODE, max_epochs=None)
    reason = "no compute-optimal size for 6e+12 FLOPs: E fitted to ~0 (at its bound): probe more sizes"
    assert out["flops"] is None and out["flops_refused"] == {"flops": 6e12, "reason": reason}
    assert out["notes"][-1] == reason


def test_a_supply_of_no_tokens_is_said_not_refused_as_a_flop_budget():
    """A source of 0 unique tokens (the manifest allows it) supplies nothing: said, not asked of the law at 0 FLOPs
    (which refused with a message about the FLOP budget, naming no supply)."""
    out = sizing(_law(), [], params=None, flops=6e12, recipe=_recipe({"name": "web", "unique_tokens": 0}), max_epochs=4)
    assert out["flops"]["supply_tokens"] == 0.0 and out["flops"]["undertrained"] is True
    assert out["flops"]["supply_params"] is None and out["flops"]["supply_flops"] is None
    assert out["flops"]["advice"] == (
        "the sources supply no tokens within 4 epochs (a source drawn from holds no unique tokens): grow the sources"
    )


@pytest.fixture(scope="module")
def two_recipes(tmp_path_factory) -> Iterator[Ledger]:
    path = campaign(
        tmp_path_factory.mktemp("pins3") / "c.db",
        {"b": Probe(curve=power_law()), "a": Probe(curve=power_law())},
        seeds=1,
    )
    with Ledger(path) as led:
        led.put_campaign("camp", {"recipes": ["a", "b"]}, "h")
        write_probe(led, "solo/a/s0", "a", 0, Probe(curve=power_law()), "solo")  # a campaign of one recipe
        led.put_campaign("solo", {"recipes": ["a"]}, "h")
        for run in ("camp/a/s0", "camp/b/s0", "solo/a/s0"):  # as `yieldgate probe` stores a probe: with its model
            led.set_meta(run, "probe", {**led.meta(run)["probe"], "model": {"layers": 1, "width": 32}})
        yield led


def test_campaign_law_names_the_recipe_it_needs(two_recipes):
    with pytest.raises(InputError) as err:
        campaign_law(two_recipes, "camp", level=0.8)
    assert str(err.value) == "campaign 'camp' has 2 recipes (a, b): name one, as camp/a"
    with pytest.raises(InputError) as err:
        campaign_law(two_recipes, "camp/c", level=0.8)
    assert str(err.value) == "campaign 'camp' has no recipe 'c'; it has a, b"
    with pytest.raises(InputError) as err:
        campaign_law(two_recipes, "other/a", level=0.8)
    assert str(err.value).startswith("no campaign named 'other' in ")
    # A campaign of one recipe needs no recipe named: its law is fitted (here refused: one model size).
    fit = (
        "an L(N, D) fit needs probes of at least 3 model sizes, got 1 (N = 12,000): add sizes to the campaign's "
        "`models`"
    )
    for ref in ("solo", "solo/a"):
        with pytest.raises(InputError) as err:
            campaign_law(two_recipes, ref, level=0.8)
        assert str(err.value) == fit


# The governor (`gate/live.py`): its note, its budgets read live, its screen between boundaries.

LIVE_STAGES = (40_000, 100_000, 140_000, 600_000)
RATE = 1024 / 0.05 * 3600
"""The constructed probes' tokens per device-hour: 1,024 tokens a step, 0.05 s a step, 73,728,000."""


def _live(unit: str = "tokens", **top: Any) -> dict[str, Any]:
    per = {"tokens": 1, "device_hours": 1 / RATE}[unit]
    stages = [{"name": f"s{i}", unit: t * per, "compute_share": 0.25} for i, t in enumerate(LIVE_STAGES)]
    requirements = {"min_yield_per_btok": 250, "min_seeds": 3, "level": 0.8, **top.pop("requirements", {})}
    return {"name": "live", "version": 2, "stages": stages, "requirements": requirements, **top}


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Iterator[Ledger]:
    """One probe written whole (146 steps of 1,024 tokens at 0.05 s; evaluations at steps 0, 12, 24, ...)."""
    with Ledger(tmp_path_factory.mktemp("live") / "r.db") as led:
        write_probe(led, "r", "rec", 0, Probe(curve=power_law()))
        led.set_meta("r", "probe", {})
        led.set_status("r", "running")
        yield led


def test_unspent_line_says_each_figure_known():
    assert _unspent_line({}) == "nothing priced"
    full = {"tokens": 1_234_567.4, "device_hours": 0.0123456, "usd": 12.345, "kwh": 2.5}
    assert _unspent_line(full) == "1,234,567 tokens, 0.0123 device-hours, 12.3 USD, 2.5 kWh unspent"
    assert _unspent_line({**full, "usd": None, "device_hours": None}) == "1,234,567 tokens, 2.5 kWh unspent"
    assert _unspent_line({"tokens": 10.0, "usd": 0.0}) == "10 tokens, 0 USD unspent"


def test_the_stage_a_run_reached_counts_a_budget_met_exactly():
    policy = parse_policy(_live())
    cases = {0.0: -1, -5.0: -1, math.nan: -1, 39_999.0: -1, 40_000.0: 0, 99_999.9: 0, 100_000.0: 1, 600_000.0: 3}
    assert {t: _stage_of(policy, t) for t in cases} == cases
    assert _stage_of(policy, math.inf) == 3


def test_a_policy_is_loaded_from_a_policy_a_mapping_or_a_file(tmp_path):
    policy = parse_policy(_live())
    assert load(policy) == (policy, "Tracker(policy=...)")
    parsed, source = load(_live())
    assert (parsed.content_hash(), source) == (policy.content_hash(), "Tracker(policy=...)")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_live()))
    parsed, source = load(path)
    assert (parsed.content_hash(), source) == (policy.content_hash(), str(path))
    parsed, source = load(str(path))
    assert (parsed.content_hash(), source) == (policy.content_hash(), str(path))


def test_the_governor_s_note_names_the_policy_its_hash_and_how_a_hold_is_acted_on():
    governor = Governor.start(_live(), manifest=None)
    assert (governor.stage, governor.first, governor.done, governor.held) == (-1, 0, False, None)
    assert governor.note() == {
        "policy": "live@2",
        "policy_hash": parse_policy(_live()).content_hash(),
        "source": "Tracker(policy=...)",
        "on_hold": "stop",
        "decisions": [],
        "held": None,
    }
    assert Governor.start(_live(on_hold="warn"), manifest=None).note()["on_hold"] == "warn"


def _manifest(price: float | None) -> Manifest:
    hardware = {"device_kind": "cpu", "device_count": 1}
    return Manifest.model_validate(
        {"hardware": hardware if price is None else {**hardware, "price_per_device_hour": price}}
    )


def test_a_policy_that_cannot_govern_the_run_is_refused_in_one_line():
    usd = {
        **_live(),
        "stages": [{"name": "a", "usd": 1.0, "compute_share": 0.5}, {"name": "b", "usd": 2.0, "compute_share": 0.5}],
    }
    with pytest.raises(InputError) as err:
        governable(parse_policy(usd), _manifest(None))
    assert str(err.value) == (
        "policy 'live' gives its stages in dollars, but this run records no price: give the policy "
        "prices.per_device_hour or the manifest hardware.price_per_device_hour, or give the stages in tokens or "
        "device_hours; the run was not started"
    )
    with pytest.raises(InputError):
        governable(parse_policy(usd), None)
    governable(parse_policy(usd), _manifest(0.5))  # priced by the manifest
    governable(parse_policy({**usd, "prices": {"per_device_hour": 2.0}}), None)  # or by the policy
    per_usd = _live(requirements={"min_yield_per_usd": 2.5})
    for manifest in (None, _manifest(None)):
        with pytest.raises(InputError) as err:
            governable(parse_policy(per_usd), manifest)
        assert str(err.value) == (
            "policy 'live' asks for requirements.min_yield_per_usd (2.5 per dollar), but this run records no price: "
            "give the manifest hardware.price_per_device_hour, or remove the bar; the run was not started"
        )
    governable(parse_policy(per_usd), _manifest(0.5))
    governable(parse_policy(_live()), None)


def test_budgets_in_device_hours_are_read_at_the_throughput_screened_so_far(one_run):
    """At step 12 the run has trained 12,288 tokens in 0.6 s: 20,480 tokens/s, 73,728,000 a device-hour, so the
    stages written in device-hours read as the same tokens."""
    governor = Governor.start(_live("device_hours"), manifest=None)
    assert governor.evaluate(one_run, "r", 12) is None  # no stage reached, no fault: nothing decided
    assert (governor._seen, governor.stage, governor.done) == (12, -1, False)
    assert list(governor._window["step"]) == list(range(13))
    read = governor._in_tokens(one_run, "r")
    assert [s.tokens for s in read.stages] == list(LIVE_STAGES)
    # In dollars at the manifest's $0.5 per device-hour (the policy names no price): 147,456,000 tokens a dollar.
    usd = _live("device_hours")
    usd["stages"] = [{"name": f"s{i}", "usd": t / RATE * 0.5, "compute_share": 0.25} for i, t in enumerate(LIVE_STAGES)]
    priced = Governor.start(usd, manifest=one_run.manifest("r"))
    assert priced.evaluate(one_run, "r", 12) is None
    assert [s.tokens for s in priced._in_tokens(one_run, "r").stages] == list(LIVE_STAGES)
    # A policy already in tokens is read as it is.
    tokens = Governor.start(_live(), manifest=None)
    assert tokens._in_tokens(one_run, "r") is tokens.policy


def test_the_screen_reads_only_the_steps_since_the_last_and_reports_the_tokens(one_run):
    governor = Governor.start(_live(), manifest=None)
    assert governor._screen(one_run, "r", 12) == (12_288.0, False)
    assert governor._screen(one_run, "r", 24) == (24_576.0, False)
    assert list(governor._window["step"]) == list(range(25)) and governor._seen == 24
    assert list(governor._window.index) == list(range(25))  # one label a step: the detectors index the window
    assert governor._screen(one_run, "r", 24) == (24_576.0, False)  # nothing new: the window is kept
    assert len(governor._window) == 25


def test_a_run_past_its_last_stage_is_done_and_a_resumed_run_decides_nothing_before_its_start(one_run):
    last = _live()
    last["stages"][-1]["tokens"] = 12_288  # reached exactly at step 12
    last["stages"] = [{"name": "s0", "tokens": 6_000, "compute_share": 0.5}, last["stages"][-1]]
    governor = Governor.start(last, manifest=None)
    assert governor.evaluate(one_run, "r", 12) is None and governor.done
    resumed = Governor.start(_live(), manifest=None)
    resumed.begin_at(49, 50_176.0)
    assert (resumed.first, resumed._seen, resumed.stage) == (49, 49, 0)
    assert resumed.evaluate(one_run, "r", 49) is None and resumed.evaluate(one_run, "r", 12) is None
    assert resumed._window.empty  # nothing was read
    assert resumed.evaluate(one_run, "r", 61) is None  # 62,464 tokens: stage s0's, already decided
    assert list(resumed._window["step"]) == list(range(50, 62))


def test_a_drift_is_a_loss_worse_than_the_approved_law_by_more_than_three_times_its_scatter(one_run):
    """The held-out loss at step 12 (12,288 tokens) is 1.6 + 180 / 14,288^0.5 (the probe's curve, its wobble 0
    there); a law (E, B, beta, rmse) foresees E + B t^-beta."""
    evals = one_run.evals("r")
    value = float(evals.loc[evals["step"] == 12, "value"].iloc[-1])
    assert value == pytest.approx(1.6 + 180 / 14_288**0.5)
    governor = Governor.start(_live(between_boundaries="forecast"), manifest=None)
    assert not governor._drifted(one_run, "r", 12, 12_288.0)  # no approved law yet
    governor._law = (value, 0.0, 0.5, 0.0)  # foreseen exactly: not worse
    assert not governor._drifted(one_run, "r", 12, 12_288.0)
    governor._law = (value - 0.03, 0.0, 0.5, 0.01)  # worse by 3 rmse exactly: not more
    assert not governor._drifted(one_run, "r", 12, 12_288.0)
    governor._law = (1.6, 180.0, 0.5, 0.01)  # 1.6 + 180 / 12,288^0.5 = 3.224 foreseen: better than it
    assert not governor._drifted(one_run, "r", 12, 12_288.0)
    governor._law = (1.0, 180.0, 0.5, 0.1)  # 2.624 + 0.3 foreseen: 3.106 is worse
    assert governor._drifted(one_run, "r", 12, 12_288.0)
    assert not governor._drifted(one_run, "r", 13, 13_312.0)  # no evaluation at step 13
    assert not governor._drifted(one_run, "r", 12, 0.0)
    governor._law = (1.0, 180.0, 0.5, math.nan)  # a law of unknown scatter foresees nothing
    assert not governor._drifted(one_run, "r", 12, 12_288.0)
    faults = Governor.start(_live(), manifest=None)
    faults._law = (1.0, 180.0, 0.5, 0.1)
    assert not faults._drifted(one_run, "r", 12, 12_288.0)  # drift is watched only with `between_boundaries: forecast`


# `yieldgate plan` on a target read from a file (`gate/plan.py`).

MANIFEST = {
    "data": {"sources": [{"name": "web", "weight": 1.0, "unique_tokens": 100_000}]},
    "model": {"name": "m", "params": 50_000, "non_embedding_params": 20_000, "layers": 2, "width": 16},
}


def _write(path: Path, data: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_manifest_file_gives_its_recipe_its_parameters_and_its_planned_size(tmp_path):
    target = _write(tmp_path / "m.yaml", MANIFEST)
    with Ledger(tmp_path / "l.db") as led:
        recipe, params = target_recipe(led, target)
        assert (recipe.sources[0].name, recipe.sources[0].unique_tokens, params) == ("web", 100_000, 50_000)
        assert _target_probe(led, target) == (None, 20_000)  # the sizing's N is the non-embedding count
        bare = _write(tmp_path / "bare.yaml", {"data": MANIFEST["data"]})
        assert target_recipe(led, bare)[1] is None and _target_probe(led, bare) == (None, None)
        recipe_file = _write(tmp_path / "r.yaml", MANIFEST["data"])
        recipe, params = target_recipe(led, recipe_file)
        assert (recipe.sources[0].unique_tokens, params) == (100_000, None)
        assert _target_probe(led, recipe_file) == (None, None)
        broken = _write(tmp_path / "b.yaml", {**MANIFEST, "model": {"params": 0}})
        with pytest.raises(InputError) as err:
            _target_probe(led, broken)
        assert str(err.value) == f"{broken}: model.params: must be >= 1, got 0"
        empty = _write(tmp_path / "e.yaml", {"data": None, "model": MANIFEST["model"]})
        with pytest.raises(InputError) as err:
            target_recipe(led, empty)
        assert str(err.value) == f"{empty}: the manifest has no data recipe (data.sources)"


def _plan_policy(**top: Any) -> Policy:
    stages = [{"name": "pilot", "tokens": 200_000, "compute_share": 0.2}, {"name": "full", "tokens": 1_000_000}]
    stages[1]["compute_share"] = 0.8
    return parse_policy(
        {"name": "p", "version": 3, "stages": stages, "requirements": {"min_yield_per_btok": 1, "max_epochs": 4}, **top}
    )


def test_plan_of_a_file_reads_its_supply_against_the_stages_and_needs_a_law_for_a_flop_budget(tmp_path):
    target = _write(tmp_path / "m.yaml", MANIFEST)
    with Ledger(tmp_path / "l.db") as led:
        out = plan_target(led, target, _plan_policy())
        assert (out.target, out.policy, out.max_epochs, out.params, out.sizing) == (target, "p@3", 4, 50_000, None)
        # 200,000 then 1,000,000 tokens of 100,000 unique: 2 then 10 epochs; web passes 4 at the full stage.
        assert [(s["stage"], s["start_tokens"], s["tokens"]) for s in out.stages] == [
            ("pilot", 0.0, 200_000),
            ("full", 200_000, 1_000_000),
        ]
        assert [s["tokens_per_param"] for s in out.stages] == [4.0, 20.0]
        assert [s["sources"][0]["over_limit"] for s in out.stages] == [False, True]
        assert out.grow == [
            {
                "source": "web",
                "stage": "full",
                "epochs": 10.0,
                "unique_tokens": 100_000,
                "needed_unique_tokens": 250_000,
            }
        ]
        assert set(out.to_dict()) == {"target", "policy", "max_epochs", "params", "r_star", "stages", "grow"}
        assert out.to_dict()["grow"] == out.grow
        with pytest.raises(InputError) as err:
            plan_target(led, target, _plan_policy(), flops=1e15)
        assert str(err.value) == (
            f"a FLOP budget needs an L(N, D) law, and {target!r} is no probe of a campaign of 3 or more model sizes: "
            "name the campaign recipe to fit it from (CAMPAIGN/RECIPE)"
        )
        hours = parse_policy(
            {
                "name": "h",
                "version": 1,
                "stages": [
                    {"name": "a", "device_hours": 1, "compute_share": 0.5},
                    {"name": "b", "device_hours": 2, "compute_share": 0.5},
                ],
                "requirements": {"min_yield_per_btok": 1},
            }
        )
        with pytest.raises(InputError) as err:
            plan_target(led, target, hours)
        assert str(err.value) == (
            "policy 'h' gives its stages in device_hours; yieldgate plan reads a recipe's supply against stages in "
            "tokens, before any throughput is measured: give the stages in tokens (yieldgate gate reads device_hours "
            "at the runs' throughput)"
        )


def test_a_target_in_the_ledger_gives_its_own_campaign_recipe_and_size(two_recipes):
    assert _target_probe(two_recipes, "camp/a/s0") == ("camp/a", 12_000)
    assert _sizes(two_recipes, "camp/a") == 1  # one model size: no law of its own
    recipe, params = target_recipe(two_recipes, "camp/a/s0")
    assert (recipe.sources[0].name, recipe.sources[0].unique_tokens, params) == ("a-text", 5_000_000, 31_000)


# Conditions shared by a campaign's recipes (`gate/shared.py`) and a decision as it is drafted (`gate/draft.py`).


def test_a_finding_is_shared_when_every_detector_behind_it_found_its_cause_on_every_recipe():
    both = Shared(campaign="c", recipes=("a", "b"), keys=frozenset({("schedule", "warmup"), ("schedule", "lr_jump")}))
    assert is_shared({"cause": "schedule", "detector": "warmup+lr_jump"}, both)
    assert is_shared({"cause": "schedule", "detector": "warmup"}, both)
    assert not is_shared({"cause": "schedule", "detector": "warmup+spike"}, both)
    assert not is_shared({"cause": "data", "detector": "warmup"}, both)
    none = Shared(campaign="c", recipes=("a", "b"), keys=frozenset())
    assert not is_shared({"cause": "schedule", "detector": "warmup"}, none)
    blank = Shared(campaign="c", recipes=("a",), keys=frozenset({("schedule", "")}))
    assert is_shared({"cause": "schedule", "detector": None}, blank)  # a finding naming no detector
    assert both.to_dict() == {
        "campaign": "c",
        "recipes": ["a", "b"],
        "conditions": [{"cause": "schedule", "detector": "lr_jump"}, {"cause": "schedule", "detector": "warmup"}],
    }


def _records(name: str, meta: dict[str, Any]) -> RunRecords:
    empty = pd.DataFrame()
    return RunRecords(name=name, steps=empty, extras=empty, evals=empty, manifest=None, meta=meta)


def test_shared_conditions_need_one_campaign_and_two_recipes_of_it_read(two_recipes):
    listing = pd.DataFrame(
        {"name": ["camp/a/s0", "camp/b/s0", "campx/b/s0"], "status": ["finished", "failed", "finished"]}
    )
    known = {"camp/a/s0": _records("camp/a/s0", {"probe": {"campaign": "camp", "recipe": "a"}})}
    # camp/b/s0 has not a usable status; campx/... is another campaign's name: one recipe, nothing shared.
    assert shared_conditions(two_recipes, known, ("finished",), listing) == Shared(
        campaign="camp", recipes=("a",), keys=frozenset()
    )
    assert shared_conditions(two_recipes, {}, ("finished",), listing) == Shared(
        campaign=None, recipes=(), keys=frozenset()
    )
    plain = {"r": _records("r", {"probe": {"campaign": "camp"}})}  # no recipe: not a campaign's probe
    assert shared_conditions(two_recipes, plain, ("finished",), listing).campaign is None
    two = {**known, "x": _records("x", {"probe": {"campaign": "other", "recipe": "a"}})}
    assert shared_conditions(two_recipes, two, ("finished",), listing).campaign is None


def test_a_probe_is_named_by_its_campaign_and_recipe_or_not_at_all():
    assert _probe({"probe": {"campaign": "c", "recipe": 5}}) == ("c", "5")
    for meta in ({}, {"probe": "c/r"}, {"probe": {"campaign": "", "recipe": "r"}}, {"probe": {"campaign": "c"}}):
        assert _probe(meta) is None


def test_a_draft_decides_with_its_head_its_suffix_and_the_policy_named():
    policy = parse_policy(_live())
    stages = policy.stages
    draft = Draft(target="t", policy=policy, current=stages[0], next=stages[1], evidence={"k": 1}, suffix=" (x)")
    assert draft.check("a", True, "fine") is True and draft.check("b", None, "a note") is None
    decision = draft.decide("hold", "why", run_next="more seeds")
    assert decision == Decision(
        target="t",
        decision="hold",
        stage="s0",
        next_stage="s1",
        rationale="hold s1 (100,000 tokens): why (x)",
        axis="learning",
        evidence={"k": 1},
        checks=[Check("a", True, "fine"), Check("b", None, "a note")],
        what_to_run_next="more seeds",
        policy="live@2",
        policy_hash=policy.content_hash(),
    )
    first = Draft(target="t", policy=policy, current=None, next=stages[0], evidence={}).decide(
        "approve", "ok", axis="throughput"
    )
    assert (first.stage, first.rationale, first.axis, first.what_to_run_next) == (
        None,
        "approve s0 (40,000 tokens): ok",
        "throughput",
        None,
    )
    kept = RecordedDecision.of(decision, 7)
    assert kept.to_dict() == {"id": 7, **decision.to_dict()} and list(kept.to_dict())[:2] == ["id", "target"]
    assert decision.to_dict()["checks"][0] == {"name": "a", "passed": True, "detail": "fine"}


def test_a_bound_says_it_was_discounted_only_below_a_factor_of_one():
    assert Bounds(point=1.0, lo=0.5, hi=2.0, threshold=1.0, factor=1.0).discounted == ""
    assert Bounds(point=1.0, lo=0.5, hi=2.0, threshold=1.0, factor=0.999).discounted == " (discounted for repetition)"


# The new-hardware exception's decision (`gate._throughput_decision`) and the governor's reading of a decision.


def _draft() -> Draft:
    policy = parse_policy(_live())
    return Draft(target="t", policy=policy, current=policy.stages[0], next=policy.stages[1], evidence={})


EXCEPTION_NOTE = Check(
    "new-hardware exception",
    None,
    "holds: only hardware differs and the loss curve matches the reference within noise; throughput decides",
)


@pytest.mark.parametrize(
    ("tokens_per_s", "faults", "detail", "decision", "why", "run_next"),
    [
        (
            1_500.0,
            [],
            "1,500 vs 2,000 tokens/s (x0.750, floor x0.75)",
            "approve",
            "same recipe on new hardware, same learning curve, x0.750 tokens/s",
            None,
        ),
        (
            1_499.0,
            [],
            "1,499 vs 2,000 tokens/s (x0.750, floor x0.75)",  # x0.7495, just under the floor
            "hold",
            "the new hardware moves x0.750 the reference's tokens/s (floor x0.75)",
            "find the throughput loss (data wait, precision, layout) first",
        ),
        (
            2_500.0,
            [{"cause": "schedule"}, {"cause": "infrastructure_stall"}, {"cause": "schedule"}],
            "2,500 vs 2,000 tokens/s (x1.250, floor x0.75)",
            "hold",
            "open infrastructure_stall, schedule diagnosis on the new hardware",
            "fix it, rerun, and run `yieldgate diagnose` again",
        ),
    ],
)
def test_the_new_hardware_exception_decides_on_throughput_at_its_floor(
    tokens_per_s, faults, detail, decision, why, run_next
):
    """A tolerance of 0.25: the floor is x0.75 of the reference's 2,000 tokens/s, met exactly at 1,500."""
    ratio = tokens_per_s / 2_000
    exc = {"throughput_ratio": ratio, "tokens_per_s": tokens_per_s, "reference_tokens_per_s": 2_000.0}
    out = _throughput_decision(_draft(), exc, 0.25, faults)
    assert (out.decision, out.rationale, out.axis, out.what_to_run_next) == (
        decision,
        f"{decision} s1 (100,000 tokens): {why}",
        "throughput",
        run_next,
    )
    assert out.checks == [EXCEPTION_NOTE, Check("throughput not worse", tokens_per_s >= 1_500, detail)]


def _decision(decision: str, *, stage: str = "s1", fault: bool | None = None, fits: Any = None) -> Decision:
    checks = [] if fault is None else [Check("no open non-data fault", not fault, "")]
    evidence = {"forecast": None if fits is None else {"per_seed": fits}}
    return Decision(
        target="r",
        decision=decision,  # type: ignore[arg-type]
        stage="s0",
        next_stage=stage,
        rationale="",
        axis="learning",
        evidence=evidence,
        checks=checks,
    )


def test_the_governor_keeps_the_law_of_an_approval_on_one_fit_and_acts_on_a_fault_once_a_stage():
    governor = Governor.start(_live(), manifest=None)
    fit = {"E": 1.5, "B": 80, "beta": 0.4, "rmse": 0.01, "A": 9}
    governor._remember(_decision("hold", fits=[{"fit": fit}]))
    assert governor._law is None  # a hold's forecast is not held to
    governor._remember(_decision("approve", fits=[{"fit": fit}, {"fit": fit}]))
    assert governor._law is None  # two seeds' fits: no one law
    governor._remember(_decision("approve", fits=[{"fit": None}]))
    governor._remember(_decision("approve"))
    assert governor._law is None
    governor._remember(_decision("approve", fits=[{"fit": fit}]))
    assert governor._law == (1.5, 80.0, 0.4, 0.01)
    assert governor._fault(_decision("hold", fault=True)) and governor._fault(_decision("reject", fault=True))
    assert not governor._fault(_decision("approve", fault=True))
    assert not governor._fault(_decision("hold", fault=False)) and not governor._fault(_decision("hold"))
    assert governor._unearned(_decision("hold")) and not governor._unearned(_decision("approve"))
    governor._held_stages.add("s1")
    assert not governor._fault(_decision("hold", fault=True)) and not governor._unearned(_decision("reject"))
    assert governor._fault(_decision("hold", stage="s2", fault=True))


# What the evidence must show (`gate/requirements.py`): the data supply and the tokens per parameter.

MIXED = _recipe(
    {"name": "web", "weight": 6.0, "unique_tokens": 10_000},
    {"name": "code", "weight": 2.0, "unique_tokens": 2_500},
    {"name": "books", "weight": 2.0, "unique_tokens": 5_000},
)
"""Stage s1 (to 100,000 tokens) draws 60,000 of web (x6), 20,000 of code (x8) and 20,000 of books (x4, the limit)."""


def _draft_with(**requirements: Any) -> Draft:
    policy = parse_policy(_live(requirements=requirements))
    return Draft(target="t", policy=policy, current=policy.stages[0], next=policy.stages[1], evidence={})


def _supply(recipe: Recipe) -> dict[str, Any]:
    return {"sources": [r.to_dict() for r in stage_supply(recipe, "s1", 0, 100_000)]}


def test_the_data_supply_holds_on_each_source_past_the_limit_most_passed_first():
    draft, holds = _draft_with(max_epochs=4), []
    draft.evidence["supply"] = _supply(MIXED)
    _epochs(draft, holds)
    assert draft.checks == [Check("data supply", False, "s1 passes web x6, code x8, books x4; the policy allows 4")]
    assert holds == [
        (
            "s1 would pass code 8 times (the policy allows 4)",
            "grow code to at least 5,000 unique tokens (it holds 2,500), or lower its weight",
        ),
        (
            "s1 would pass web 6 times (the policy allows 4)",
            "grow web to at least 15,000 unique tokens (it holds 10,000), or lower its weight",
        ),
    ]
    draft, holds = _draft_with(max_epochs=8), []
    draft.evidence["supply"] = _supply(MIXED)
    _epochs(draft, holds)
    assert (draft.checks, holds) == (
        [Check("data supply", True, "s1 passes web x6, code x8, books x4; the policy allows 8")],
        [],
    )


def test_the_data_supply_unknown_holds_with_what_to_record():
    draft, holds = _draft_with(max_epochs=4), []
    draft.evidence["supply"] = _supply(_recipe({"name": "web", "weight": 1.0}, {"name": "code", "weight": 1.0}))
    _epochs(draft, holds)
    assert draft.checks == [Check("data supply", False, "unique tokens unknown for web, code")]
    assert holds == [
        ("the unique tokens of web, code are unknown", "record data.sources[].unique_tokens in the manifests")
    ]
    draft, holds = _draft_with(max_epochs=4), []
    _epochs(draft, holds)
    assert draft.checks == [
        Check("data supply", False, "the target's recipe is unknown (no manifest, or several workflows)")
    ]
    assert holds == [("the data supply is unknown", "record the recipe (manifest `data`) with the runs")]
    draft, holds = _draft_with(), []  # no max_epochs: not asked
    draft.evidence["supply"] = _supply(MIXED)
    _epochs(draft, holds)
    assert (draft.checks, holds) == ([], [])


def test_a_source_not_drawn_from_with_no_unique_count_does_not_break_the_supply_check():
    """A source of weight 0 with no unique-token count (epochs None) is passed no times: it limits nothing and is not
    listed (it was compared with max_epochs: a TypeError instead of a check)."""
    draft, holds = _draft_with(max_epochs=4), []
    draft.evidence["supply"] = _supply(WEB_CODE)
    _epochs(draft, holds)
    assert draft.checks[0].passed is True and holds == []
    assert "held" not in draft.checks[0].detail


def _model(params: int | None) -> Manifest:
    model = {"name": "m", "layers": 2, "width": 16, **({} if params is None else {"params": params})}
    return Manifest.model_validate({"model": model})


def test_tokens_per_parameter_are_counted_against_the_largest_model_and_met_at_the_bar():
    manifests = {"a": None, "b": _model(20_000), "c": _model(5_000), "d": Manifest(), "e": _model(None)}
    draft, holds = _draft_with(min_tokens_per_param=10), []
    _tokens_per_param(draft, SimpleNamespace(manifests=manifests), holds)
    assert draft.checks == [Check("tokens per parameter", False, "s1: 5 tokens per parameter, the policy needs 10")]
    assert holds == [
        (
            "s1 would leave the model undertrained (5 tokens per parameter)",
            "give s1 at least 200,000 tokens, or a smaller model",
        )
    ]
    assert draft.evidence == {"next_tokens_per_param": 5.0}
    draft, holds = _draft_with(min_tokens_per_param=10), []
    _tokens_per_param(draft, SimpleNamespace(manifests={"a": _model(10_000)}), holds)
    assert (draft.checks, holds) == (
        [Check("tokens per parameter", True, "s1: 10 tokens per parameter, the policy needs 10")],
        [],
    )
    draft, holds = _draft_with(min_tokens_per_param=10), []
    _tokens_per_param(draft, SimpleNamespace(manifests={"a": None, "e": _model(None)}), holds)
    assert draft.checks == [Check("tokens per parameter", False, "model parameters unknown (manifest model.params)")]
    assert holds == [("model parameters unknown", "record model.params in the manifests")]
    draft, holds = _draft_with(), []  # no bar: not asked
    _tokens_per_param(draft, SimpleNamespace(manifests={"a": _model(10)}), holds)
    assert (draft.checks, holds, draft.evidence) == ([], [], {})


def test_a_decision_on_stages_in_device_hours_says_how_they_read_in_tokens(one_run):
    """At 20,480 tokens/s a device-hour is 73,728,000 tokens: the stages written as 40,000 / 73,728,000 = 0.0005425
    device-hours and so on read as the same tokens again."""
    policy = parse_policy(_live("device_hours"))
    decision = gate(one_run, "r", policy, at_step=12)
    assert [c for c in decision.checks if c.name == "stage budgets in tokens"] == [
        Check(
            "stage budgets in tokens",
            None,
            "the stages' device-hours (s0 0.0005425, s1 0.001356, s2 0.001899, s3 0.008138) read as 40,000, 100,000, "
            "140,000, 600,000 tokens at the measured throughput",
        )
    ]
    assert decision.evidence["stage_budgets"] == {
        "unit": "device_hours",
        "written": pytest.approx([t / RATE for t in LIVE_STAGES], rel=1e-12),
        "tokens": list(LIVE_STAGES),
    }
    assert decision.policy_hash == policy.content_hash() != parse_policy(_live()).content_hash()


def test_a_target_mixing_workflows_holds_naming_the_first_four_fields_that_differ():
    base = manifest_of("rec", 0, {})
    other = manifest_of("rec", 1, {"optimisation": {"lr": 1e-3, "batch_size": 32}, "model": {"width": 64}})
    third = manifest_of("rec", 2, {"model": {"layers": 2}, "data": {"sources": [{"name": "rec-text", "weight": 2.0}]}})
    runs = {"a": base, "b": other, "c": third, "d": None}
    draft, holds = _draft_with(), []
    draft.evidence["workflow"] = None
    _workflow(draft, SimpleNamespace(manifests=runs, runs=list(runs)), holds)
    # Five fields differ (the seeds are no part of the workflow): data.sources[rec-text].weight, model.layers,
    # model.width, optimisation.batch_size and optimisation.lr, sorted; the first four are named.
    assert draft.checks == [
        Check(
            "one workflow",
            False,
            "the target's runs differ in data.sources[rec-text].weight, model.layers, model.width, "
            "optimisation.batch_size",
        )
    ]
    assert holds == [("the target mixes workflows", "gate one recipe (one workflow) at a time")]
    draft, holds = _draft_with(), []
    draft.evidence["workflow"] = None
    _workflow(draft, SimpleNamespace(manifests={"a": base, "b": manifest_of("rec", 1, {})}, runs=["a", "b"]), holds)
    assert draft.checks == [Check("one workflow", False, "the target's runs differ in their manifests")]
    holds = []
    # A stage whose cumulative share (0.25) is the exploration share exactly is explored: no lock asked.
    policy = parse_policy({**_live(), "exploration_share": 0.25})
    exploring = Draft(target="t", policy=policy, current=None, next=policy.stages[0], evidence={"workflow": "w"})
    _workflow(exploring, SimpleNamespace(manifests={"a": base}, runs=["a"]), holds)
    assert (exploring.checks, holds) == (
        [Check("workflow locked", None, "s0 is within the exploration share (25%)")],
        [],
    )


def test_the_shared_conditions_read_the_target_s_runs_as_given_not_again(two_recipes):
    """The gate hands its runs read (at a step, for a governed run): their meta is taken from them, not the ledger."""
    listing = pd.DataFrame({"name": ["camp/a/s0"], "status": ["finished"]})
    renamed = {"camp/a/s0": _records("camp/a/s0", {"probe": {"campaign": "camp", "recipe": "z"}})}
    assert shared_conditions(two_recipes, renamed, ("finished",), listing).recipes == ("z",)


def test_a_finding_is_answered_by_a_resolved_diagnosis_of_its_cause_over_steps_that_touch_it():
    assert (_step(None), _step(math.nan), _step(7.0), _step(0)) == (None, None, 7, 0)
    assert _steps(None, math.nan) == (-math.inf, math.inf) and _steps(3, 9.0) == (3.0, 9.0)
    finding = {"cause": "schedule", "start_step": 10, "end_step": 20}
    for span, answered in (((20, 30), True), ((0, 10), True), ((21, 30), False), ((0, 9), False), ((12, 14), True)):
        assert _answered(finding, [("schedule", span)]) is answered, span
    assert not _answered(finding, [("damaged_update", (0, 100))])
    assert not _answered(finding, [])
    assert _answered({"cause": "schedule"}, [("schedule", (500.0, 600.0))])  # a finding of no steps spans the run
    assert _answered({"cause": "schedule", "start_step": 10, "end_step": None}, [("schedule", (99, 100))])


# The policy (`gate/policy.py`): what it refuses, and its stages read in tokens.


def _stages(*pairs: tuple[str, float, float], unit: str = "tokens") -> list[dict[str, Any]]:
    return [{"name": n, unit: b, "compute_share": c} for n, b, c in pairs]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stages": _stages(("a", 1, 0.5), ("a", 2, 0.5))}, "stage names must be unique, repeated: a"),
        ({"stages": _stages(("a", 1, 0.6), ("b", 2, 0.5))}, "stage compute shares add up to 1.1, more than 1"),
        (
            {"stages": _stages(("a", 1.5, 0.5), ("b", 1.5, 0.5), unit="device_hours")},
            "stages must be in strictly increasing device_hours, got [1.5, 1.5]",
        ),
        (
            {"primary": "throughput"},
            "primary: throughput needs an exception (kind: new_hardware, reference: RUN_OR_GLOB): throughput decides "
            "only against a reference whose learning it is shown to keep",
        ),
    ],
)
def test_a_policy_that_cannot_be_read_is_refused_with_what_is_wrong(changes, message):
    with pytest.raises(InputError) as err:
        parse_policy({**_live(), **changes})
    assert str(err.value) == f"policy: {message}"


def test_stages_in_device_hours_or_dollars_read_in_tokens_at_a_throughput_and_a_price():
    hours = parse_policy({**_live(), "stages": _stages(("a", 0.0001, 0.5), ("b", 0.01, 0.5), unit="device_hours")})
    # 0.1 tokens round to none: a stage is at least one token.
    assert [s.tokens for s in hours.in_tokens(1_000.0, None).stages] == [1, 10]
    for rate in (None, 0.0):
        with pytest.raises(InputError) as err:
            hours.in_tokens(rate, 2.0)
        assert str(err.value) == (
            "policy 'live' gives its stages in device_hours, and the runs' throughput is unknown (no tokens or "
            "wall-clock time recorded): record them, or give the stages in tokens"
        )
    close = parse_policy({**_live(), "stages": _stages(("a", 1.0, 0.5), ("b", 1.0001, 0.5), unit="device_hours")})
    with pytest.raises(InputError) as err:
        close.in_tokens(1_000.0, None)
    assert str(err.value) == "policy 'live': its stages read in tokens are not distinct: [1000, 1000]"
    usd = parse_policy({**_live(), "stages": _stages(("a", 1.0, 0.5), ("b", 2.0, 0.5), unit="usd")})
    read = usd.in_tokens(1_000.0, 2.0)  # 1,000 tokens a device-hour at $2: 500 tokens a dollar
    assert [(s.name, s.tokens, s.compute_share) for s in read.stages] == [("a", 500, 0.5), ("b", 1_000, 0.5)]
    for price in (None, 0.0):
        with pytest.raises(InputError) as err:
            usd.in_tokens(1_000.0, price)
        assert str(err.value) == (
            "policy 'live' gives its stages in dollars, and no price is known: set prices.per_device_hour in the "
            "policy or hardware.price_per_device_hour in the manifests"
        )
    with pytest.raises(ValueError, match=r"^stage 'a' is a budget of usd: read it in tokens first$"):
        _ = usd.stages[0].token_budget
    with pytest.raises(ValueError, match=r"^stage 'x' is not in policy 'live'$"):
        usd.is_exploration(Stage(name="x", tokens=1, compute_share=0.1))


def test_a_run_still_running_is_read_only_at_a_step_and_a_metric_never_evaluated_holds_for_its_forecast(one_run):
    """Read at step 49 (50,176 tokens) on a metric the run never evaluated: held for the forecast, the checks before
    it passed, and the 549,824 tokens left of the 600,000 planned priced at 20,480 tokens/s and the manifest's $0.5
    per device-hour (549,824 / 20,480 / 3,600 = 0.00746 device-hours, $0.00373)."""
    policy = parse_policy(_live(requirements={"min_seeds": 1}))
    with pytest.raises(InputError) as err:
        TargetEvidence.read(one_run, "r", policy)  # offline, a running run is no evidence
    assert str(err.value) == "no finished run in 'r': r is running"
    decision = gate(one_run, "r", policy, metric="val/bpb", at_step=49)
    assert (decision.decision, decision.rationale, decision.what_to_run_next) == (
        "hold",
        "hold s1 (100,000 tokens): no forecast: run 'r' has no evaluation of val/bpb",
        "record evaluations of val/bpb",
    )
    assert decision.checks == [
        Check(
            "no open non-data fault",
            True,
            "no diagnosis of schedule, damaged_update, infrastructure_stall above confidence 0.3 (the detectors ran on "
            "1 run)",
        ),
        Check("no stall of unknown cause", True, "no plateau at constant LR without a cooldown after it"),
        Check("seeds", True, "1 per budget, the policy needs 1"),
        Check("forecast", False, "no forecast: run 'r' has no evaluation of val/bpb"),
        Check(
            "compute saved by stopping",
            None,
            "549,824 of the 600,000 planned tokens (92%), 0.00746 device-hours, $0.00373, ? kWh at the measured "
            "throughput (no energy recorded (energy_j) by the runs)",
        ),
    ]


def test_findings_are_kept_by_the_ledger_s_path_and_the_run_and_the_least_recently_used_go_first(
    two_recipes, monkeypatch
):
    key = _content_key(two_recipes, "camp/a/s0")
    assert key is not None and key[:2] == (os.path.realpath(str(two_recipes.location)), "camp/a/s0")
    assert _content_key(two_recipes, "no/such/run") is None
    monkeypatch.setattr(gate_findings, "_cache", OrderedDict())
    monkeypatch.setattr(gate_findings, "CACHE_RUNS", 2)
    for run in ("camp/a/s0", "camp/b/s0", "camp/a/s0", "solo/a/s0"):  # a read again: b is the least recent
        run_findings(two_recipes, run)
    assert [k[1] for k in gate_findings._cache] == ["camp/a/s0", "solo/a/s0"]


def test_the_findings_that_stand_are_the_open_stored_ones_and_the_detectors_not_answered(tmp_path):
    """A probe at its peak LR from the first step: the detectors find the schedule fault (no warm-up, steps 0-14) and
    an undertrained model (steps 0-146)."""
    with Ledger(tmp_path / "f.db") as led:
        write_probe(led, "r", "rec", 0, Probe(curve=power_law(), lr=no_warmup))
        assert [(f["cause"], f["start_step"], f["end_step"]) for f in target_findings(led, {"r": None})] == [
            ("undertrained", 0, 146),
            ("schedule", 0, 14),
        ]
        # A resolved diagnosis of the schedule over steps 14-30 (touching the finding's) answers it.
        led.resolve_event(led.add_event("r", "diagnosis", {"cause": "schedule"}, start_step=14, end_step=30))
        # An open stored diagnosis of the same cause and steps as a finding stands instead of it.
        same = led.add_event("r", "diagnosis", {"cause": "undertrained"}, start_step=0, end_step=146)
        led.add_event("r", "diagnosis", {"note": "no cause"}, start_step=0, end_step=1)  # not a finding
        later = led.add_event(
            "r",
            "diagnosis",
            {"cause": "data_exhaustion", "confidence": 0.9, "detector": "d", "advice": "grow"},
            start_step=100,
            end_step=120,
        )
        stored = {"confidence": None, "detector": None, "advice": "", "evidence": {}}
        assert target_findings(led, {"r": None}) == [
            {"run": "r", "event": same, "cause": "undertrained", **stored, "start_step": 0, "end_step": 146},
            {
                "run": "r",
                "event": later,
                "cause": "data_exhaustion",
                "confidence": 0.9,
                "start_step": 100,
                "end_step": 120,
                "detector": "d",
                "advice": "grow",
                "evidence": {},
            },
        ]
        # Read as the run stood at a step: a diagnosis stored of later steps is left out; one from that step stands.
        assert later in [f.get("event") for f in target_findings(led, {"r": None}, upto=100)]
        assert later not in [f.get("event") for f in target_findings(led, {"r": None}, upto=99)]


def test_the_next_stage_s_price_names_the_energy_the_runs_recorded(tmp_path):
    """The probe again, its steps with 0.5 J a token: the last stage's 600,000 tokens cost 300,000 J = 0.0833 kWh,
    beside 600,000 / 73,728,000 = 0.00814 device-hours and $0.00407 at the manifest's $0.5."""
    with Ledger(tmp_path / "e.db") as led:
        write_probe(led, "p", "rec", 0, Probe(curve=power_law()))
        steps = led.steps("p")
        led.create_run("e", manifest=led.manifest("p"), source="probe")
        led.append_steps(
            "e",
            {
                **{c: steps[c].tolist() for c in ("step", "tokens", "wall_s", "loss", "lr")},
                "energy_j": (steps["tokens"] * 0.5).tolist(),
            },
        )
        led.append_evals(
            "e",
            [EvalRecord(**r) for r in led.evals("p")[["step", "tokens", "task", "metric", "value"]].to_dict("records")],
        )
        led.set_status("e", "finished")
        decision = gate(led, "e", parse_policy(_live(requirements={"min_seeds": 1})))
    (price,) = [c for c in decision.checks if c.name == "next stage's price"]
    assert price.detail.startswith(
        "s3: 600,000 tokens, 0.00814 device-hours, $0.00407, 0.0833 kWh at the measured throughput, for a forecast "
    )
    assert price.detail.endswith(" drop in val/loss")
    assert decision.evidence["next_stage_price"]["kwh"] == pytest.approx(600_000 * 0.5 / 3.6e6)


def test_a_stored_stall_of_unknown_cause_holds_for_the_cooldown_probe(tmp_path):
    with Ledger(tmp_path / "s.db") as led:
        write_probe(led, "r", "rec", 0, Probe(curve=power_law()))
        led.add_event("r", "diagnosis", {"cause": "stalled", "confidence": 0.9}, start_step=80, end_step=146)
        decision = gate(led, "r", parse_policy(_live(requirements={"min_seeds": 1})))
    assert (decision.decision, decision.rationale, decision.what_to_run_next) == (
        "hold",
        "hold s3 (600,000 tokens): learning stalled at constant LR on r, cause not known: the LR's noise floor "
        "(schedule) or the data; the flat curve neither earns the next stage nor shows the data exhausted",
        "the cooldown probe: continue r with its LR cooled down over ~10% of its tokens (`yieldgate train RECIPE "
        "--resume-from r --cooldown-tokens N`) and evaluate; a drop means the schedule was the limit, no drop means "
        "the data; then gate again",
    )
    (stall,) = [c for c in decision.checks if c.name == "no stall of unknown cause"]
    assert stall == Check(
        "no stall of unknown cause", False, "learning stalled at constant LR on r: schedule or data, not yet told apart"
    )
    assert [(f["cause"], f["steps"]) for f in decision.evidence["undetermined_stalls"]] == [("stalled", [80, 146])]
