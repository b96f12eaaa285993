"""Logs read by their structure (issue 45), the second set of classes seen in real public logs that were refused or
misread: values printed in a sentence beside their counter and evaluation blocks under a titled rule
(Deeplearning4j). Each on a small file written here (no real log), each rule on generated cases (hypothesis), and
beside each a file that is not the class and is not read as it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.textlog.kv import read_counted
from yieldgate.ledger import Ledger

_FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _import(path: Path, kind: str = "auto", **options):
    """(steps, evals, warnings) of `path` imported into a new in-memory ledger."""
    with Ledger(":memory:") as led:
        (res,) = import_run(led, kind, [str(path)], ImportOptions(run="r", **options))
        return led.steps("r"), led.evals("r"), res.warnings


def _column(steps, name: str) -> dict[int, float]:
    known = steps[["step", name]].dropna()
    return dict(zip(known["step"].astype(int).tolist(), known[name].tolist(), strict=True))


def _evals(evals) -> dict[tuple[str, int], float]:
    return {
        (f"{task}/{metric}", int(step)): value
        for task, metric, step, value in evals[["task", "metric", "step", "value"]].itertuples(index=False)
    }


# -- 1. values in a sentence; evaluation blocks under a titled rule ---------------------------------------------------

_LISTENER = "[main] INFO org.deeplearning4j.optimize.listeners"
_EVAL_BLOCK = """

========================Evaluation Metrics========================
 # of classes:    5
 Accuracy:        {acc}
 Precision:       0.6194
 F1 Score:        0.6172
Precision, recall & F1: macro-averaged (equally weighted avg. of 5 classes)


=========================Confusion Matrix=========================
    0    1    2
--------------------
 9213 2873  374 | 0 = 0
"""


def _dl4j(scores: dict[int, float], evaluated: dict[int, float]) -> str:
    out = [f"06:38:14.898 {_LISTENER[:12]}yelpreview.TrainReviews - Starting training...\n"]
    for i, (step, score) in enumerate(sorted(scores.items())):
        out.append(f"06:{38 + i // 60:02d}:{i % 60:02d}.402 {_LISTENER}.ScoreIterationListener - ")
        out.append(f"Score at iteration {step} is {score}\n")
        if step in evaluated:
            out.append(f"06:59:00.001 {_LISTENER}.EvaluativeListener - Reporting evaluation results:\n")
            out.append(_EVAL_BLOCK.format(acc=evaluated[step]))
    return "".join(out)


def test_deeplearning4j_s_score_is_the_loss_and_its_evaluation_blocks_evaluations(tmp_path):
    """`Score at iteration N is X` (ScoreIterationListener) is the loss at step N; the EvaluativeListener's block of
    `name: value` lines under `===Evaluation Metrics===` are evaluations at the step before; its class count and the
    confusion matrix are no metric."""
    scores = {0: 1.6235, 100: 1.3935, 200: 1.2, 300: 1.1}
    path = _write(tmp_path, "train.log", _dl4j(scores, {100: 0.6162, 300: 0.6238}))
    steps, evals, _ = _import(path)
    assert _column(steps, "loss") == scores
    assert _evals(evals) == {
        ("val/acc", 100): 0.6162,
        ("val/acc", 300): 0.6238,
        **{(name, s): v for s in (100, 300) for name, v in (("val/precision", 0.6194), ("val/f1_score", 0.6172))},
    }


_NAMES = {"loss": "loss", "train loss": "loss", "score": "loss", "grad norm": "grad_norm", "learning rate": "lr"}
_COUNTERS = st.sampled_from(["iteration", "iter", "step", "update", "batch"])


@_FAST
@given(
    name=st.sampled_from(sorted(_NAMES)),
    prep=st.sampled_from(["at", "for", "after"]),
    counter=_COUNTERS,
    verb=st.sampled_from([" is ", ": ", " = ", " was ", ":"]),
    values=st.lists(st.integers(1, 10**6), min_size=2, max_size=6),
    interval=st.integers(1, 500),
    prefix=st.sampled_from(["", "INFO ", "2024-01-01 12:00:00,000 - Trainer - ", "[rank0] the "]),
)
def test_a_value_in_a_sentence_is_at_the_counter_beside_it(
    tmp_path_factory, name, prep, counter, verb, values, interval, prefix
):
    """Property: `<name> <at|for|after> <counter> <N> <is|was|:|=> <value>`, whatever the words, the counter (one a
    loop turns at each iteration), the verb and what the logger puts before it, is the value of `name` at step N; a
    `score` so printed is the loss."""
    lines = [
        f"{prefix}{name.capitalize()} {prep} {counter} {i * interval}{verb}{v / 1e4}\n" for i, v in enumerate(values)
    ]
    steps, _, _ = _import(_write(tmp_path_factory.mktemp("prose"), "log.txt", "".join(lines)))
    assert _column(steps, _NAMES[name]) == {i * interval: v / 1e4 for i, v in enumerate(values)}


def test_a_score_that_is_not_a_loop_s_per_iteration_value_is_not_the_loss(tmp_path):
    """Near misses: a score at an epoch (`Best score at epoch 3 is 0.91`), an accuracy at an iteration, an evaluation
    line's `score` (Flair's `DEV : loss 0.17 - score 0.90`) are not the training loss; a titled rule that names no
    evaluation heads no block of evaluations."""
    assert read_counted("Best score at epoch 3 is 0.91") == {
        "best_score": 0.91,
        "epoch": 3.0,
        "step": 3.0,
        "#epoch": 3.0,
    }
    assert "loss" not in (read_counted("Accuracy at iteration 100 is 0.9") or {})
    assert read_counted("2023-01-01 12:00:00,000 DEV : loss 0.17 - score 0.90") == {"dev_loss": 0.17, "dev_score": 0.9}
    summary = (
        "".join(f"step {s} loss: {1 / (s + 1):.4f}\n" for s in range(1, 4))
        + "=====Training Summary=====\n  speed: 12.5\n  memory: 3.1\n"
    )
    _, evals, _ = _import(_write(tmp_path, "summary.log", summary))
    assert evals.empty
