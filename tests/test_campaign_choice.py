"""What a campaign ranks by and how a probe is scored (issue #47): `rank_by:` any declared evaluation with its
direction, the metric with the best signal-to-noise recommended and each candidate's decision accuracy beside it
(`analysis.metric_choice`), a probe scored by the mean of its evaluations inside the LR decay (`score_window`), and
the campaign file's checks on these keys and on the adaptive mode. Probes written to a ledger from fixed numbers,
no training (but the one slow test that an evaluation changes nothing a probe learns)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from yieldgate.analysis.campaign import summarise
from yieldgate.analysis.probe_scores import probe_scores, scoring_steps
from yieldgate.errors import InputError
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.probe.campaign import Campaign, load_campaign, plan
from yieldgate.report.console.campaign import accuracy_lines, ranking_tables

RECIPE = {"sources": [{"name": "milton"}], "tokenizer": {"name": "bpe-512", "vocab_size": 512}}
TOKENS = {1000: 10, 4000: 40}  # budget -> steps (100 tokens a step)


def write(led: Ledger, spec: dict, value) -> Campaign:
    """The campaign's probes, finished, with evaluations at steps 0, 5, ..., the last (and 9 and 10 of 10: 0.9,
    0.95 x 2 is not a step; 0.95 of 40 is 38): `value(recipe, seed, budget, step, metric)` for metrics
    `val/bpb`, `val/a/bpb` and `val/a/acc`."""
    campaign = Campaign.model_validate(spec)
    led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
    for p in plan(campaign):
        steps = TOKENS[p.tokens]
        led.create_run(p.run, source="probe")
        led.set_meta(p.run, "probe", p.meta())
        at = sorted({*range(0, steps + 1, 5), round(0.9 * steps), round(0.95 * steps), steps})
        led.append_steps(p.run, {"step": at, "tokens": [100.0 * s for s in at], "lr": [1e-3] * len(at)})
        led.append_evals(
            p.run,
            [
                EvalRecord(
                    step=s,
                    tokens=100 * s,
                    task=t,
                    metric=m,
                    value=value(p.recipe_name, p.seed, p.tokens, s, f"{t}/{m}"),
                )
                for s in at
                for t, m in (("val", "bpb"), ("val/a", "bpb"), ("val/a", "acc"))
            ],
        )
        led.set_status(p.run, "finished")
    return campaign


def spec(**over) -> dict:
    return {
        "name": "c",
        "recipes": {"x": RECIPE, "y": RECIPE, "z": RECIPE},
        "seeds": [0, 1, 2],
        "budgets": [1000, 4000],
        **over,
    }


MEANS = {"x": 1.0, "y": 1.1, "z": 1.2}


def value(recipe, seed, budget, step, metric):
    """bpb: x < y < z at both budgets with seed noise 0.05; acc (higher is better): the order z > x > y at the
    small budget, x > y > z at the large one, with a seed noise of 0.001 (a far better signal-to-noise)."""
    noise = (seed - 1) * 0.05
    if metric.endswith("acc"):
        order = {"x": 0.6, "y": 0.5, "z": 0.7} if budget == 1000 else {"x": 0.7, "y": 0.6, "z": 0.5}
        return order[recipe] + (seed - 1) * 0.001
    return MEANS[recipe] + noise + (0.0 if metric == "val/bpb" else 0.3)


def test_a_campaign_ranks_and_decides_by_its_declared_evaluation(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        write(led, spec(rank_by={"metric": "val/a/acc"}), value)  # acc's direction from its name: higher
        summary = summarise(led, "c").to_dict()
    assert summary["rank_by"] == {"metric": "val/a/acc", "higher_is_better": True}
    order = [e["recipe"] for e in summary["rankings"]["4000"]["val/a/acc"]["order"]]
    assert order == ["x", "y", "z"]  # highest first
    # At 1,000 tokens acc orders z > x > y: of the three pairs only x-y agrees with 4,000 tokens' x > y > z.
    entry = summary["decision_accuracy"]["1000"]
    assert entry["accuracy"] == pytest.approx(1 / 3)
    title, headers, _ = ranking_tables(summary)[0]
    assert headers[3] == "val/a/acc ± (90%)"
    assert (
        accuracy_lines(summary)[0] == "ranked by val/a/acc (higher is better), each probe scored by the last evaluation"
    )


def test_the_metric_with_the_best_signal_to_noise_is_recommended_with_each_ones_accuracy_beside_it(tmp_path):
    with Ledger(tmp_path / "l.db") as led:
        write(led, spec(), value)
        report = summarise(led, "c").to_dict()["metrics"]
    # acc's recipes are 0.1 apart over a seed noise of 0.001; bpb's 0.1 apart over 0.05: acc is recommended, by
    # the probes alone, though it orders the small budget worse against the largest budget's bpb (1 of 3 pairs).
    assert report["recommended"] == "val/a/acc" and report["rank_by"] == "bpb"
    rows = report["metrics"]
    assert rows["val/a/acc"]["snr_mean"] > 10 * rows["bpb"]["snr_mean"]
    assert rows["bpb"]["accuracy"]["1000"] == 1.0 and rows["val/a/acc"]["accuracy"]["1000"] == pytest.approx(1 / 3)
    assert rows["val/a/acc"]["higher_is_better"] is True and rows["val/a/bpb"]["higher_is_better"] is False


def test_a_probe_is_scored_by_the_mean_of_its_evaluations_in_the_window(tmp_path):
    def late(recipe, seed, budget, step, metric):  # the last evaluation jumps by +0.3 for y: a noisy final read
        steps = TOKENS[budget]
        jump = 0.3 if (recipe == "y" and step == steps) else 0.0
        return MEANS[recipe] + 0.01 * seed + jump + 0.1 * (steps - step) / steps

    with Ledger(tmp_path / "l.db") as led:
        write(led, spec(name="c", score_window=[0.9, 0.95, 1.0]), late)
        windowed = summarise(led, "c").to_dict()
        evals = led.evals("c/y/s0/t4000")
    assert windowed["scored_by"] == "the mean of its evaluations at 0.9, 0.95, 1 of its budget"
    # y at 4,000 tokens, seed 0: the evaluations at steps 36, 38 and 40 (0.9, 0.95, 1.0 of 40), 1.11, 1.105, 1.4.
    y = windowed["rankings"]["4000"]["bpb"]["order"]
    assert next(e for e in y if e["recipe"] == "y")["mean"] == pytest.approx((1.11 + 1.105 + 1.4) / 3 + 0.01)
    assert scoring_steps(evals, window=[0.9, 0.95, 1.0], budget=4000) == [36, 38, 40]
    assert scoring_steps(evals, last_evals=2) == [38, 40]


def test_a_window_share_without_an_evaluation_near_it_is_missing():
    """A trainer of one's own evaluates where it will: a share is read off the evaluation nearest it within 2.5% of
    the budget, or not at all; with none in the window the score is missing (NaN), never the last evaluation's."""
    evals = pd.DataFrame(
        [
            {"step": s, "tokens": t, "task": "val", "metric": "bpb", "value": v}
            for s, t, v in ((1, 500, 3.0), (2, 880, 2.0), (3, 1000, 1.0))
        ]
    )
    assert scoring_steps(evals, window=[0.9, 0.95, 1.0], budget=1000) == [2, 3]  # 880 stands for 0.9; none for 0.95
    assert probe_scores(evals, window=[0.9, 0.95, 1.0], budget=1000)["bpb"] == 1.5
    assert math.isnan(probe_scores(evals, window=[0.6, 0.7], budget=1000)["bpb"])


