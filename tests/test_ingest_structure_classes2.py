"""Logs read by their structure (issue 45), the second set of classes seen in real public logs that were refused or
misread: values printed in a sentence beside their counter and evaluation blocks under a titled rule
(Deeplearning4j). Each on a small file written here (no real log), each rule on generated cases (hypothesis), and
beside each a file that is not the class and is not read as it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.ingested import column as _column
from tests.support.ingested import evals_at as _evals
from tests.support.ingested import imported as _import
from tests.support.ingested import write as _write
from yieldgate.errors import InputError
from yieldgate.ingest.textlog.kv import read_counted

_FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


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


_NAMES = {"loss": "loss", "train loss": "loss", "score": "loss", "grad norm": "grad_norm"}
# (The learning rate alone is a setting, no value of training: such a log is refused, the test below.)
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


def test_a_learning_rate_in_sentences_is_read_beside_a_loss_and_alone_is_refused(tmp_path):
    rates = "".join(f"Learning rate at iteration {i * 10} is {0.001 / (i + 1)}\n" for i in range(4))
    with pytest.raises(InputError, match=r"only counters and settings were read \(iteration, learning_rate\)"):
        _import(_write(tmp_path, "alone.txt", rates))
    losses = "".join(f"Loss at iteration {i * 10} is {2.0 - i / 10}\n" for i in range(4))
    steps, _, _ = _import(_write(tmp_path, "both.txt", rates + losses))
    assert _column(steps, "lr") == {i * 10: 0.001 / (i + 1) for i in range(4)}
    assert _column(steps, "loss") == {i * 10: 2.0 - i / 10 for i in range(4)}


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


# -- 2. ` : `-separated `name value` segments, abbreviated names, a bracketed split (Marian) ------------------------


def _marian(updates: list[int], costs: list[float], valid: dict[int, float], sep: str = " : ") -> str:
    out = [
        "[2018-12-08 17:19:18] [data] Restoring the corpus state to epoch 30, batch 50000\n",
        "[2018-12-08 17:19:56] Training started\n",
    ]
    for i, (up, cost) in enumerate(zip(updates, costs, strict=True)):
        stamp = f"[2018-12-08 {18 + i // 60:02d}:{i % 60:02d}:13]"
        sen = f"{391_818 + i * 1_001:,}"
        fields = [f"Ep. {32 + i // 3}", f"Up. {up}", f"Sen. {sen}", f"Cost {cost:.8f}", "Time 397.15s"]
        out.append(f"{stamp} {sep.join([*fields, '11345.70 words/s', 'L.r. 1.6803e-04'])}\n")
        if up in valid:
            head = f"{stamp} [valid] Ep. {32 + i // 3} : Up. {up}"
            out.append(f"{head} : cross-entropy : {valid[up]} : new best\n")
            out.append(f"{head} : perplexity : {valid[up] / 10} : stalled 1 times\n")
    return "".join(out)


def test_marian_s_segments_read_its_updates_cost_and_validations(tmp_path):
    """`Ep. 32 : Up. 51000 : Sen. 391,818 : Cost 1.89 : ...`: segments cut by ` : ` hold `name value` pairs, `Up.`
    (updates) is the step, `Cost` the loss; `[valid] ... : cross-entropy : 50.2 : new best` is an evaluation at its
    own update, named by the segment before the value. A resumed log's first update (51000) is kept as it is."""
    updates, costs = [51000, 52000, 53000, 54000], [1.898, 1.877, 1.861, 1.851]
    path = _write(tmp_path, "train.log", _marian(updates, costs, {52000: 50.2476, 54000: 51.38}))
    steps, evals, _ = _import(path)
    assert _column(steps, "loss") == dict(zip(updates, costs, strict=True))
    assert _column(steps, "lr") == dict.fromkeys(updates, 1.6803e-04)
    assert _evals(evals) == {
        ("val/loss", 52000): 50.2476,
        ("val/loss", 54000): 51.38,
        ("val/ppl", 52000): 5.02476,
        ("val/ppl", 54000): 5.138,
    }


@_FAST
@given(
    sep=st.sampled_from([" : ", " | ", " - "]),
    start=st.integers(0, 10**6),
    interval=st.integers(1, 5000),
    costs=st.lists(st.integers(1, 10**5), min_size=2, max_size=6),
    step_word=st.sampled_from(["Up.", "Upd.", "It.", "step", "iteration"]),
    loss_word=st.sampled_from(["Cost", "cost", "loss", "Loss"]),
    seen=st.integers(1000, 10**8),
)
def test_segments_of_name_value_pairs_read_alike_whatever_the_cut(
    tmp_path_factory, sep, start, interval, costs, step_word, loss_word, seen
):
    """Property: `name value` segments cut by ` : `, ` | ` or ` - `, the step named by an abbreviation with a dot
    (`Up.`, `It.`) or a word, the loss `Cost` or `loss`, a count with thousands separators between them: the same
    steps and losses."""
    lines = [
        sep.join([f"{step_word} {start + i * interval}", f"Sen. {seen + i:,}", f"{loss_word} {c / 1e4}"]) + "\n"
        for i, c in enumerate(costs)
    ]
    steps, _, _ = _import(_write(tmp_path_factory.mktemp("seg"), "log.txt", "".join(lines)))
    assert _column(steps, "loss") == {start + i * interval: c / 1e4 for i, c in enumerate(costs)}


def test_a_cost_beside_a_loss_or_a_price_is_not_the_loss(tmp_path):
    """Near misses: `cost` beside a printed loss stays `cost` (the loss is the loss); a cost with a currency unit
    (`cost: 12.5USD`) is a price; a time of day cut by ` : ` is no pair; an evaluation tag without a step is at the
    record before's."""
    assert read_counted("step 5 : loss 0.30 : cost 0.41") == {"step": 5.0, "#step": 5.0, "loss": 0.3, "cost": 0.41}
    assert read_counted("step 5 : cost: 12.5USD")["cost_usd"] == 12.5
    assert "loss" not in (read_counted("step 5 : cost: 12.5USD") or {})
    assert read_counted("[valid] loss: 0.52") == {"valid_loss": 0.52}
