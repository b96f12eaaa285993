"""Attribution to sources (issue #31 item 9), on exact numbers: a source's effect (base minus leave-one-out) and its
paired interval, the recipe x capability table's displacement marks, the mixture regression's effect on a known
linear law, the leave-one-out recipes, and a campaign of one source refused in one line before any probe."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sstats
from typer.testing import CliRunner

from tests.support.reliability import check
from yieldgate.analysis.attribution import attribution, capability_table, mixture_effects, source_effects
from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.manifest import Manifest, Recipe
from yieldgate.probe.campaign import Campaign, plan
from yieldgate.probe.campaign.ablation import ablation_plan, left_out
from yieldgate.report.console.attribution import attribution_table, effect_lines

COLUMNS = ["bpb", "val/a/bpb", "val/b/bpb"]
BASE = {
    "bpb": {0: 2.0, 1: 2.1, 2: 2.2},
    "val/a/bpb": {0: 1.9, 1: 2.0, 2: 2.1},
    "val/b/bpb": {0: 2.1, 1: 2.2, 2: 2.3},
}


def shifted(by: dict[str, list[float]]) -> dict[str, dict[int, float]]:
    """BASE with each column's seeds moved by the given per-seed amounts."""
    return {c: {s: BASE[c][s] + by[c][s] for s in BASE[c]} for c in BASE}


def half(diffs: list[float], level: float = 0.9, family: int = 3) -> float:
    """The half-width of a paired t interval held family-wise (Bonferroni) over `family` columns."""
    sd = float(np.std(diffs, ddof=1))
    return float(sstats.t.ppf(1 - (1 - level) / family / 2, len(diffs) - 1)) * sd / math.sqrt(len(diffs))


def test_a_recipe_better_on_one_capability_and_worse_on_another_is_marked_as_displacing():
    values = {
        "base": BASE,
        # a: 0.1 lower (better) on every seed but for a spread of 0.02; b: 0.1 higher (worse); the mean about even.
        "swap": shifted({"bpb": [0.0, 0.01, -0.01], "val/a/bpb": [-0.1, -0.12, -0.08], "val/b/bpb": [0.1, 0.12, 0.08]}),
        # better on a beyond noise, b within noise: no displacement, no marks.
        "gain": shifted({"bpb": [-0.05, -0.06, -0.04], "val/a/bpb": [-0.1, -0.12, -0.08], "val/b/bpb": [0.1, -0.1, 0]}),
    }
    rows = {r["recipe"]: r for r in capability_table(values, "base", COLUMNS, level=0.9)}
    assert list(rows) == ["base", "gain", "swap"] and rows["base"]["base"]
    base_a = rows["base"]["cells"]["val/a/bpb"]
    assert base_a["mean"] == pytest.approx(2.0) and "diff" not in base_a
    t = float(sstats.t.ppf(0.95, 2)) * 0.1 / math.sqrt(3)  # the base's own mean interval: Student t, no family
    assert base_a["interval"] == pytest.approx([2.0 - t, 2.0 + t])
    swap = rows["swap"]["cells"]
    assert swap["val/a/bpb"]["diff"] == pytest.approx(-0.1)
    h = half([-0.1, -0.12, -0.08])
    assert swap["val/a/bpb"]["diff_interval"] == pytest.approx([-0.1 - h, -0.1 + h], rel=1e-12)
    assert 0.03 < h < 0.1  # beyond noise, but not by a mile: the family-wise t of two degrees of freedom is wide
    assert rows["swap"]["displaces"] and not rows["gain"]["displaces"]
    assert [swap[c]["mark"] for c in COLUMNS[1:]] == ["better", "worse"]
    assert swap["bpb"]["verdict"] == "within noise" and "mark" not in swap["bpb"]  # the followed metric: no mark
    gain = rows["gain"]["cells"]
    assert [gain[c]["verdict"] for c in COLUMNS] == ["better", "better", "within noise"]
    assert [gain[c]["mark"] for c in COLUMNS[1:]] == [None, None]