def campaign_file(tmp_path, **over):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec(**over)))
    return path


BAD = {
    "an unknown direction": (
        {"rank_by": {"metric": "val/zork"}},
        "has no known direction; give rank_by.higher_is_better",
    ),
    "a bare name": ({"rank_by": {"metric": "zork", "higher_is_better": True}}, "must be 'bpb' or an evaluation key"),
    "a window and last_evals": ({"score_window": [0.9, 1.0], "last_evals": 2}, "score_window and last_evals"),
    "a share past the budget": ({"score_window": [0.9, 1.5]}, r"score_window shares must lie in \(0, 1\]"),
    "an eval share of 0": ({"probe": {"eval_at": [0.0]}}, r"shares of the budget must lie in \(0, 1\]"),
    "adaptive at the largest budget": (
        {"adaptive": {"budget": 4000, "compute": 1.0}},
        "adaptive.budget must be a smaller budget",
    ),
    "adaptive without a pool": (
        {"adaptive": {"budget": 1000, "compute": 1.0}, "seeds": [0, 1]},
        "no more than first_seeds",
    ),
    "adaptive short of its first pass": (
        {"adaptive": {"budget": 1000, "compute": 0.2}},
        r"less than its first pass costs \(0.5",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_campaign_file_refuses_a_bad_rank_window_or_adaptive_key(tmp_path, case):
    over, message = BAD[case]
    with pytest.raises(InputError, match=message):
        load_campaign(campaign_file(tmp_path, **over))


def test_a_window_evaluates_the_built_in_probes_there_and_keys_them_apart(tmp_path):
    plain = plan(load_campaign(campaign_file(tmp_path)))
    windowed = load_campaign(campaign_file(tmp_path, score_window=[0.9, 0.95, 1.0]))
    assert windowed.probe.eval_at == [0.9, 0.95]  # 1.0 is the last evaluation already
    assert not {p.key for p in plan(windowed)} & {p.key for p in plain}  # other evaluations: other records
    # The first pass of an adaptive budget is planned; its later seeds are drawn by the rounds.
    adaptive = load_campaign(campaign_file(tmp_path, seeds=[0, 1, 2, 3], adaptive={"budget": 1000, "compute": 1.0}))
    assert sorted({p.seed for p in plan(adaptive) if p.tokens == 1000}) == [0, 1]
    assert sorted({p.seed for p in plan(adaptive) if p.tokens == 4000}) == [0, 1, 2, 3]


@pytest.mark.slow
def test_an_evaluation_changes_nothing_a_probe_learns(tmp_path):
    """Two built-in probes, one evaluated also at 0.9 and 0.95 of its budget: the same final evaluation to the bit
    (an evaluation draws on no random state of training), and the window's evaluations where asked."""
    from yieldgate.data.recipe import resolve
    from yieldgate.manifest import Recipe
    from yieldgate.probe.config import ProbeConfig
    from yieldgate.probe.trainer import train_probe

    data = resolve(Recipe.model_validate(RECIPE), max_chars_per_source=60_000)
    cfg = {
        "tokens": 6400,
        "batch_size": 4,
        "context": 32,
        "evals": 2,
        "eval_seed": 0,
        "checkpoint": False,
        "threads": 1,
    }
    ledger = str(tmp_path / "l.db")
    plain = train_probe(data, ProbeConfig(**cfg), run="plain", ledger=ledger)
    windowed = train_probe(data, ProbeConfig(**cfg, eval_at=(0.9, 0.95)), run="windowed", ledger=ledger)
    assert windowed == plain
    with Ledger(ledger, readonly=True) as led:
        assert sorted(led.evals("plain")["step"].unique()) == [0, 25, 50]
        assert sorted(led.evals("windowed")["step"].unique()) == [0, 25, 45, 48, 50]  # 0.9 and 0.95 of 50 steps


@pytest.mark.slow
def test_an_adaptive_campaign_trains_what_the_rule_says(tmp_path, cli, ledger_path):
    """A real adaptive campaign: three recipes, a first pass of two seeds at 3,000 tokens, then rounds from the
    budget's six seeds, within 2.5 probes of 6,000 tokens a recipe (15 probes of 3,000 tokens in all). The seeds it
    trained are those the rule (`analysis.adaptive.adaptive_seeds`) gives when replayed on the probes' own scores:
    each round only for the recipes still in a pair within noise."""
    from yieldgate.analysis.adaptive import adaptive_seeds
    from yieldgate.analysis.campaign import campaign_scores

    shuffled = {"sources": [{"name": "milton", "shuffled_share": 1.0}], "tokenizer": RECIPE["tokenizer"]}
    pool = [100, 101, 102, 103, 104, 105]
    spec = {
        "name": "adapt",
        "recipes": {"clean": RECIPE, "twin": {**RECIPE, "dedup": {"kind": "none"}}, "shuffled": shuffled},
        "seeds": [0],
        "budgets": [3000, 6000],
        "budget_seeds": {3000: pool},
        "probe": {"batch_size": 4, "context": 32, "evals": 2, "eval_sequences": 8},
        "data": {"max_chars_per_source": 60_000},
        "adaptive": {"budget": 3000, "first_seeds": 2, "compute": 2.5},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    state = cli.json("probe", str(tmp_path / "c.yaml"), "--workers", "2")["summary"]["adaptive"]
    assert state["budget"] == 3000 and state["compute_share"] <= 2.5 + 1e-9
    with Ledger(ledger_path, readonly=True) as led:
        scores = campaign_scores(led, "adapt")[3000]["bpb"]
    taken = dict.fromkeys(scores, 2)

    def draw(recipes):
        out = {}
        for r in recipes:
            if taken[r] < len(pool) and pool[taken[r]] in scores[r]:
                out[r] = {pool[taken[r]]: scores[r][pool[taken[r]]]}
                taken[r] += 1
        return out

    replay = adaptive_seeds({r: {s: x[s] for s in pool[:2]} for r, x in scores.items()}, draw, max_probes=15)
    assert {r: len(x) for r, x in replay.scores.items()} == {r: len(x) for r, x in scores.items()} == state["seeds"]
    assert replay.rounds, "no round: the campaign did not exercise the adaptive mode"
