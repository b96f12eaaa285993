"""Published results in (`yieldgate import results`, issue #34): the long-form table checked whole and imported as a
campaign, its decisions per scale, the mixture regression; RegMix's published runs where ../shared has them."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from yieldgate.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]
REGMIX = next(
    (p for p in (ROOT.parent / "shared" / "tables" / "regmix", Path("/work/shared/tables/regmix")) if p.is_dir()),
    None,
)
MIX = {"w:code": 0.25, "w:prose": 0.75}


def table(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def good_rows() -> list[dict]:
    """Three recipes x two sizes x two seeds, loss at two token counts; recipe b best at the large size."""
    rows = []
    final = {"a": (3.0, 2.00), "b": (3.1, 1.90), "c": (3.2, 2.20)}
    for (recipe, (small, large)), seed in itertools.product(final.items(), (0, 1)):
        w = {"w:code": 0.1 * (ord(recipe) - 96), "w:prose": 1 - 0.1 * (ord(recipe) - 96)}
        for params, tokens, value in ((1000, 10_000, small + 1), (1000, 20_000, small), (8000, 160_000, large)):
            rows.append(
                {"recipe": recipe, "params": params, "tokens": tokens, "seed": seed, "metric": "val/loss"}
                | {"value": value + 0.01 * seed, "stderr": 0.02, **w}
            )
    return rows


def test_a_table_imports_as_a_campaign_of_runs(tmp_path, cli, ledger_path):
    path = table(tmp_path / "r.csv", good_rows())
    done = cli.json("import", "results", str(path), "--campaign", "pub")
    assert (done["runs"], done["recipes"], done["evals"], done["sizes"]) == (12, 3, 18, [1000, 8000])
    with Ledger(ledger_path, readonly=True) as led:
        run = "pub/b/s1/n1000"
        evals = led.evals(run)
        assert evals["tokens"].tolist() == [10_000, 20_000] and evals["value"].tolist() == pytest.approx([4.11, 3.11])
        assert list(evals["task"]) == ["val", "val"] and not evals["higher_is_better"].any()
        manifest = led.manifest(run)
        assert {s.name: s.weight for s in manifest.data.sources} == {"code": 0.2, "prose": 0.8}
        assert manifest.model.params == 1000 and led.meta(run)["results"]["tokens"] == 20_000
    m = cli.json("campaign", "pub")["summary"]["metrics"]["val/loss"]
    assert m["largest"] == {"params": 8000, "tokens": 160_000, "run": None, "recipes": 3}
    by = {(e["params"], e["tokens"]): e for e in m["scales"]}
    # At 1000 x 20,000 the order is a < b < c, at the largest b < a < c: two of three pairs agree.
    e = by[(1000, 20_000)]
    assert (e["pairs"], e["accuracy"], e["noise"]) == (3, pytest.approx(2 / 3), "seeds")
    assert e["compute_share"] == pytest.approx(2 * 1000 * 20_000 / (8000 * 160_000))
    # Two seeds 0.01 apart: every pair is 0.1 apart, far beyond the seeds' noise, so all are decided.
    assert (e["decided_pairs"], e["abstained"], e["accuracy_decided"]) == (3, 0, pytest.approx(2 / 3))
    assert [r["recipe"] for r in m["ranking"]] == ["b", "a", "c"]
    shown = " ".join(cli("campaign", "pub").stdout.split())  # as one line, however the console wraps it
    assert "val/loss at N = 1,000, D = 20,000: 66.7% of 3 recipe pairs ordered as at N = 8,000, D = 160,000" in shown


def test_the_noise_unit_is_the_reported_stderr_with_one_seed(tmp_path, cli):
    rows = [r for r in good_rows() if r["seed"] == 0]
    for r in rows:
        r["stderr"] = 0.1 if r["params"] == 1000 else 0.01  # a noise unit of 0.14: only a and c (0.2) are decided
    cli("import", "results", str(table(tmp_path / "r.csv", rows)), "--campaign", "pub")
    m = cli.json("campaign", "pub")["summary"]["metrics"]["val/loss"]
    e = next(e for e in m["scales"] if e["tokens"] == 20_000)
    assert e["noise"] == "stderr" and e["decided_pairs"] == 1 and e["accuracy_decided"] == 1.0


def test_an_existing_run_is_refused_unless_replace_and_nothing_is_half_imported(tmp_path, cli, ledger_path):
    path = table(tmp_path / "r.csv", good_rows())
    cli("import", "results", str(path), "--campaign", "pub")
    more = good_rows() + [{**good_rows()[0], "recipe": "d"}]
    err = cli("import", "results", str(table(tmp_path / "m.csv", more)), "--campaign", "pub", code=2).stderr
    assert "already exists" in err and "--replace" in err and len(err.strip().splitlines()) == 1
    with Ledger(ledger_path, readonly=True) as led:
        assert not [n for n in led.runs()["name"] if n.startswith("pub/d/")]
    done = cli.json("import", "results", str(table(tmp_path / "m.csv", more)), "--campaign", "pub", "--replace")
    assert done["runs"] == 13 and done["replaced"] == 12


BAD = {
    "missing column": (
        lambda rows: [{k: v for k, v in r.items() if k != "tokens"} for r in rows],
        "no column 'tokens'",
    ),
    "weights": (
        lambda rows: [r if i != 4 else {**r, "w:code": 0.3} for i, r in enumerate(rows)],
        "row 5, column 'w:prose': the row's weights (w:code, w:prose) sum to 1.2, not 1",
    ),
    "direction": (
        lambda rows: [r if i != 6 else {**r, "metric": "val/zork"} for i, r in enumerate(rows)],
        "row 7, column 'metric': 'val/zork' has no known direction; pass --higher-is-better val/zork",
    ),
    "non-finite": (
        lambda rows: [r if i != 17 else {**r, "value": "inf"} for i, r in enumerate(rows)],
        "row 18, column 'value': expected a finite number, got 'inf'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_table_is_refused_in_one_line_and_nothing_is_imported(tmp_path, cli, ledger_path, case):
    change, said = BAD[case]
    path = table(tmp_path / "bad.csv", change(good_rows()))
    err = cli("import", "results", str(path), "--campaign", "pub", code=2).stderr
    assert said in err and len(err.strip().splitlines()) == 1, err
    if ledger_path.exists():
        with Ledger(ledger_path, readonly=True) as led:
            assert led.runs().empty and led.campaigns() == []


def test_a_direction_flag_makes_an_unknown_metric_importable(tmp_path, cli):
    rows = [{**r, "metric": "zork"} for r in good_rows()]
    done = cli.json(
        "import", "results", str(table(tmp_path / "r.csv", rows)), "--campaign", "p", "--higher-is-better", "zork"
    )
    assert done["metrics"] == {"zork": True}
    assert cli.json("campaign", "p")["summary"]["metrics"]["zork"]["ranking"][0]["recipe"] == "c"


def test_mixture_regression_recovers_a_known_quadratic():
    """Losses made from a known quadratic of the weights: the fit ranks unseen mixtures almost perfectly, and the
    proposal lands near the known optimum."""
    from yieldgate.analysis.mixture import fit_mixture, pair_accuracy, propose

    rng = np.random.default_rng(1)
    w = rng.dirichlet(np.ones(3), 120)
    best = np.array([0.5, 0.3, 0.2])
    y = 2 + 4 * ((w - best) ** 2).sum(axis=1) + rng.normal(0, 0.005, len(w))
    fit = fit_mixture(["a", "b", "c"], w[:80], y[:80])
    assert fit.kind == "quadratic"
    accuracy, pairs = pair_accuracy(fit.predict(w[80:]), y[80:])
    assert pairs == 780 and accuracy > 0.9
    p = propose(fit, w[:80], y[:80], higher_is_better=False, level=0.9, boots=10)
    got = np.array([p["mixture"][s] for s in "abc"])
    assert np.abs(got - best).max() < 0.08 and p["interval"][0] <= p["predicted"] <= p["interval"][1]


def _pile_cc_from_raw(folder: Path) -> tuple[int, int]:
    """(pairs ordered alike, pairs) of the 256 test mixtures by Pile-CC loss at 1M and 60M, from the CSVs alone."""

    def read(name: str) -> dict[str, float]:
        with (folder / name).open(newline="") as fh:
            return {r["index"]: float(r["metric/the_pile_pile_cc_val_loss"]) for r in csv.DictReader(fh)}

    small, large = read("test_pile_loss_1m.csv"), read("test_pile_loss_60m.csv")
    pairs = list(itertools.combinations(sorted(small), 2))
    agree = sum((small[a] < small[b]) == (large[a] < large[b]) for a, b in pairs)
    return agree, len(pairs)


@pytest.mark.slow
def test_regmix_pile_cc_decision_accuracy_matches_a_count_from_the_raw_csvs(tmp_path, cli):
    if REGMIX is None:
        pytest.skip("../shared/tables/regmix is absent: RegMix's published CSVs are not on this machine")
    agree, pairs = _pile_cc_from_raw(REGMIX)
    assert (agree, pairs) == (31_618, 32_640)  # 96.9%, as SOURCES.md records
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import regmix_table

    rows = [r for r in regmix_table.rows(REGMIX, {"pile_cc"}) if str(r["recipe"]).startswith("test-")]
    path = tmp_path / "regmix.csv"
    regmix_table.write(path, rows)
    cli("import", "results", str(path), "--campaign", "regmix")
    m = cli.json("campaign", "regmix")["summary"]["metrics"]["val/pile_cc/loss"]
    (e,) = m["scales"]
    assert (e["params"], e["against"]["params"], e["pairs"]) == (1_000_000, 60_000_000, 32_640)
    assert e["accuracy"] == pytest.approx(agree / pairs) and f"{e['accuracy']:.1%}" == "96.9%"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="probes need torch")
@pytest.mark.slow
def test_a_table_from_a_probe_campaign_decides_as_the_campaign_does(tmp_path, cli, ledger_path):
    """Real built-in probes at two model sizes, their final bits per byte written as a results table: importing it
    gives the decision accuracy the campaign's own summary (rank transfer) gives."""
    import yaml

    from yieldgate.analysis.campaign import campaign_scores, probe_runs
    from yieldgate.analysis.campaign_sizes import sizes_of

    clean = {
        "sources": [{"name": "shakespeare-modern"}],
        "tokenizer": {"name": "bpe-512", "vocab_size": 512},
        "dedup": {"kind": "exact"},
    }
    shuffled = lambda share: {**clean, "sources": [{"name": "shakespeare-modern", "shuffled_share": share}]}  # noqa: E731
    spec = {
        "name": "sizes",
        "recipes": {"clean": clean, "quarter": shuffled(0.25), "whole": shuffled(1.0)},
        "seeds": 1,
        "budgets": [24_000],
        "models": [{"layers": 1, "width": 16, "heads": 2}, {"layers": 1, "width": 32, "heads": 4}],
        "probe": {"batch_size": 16, "evals": 2, "eval_sequences": 16},
        "data": {"max_chars_per_source": 120_000},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    summary = cli.json("probe", str(tmp_path / "c.yaml"), "--workers", "2")["summary"]
    ((small_n, own),) = summary["rank_transfer"]["24000"].items()
    with Ledger(ledger_path, readonly=True) as led:
        scores = campaign_scores(led, "sizes")[24_000]["bpb"]
        sizes = sizes_of(led, probe_runs(led, "sizes"))
    rows = []
    for name, seeds in scores.items():
        recipe, _, size = name.rpartition("@")
        rows += [
            {"recipe": recipe, "params": sizes[size], "tokens": 24_000, "seed": s, "metric": "val/bpb", "value": v}
            for s, v in seeds.items()
        ]
    cli("import", "results", str(table(tmp_path / "t.csv", rows)), "--campaign", "table")
    (e,) = cli.json("campaign", "table")["summary"]["metrics"]["val/bpb"]["scales"]
    assert (e["params"], e["against"]["params"]) == (int(small_n), own["largest_params"])
    assert (e["pairs"], e["accuracy"]) == (own["pairs"], pytest.approx(own["accuracy"]))


def test_a_law_across_sizes_is_set_beside_plain_ranking_pair_by_pair():
    """Power laws whose order flips past the smaller sizes: x leads at N = 3, y at N = 16. The law fitted over
    N = 1, 2, 3 ranks as N = 16 does; plain ranking at N = 3 gets the flipped pair wrong."""
    from yieldgate.analysis.results import POINT_COLUMNS, extrapolation

    laws = {"x": (10, 0.1), "y": (13, 0.3), "z": (20, 0.1)}
    rows = [
        (f"{r}/{n}", r, 0, n, "", 1000, "val/loss", a * n**-b, np.nan)
        for r, (a, b) in laws.items()
        for n in (1, 2, 3, 16)
    ]
    x = extrapolation(pd.DataFrame(rows, columns=POINT_COLUMNS), higher_is_better=False)
    assert x["available"] and x["sizes"] == [1, 2, 3, 16] and x["pairs"] == 3
    assert (x["law_accuracy"], x["plain_accuracy"]) == (1.0, pytest.approx(2 / 3))
    assert (x["law_only"], x["plain_only"], x["beats"], x["law_best"]) == (1, 0, True, "y")
    assert x["default"] == "law"  # it orders more pairs right: said, and the default
    assert (x["law_compute_share"], x["plain_compute_share"]) == (pytest.approx(6 / 16), pytest.approx(3 / 16))


def test_no_law_through_two_points_unless_its_exponent_is_declared():
    """Three sizes leave two below the target: a law through two points bends to each one's noise, so none is
    fitted and plain ranking is the default; a declared exponent fits only each recipe's constant, from any number
    of sizes. Values from exact power laws of one exponent: the declared law orders every pair right."""
    from yieldgate.analysis.results import POINT_COLUMNS, extrapolation

    laws = {"x": 10.0, "y": 12.0, "z": 11.0}  # value = a * N^-0.2; at every size x < z < y
    rows = [
        (f"{r}/{n}", r, 0, n, "", 1000, "val/loss", a * n**-0.2, np.nan) for r, a in laws.items() for n in (1, 4, 16)
    ]
    points = pd.DataFrame(rows, columns=POINT_COLUMNS)
    three = extrapolation(points, False)
    assert three["available"] is False and three["default"] == "plain"
    assert (
        three["reason"]
        == "3 model size(s); a law across sizes needs 3 or more below the largest (or a declared exponent)"
    )
    declared = extrapolation(points, False, exponent=-0.2)
    assert declared["available"] and declared["exponent"] == -0.2 and declared["law_accuracy"] == 1.0
    assert declared["default"] == "plain"  # plain ranking is right too: a tie keeps the cheaper one
    assert extrapolation(pd.DataFrame([r for r in rows if r[3] in (1, 16)], columns=POINT_COLUMNS), False, -0.2)[
        "available"
    ]


def test_the_dashboard_shows_a_results_campaign(tmp_path, cli, ledger_path):
    from yieldgate.serve.views import campaign_page

    cli("import", "results", str(table(tmp_path / "r.csv", good_rows())), "--campaign", "pub")
    with Ledger(ledger_path, readonly=True) as led:
        html = campaign_page(led.campaign("pub"), [])
    assert "12 imported runs" in html and "val/loss at N = 1,000, D = 20,000: 66.7% of 3 recipe pairs" in html


def test_import_asks_for_what_its_kind_needs(tmp_path, cli):
    path = str(table(tmp_path / "r.csv", good_rows()))
    assert "yieldgate import table needs --run NAME" in cli("import", "table", path, code=2).stderr
    assert "needs --campaign NAME" in cli("import", "results", path, code=2).stderr


def one_seed_rows() -> list[dict]:
    """Three recipes, one seed, no stderr: at the small scale a 1.0 < b 1.05 < c 1.3, at the large b < a < c."""
    final = {"a": (1.0, 2.0), "b": (1.05, 1.9), "c": (1.3, 2.2)}
    return [
        {"recipe": r, "params": n, "tokens": d, "metric": "val/loss", "value": v}
        for r, (small, large) in final.items()
        for n, d, v in ((1000, 20_000, small), (8000, 160_000, large))
    ]


def test_a_single_seed_table_decides_only_beyond_a_noise_given_at_import(tmp_path, cli):
    path = str(table(tmp_path / "r.csv", one_seed_rows()))
    cli("import", "results", path, "--campaign", "bare")
    (e,) = cli.json("campaign", "bare")["summary"]["metrics"]["val/loss"]["scales"]
    # No seeds, no stderr, no noise given: nothing is decided (it decided every pair before).
    assert (e["accuracy"], e["noise"]) == (pytest.approx(2 / 3), None) and "coverage" not in e
    shown = " ".join(cli("campaign", "bare").stdout.split())
    assert "decided pairs: none (no noise measured); coverage -; give a noise to decide beyond it" in shown
    # A standard error of 0.05 a run: a noise unit of 0.0707 for a difference of two one-run values. a-b (0.05)
    # is within it; a-c (0.3, right) and b-c (0.25, right) are decided.
    cli("import", "results", path, "--campaign", "given", "--noise", "val/loss=0.05")
    m = cli.json("campaign", "given")["summary"]["metrics"]["val/loss"]
    (e,) = m["scales"]
    assert m["noise_given"] == 0.05 and e["noise"] == "given"
    assert (e["decided_pairs"], e["coverage"], e["accuracy_decided"]) == (2, pytest.approx(2 / 3), 1.0)
    assert e["accuracy_stderr"] == pytest.approx(np.std([0, 1, 1], ddof=1) / np.sqrt(3))
    shown = " ".join(cli("campaign", "given").stdout.split())
    assert "(all pairs 66.7% ± 33.3% of 3; decided pairs 100.0% of 2; coverage 67%, beyond the noise given" in shown


def test_a_probe_campaign_and_a_replayed_table_print_the_same_three_figures(tmp_path, cli):
    from yieldgate.report.console.decisions import decision_figures

    entry = {"accuracy": 0.75, "accuracy_stderr": 0.1, "pairs": 4, "decided_pairs": 2, "accuracy_decided": 1.0}
    assert decision_figures({**entry, "coverage": 0.5}) == (
        "all pairs 75.0% ± 10.0% of 4; decided pairs 100.0% of 2; coverage 50%"
    )
    # A summary stored before coverage was: read from its abstention.
    assert decision_figures({**entry, "abstained": 0.5}) == decision_figures({**entry, "coverage": 0.5})


def test_replicates_of_some_recipes_measure_the_noise_of_all(tmp_path, cli):
    rows = [{**r, "seed": 0} for r in one_seed_rows()]
    # a and b replicated at the small scale (seed 1 0.02 above seed 0: a variance of 0.0002 each, sd 0.01414).
    rows += [{**r, "seed": 1, "value": r["value"] + 0.02} for r in rows if r["params"] == 1000 and r["recipe"] != "c"]
    cli("import", "results", str(table(tmp_path / "r.csv", rows)), "--campaign", "rep")
    (e,) = cli.json("campaign", "rep")["summary"]["metrics"]["val/loss"]["scales"]
    # Means a 1.01, b 1.06 (two runs), c 1.3 (one): the a-b unit is 0.01414 * sqrt(1/2 + 1/2) = 0.0141 < 0.05.
    assert e["noise"] == "replicates" and e["decided_pairs"] == 3 and e["accuracy_decided"] == pytest.approx(2 / 3)


NOISE_BAD = {
    "negative": (["--noise", "val/loss=-0.1"], "--noise for 'val/loss' must be a finite number >= 0, got -0.1"),
    "not finite": (["--noise", "val/loss=inf"], "--noise for 'val/loss' must be a finite number >= 0, got inf"),
    "nan": (["--noise", "val/loss=nan"], "--noise for 'val/loss' must be a finite number >= 0, got nan"),
    "unknown metric": (["--noise", "val/zz=0.1"], "--noise for 'val/zz': the table has no metric 'val/zz'"),
    "not a pair": (["--noise", "0.1"], "--noise '0.1': give METRIC=NUMBER"),
    "exponent": (["--exponent", "val/loss=inf"], "--exponent for 'val/loss' must be a finite number, got inf"),
}


@pytest.mark.parametrize("case", sorted(NOISE_BAD))
def test_a_bad_noise_is_refused_in_one_line_and_nothing_is_imported(tmp_path, cli, ledger_path, case):
    flags, said = NOISE_BAD[case]
    err = cli("import", "results", str(table(tmp_path / "r.csv", one_seed_rows())), "--campaign", "c", *flags, code=2)
    assert said in err.stderr and len(err.stderr.strip().splitlines()) == 1, err.stderr
    if ledger_path.exists():
        with Ledger(ledger_path, readonly=True) as led:
            assert led.runs().empty and led.campaigns() == []


def longer_rows() -> list[dict]:
    """Recipes a and b at 1,000 parameters, seed 0: a compute-optimal run (20,000 tokens) and a 5x run (100,000),
    both evaluated at 20,000 tokens; the 5x run's LR is still high there, so its loss is higher than the short run's
    final. At 8,000 parameters one run each."""
    rows = []
    for r, shift in (("a", 0.0), ("b", 0.1)):
        for mult, points in ((1, ((10_000, 3.0), (20_000, 2.5))), (5, ((20_000, 2.8), (100_000, 2.0)))):
            rows += [
                {"recipe": r, "params": 1000, "tokens": d, "tokens_multiplier": mult, "metric": "val/loss"}
                | {"value": v + shift}
                for d, v in points
            ]
        rows.append(
            {
                "recipe": r,
                "params": 8000,
                "tokens": 160_000,
                "tokens_multiplier": 1,
                "metric": "val/loss",
                "value": 1.9 + shift,
            }
        )
    return rows


def test_runs_of_one_size_and_seed_but_other_lengths_are_other_runs(tmp_path, cli, ledger_path):
    done = cli.json("import", "results", str(table(tmp_path / "r.csv", longer_rows())), "--campaign", "len")
    assert done["runs"] == 6  # 2 recipes x (two lengths at 1,000 + one at 8,000)
    with Ledger(ledger_path, readonly=True) as led:
        short, long = led.evals("len/a/s0/n1000/x1"), led.evals("len/a/s0/n1000/x5")
        assert short["tokens"].tolist() == [10_000, 20_000] and long["tokens"].tolist() == [20_000, 100_000]
        assert led.meta("len/a/s0/n1000/x5")["results"]["run"] == "x5"
    scales = cli.json("campaign", "len")["summary"]["metrics"]["val/loss"]["scales"]
    # 20,000 tokens of the short run and of the long one are two scales, never one with two values a recipe.
    at = {(e["tokens"], e["run"]): e for e in scales}
    assert {(20_000, "x1"), (20_000, "x5"), (100_000, "x5")} <= set(at) and at[(20_000, "x5")]["seeds"] == 1
    # Without the column the same rows are refused: a second value at 20,000 tokens of one run.
    plain = [{k: v for k, v in r.items() if k != "tokens_multiplier"} for r in longer_rows()]
    err = cli("import", "results", str(table(tmp_path / "p.csv", plain)), "--campaign", "p", code=2).stderr
    assert "a second value of 'val/loss'" in err and "name it in a run or tokens_multiplier column" in err


RUN_BAD = {
    "past its length": (
        lambda rows: [r if i != 3 else {**r, "tokens_multiplier": 1} for i, r in enumerate(rows)],
        "row 4, column 'tokens_multiplier': tokens 100,000 lie past the run's length, 1 x 20 tokens a parameter x "
        "1,000 parameters = 20,000",
    ),
    "a run that changes size": (
        lambda rows: [{**r, "run": f"{r['recipe']}-{r['tokens_multiplier']}"} for r in rows],
        "row 5, column 'run': run 'a-1' has params 1000 at row 1 and 8000 here: one run is one recipe, seed and model "
        "size",
    ),
    "a multiplier <= 0": (
        lambda rows: [r if i != 0 else {**r, "tokens_multiplier": 0} for i, r in enumerate(rows)],
        "row 1, column 'tokens_multiplier': expected a number > 0, got 0",
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_BAD))
def test_a_run_column_that_contradicts_its_size_is_refused(tmp_path, cli, ledger_path, case):
    change, said = RUN_BAD[case]
    err = cli("import", "results", str(table(tmp_path / "bad.csv", change(longer_rows()))), "--campaign", "b", code=2)
    assert said in err.stderr and len(err.stderr.strip().splitlines()) == 1, err.stderr
    if ledger_path.exists():
        with Ledger(ledger_path, readonly=True) as led:
            assert led.runs().empty and led.campaigns() == []


@pytest.mark.slow
def test_regmix_pile_cc_decided_accuracy_and_coverage_at_a_given_noise_match_a_count_from_the_raw_csvs(tmp_path, cli):
    """`benchmarks/bench_published.py`'s beyond-noise figures, recomputed from RegMix's CSVs alone: with one run's
    standard error s given, a pair of 1M values is decided when they differ by more than s sqrt(2)."""
    if REGMIX is None:
        pytest.skip("../shared/tables/regmix is absent: RegMix's published CSVs are not on this machine")
    folder = REGMIX

    def read(name: str) -> dict[str, float]:
        with (folder / name).open(newline="") as fh:
            return {r["index"]: float(r["metric/the_pile_pile_cc_val_loss"]) for r in csv.DictReader(fh)}

    small, large = read("test_pile_loss_1m.csv"), read("test_pile_loss_60m.csv")
    noise = 0.003 * float(np.median(list(small.values())))
    decided = right = 0
    for a, b in itertools.combinations(sorted(small), 2):
        if abs(small[a] - small[b]) > noise * np.sqrt(2):
            decided += 1
            right += (small[a] < small[b]) == (large[a] < large[b])
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import regmix_table

    rows = [r for r in regmix_table.rows(REGMIX, {"pile_cc"}) if str(r["recipe"]).startswith("test-")]
    regmix_table.write(tmp_path / "regmix.csv", rows)
    cli("import", "results", str(tmp_path / "regmix.csv"), "--campaign", "r", "--noise", f"val/pile_cc/loss={noise!r}")
    (e,) = cli.json("campaign", "r")["summary"]["metrics"]["val/pile_cc/loss"]["scales"]
    assert (e["noise"], e["decided_pairs"]) == ("given", decided)
    assert e["coverage"] == pytest.approx(decided / 32_640) and e["accuracy_decided"] == pytest.approx(right / decided)
