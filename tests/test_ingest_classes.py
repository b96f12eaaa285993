"""Classes of misreading removed from every importer (issue 35, items 4-8): a named total loss, vision scores and
their -1, per-iteration times, evaluations logged in epochs, and two writers of one log. Each on a small log shaped
like the trainer's own (detectron2's metrics.json, MMEngine's scalars.json) and, where the corpus holds one, on the
real file, its facts recomputed here with `json` / `csv` alone."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from yieldgate.analysis.goodput import goodput_of
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.names import metric_direction

REAL = Path(__file__).parent / "data" / "real"
DETECTRON2 = REAL / "detectron2-maskrcnn-balloon-metrics.json"


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _import(ledger, path: Path, run: str = "r", kind: str = "table"):
    (res,) = import_run(ledger, kind, [str(path)], ImportOptions(run=run))
    return res


def _column(ledger, run: str, key: str) -> dict[int, float]:
    steps = ledger.steps(run)
    if key in steps.columns:
        known = steps[["step", key]].dropna().rename(columns={key: "value"})
    else:
        known = ledger.extras(run, [key])
    return dict(zip(known["step"].astype(int).tolist(), known["value"].astype(float).tolist(), strict=True))


def _detectron2_rows(n: int = 6) -> list[dict]:
    """What detectron2's JSONWriter writes every 20 iterations: the total beside its terms, and `time` / `data_time`
    the seconds of one iteration (a window's median)."""
    rows = []
    for i in range(n):
        cls, box = 0.6 - 0.05 * i, 0.4 - 0.03 * i
        rows.append(
            {
                "data_time": 0.004 + 0.001 * (i % 2),
                "iteration": 19 + 20 * i,
                "loss_box_reg": box,
                "loss_cls": cls,
                "lr": 1e-4 * (i + 1),
                "time": 0.35 + 0.02 * (-1) ** i,
                "total_loss": cls + box + 0.1,
            }
        )
    return rows


# -- 4. a named total loss is the training loss ---------------------------------------------------------------


def test_a_named_total_loss_is_the_training_loss(ledger, tmp_path):
    rows = _detectron2_rows()
    res = _import(ledger, _jsonl(tmp_path / "metrics.jsonl", rows))
    assert res.mapping["total_loss"] == "loss"
    assert _column(ledger, "r", "loss") == {r["iteration"]: r["total_loss"] for r in rows}
    assert _column(ledger, "r", "imported/loss_cls") == {r["iteration"]: r["loss_cls"] for r in rows}
    assert not any("no total training loss" in w for w in res.warnings)


def test_the_real_detectron2_log_reads_its_total_and_its_iteration_times(ledger, tmp_path):
    raw = [json.loads(line) for line in DETECTRON2.read_text().splitlines()]
    last = {r["iteration"]: r for r in raw}  # iteration 19 is logged twice: the later row is kept
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(DETECTRON2.read_bytes())
    res = _import(ledger, path)
    assert _column(ledger, "r", "loss") == {s: r["total_loss"] for s, r in last.items()}
    assert _column(ledger, "r", "step_s") == {s: r["time"] for s, r in last.items()}
    assert _column(ledger, "r", "data_wait_s") == {s: r["data_time"] for s, r in last.items()}
    # The clock: each logged time stands for the iterations since the row before (19 for the first row).
    steps = sorted(last)
    gaps = np.diff([0, *steps]).astype(float)
    wall = np.cumsum(gaps * np.array([last[s]["time"] for s in steps]))
    assert np.allclose(list(_column(ledger, "r", "wall_s").values()), wall, rtol=1e-12)
    assert not any("went back" in w for w in res.warnings)
    assert res.steps == len(last) == 15


def test_terms_are_summed_only_where_no_total_is_logged(ledger):
    # Ultralytics YOLO logs only the terms: loss is their sum, as before
    with (REAL / "yolo11-seg-gallstone-results.csv").open(newline="") as fh:
        raw = [{k.strip(): v for k, v in row.items()} for row in csv.DictReader(fh)]
    res = _import(ledger, REAL / "yolo11-seg-gallstone-results.csv", run="yolo")
    terms = ("train/box_loss", "train/seg_loss", "train/cls_loss", "train/dfl_loss")
    want = {int(r["epoch"]): sum(float(r[t]) for t in terms) for r in raw}
    got = _column(ledger, "yolo", "loss")
    assert got.keys() == want.keys() and all(math.isclose(got[k], want[k], rel_tol=1e-12) for k in want)
    # its `time` is a clock (cumulative seconds): kept as wall_s
    assert _column(ledger, "yolo", "wall_s") == {int(r["epoch"]): float(r["time"]) for r in raw}
    assert any("no total training loss" in w for w in res.warnings)


# -- 5. vision metrics have directions; -1 is "not computed" ------------------------------------------------------

VISION = {
    "bbox/AP": ("bbox", "AP", True),
    "segm/AP50": ("segm", "AP50", True),
    "bbox/AP-balloon": ("bbox", "AP-balloon", True),
    "coco/bbox_mAP": ("coco", "bbox_mAP", True),
    "coco/bbox_mAP_s": ("coco", "bbox_mAP_s", True),
    "accuracy/top1": ("accuracy", "top1", True),
    "PCK": ("val", "PCK", True),
    "NME": ("val", "NME", False),
    "val/mAP50": ("val", "map50", True),
    "val/NME": ("val", "nme", False),
}


@pytest.mark.parametrize(
    "name", ["AP", "AP50", "APs", "mAP", "bbox_mAP", "bbox_mAP_50", "PCK", "AUC", "top1", "top-5", "accuracy_top-1"]
)
def test_vision_scores_rise(name):
    assert metric_direction(name) is True


@pytest.mark.parametrize("name", ["NME", "EPE", "MPJPE"])
def test_vision_errors_fall(name):
    assert metric_direction(name) is False


def _vision_log() -> list[dict]:
    rows: list[dict] = []
    for epoch in (1, 2):
        rows += [{"step": 100 * epoch - 50 + i, "loss": 2.0 / epoch - 0.01 * i} for i in (0, 50)]
        rows.append({"step": 100 * epoch, **{name: 0.3 * epoch for name in VISION}, "coco/bbox_mAP_s": -1.0})
    return rows


def _evals(ledger, run: str) -> dict[tuple[str, str], dict[int, tuple[float, bool]]]:
    out: dict[tuple[str, str], dict[int, tuple[float, bool]]] = {}
    for row in ledger.evals(run).itertuples():
        out.setdefault((row.task, row.metric), {})[int(row.step)] = (float(row.value), bool(row.higher_is_better))
    return out


def test_vision_scores_are_evaluations_with_their_direction_and_a_minus_one_is_missing(ledger, tmp_path):
    res = _import(ledger, _jsonl(tmp_path / "scalars.jsonl", _vision_log()))
    evals = _evals(ledger, "r")
    for name, (task, metric, higher) in VISION.items():
        if name == "coco/bbox_mAP_s":
            assert (task, metric) not in evals  # -1 at every evaluation: never computed
            continue
        assert evals[(task, metric)] == {100: (0.3, higher), 200: (0.6, higher)}, name
    assert any("coco/bbox_mAP_s is -1 on 2 row(s)" in w for w in res.warnings)


def test_vision_scores_read_the_same_from_tensorboard(ledger, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "tb"))
    for row in _vision_log():
        values = [Summary.Value(tag=k, simple_value=v) for k, v in row.items() if k != "step"]
        writer.add_event(Event(wall_time=1.7e9 + row["step"], step=row["step"], summary=Summary(value=values)))
    writer.close()
    _import(ledger, tmp_path / "tb", kind="tensorboard")
    evals = _evals(ledger, "r")
    assert evals[("bbox", "AP")] == {100: (pytest.approx(0.3), True), 200: (pytest.approx(0.6), True)}
    assert evals[("val", "NME")][200] == (pytest.approx(0.6), False)
    assert ("coco", "bbox_mAP_s") not in evals


