"""Logs read by their structure (issue 45), the sixth set of classes: those behind the second unseen set's misreadings
and refusals (tests/data/real/SOURCES.md, "Second unseen set"). Each on a small file written here (no real log), each
rule on generated cases (hypothesis), and beside each a file that is not the class and is not read as it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.ingested import FAST as _FAST
from tests.support.ingested import column, evals_at, imported, write
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.textlog.kv import read_counted
from yieldgate.ledger import Ledger
from yieldgate.names import metric_direction

# -- 1. a date split by `/` is a date: PaddlePaddle's logger `[2022/12/09 15:54:51] root INFO: ...` ------------------


def _stamped(gaps: list[int], sep: str) -> str:
    """A log of one training line per gap, each stamped `gaps` seconds after the one before (from 10:00:00)."""
    lines, t = [], 0
    for i, gap in enumerate(gaps):
        t += gap
        h, m, s = 10 + t // 3600, t % 3600 // 60, t % 60
        lines.append(
            f"[2022{sep}12{sep}09 {h:02d}:{m:02d}:{s:02d}] root INFO: epoch: [1/5], iter: {10 * (i + 1)}, "
            f"lr: 0.001000, loss: {1.0 / (i + 1):.6f}, batch_cost: 0.5 s"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@_FAST
@given(st.lists(st.integers(1, 900), min_size=3, max_size=12))
def test_a_date_split_by_slashes_is_the_same_clock_as_one_split_by_dashes(tmp_path, gaps):
    dashed, _, _ = imported(write(tmp_path, "dashed.log", _stamped(gaps, "-")))
    slashed, _, _ = imported(write(tmp_path, "slashed.log", _stamped(gaps, "/")))
    expected = {10 * (i + 1): float(sum(gaps[1 : i + 1])) for i in range(len(gaps))}  # seconds since the first line
    assert column(slashed, "wall_s") == pytest.approx(expected)
    assert column(slashed, "wall_s") == column(dashed, "wall_s")


def test_paddle_s_slashed_stamps_are_the_clock(tmp_path):
    steps, _, _ = imported(write(tmp_path, "train.log", _stamped([5, 60, 3600], "/")))
    assert column(steps, "wall_s") == pytest.approx({10: 0.0, 20: 60.0, 30: 3660.0})


def test_a_slashed_date_that_is_no_date_is_no_clock(tmp_path):
    text = "".join(f"[2022/12 10:00:0{i}] step: {i + 1}, loss: {2.0 - 0.1 * i}\n" for i in range(5))  # no day
    steps, _, _ = imported(write(tmp_path, "train.log", text))
    assert "wall_s" not in steps or steps["wall_s"].isna().all()


# -- 2. a reinforcement-learning agent's reward rises (Stable-Baselines3's progress.csv) -------------------------------


@pytest.mark.parametrize(
    ("name", "rises"),
    [
        ("mean_reward", True),
        ("eval/mean_reward", True),
        ("ep_rew_mean", True),
        ("episode_return", True),
        ("std_reward", None),  # a spread says nothing of which way is better
        ("reward_loss", False),  # a loss falls, whatever it models
        ("ep_len_mean", None),
    ],
)
def test_rewards_and_returns_rise_their_spread_does_not_say(name, rises):
    assert metric_direction(name) is rises


def _sb3(rows: int, every: int) -> tuple[str, dict[int, float], dict[int, float]]:
    """Stable-Baselines3's CSV logger: a rollout row per 2,048 timesteps and, every `every` rollouts, the
    EvalCallback's row (its own timesteps, no clock or iteration); {timesteps: elapsed s}, {timesteps: mean reward}."""
    head = "time/time_elapsed,time/iterations,rollout/ep_rew_mean,time/total_timesteps,train/loss,eval/mean_reward"
    lines, clock, rewards = [head], {}, {}
    for i in range(1, rows + 1):
        steps = 2048 * i
        lines.append(f"{3 * i},{i},{0.1 * i:.3f},{steps},{1.0 / i:.5f},")
        clock[steps] = float(3 * i)
        if i % every == 0:
            at = steps + 1000
            rewards[at] = round(5.0 + i, 3)
            lines.append(f",,,{at},{0.9 / i:.5f},{rewards[at]}")
    return "\n".join(lines) + "\n", clock, rewards


