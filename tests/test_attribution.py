"""Attribution to sources (issue #31 item 9), on exact numbers: a source's effect (base minus leave-one-out) and its
paired interval, the recipe x capability table's displacement marks, the mixture regression's effect on a known
linear law, the leave-one-out recipes, and a campaign of one source refused in one line before any probe."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats as sstats
from typer.testing import CliRunner

from tests.support.reliability import check
from yieldgate.analysis.attribution import capability_table, mixture_effects, source_effects
from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.probe.campaign import Campaign
from yieldgate.probe.campaign.ablation import ablation_plan

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
        "leaving it out leaves nothing; ablate a recipe of two or more sources"
    )
    assert not ledger.exists()  # refused before any probe: nothing written
    check(
        "campaign: `probe --ablate-sources` on a base recipe of one source",
        f"refused before any probe, exit 2, ledger unchanged: `{message[:107]}…`",
        "0",
    )