def test_a_sources_effect_is_the_base_minus_its_leave_one_out_recipe_paired_by_seed():
    values = {
        "base": BASE,
        # Without a: a's bits per byte 0.3 higher (so a helps a, by -0.3), b's 0.05 lower (a costs b 0.05).
        "base-minus-a": shifted(
            {"bpb": [0.12, 0.13, 0.14], "val/a/bpb": [0.28, 0.3, 0.32], "val/b/bpb": [-0.05, -0.04, -0.06]}
        ),
    }
    effects = source_effects(values, "base", {"a": "base-minus-a"}, COLUMNS, level=0.9)
    a = effects["a"]
    assert a["recipe"] == "base-minus-a"
    on_a, on_b = a["effects"]["val/a/bpb"], a["effects"]["val/b/bpb"]
    assert on_a["estimate"] == pytest.approx(-0.3) and on_a["verdict"] == "helps"
    h = half([0.28, 0.3, 0.32])
    assert [on_a["low"], on_a["high"]] == pytest.approx([-0.3 - h, -0.3 + h], rel=1e-12)
    assert on_a["level"] == 0.9 and on_a["family"] == 3 and on_a["n"] == 3
    assert on_b["estimate"] == pytest.approx(0.05) and on_b["verdict"] == "hurts"
    assert a["effects"]["bpb"]["estimate"] == pytest.approx(-0.13) and a["effects"]["bpb"]["verdict"] == "helps"


def test_the_mixture_regression_reads_a_known_linear_law_at_the_base_mixture():
    # metric = 2 + 1·w_a + 3·w_b over mixtures of two sources: leaving a out of (0.5, 0.5) gives (0, 1), 5 against
    # 4 (a's effect -1); leaving b out gives (1, 0), 3 (b's effect +1); mixing in more a lowers it at -1 per unit.
    mixtures = [(0.5, 0.5), (0.0, 1.0), (1.0, 0.0), (0.25, 0.75), (0.75, 0.25)] * 2
    w = np.array(mixtures)
    y = 2 + w @ np.array([1.0, 3.0])
    out = mixture_effects(["a", "b"], w, {"bpb": y}, np.array([0.5, 0.5]), level=0.9, boots=50)
    assert out["available"] and out["mixtures"] == 5 and out["probes"] == 10
    effects = out["columns"]["bpb"]["effects"]
    assert effects["a"]["estimate"] == pytest.approx(-1.0, abs=1e-3)
    assert effects["b"]["estimate"] == pytest.approx(1.0, abs=1e-3)
    assert effects["a"]["derivative"] == pytest.approx(-1.0, abs=1e-3)
    assert effects["a"]["interval"][0] <= -1.0 + 1e-3 and effects["a"]["interval"][1] >= -1.0 - 1e-3
    too_few = mixture_effects(["a", "b"], w[:3], {"bpb": y[:3]}, np.array([0.5, 0.5]), level=0.9)
    assert not too_few["available"] and "needs 10 or more probes" in too_few["reason"]
    same = mixture_effects(
        ["a", "b"], np.array([(0.5, 0.5), (0, 1.0)] * 5), {"bpb": y}, np.array([0.5, 0.5]), level=0.9
    )
    assert not same["available"] and "2 distinct mixtures" in same["reason"]


MIX = {
    "name": "mix",
    "recipes": {
        "base": {"sources": [{"name": "shakespeare-modern", "weight": 3}, {"name": "milton", "weight": 1}]},
        "other": {"sources": [{"name": "milton"}]},
    },
    "seeds": 3,
    "budgets": [20_000, 10_000],
    "budget_seeds": {10_000: [7, 8]},
    "eval_sources": ["milton"],
}