def test_an_rl_progress_table_reads_its_evaluations_rewards_and_its_clock(tmp_path):
    text, clock, rewards = _sb3(rows=12, every=4)
    steps, got, _ = imported(write(tmp_path, "progress.csv", text))
    # the eval rows' rewards and nothing else: the rollout's reward is training's, no evaluation
    assert evals_at(got) == pytest.approx({("val/mean_reward", s): v for s, v in rewards.items()})
    assert got["higher_is_better"].all()
    assert column(steps, "wall_s") == pytest.approx(clock)  # the rollout rows' elapsed seconds; eval rows have none


# -- 3. a JSON list of step records is the table JSON lines of them would be (Chainer's LogReport `result/log`) --------

_RECORD = st.fixed_dictionaries(
    {
        "main/loss": st.floats(0.01, 5.0),
        "validation/main/loss": st.floats(0.01, 5.0),
        "validation/main/accuracy": st.floats(0.0, 1.0),
        "elapsed_time": st.floats(0.5, 100.0),
    }
)


@_FAST
@given(st.lists(_RECORD, min_size=2, max_size=8), st.booleans())
def test_a_json_list_of_step_records_reads_as_json_lines_of_them(tmp_path, records, pretty):
    clock = 0.0
    for i, rec in enumerate(records, start=1):
        clock += rec["elapsed_time"]
        rec.update(epoch=i, iteration=600 * i, elapsed_time=round(clock, 3))
    listed = json.dumps(records, indent=4 if pretty else None)
    lined = "\n".join(json.dumps(r) for r in records) + "\n"
    a_steps, a_evals, _ = imported(write(tmp_path, "log", listed))
    b_steps, b_evals, _ = imported(write(tmp_path, "log.jsonl", lined))
    pd.testing.assert_frame_equal(a_steps, b_steps)
    assert evals_at(a_evals) == evals_at(b_evals)
    # `main/loss` beside `validation/main/loss` is the training side of that metric: the loss, not a task `main`
    assert column(a_steps, "loss") == pytest.approx({600 * i: r["main/loss"] for i, r in enumerate(records, 1)})
    assert set(a_evals["metric"]) == {"loss", "acc"}
    assert list(a_evals["step"].unique()) == [600 * i for i in range(1, len(records) + 1)]


def test_a_namespaced_metric_with_no_held_out_twin_stays_an_evaluation_of_its_task(tmp_path):
    text = "\n".join(json.dumps({"step": s, "loss": 1.0 / s, "hellaswag/acc": 0.25 + s / 100}) for s in (1, 2, 3))
    steps, got, _ = imported(write(tmp_path, "m.jsonl", text + "\n"))
    assert evals_at(got) == pytest.approx({("hellaswag/acc", s): 0.25 + s / 100 for s in (1, 2, 3)})


def test_a_json_list_whose_objects_name_no_step_is_refused_saying_what_it_holds(tmp_path):
    from yieldgate.errors import InputError

    path = write(tmp_path, "log.json", json.dumps([{"loss": 1.0, "acc": 0.5}, {"loss": 0.5, "acc": 0.7}]))
    with pytest.raises(InputError, match="a JSON list"):
        imported(path)


# -- 4. a line of scores printed alone is the evaluation of the step before it -----------------------------------------


def _scored(epochs: int, best: bool) -> tuple[str, dict[int, float], dict[tuple[str, int], float]]:
    """CSRA's layout: training lines `Epoch E[S/5011]: loss:x`, then `Test on Epoch E`, a bar, and `mAP: v` alone,
    and (PaddleOCR's) a best-so-far line repeating a score, which is no evaluation of its own."""
    lines, losses, evals = [], {}, {}
    for e in range(1, epochs + 1):
        for s in (16, 1616, 3216):
            losses[e] = round(0.7 / e + s / 1e6, 6)
            lines.append(f"Epoch {e}[{s}/5011]: loss:{losses[e]:.6f}, lr:0.01000, batch time:0.3142")
        evals[("val/map", e)] = round(0.86 + e / 100, 6)
        lines += [f"Test on Epoch {e}", "100%|██████████| 310/310 [00:32<00:00,  9.67it/s]", "Evaluation"]
        lines.append(f"mAP: {evals[('val/map', e)]:.6f}")
        lines.append("CP: 0.921965, CR: 0.835129, CF1 :0.876401")  # names of no known direction: not read
        if best:
            lines.append(f"best metric, mAP: {0.99:.6f}, best_epoch: 1")
    return "\n".join(lines) + "\n", losses, evals