def test_vision_scores_read_the_same_from_a_text_log(ledger, tmp_path):
    path = tmp_path / "train.log"
    lines = []
    for row in _vision_log():
        pairs = [f"{k}: {row[k]}" for k in ("loss", "bbox/AP", "NME", "coco/bbox_mAP_s") if k in row]
        lines.append(f"step: {row['step']} " + " ".join(pairs))
    path.write_text("\n".join(lines) + "\n")
    res = _import(ledger, path, kind="textlog")
    evals = _evals(ledger, "r")  # the kv reader lower-cases names
    assert evals[("bbox", "ap")] == {100: (0.3, True), 200: (0.6, True)}
    assert evals[("val", "nme")] == {100: (0.3, False), 200: (0.6, False)}
    assert ("coco", "bbox_map_s") not in evals
    assert any("-1 on 2 row(s)" in w for w in res.warnings)


# -- 6. per-iteration times are not a clock ----------------------------------------------------------------------


def _mmengine_train(epochs: int = 8, per_epoch: int = 10, wait_from: int | None = None) -> list[dict]:
    """MMEngine's LoggerHook training rows (scalars.json): `step` the iteration, `time` / `data_time` the seconds of
    one iteration; from epoch `wait_from` on, the loader makes each iteration wait."""
    rows, jitter = [], np.random.default_rng(0)
    for e in range(1, epochs + 1):
        for i in range(1, per_epoch + 1):
            it = (e - 1) * per_epoch + i
            wait = 0.35 if wait_from is not None and e >= wait_from else 0.01
            rows.append(
                {
                    "lr": 0.01,
                    "data_time": wait,
                    "loss": 3.0 / (1 + 0.05 * it),
                    "loss_cls": 1.0 / (1 + 0.05 * it),
                    "time": round(0.3 + wait + float(jitter.uniform(0.0, 0.02)), 4),
                    "epoch": e,
                    "iter": i,
                    "memory": 3000,
                    "step": it,
                }
            )
    return rows