def test_leave_one_out_probes_renormalise_the_rest_and_say_what_they_left_out():
    specs = ablation_plan(Campaign.model_validate(MIX))
    assert sorted({s.recipe_name for s in specs}) == ["base-minus-milton", "base-minus-shakespeare-modern"]
    assert {s.tokens for s in specs} == {10_000} and sorted({s.seed for s in specs}) == [7, 8]  # the smallest budget
    by = {s.recipe_name: s for s in specs}
    without = by["base-minus-shakespeare-modern"]
    assert [(s.name, s.weight) for s in without.recipe.sources] == [("shakespeare-modern", 0.0), ("milton", 1.0)]
    assert [(s.name, s.weight) for s in by["base-minus-milton"].recipe.sources] == [
        ("shakespeare-modern", 1.0),
        ("milton", 0.0),
    ]
    assert without.meta()["ablation"] == {"base": "base", "left_out": "shakespeare-modern"}
    assert {s.run for s in specs if s.recipe_name == "base-minus-shakespeare-modern"} == {
        "mix/base-minus-shakespeare-modern/s7/t10000",
        "mix/base-minus-shakespeare-modern/s8/t10000",
    }
    assert "ablation" not in Campaign.model_validate(MIX).recipes  # the campaign's own plan is untouched
    taken = {**MIX, "recipes": {**MIX["recipes"], "base-minus-milton": {"sources": [{"name": "milton"}]}}}
    with pytest.raises(InputError, match="already has a recipe 'base-minus-milton'"):
        ablation_plan(Campaign.model_validate(taken))


def test_a_campaign_of_one_source_cannot_be_ablated_and_is_refused_in_one_line(tmp_path):
    one = {**MIX, "recipes": {"only": {"sources": [{"name": "milton"}]}, **MIX["recipes"]}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(one, sort_keys=False))
    ledger = tmp_path / "ledger.db"
    result = CliRunner().invoke(app, ["--ledger", str(ledger), "probe", str(path), "--ablate-sources"])
    assert result.exit_code == 2 and result.stdout == ""
    message = result.stderr.removeprefix("error: ").rstrip("\n")
    assert "\n" not in message and message == (
        "campaign 'mix' cannot be ablated: its base recipe 'only' (the first) trains on one source (milton), and "
        "leaving it out leaves nothing; ablate a recipe of two or more sources, or move its weight to a baseline "
        "source of the recipe"
    )
    assert not ledger.exists()  # refused before any probe: nothing written
    check(
        "campaign: `probe --ablate-sources` on a base recipe of one source",
        f"refused before any probe, exit 2, ledger unchanged: `{message[:107]}…`",
        "0",
    )


WEIGHTS = st.lists(st.integers(0, 6), min_size=2, max_size=5).filter(lambda w: sum(1 for x in w if x) >= 2)


@settings(max_examples=40, deadline=None)
@given(weights=WEIGHTS, data=st.data())
def test_leaving_a_source_out_renormalises_the_rest_or_moves_its_weight_to_the_baseline_alone(weights, data):
    """The two ablations as properties, on the recipe and a curriculum stage alike: the rest in proportion scales
    every other share by 1 / (1 - w) (a source's share rises with another's leaving); moved to a baseline, only the
    baseline's weight changes, by the left-out weight."""
    names = [f"s{i}" for i in range(len(weights))]
    trained = [n for n, w in zip(names, weights, strict=True) if w]
    source = data.draw(st.sampled_from(trained))
    by = data.draw(st.sampled_from([n for n in names if n != source]))
    stage = {"until_share": 0.5, "weights": dict(zip(names, map(float, weights), strict=True))}
    recipe = Recipe.model_validate(
        {
            "sources": [{"name": n, "weight": w} for n, w in zip(names, weights, strict=True)],
            "curriculum": {"kind": "staged", "stages": [stage]},
        }
    )
    before = dict(zip(names, map(float, weights), strict=True))
    share = before[source] / sum(before.values())
    for after in (
        {s.name: s.weight for s in left_out(recipe, source).sources},
        left_out(recipe, source).curriculum.stages[0].weights,
    ):
        assert after[source] == 0.0 and sum(after.values()) == pytest.approx(1.0)
        for n in names:
            if n != source:
                assert after[n] == pytest.approx(before[n] / sum(before.values()) / (1 - share))
    for after in (
        {s.name: s.weight for s in left_out(recipe, source, by).sources},
        left_out(recipe, source, by).curriculum.stages[0].weights,
    ):
        assert after == {**before, source: 0.0, by: before[by] + before[source]}