@pytest.mark.parametrize("best", [False, True])
def test_scores_printed_alone_are_the_evaluation_of_the_record_before(tmp_path, best):
    text, losses, evals = _scored(epochs=4, best=best)
    steps, got, _ = imported(write(tmp_path, "train.log", text))
    assert column(steps, "loss") == pytest.approx(losses)
    assert evals_at(got) == pytest.approx(evals)  # the best-so-far line adds none


@pytest.mark.parametrize("alone", ["loss: {v:.4f}", "average reward score: {v:.4f}"])
def test_a_loss_or_a_reward_printed_alone_is_no_evaluation(tmp_path, alone):
    """A training value printed apart (a loss; a rollout's reward, which DeepSpeed-Chat prints after every step)."""
    text = "".join(f"step: {s}, loss: {1.0 / s:.4f}\n" + alone.format(v=0.5 / s) + "\n" for s in (1, 2, 3, 4))
    steps, got, _ = imported(write(tmp_path, "train.log", text))
    assert got.empty
    assert column(steps, "loss") == pytest.approx({s: round(1.0 / s, 4) for s in (1, 2, 3, 4)})


# -- 5. where a message was logged from is no value: logging's `%(filename)s[line:%(lineno)d]` -------------------------


@pytest.mark.parametrize("where", ["train_net.py[line:177]", "train.py[lineno: 42]", "[line=9]"])
def test_the_line_a_message_was_logged_from_is_no_metric(where):
    line = f"2020-09-02 13:28:04,330 - {where} - INFO: step: 3, loss=0.125"
    assert read_counted(line) == {"step": 3.0, "loss": 0.125, "#step": 3.0}


# -- 6. a loss printed only as its terms is said, and the advice given works -------------------------------------------


def _terms() -> str:
    return "".join(
        f"2020-09-02 13:28:{10 + e:02d},330 - INFO: [Epoch {e}], Speed: 6.9 samples/sec, "
        f"CrossEntropy={1.0 / (e + 1):.3e}, SmoothL1={0.01 / (e + 1):.3e}, val_AP={0.1 + e / 20:.3f}\n"
        for e in range(5)
    )


def test_a_loss_logged_only_as_its_terms_is_said_and_the_advised_mapping_reads_it(tmp_path):
    path = write(tmp_path, "train.log", _terms())
    steps, _, warnings = imported(path)
    said = [w for w in warnings if "no training loss" in w]
    assert len(said) == 1 and "crossentropy, smoothl1" in said[0] and "map loss=crossentropy" in said[0]
    assert "loss" not in steps.columns or steps["loss"].isna().all()
    steps, _, _ = imported(path, map=["loss=crossentropy"])
    assert column(steps, "loss") == pytest.approx({e: float(f"{1.0 / (e + 1):.3e}") for e in range(5)})


# -- 7. an evaluation loop's batches after its split's tag are no steps; its `[Avg]` line is the evaluation -------


