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
    assert m["largest"] == {"params": 8000, "tokens": 160_000, "recipes": 3}
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
        (f"{r}/{n}", r, 0, n, 1000, "val/loss", a * n**-b, np.nan) for r, (a, b) in laws.items() for n in (1, 2, 3, 16)
    ]
    x = extrapolation(pd.DataFrame(rows, columns=POINT_COLUMNS), higher_is_better=False)
    assert x["available"] and x["sizes"] == [1, 2, 3, 16] and x["pairs"] == 3
    assert (x["law_accuracy"], x["plain_accuracy"]) == (1.0, pytest.approx(2 / 3))
    assert (x["law_only"], x["plain_only"], x["beats"], x["law_best"]) == (1, 0, True, "y")
    assert (x["law_compute_share"], x["plain_compute_share"]) == (pytest.approx(6 / 16), pytest.approx(3 / 16))
    two = extrapolation(pd.DataFrame([r for r in rows if r[3] in (1, 16)], columns=POINT_COLUMNS), False)
    assert two == {"available": False, "reason": "2 model size(s); a law across sizes needs 3 or more"}


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