MIXED = {
    "name": "camp",
    "recipes": {
        "clean": {"sources": [{"name": "clean"}]},  # the first recipe: not the one ablated
        "mix": {
            "sources": [
                {"name": "clean", "weight": 0.4},
                {"name": "dup", "weight": 0.3},
                {"name": "shuffled", "weight": 0.3},
            ]
        },
    },
    "seeds": 2,
    "budgets": [10_000],
}
LAW = {"clean": 2.0, "dup": 1.8, "shuffled": 2.5}
"""Bits per byte of a probe: the mixture's weighted mean of these per source (each seed shifted by its own noise), so
the known answer of each contrast is the law's own: dup at 1.8 helps against clean, shuffled at 2.5 hurts."""
NOISE = {0: 0.004, 1: -0.003}


def law_ledger(path) -> None:
    """A ledger holding MIXED's probes and both kinds of leave-one-out probes of `mix`, as `yieldgate probe` stores
    them (run meta, manifest), each probe's final bits per byte the law's."""
    campaign = Campaign.model_validate(MIXED)
    specs = [*plan(campaign), *ablation_plan(campaign, "mix"), *ablation_plan(campaign, "mix", "clean")]
    with Ledger(path) as led, led.transaction():  # one commit, not one per write
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
        for spec in specs:
            led.create_run(spec.run, manifest=Manifest(name=spec.run, data=spec.recipe), source="probe")
            led.set_meta(spec.run, "probe", spec.meta())
            total = sum(s.weight for s in spec.recipe.sources)
            bpb = sum(LAW[s.name] * s.weight / total for s in spec.recipe.sources) + NOISE[spec.seed]
            led.append_steps(spec.run, [{"step": 10, "tokens": 10_000.0, "loss": bpb}])
            led.append_evals(spec.run, [{"step": 10, "tokens": 10_000, "task": "val", "metric": "bpb", "value": bpb}])
            led.set_status(spec.run, "finished")