def _ppcls(epochs: int, iters: int, evals: int, every: int = 10) -> tuple[str, dict[int, float], dict]:
    """PaddleClas' engine: `[Train][Epoch E/T][Iter: I/N]` lines, the epoch's `[Train][Epoch E/T][Avg]`, then the
    evaluation loop's `[Eval][Epoch E][Iter: I/M]` batches, its `[Eval][Epoch E][Avg]` and the best so far."""
    lines, losses, got = [], {}, {}
    stamp = "[2022/10/07 21:46:40] ppcls INFO: "
    for e in range(1, epochs + 1):
        for i in range(0, iters, every):
            step = (e - 1) * iters + i
            losses[step] = round(7.0 - step / 1000, 5)
            lines.append(
                f"{stamp}[Train][Epoch {e}/{epochs}][Iter: {i}/{iters}]lr(LinearWarmup): 0.00000204, "
                f"CELoss: {losses[step]:.5f}, loss: {losses[step]:.5f}, batch_cost: 0.49s, ips: 260.2 samples/s"
            )
        lines.append(f"{stamp}[Train][Epoch {e}/{epochs}][Avg]CELoss: 6.92425, loss: 6.92425")
        for i in range(0, evals, every):
            lines.append(
                f"{stamp}[Eval][Epoch {e}][Iter: {i}/{evals}]CELoss: 6.9, loss: 6.9, top1: 0.5, top5: 0.9, "
                "batch_cost: 0.7s, ips: 357.3 images/sec"
            )
        top1 = round(0.1 * e, 5)
        lines.append(
            f"{stamp}[Eval][Epoch {e}][Avg]CELoss: 6.90268, loss: {6.9 - e / 10:.5f}, top1: {top1:.5f}, top5: 0.60600"
        )
        lines.append(f"{stamp}[Eval][Epoch {e}][best metric: {top1}]")
        last = e * iters - 1  # an epoch's evaluation is at its last step, the printed count's total less one
        got[("val/top1", last)] = top1
        got[("val/loss", last)] = round(6.9 - e / 10, 5)
    return "\n".join(lines) + "\n", losses, got


def test_an_evaluation_loop_tagged_by_its_split_is_no_training_and_its_average_is_the_evaluation(tmp_path):
    text, losses, evals = _ppcls(epochs=4, iters=98, evals=25)
    steps, got, warnings = imported(write(tmp_path, "train.log", text))
    assert not [w for w in warnings if "restart" in w or "go back" in w]  # the eval loop's Iter is no restart
    assert column(steps, "loss") == pytest.approx(losses)
    assert {k: v for k, v in evals_at(got).items() if k[0] in ("val/top1", "val/loss")} == pytest.approx(evals)
    assert not any("best" in m for m in got["metric"])  # the best so far is an earlier evaluation again


# -- 8. a table of splits after the line that began its epoch (AllenNLP's trainer) ------------------------------


def _allennlp(epochs: int, pad: int) -> tuple[str, dict[int, float], dict]:
    """AllenNLP's console: `Epoch E/T` as a logger's message, then a `Training | Validation` table per epoch, its
    head's prefix padded with `pad` spaces, `N/A` where validation has no value."""
    pre = "2022-09-19 20:36:19,622 - INFO - allennlp.training.tensorboard_writer - "
    lines, losses, evals = [], {}, {}
    for e in range(epochs):
        lines.append(f"2022-09-19 20:28:43,879 - INFO - allennlp.training.trainer - Epoch {e}/{epochs - 1}")
        lines.append("2022-09-19 20:28:43,880 - INFO - allennlp.training.trainer - Training")
        losses[e] = round(0.5 - e / 100, 3)
        evals[("val/loss", e)] = round(0.6 + e / 100, 3)
        evals[("val/acc", e)] = round(0.7 + e / 100, 3)
        lines.append(pre + " " * pad + "Training |  Validation")
        lines.append(pre + f"loss          |     {losses[e]:.3f}  |     {evals[('val/loss', e)]:.3f}")
        lines.append(pre + f"accuracy      |     0.721  |     {evals[('val/acc', e)]:.3f}")
        lines.append(pre + "cpu_memory_MB |  1580.612  |       N/A")
        lines.append("2022-09-19 20:36:19,666 - INFO - allennlp.training.trainer - Epoch duration: 0:07:35.787716")
    return "\n".join(lines) + "\n", losses, evals


@pytest.mark.parametrize("pad", [0, 18])
def test_a_table_of_splits_is_one_epoch_s_training_values_and_evaluations(tmp_path, pad):
    text, losses, evals = _allennlp(epochs=5, pad=pad)
    steps, got, _ = imported(write(tmp_path, "stdout.log", text))
    assert column(steps, "loss") == pytest.approx(losses)
    assert evals_at(got) == pytest.approx(evals)


