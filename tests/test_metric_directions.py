"""Issue 45, item 6: the scores of retrieval and embedding evaluators (Spearman and Pearson per similarity function,
MRR, NDCG, MAP@k, recall@k) rise, whatever their spelling, and a run whose only evaluations are these has
evaluations, not extras: the rule tested on generated names, and on a real sentence-transformers evaluator CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.real_wave4 import WAVE4_LOGS, WAVE4_PARSERS
from yieldgate.aliases import Target, guess
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger
from yieldgate.names import metric_direction, retrieval_metric, split_retrieval

REAL = Path(__file__).parent / "data" / "real"
ST_CSV = "sentence-transformers-stsb-distilbert-sts-dev-results.csv"

CORRELATIONS = ["spearman", "pearson", "spearmanr", "pearsonr"]
SIMILARITIES = ["cosine", "cos_sim", "euclidean", "manhattan", "dot", "dot_score", "max"]
RANKING = ["ndcg", "mrr", "map", "recall", "precision", "accuracy", "hit_rate", "r", "p"]
# Words that are parts of a score's name: an evaluation set's name made of them would be read as part of the score
_SCORE_WORDS = set(CORRELATIONS + RANKING + ["sim", "score", "at", "k"]) | {
    w for s in SIMILARITIES for w in s.split("_")
}


def _run(prop, n: int) -> None:
    settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(prop)()


def _cased(draw, text: str) -> str:
    return draw(st.sampled_from([text, text.upper(), text.title(), text.lower()]))


@st.composite
def correlations(draw) -> str:
    """`cosine_spearman` (sentence-transformers 2), `spearman_cosine` (3), `pearson_max`, `spearmanr`, ..."""
    corr, sim = draw(st.sampled_from(CORRELATIONS)), draw(st.sampled_from(SIMILARITIES))
    sep = draw(st.sampled_from(["_", "-"]))
    parts = draw(st.sampled_from([[corr], [sim, corr], [corr, sim]]))
    return _cased(draw, sep.join(parts))


@st.composite
def ranking_scores(draw) -> str:
    """`ndcg@10`, `NDCG@10`, `map_at_100`, `cos_sim-MRR@10` (sentence-transformers 2), `cosine_recall@5` (3), `P@1`."""
    name = _cased(draw, draw(st.sampled_from(RANKING)))
    k = draw(st.integers(1, 1000))
    score = draw(st.sampled_from([f"{name}@{k}", f"{name}_at_{k}"]))
    if draw(st.booleans()):
        score = draw(st.sampled_from(SIMILARITIES)) + draw(st.sampled_from(["_", "-"])) + score
    return score


scores = st.one_of(correlations(), ranking_scores())
datasets = st.from_regex(r"[A-Za-z][A-Za-z0-9]{1,9}(-[a-z0-9]{2,5})?", fullmatch=True).filter(
    lambda d: (
        not {w.lower() for w in d.replace("-", "_").split("_")} & _SCORE_WORDS
        and not d.lower().startswith(("train", "eval", "val", "dev", "test"))
        and metric_direction(d) is None  # `acc_spearman`: a metric's name with a suffix reads as that metric
    )
)


@pytest.mark.parametrize("n", [200, pytest.param(2000, marks=pytest.mark.slow)])
def test_every_retrieval_and_embedding_score_rises(n):
    @given(scores)
    def prop(name):
        assert retrieval_metric(name), name
        assert metric_direction(name) is True, name

    _run(prop, n)


@pytest.mark.parametrize("n", [100, pytest.param(1000, marks=pytest.mark.slow)])
def test_a_threshold_is_no_score(n):
    """sentence-transformers logs the similarity threshold beside the accuracy it gives: it has no direction."""

    @given(scores)
    def prop(name):
        assert not retrieval_metric(f"{name}_threshold")
        assert metric_direction(f"{name}_threshold") is None

    _run(prop, n)


@pytest.mark.parametrize("name", ["recall", "precision", "ndcg", "mrr"])
def test_a_ranking_name_alone_keeps_its_direction_but_is_no_evaluator_score(name):
    """Bare `recall` may be a training metric: it rises, but only its cutoff or its similarity function makes it an
    evaluation wherever it is logged."""
    assert metric_direction(name) is True and not retrieval_metric(name)


@pytest.mark.parametrize("name", ["f1_score", "accuracy_score", "precision_score", "recall_score", "acc", "recall"])
def test_a_training_score_is_no_evaluation(name):
    """sklearn's `f1_score` logged on training batches, or a bare `recall`, stays a training value (an extra)."""
    assert guess(name).kind == "extra" and not retrieval_metric(name)