def test_iteration_times_are_step_times_and_the_clock_is_their_sum(ledger, tmp_path):
    rows = _mmengine_train(epochs=2)
    res = _import(ledger, _jsonl(tmp_path / "scalars.jsonl", rows))
    assert res.mapping["time"] == "step_s" and res.mapping["data_time"] == "data_wait_s"
    assert _column(ledger, "r", "step_s") == {r["step"]: r["time"] for r in rows}
    assert _column(ledger, "r", "data_wait_s") == {r["step"]: r["data_time"] for r in rows}
    wall = np.cumsum([r["time"] for r in rows])
    assert np.allclose(list(_column(ledger, "r", "wall_s").values()), wall, rtol=1e-12)
    assert not any("went back" in w for w in res.warnings)


def test_the_data_wait_share_feeds_the_stall_detector(ledger, tmp_path):
    from yieldgate.analysis.detectors import RunSignals, stall

    _import(ledger, _jsonl(tmp_path / "scalars.jsonl", _mmengine_train(epochs=5, wait_from=3)))
    stalls = [f for f in stall(RunSignals(steps=ledger.steps("r"))) if f.detector == "stall_data_wait"]
    assert len(stalls) == 1 and stalls[0].start_step == 21


def test_a_clock_that_runs_backwards_is_a_warning(ledger, tmp_path):
    rows = [{"step": s, "loss": 1.0, "wall_s": w} for s, w in ((1, 10.0), (2, 20.0), (3, 30.0), (4, 2.0), (5, 12.0))]
    res = _import(ledger, _jsonl(tmp_path / "t.jsonl", rows))
    assert any("wall_s went back from 30 to 2" in w for w in res.warnings)
    assert _column(ledger, "r", "wall_s") == {1: 10.0, 2: 20.0, 3: 30.0, 4: 30.0, 5: 40.0}


# -- 7. evaluations logged in epochs land at the iteration that ended the epoch -----------------------------------