def test_the_attribution_finds_its_base_in_the_probes_and_says_the_weights_each_ablation_moved(tmp_path):
    """Issue #44 item 9: `mix` (not the first recipe) is the base its leave-one-out probes name. Leaving dup out with
    the rest renormalised takes shuffled from 0.30 to 0.43, so "dup helps" holds shuffled's growth too (the law:
    -0.124 bpb); moved to clean, the rest held, it is dup against clean alone (-0.06). The output says which."""
    law_ledger(tmp_path / "y.db")
    with Ledger(tmp_path / "y.db", readonly=True) as led:
        rest = attribution(led, "camp")
        moved = attribution(led, "camp", by="clean")
        with pytest.raises(InputError, match="the campaign has no recipe 'nope'; its recipes: clean, mix"):
            attribution(led, "camp", base="nope")
    assert rest is not None and moved is not None
    assert rest["base"] == moved["base"] == "mix"
    dup = rest["sources"]["dup"]
    assert dup["recipe"] == "mix-minus-dup" and dup["by"] is None
    assert dup["weights"]["before"] == pytest.approx({"clean": 0.4, "dup": 0.3, "shuffled": 0.3})
    assert dup["weights"]["after"] == pytest.approx({"clean": 0.4 / 0.7, "dup": 0.0, "shuffled": 0.3 / 0.7})
    assert dup["effects"]["bpb"]["estimate"] == pytest.approx(0.5 * (0.3 - 0.3 / 0.7) - 0.2 * 0.3)
    dup = moved["sources"]["dup"]
    assert dup["recipe"] == "mix-minus-dup+clean" and dup["by"] == "clean"
    assert dup["weights"]["after"] == pytest.approx({"clean": 0.7, "dup": 0.0, "shuffled": 0.3})
    assert dup["effects"]["bpb"]["estimate"] == pytest.approx(-0.2 * 0.3)
    assert set(moved["sources"]) == {"dup", "shuffled"}  # clean, the baseline, is not left out
    # Each table holds the base, the other recipe and its own way's leave-one-out recipes only.
    assert [r["recipe"] for r in rest["table"]] == [
        "mix",
        "clean",
        "mix-minus-clean",
        "mix-minus-dup",
        "mix-minus-shuffled",
    ]
    assert [r["recipe"] for r in moved["table"]] == ["mix", "clean", "mix-minus-dup+clean", "mix-minus-shuffled+clean"]
    lines = effect_lines(rest)
    assert (
        "source dup: mix minus mix-minus-dup (weights dup 0.3 -> 0, clean 0.4 -> 0.571, shuffled 0.3 -> 0.429 (the "
        "rest renormalised);" in " ".join(lines)
    )
    assert (
        "source dup: mix minus mix-minus-dup+clean (weights dup 0.3 -> 0, clean 0.4 -> 0.7 (dup's weight moved "
        "to clean, the rest as they were);" in " ".join(effect_lines(moved))
    )
    assert attribution_table(moved)[2][2][0] == "mix-minus-dup+clean (without dup, its weight to clean)"


def test_leave_one_out_probes_of_any_recipe_by_a_baseline_are_named_and_marked_in_their_meta():
    campaign = Campaign.model_validate(MIXED)
    specs = ablation_plan(campaign, "mix", "clean")
    assert sorted({s.recipe_name for s in specs}) == ["mix-minus-dup+clean", "mix-minus-shuffled+clean"]
    assert specs[0].meta()["ablation"] == {"base": "mix", "by": "clean", "left_out": specs[0].recipe_name[10:-6]}
    with pytest.raises(InputError, match="campaign 'camp' has no recipe 'nope' to ablate; its recipes: clean, mix"):
        ablation_plan(campaign, "nope")
    with pytest.raises(InputError, match="the baseline source 'milton' is not a source of recipe 'mix'; its sources"):
        ablation_plan(campaign, "mix", "milton")
    # One source trained on, and another at weight 0 to take its weight: nothing renormalises, something moves.
    one = Campaign.model_validate(
        {**MIXED, "recipes": {"a": {"sources": [{"name": "clean"}, {"name": "dup", "weight": 0}]}}}
    )
    only = ablation_plan(one, by="dup")
    assert {s.recipe_name for s in only} == {"a-minus-clean+dup"}
    assert [(s.name, s.weight) for s in only[0].recipe.sources] == [("clean", 0.0), ("dup", 1.0)]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--recipe", "mix"],
            "--recipe and --ablate-by say which leave-one-out probes to train: give them with --ablate-sources",
        ),
        (
            ["--ablate-sources", "--recipe", "nope"],
            "campaign 'camp' has no recipe 'nope' to ablate; its recipes: clean, mix",
        ),
        (
            ["--ablate-sources", "--recipe", "mix", "--ablate-by", "milton"],
            "campaign 'camp': the baseline source "
            "'milton' is not a source of recipe 'mix'; its sources: clean, dup, shuffled",
        ),
    ],
)
def test_ablation_flags_that_cannot_be_met_are_refused_in_one_line_before_any_probe(tmp_path, args, says):
    path, ledger = tmp_path / "c.yaml", tmp_path / "y.db"
    path.write_text(yaml.safe_dump(MIXED, sort_keys=False))
    result = CliRunner().invoke(app, ["--ledger", str(ledger), "probe", str(path), *args])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == f"error: {says}\n"
    assert not ledger.exists()