def test_a_bar_between_words_that_name_no_splits_heads_no_table(tmp_path):
    text = "step: 1, loss: 2.0\nmodel | params\nlayers | 12\nstep: 2, loss: 1.5\n"
    steps, got, _ = imported(write(tmp_path, "train.log", text))
    assert got.empty and column(steps, "loss") == {1: 2.0, 2: 1.5}


# -- 9. the line that began an epoch behind a bracketed timestamp (`[2022-06-26 21:43:24,027]Epoch: 0001`) -----------


@_FAST
@given(st.integers(2, 5), st.integers(3, 9), st.sampled_from(["[{t}]", "[{t}] ", "{t} - INFO - train - "]))
def test_an_epoch_begun_behind_a_logger_s_prefix_places_the_counts_within_it(tmp_path, epochs, size, prefix):
    lines, losses = [], {}
    for e in range(1, epochs + 1):
        lines.append(prefix.format(t="2022-06-26 21:43:24,027") + f"Epoch: {e:04d}")
        for i in range(1, size + 1):
            step = (e - 1) * size + i
            losses[step] = round(3.0 / step, 3) + 0.0007  # no trailing zero: a value printed short may pass for a copy
            stamp = f"2022-06-26 21:{10 + step // 60:02d}:{step % 60:02d},483"
            lines.append(f"[{stamp}]iter:{i:04d} loss_train: {losses[step]:.4f} acc_train: {0.5003 + step / 100:.4f}")
    steps, _, _ = imported(write(tmp_path, "train.log", "\n".join(lines) + "\n"))
    assert column(steps, "loss") == pytest.approx(losses)  # `loss_train`: the split after the name


# -- 10. a value named as an evaluation's printed alone; a cross-entropy named `xent` ---------------------------------


def test_a_line_of_values_named_as_evaluations_is_the_evaluation_of_the_step_before(tmp_path):
    """OpenNMT-py's layout: `Step N/T; acc: ..; ppl: ..; xent: ..` lines, then `Validation perplexity: p` and
    `Validation accuracy: a` each alone: evaluations at the step before, whichever way each goes."""
    lines, losses, evals = [], {}, {}
    for step in range(50, 501, 50):
        losses[step] = round(9.0 / (step / 50), 4)
        lines.append(
            f"[2020-05-01 10:00:{step // 50:02d},000 INFO] Step {step}/20000; acc:  10.12; ppl: 11400.1; "
            f"xent: {losses[step]:.4f}; lr: 1.00000; 5043/ 4977 tok/s;      9 sec"
        )
        if step % 250 == 0:
            evals[("val/ppl", step)] = round(1.0 + 100 / step, 4)
            evals[("val/acc", step)] = round(50 + step / 100, 4)
            lines.append(
                f"[2020-05-01 10:00:{step // 50:02d},500 INFO] Validation perplexity: {evals[('val/ppl', step)]}"
            )
            lines.append(
                f"[2020-05-01 10:00:{step // 50:02d},600 INFO] Validation accuracy: {evals[('val/acc', step)]}"
            )
    steps, got, _ = imported(write(tmp_path, "train.log", "\n".join(lines) + "\n"))
    assert column(steps, "loss") == pytest.approx(losses)  # `xent`: the cross-entropy the loop minimises
    assert evals_at(got) == pytest.approx(evals)
    assert dict(zip(got["metric"], got["higher_is_better"], strict=False)) == {"ppl": False, "acc": True}


# -- 11. a record or two among hundreds of other lines is no training log ----------------------------------------------


def test_a_record_or_two_in_a_long_file_is_refused_not_imported(tmp_path):
    from yieldgate.errors import InputError

    prose = [f"This paragraph {i} explains the layers of the network and how to build it." for i in range(300)]
    text = "\n".join([*prose[:150], "batch=32 subdivisions=8 train = 1", *prose[150:]]) + "\n"
    with pytest.raises(InputError, match=r"only 1 record\(s\) read among 301 lines, measuring nothing"):
        imported(write(tmp_path, "README.md", text))
    short = "\n".join(["batch=32 subdivisions=8 train = 1", "step: 1, loss: 2.0"]) + "\n"  # a short file: read
    steps, _, _ = imported(write(tmp_path, "short.log", short))
    assert len(steps) >= 1


# -- 12. a score no split names, beside a training loss named by its split: the validation's (fastai's Recorder) -------