def test_evaluations_logged_in_epochs_land_at_the_iteration_ending_their_epoch(ledger, tmp_path):
    rows: list[dict] = []
    train = _mmengine_train(epochs=3)
    for e in (1, 2, 3):
        rows += [r for r in train if r["epoch"] == e]
        # MMEngine's after_val_epoch: step=runner.epoch (older versions kept the loop's time and data_time)
        rows.append({"coco/bbox_mAP": 0.1 * e, "coco/bbox_mAP_50": 0.2 * e, "data_time": 0.02, "time": 0.05, "step": e})
    res = _import(ledger, _jsonl(tmp_path / "scalars.jsonl", rows))
    evals = _evals(ledger, "r")
    assert evals[("coco", "bbox_mAP")] == {10: (0.1, True), 20: (0.2, True), 30: (pytest.approx(0.3), True)}
    assert sorted(ledger.steps("r")["step"]) == list(range(1, 31))  # no phantom steps 1, 2, 3 from the val rows
    assert _column(ledger, "r", "step_s") == {r["step"]: r["time"] for r in train}
    assert not ledger.events("r", kind="resume").shape[0]
    assert any("3 evaluation row(s) give their step in epochs" in w for w in res.warnings)


def test_evaluations_at_their_own_iteration_stay_there(ledger, tmp_path):
    rows = [r for r in _mmengine_train(epochs=2) if r["epoch"] == 1]
    rows.append({"coco/bbox_mAP": 0.1, "step": 10})  # log_metric_by_epoch=False: the iteration itself
    _import(ledger, _jsonl(tmp_path / "scalars.jsonl", rows))
    assert _evals(ledger, "r")[("coco", "bbox_mAP")] == {10: (0.1, True)}


# -- 8. two writers of one log are not restarts ------------------------------------------------------------------


def _two_writers(n: int = 200) -> list[dict]:
    """Two ranks appending one log: each logs every 10 steps with the same values and its own clock and step time;
    at every 7th step the second's line lands after the first's line of the next step (a back-step of one
    interval)."""
    lines = []
    for k in range(1, n + 1):
        first = {"step": 10 * k, "loss": 5.0 / k, "lr": 1e-3, "wall_s": 20.0 * k, "step_s": 2.0}
        lines += [first, {**first, "wall_s": 20.0 * k + 0.3, "step_s": 2.03}]
    for k in range(7, n, 7):  # lines 2k-1 and 2k (0-based): the second writer's step k, the first's step k+1
        lines[2 * k - 1], lines[2 * k] = lines[2 * k], lines[2 * k - 1]
    return lines


def test_a_second_writer_is_kept_once_and_is_not_a_restart(ledger, tmp_path):
    res = _import(ledger, _jsonl(tmp_path / "log.jsonl", _two_writers()))
    assert res.steps == 200
    assert _column(ledger, "r", "loss") == {10 * k: 5.0 / k for k in range(1, 201)}
    assert _column(ledger, "r", "wall_s") == {10 * k: 20.0 * k for k in range(1, 201)}  # the first writer's
    assert ledger.events("r", kind="resume").empty
    assert sum("second writer" in w for w in res.warnings) == 1
    assert not any("restart" in w or "logged again" in w for w in res.warnings if "second writer" not in w)
    gp = goodput_of(ledger, "r")
    assert gp is not None and gp.restarts == 0 and gp.steps_lost == 0


def test_a_restart_shows_its_clock_restarting_and_is_counted(ledger, tmp_path):
    # the same values again (a deterministic resume from step 50), but the job's clock starts over
    first = [{"step": s, "loss": 5.0 - 0.01 * s, "lr": 1e-3, "wall_s": 2.0 * s} for s in range(10, 110, 10)]
    again = [{"step": s, "loss": 5.0 - 0.01 * s, "lr": 1e-3, "wall_s": 2.0 * (s - 50)} for s in range(60, 160, 10)]
    _import(ledger, _jsonl(tmp_path / "log.jsonl", first + again))
    gp = goodput_of(ledger, "r")
    assert len(ledger.events("r", kind="resume")) == 1
    assert gp is not None and gp.restarts == 1 and gp.steps_lost == 100 - 59  # the last step before, the checkpoint's
