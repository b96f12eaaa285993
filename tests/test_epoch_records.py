"""Issue 45, item 8: a folder of per-epoch JSON objects (one pretty-printed object per file, numbered by epoch) is one
run's table, its cumulative duration the clock; and the advice a refusal of one JSON object gives works when run.
Checked on a real AllenNLP serialization folder (facts recomputed from its files in tests/support/real_wave4.py) and
on generated folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.real_wave4 import WAVE4_LOGS, WAVE4_PARSERS
from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger

REAL = Path(__file__).parent / "data" / "real"
ALLEN = REAL / "allennlp-scibert-coherence-output"


def _facts() -> dict:
    entry = next(e for e in WAVE4_LOGS if e["path"] == ALLEN.name)
    facts = WAVE4_PARSERS[entry["parser"]](ALLEN, entry["params"])
    assert facts == entry["facts"]
    return facts


def _read(led: Ledger, sources: list[Path], run: str = "r", **options):
    (res,) = import_run(led, options.pop("kind", "auto"), [str(s) for s in sources], ImportOptions(run=run, **options))
    return res, led.steps(run, nullable=True), led.evals(run)


@pytest.mark.slow  # 14 files, the whole import
def test_the_real_allennlp_folder_is_one_runs_table(ledger):
    facts = _facts()
    res, steps, evals = _read(ledger, [ALLEN])
    assert steps["step"].tolist() == facts["epochs"]  # one row per record, stepped by its epoch
    assert ledger.meta("r")["step_unit"] == "epoch"
    loss = facts["series"]["training_loss"]
    assert steps["loss"].iloc[0] == loss["first"][1] and steps["loss"].iloc[-1] == loss["last"][1]
    duration = facts["duration_s"]  # the cumulative `training_duration`, `0:10:48.458976`, is the clock
    assert steps["wall_s"].iloc[0] == pytest.approx(duration["first"][1], abs=1e-6)
    assert steps["wall_s"].iloc[-1] == pytest.approx(duration["last"][1], abs=1e-6)
    val = evals[(evals["task"] == "val") & (evals["metric"] == "loss")].sort_values("step")
    best = facts["series"]["validation_loss"]["min"]
    assert len(val) == facts["records"] and val.loc[val["value"].idxmin(), "step"] == best[0]
    assert any("metrics.json" in w and "left out" in w for w in res.warnings)  # the final record again: said
    assert facts["other_json"] == ["metrics.json"]


@pytest.mark.slow  # two imports of the folder
def test_the_records_named_one_by_one_read_as_the_folder_whatever_their_order(ledger, tmp_path):
    """The shell sorts metrics_epoch_10.json before metrics_epoch_2.json: the number in the name orders the rows."""
    files = sorted(ALLEN.glob("metrics_epoch_*.json"))  # lexicographic, as a shell glob
    assert files[2].name == "metrics_epoch_10.json"
    _, folder, _ = _read(ledger, [ALLEN], run="folder")
    res, named, _ = _read(ledger, files, run="named", kind="table")
    assert named["step"].tolist() == folder["step"].tolist() == sorted(folder["step"].tolist())
    assert named["loss"].tolist() == folder["loss"].tolist()
    assert not any("restart" in w or "go back" in w for w in res.warnings)


@pytest.mark.slow  # every detector
def test_the_diagnosis_of_the_real_folder_finds_its_overfitting(ledger):
    from yieldgate.analysis.diagnose import diagnose

    _read(ledger, [ALLEN])
    findings = [f for f in diagnose(ledger, "r", store=False).findings if f.cause == "overfitting"]
    assert findings and findings[0].start_step == _facts()["series"]["validation_loss"]["min"][0]


def _records(folder: Path, epochs: list[int], *, named_epoch: bool, duration: bool) -> dict[int, dict]:
    folder.mkdir()
    out = {}
    rank = {epoch: i for i, epoch in enumerate(sorted(epochs))}  # the clock runs with the epochs, written in any order
    for epoch in epochs:
        i = rank[epoch]
        rec: dict = {"training_loss": round(2.0 / (epoch + 1), 6), "validation_loss": round(1.5 + 0.01 * epoch, 6)}
        if named_epoch:
            rec["epoch"] = epoch
        if duration:
            rec["training_duration"] = f"0:{(i + 1) // 60:02d}:{(i + 1) % 60:02d}.5"
        (folder / f"metrics_epoch_{epoch}.json").write_text(json.dumps(rec, indent=2))
        out[epoch] = rec
    (folder / "config.json").write_text(json.dumps({"model": {"type": "x"}, "trainer": {"num_epochs": 3}}))
    return out


@pytest.mark.parametrize("n", [5, pytest.param(150, marks=pytest.mark.slow)])
def test_any_folder_of_numbered_records_reads_back_as_its_records(n, tmp_path):
    @given(
        st.lists(st.integers(0, 300), min_size=1, max_size=25, unique=True),
        st.booleans(),
        st.booleans(),
    )
    def prop(epochs, named_epoch, duration):
        folder = tmp_path / "run"
        shutil.rmtree(folder, ignore_errors=True)
        records = _records(folder, epochs, named_epoch=named_epoch, duration=duration)
        with Ledger(":memory:") as led:
            res, steps, evals = _read(led, [folder])
            assert steps["step"].tolist() == sorted(records)
            assert steps["loss"].tolist() == [records[e]["training_loss"] for e in sorted(records)]
            assert sorted(zip(evals["step"], evals["value"], strict=True)) == [
                (e, records[e]["validation_loss"]) for e in sorted(records)
            ]
            if duration:
                assert steps["wall_s"].tolist() == [i + 1.5 for i in range(len(records))]
            assert any("config.json" in w for w in res.warnings)

    settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(prop)()


def test_a_folder_without_records_is_refused_naming_what_it_looks_for(ledger, tmp_path):
    (tmp_path / "notes.txt").write_text("nothing\n")
    with pytest.raises(InputError, match="numbered JSON records"):
        _read(ledger, [tmp_path])
    assert ledger.runs().empty


def test_one_object_of_no_step_is_refused_and_its_advice_works(ledger_path, tmp_path):
    """The refusal names a mapping; the mapping, run as the refusal says, reads the object as one step."""
    doc = tmp_path / "final.json"
    doc.write_text(json.dumps({"model": "resnet", "iterations": 300, "loss": 0.25}, indent=2))
    runner = CliRunner()
    base = ["--ledger", str(ledger_path)]
    refused = runner.invoke(app, [*base, "import", "auto", str(doc), "--run", "x"])
    assert refused.exit_code == 2 and "one JSON object (keys model, iterations, loss)" in refused.output
    assert "import it as a table and name its step field with --map step=FIELD" in refused.output
    done = runner.invoke(app, [*base, "import", "table", str(doc), "--run", "x", "--map", "step=iterations"])
    assert done.exit_code == 0, done.output
    with Ledger(ledger_path) as led:
        steps = led.steps("x", nullable=True)
    assert steps["step"].tolist() == [300] and steps["loss"].tolist() == [0.25]


KERAS = REAL / "keras-history-glove-lstm-tweets-training_history.json"


def test_a_real_keras_history_dump_is_a_table_of_epochs(ledger):
    entry = next(e for e in WAVE4_LOGS if e["path"] == KERAS.name)
    facts = WAVE4_PARSERS[entry["parser"]](KERAS, entry["params"])
    assert facts == entry["facts"]
    res, steps, evals = _read(ledger, [KERAS])
    assert steps["step"].tolist() == list(range(facts["lengths"][0]))  # the position in the lists is the epoch
    assert steps["loss"].tolist()[-1] == facts["series"]["loss"]["last"][1]
    val = evals[(evals["task"] == "val") & (evals["metric"] == "loss")]
    assert dict(zip(val["step"], val["value"], strict=True))[5] == facts["series"]["val_loss"]["min"][1]
    assert ledger.meta("r")["step_unit"] == "epoch"


@pytest.mark.parametrize("n", [6, pytest.param(150, marks=pytest.mark.slow)])
def test_any_object_of_equal_lists_reads_back_as_its_columns(n, tmp_path):
    """Nested or flat, with or without a step list, the values read back at their positions; lists of unequal length
    are no table (refused as JSON of no known shape, nothing stored)."""

    @given(
        st.integers(1, 40),
        st.sampled_from([("loss", "val_loss"), ("train/loss", "val/loss")]),
        st.booleans(),
        st.booleans(),
    )
    def prop(rows, names, with_epoch, ragged):
        train = [round(3.0 - 0.01 * i, 6) for i in range(rows)]
        held = [round(2.0 + 0.02 * i, 6) for i in range(rows)]
        doc: dict = {}
        for name, values in zip(names, (train, held), strict=True):
            head, _, tail = name.rpartition("/")
            (doc.setdefault(head, {}) if head else doc)[tail] = values
        if with_epoch:
            doc["epoch"] = list(range(1, rows + 1))
        if ragged:
            doc["lr"] = [0.1] * (rows + 1)
        path = tmp_path / "history.json"
        path.write_text(json.dumps(doc))
        with Ledger(":memory:") as led:
            if ragged:
                with pytest.raises(InputError, match="JSON"):
                    _read(led, [path])
                assert led.runs().empty
                return
            _, steps, evals = _read(led, [path])
        first = 1 if with_epoch else 0
        assert steps["step"].tolist() == list(range(first, first + rows))
        assert steps["loss"].tolist() == train
        assert sorted(evals["value"].tolist()) == sorted(held)

    settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(prop)()