@pytest.mark.parametrize(("metric", "rises"), [("accuracy", True), ("error_rate", False), ("f1_score", True)])
def test_a_score_beside_split_named_losses_is_the_validation_s_and_beside_bare_ones_the_training_s(
    tmp_path, metric, rises
):
    rows = [(e, 0.8 / (e + 1), 0.5 + e / 100, 0.85 + e / 100) for e in range(5)]
    fastai = f"epoch,train_loss,valid_loss,{metric},time\n" + "".join(
        f"{e},{t:.4f},{v:.4f},{a:.4f},04:39\n" for e, t, v, a in rows
    )
    _, got, _ = imported(write(tmp_path, "history.csv", fastai))
    assert set(got["metric"]) == {"loss", {"accuracy": "acc"}.get(metric, metric)}
    assert set(zip(got["metric"], got["higher_is_better"], strict=True)) >= {("loss", False)}
    assert got.loc[got["metric"] != "loss", "higher_is_better"].tolist() == [rises] * 5
    keras = f"epoch,loss,{metric},val_loss,val_{metric}\n" + "".join(
        f"{e},{t:.4f},{a:.4f},{v:.4f},{a - 0.01:.4f}\n" for e, t, v, a in rows
    )
    steps, got, _ = imported(write(tmp_path, "training_log.csv", keras))
    assert len(got) == 10  # val_loss and val_<metric>: the bare metric is the training's
    assert column(steps, "loss") == pytest.approx({e: round(t, 4) for e, t, _, _ in rows})


def test_ray_tune_s_training_iteration_is_a_step_column(tmp_path):
    text = "episode_reward_mean,training_iteration,info/learner/default_policy/vf_loss\n" + "".join(
        f"{10 + i},{91 + i},{1.0 / (i + 1):.4f}\n" for i in range(5)
    )
    with Ledger(":memory:") as led:  # refused before: no step column
        import_run(led, "auto", [str(write(tmp_path, "progress.csv", text))], ImportOptions(run="r"))
        extras = led.extras("r", ["imported/episode_reward_mean"])
    assert extras["step"].tolist() == [91, 92, 93, 94, 95]


def test_mxnet_s_speedometer_prints_the_epoch_and_the_batches_done_in_it():
    line = "2018-10-11 09:16:49,200 INFO - Epoch[5] Batch [0-20]\tSpeed: 25.77 samples/sec\tM0_RPNAcc=0.996745"
    assert read_counted(line) == {
        "speed": 25.77,
        "m0_rpnacc": 0.996745,
        "step": 5.0,
        "#epoch": 5.0,
        "#batch": 20.0,
    }


# -- advice that works: the refusal of an epoch's unknown size, run on the command line as it is printed ------------


def test_the_advice_for_an_epoch_s_unknown_size_runs_on_the_command_line_as_printed(tmp_path, cli):
    """Every epoch's last logged count on the logging grid (every 20, 140 per epoch): its size cannot be told. The
    refusal's advice, with N given, is run as printed (`--map` before each value: one `--map a=b c=d` took `c=d` for a
    file), and reads the run."""
    import shlex

    lines, losses = [], {}
    for e in range(1, 4):
        lines.append(f"[2022-06-26 21:43:24,027]Epoch: {e:04d}")
        for i in range(20, 141, 20):
            step = (e - 1) * 140 + i
            losses[step] = round(3.0 / step, 5) + 0.00001
            lines.append(
                f"[2022-06-26 21:{10 + step // 60 % 50:02d}:{step % 60:02d},483]iter:{i:04d} "
                f"loss_train: {losses[step]:.5f}"
            )
    log = write(tmp_path, "train.log", "\n".join(lines) + "\n")
    refused = cli("import", "auto", str(log), "--run", "r", code=2)
    advice = refused.stderr.rsplit("give it: ", 1)[1].strip()
    assert advice == "--map epoch=epoch --map iter=iter --map iters_per_epoch=N"
    cli("import", "auto", str(log), "--run", "r", *shlex.split(advice.replace("=N", "=140")))
    with Ledger(cli.ledger_path) as led:
        assert column(led.steps("r"), "loss") == pytest.approx(losses)