def test_negative_mse_rises():
    assert metric_direction("negative_mse") is True and metric_direction("mse") is False


@pytest.mark.parametrize("n", [80, pytest.param(1000, marks=pytest.mark.slow)])
def test_a_score_after_its_evaluation_set_is_an_evaluation_of_that_set(n):
    """The sentence-transformers trainer writes `eval_<evaluator name>_<score>`: the evaluator's name is the task."""

    @given(datasets, scores, st.sampled_from(["eval_", "eval/", ""]))
    @example("PQ", "spearman", "eval_")  # a dataset named as panoptic quality was read as `pq_<suffix>` (CI found it)
    def prop(dataset, score, prefix):
        assert split_retrieval(f"{dataset}_{score}") == (dataset, score)
        assert guess(f"{prefix}{dataset}_{score}") == Target("eval", f"{dataset}/{score}")

    _run(prop, n)


@pytest.mark.parametrize("n", [100, pytest.param(1000, marks=pytest.mark.slow)])
def test_a_score_alone_is_a_validation_evaluation_and_a_training_one_is_not(n):
    @given(scores)
    def prop(score):
        assert guess(score) == Target("eval", f"val/{score}")
        assert guess(f"train_{score}").kind == "extra"

    _run(prop, n)


@pytest.mark.parametrize("n", [8, pytest.param(200, marks=pytest.mark.slow)])
def test_a_run_of_these_evaluations_alone_has_evaluations(n, tmp_path):
    @given(st.lists(scores, min_size=1, max_size=6, unique_by=str.lower), st.integers(2, 6))
    def prop(names, evaluations):
        path = tmp_path / "evals.jsonl"
        rows = [{"step": 100 * i, **{n: 0.5 + 0.01 * i for n in names}} for i in range(1, evaluations + 1)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with Ledger(":memory:") as led:
            (res,) = import_run(led, "auto", [str(path)], ImportOptions(run="r"))
            evals = led.evals("r")
            assert res.evals == len(names) * evaluations
            assert evals["higher_is_better"].all()
            assert led.extra_keys("r") == []  # no score kept as an imported/ extra

    _run(prop, n)


def test_the_real_sentence_transformers_evaluator_csv(ledger):
    entry = next(e for e in WAVE4_LOGS if e["path"] == ST_CSV)
    facts = WAVE4_PARSERS[entry["parser"]](REAL / ST_CSV, entry["params"])
    assert facts == entry["facts"]
    (res,) = import_run(ledger, "auto", [str(REAL / ST_CSV)], ImportOptions(run="st"))
    evals = ledger.evals("st")
    scores = [c for c in facts["columns"] if c not in ("epoch", "steps")]
    assert res.evals == facts["rows"] * len(scores)  # every score an evaluation, none an extra
    assert sorted(evals["metric"].unique()) == sorted(scores) and set(evals["task"]) == {"val"}
    assert evals["higher_is_better"].all()
    assert facts["steps"] == [-1] and any("'steps' holds a negative value" in w for w in res.warnings)
    for column in entry["params"]["columns"]:
        got = evals[evals["metric"] == column].sort_values("step")
        series = facts["series"][column]
        assert len(got) == series["count"]  # one per epoch, stepped by the epoch
        assert (int(got["step"].iloc[0]), float(got["value"].iloc[0])) == tuple(series["first"])
        assert (int(got["step"].iloc[-1]), float(got["value"].iloc[-1])) == tuple(series["last"])
