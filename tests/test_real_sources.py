"""Independent checks of the real-log corpus: tests/data/real (committed) and shared/real.

Every fact in tests/support/real_logs.py is recomputed here from the raw file with the standard
library (and, for event files, the tensorboard package's own reader), never with yieldgate
code: these parsers are the yardstick the importers are measured against, so each one is
a few lines that follow the source format literally.

``REAL_LOGS`` live in tests/data/real and are committed; ``SHARED_LOGS`` (binary event files
and files taken from repository snapshots, which are not committed) are looked for in the
steering repository's ``shared/real`` folder and skipped where it or the file is absent.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_logs import REAL_LOGS, SHARED_LOGS
from tests.support.real_wave2 import WAVE2_PARSERS
from tests.support.real_wave3 import WAVE3_PARSERS
from tests.support.real_wave4 import WAVE4_PARSERS

ROOT = Path(__file__).parent / "data" / "real"
# shared/ beside the clone (the steering repository's shared folder; a copy of it on CI)
# (or YIELDGATE_SHARED_REAL: a folder laid out as shared/real, to check the uncommitted files where they are kept)
SHARED_ROOT = Path(os.environ.get("YIELDGATE_SHARED_REAL") or Path(__file__).resolve().parents[2] / "shared" / "real")
MAX_BYTES = 1_000_000


# --- shared helpers -----------------------------------------------------------------------


def _series_facts(
    points: list[tuple[int, float]], after_step: int | None = None, window: list[int] | None = None
) -> dict:
    """count / first / last / min / max of (step, value) points, in file order; with
    ``after_step`` also the largest value past warm-up, with ``window`` ``[lo, hi]`` the
    largest value in lo < step <= hi (where a transient spike sits)."""
    lowest = min(points, key=lambda p: p[1])
    highest = max(points, key=lambda p: p[1])
    facts: dict[str, Any] = {
        "count": len(points),
        "first": list(points[0]),
        "last": list(points[-1]),
        "min": list(lowest),
        "max": list(highest),
    }
    if after_step is not None:
        late = max((p for p in points if p[0] > after_step), key=lambda p: p[1])
        facts["max_after"] = list(late)
    if window is not None:
        spike = max((p for p in points if window[0] < p[0] <= window[1]), key=lambda p: p[1])
        facts["max_in_window"] = list(spike)
    return facts


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _num(text: str) -> float:
    return float(text.replace(",", ""))


# --- one parser per source format ---------------------------------------------------------


def hf_trainer_state(path: Path, params: dict) -> dict:
    """HF Trainer trainer_state.json: log_history rows are training rows (``loss``), eval
    rows (any ``eval_*`` key) or the end-of-training summary (``train_runtime``)."""
    state = json.loads(path.read_text())
    history = state["log_history"]
    train = [(row["step"], row["loss"]) for row in history if "loss" in row]
    evals = [row for row in history if any(key.startswith("eval_") for key in row)]
    facts = {
        "global_step": state["global_step"],
        "history_rows": len(history),
        "stepless_rows": sum("step" not in row for row in history),
        "summary_rows": sum("train_runtime" in row for row in history),
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "eval_rows": len(evals),
    }
    for key in params.get("eval_keys", []):
        facts[key] = _series_facts([(row["step"], row[key]) for row in evals if key in row])
    if params.get("objective_keys"):  # an RL / preference trainer's: its loss below 0, and what it logs beside it
        facts["negative_losses"] = sum(value < 0 for _, value in train)
        facts["objective_keys"] = [key for key in params["objective_keys"] if all(key in row for row in history)]
    return facts


def tensorboard(path: Path, params: dict) -> dict:
    """Every scalar in every event file under the directory, keyed by tag.

    Scalars are either ``simple_value`` (TF1 / tensorboardX) or a rank-0 tensor under the
    ``scalars`` plugin (torch.utils.tensorboard >= 1.x writes the latter)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    points: dict[str, list[tuple[int, float]]] = {}
    for event_file in sorted(path.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(event_file)).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = float(value.simple_value)
                elif value.metadata.plugin_data.plugin_name == "scalars":
                    number = float(tensor_util.make_ndarray(value.tensor))
                else:
                    continue
                points.setdefault(value.tag, []).append((event.step, number))
    return {
        "event_files": len(list(path.rglob("events.out.tfevents.*"))),
        "scalar_tags": sorted(points),
        "series": {tag: _series_facts(points[tag]) for tag in params["tags"]},
    }


def keras_tensorboard(path: Path, params: dict) -> dict:
    """Keras' TensorBoard callback: one run as ``train/`` and ``validation/`` folders holding the same tags
    (``epoch_loss`` at step = epoch), so every scalar is keyed ``<folder>/<tag>``."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    points: dict[str, list[tuple[int, float]]] = {}
    for event_file in sorted(path.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(event_file)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "scalars":
                    continue
                key = f"{event_file.parent.name}/{value.tag}"
                points.setdefault(key, []).append((event.step, float(tensor_util.make_ndarray(value.tensor))))
    return {
        "event_files": len(list(path.rglob("events.out.tfevents.*"))),
        "scalars": sorted(points),
        "series": {key: _series_facts(points[key]) for key in params["keys"]},
    }


def csv_table(path: Path, params: dict) -> dict:
    """A wide CSV (Lightning CSVLogger, W&B chart export, W&B history): one row per logged
    step, empty cells where a column was not logged at that row."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    step = params["step_column"]
    series = {}
    for column in params["columns"]:
        points = [(int(float(row[step])), float(row[column])) for row in rows if row[column] != ""]
        series[column] = _series_facts(points, params.get("after_step"))
    return {"rows": len(rows), "columns": len(rows[0]), "series": series}


def build_nanogpt_logtxt(path: Path, params: dict) -> dict:
    """karpathy/build-nanogpt log/log.txt: ``<step> train|val|hella <value>``."""
    kinds: dict[str, list[tuple[int, float]]] = {}
    for line in _lines(path):
        step, kind, value = line.split()
        kinds.setdefault(kind, []).append((int(step), float(value)))
    return {
        kind: _series_facts(points, params.get("after_step"), params.get("spike_window"))
        if kind == "train"
        else _series_facts(points)
        for kind, points in sorted(kinds.items())
    }


def jsonl_table(path: Path, params: dict) -> dict:
    """A JSON-lines log (detectron2's metrics.json): one JSON object per line, the step under ``step_key``."""
    rows = [json.loads(line) for line in _lines(path) if line.strip()]
    step = params["step_key"]
    series = {
        key: _series_facts([(int(row[step]), float(row[key])) for row in rows if key in row])
        for key in params["columns"]
    }
    return {"rows": len(rows), "keys": len({key for row in rows for key in row}), "series": series}


STEP_BAR = re.compile(
    r"^step (\d+) \| loss: ([\d.]+) \| lr ([\d.e+-]+) \| norm: ([\d.]+) \| dt: ([\d.]+)ms \| tok/sec: ([\d.]+)$"
)
VAL_STEPLESS = re.compile(r"^validation loss: ([\d.]+)$")
HELLA_STEPLESS = re.compile(r"^HellaSwag accuracy: (\d+)/(\d+)=([\d.]+)$")


def build_nanogpt_stdout(path: Path, params: dict) -> dict:
    """build-nanogpt's printed output; its validation and HellaSwag lines carry no step."""
    train, val, hella, tok_s = [], [], [], []
    for line in _lines(path):
        if match := STEP_BAR.match(line):
            train.append((int(match[1]), float(match[2])))
            tok_s.append(float(match[6]))
        elif match := VAL_STEPLESS.match(line):
            val.append(float(match[1]))
        elif match := HELLA_STEPLESS.match(line):
            hella.append(float(match[3]))
    return {
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "stepless_val_lines": len(val),
        "val_first": val[0],
        "val_last": val[-1],
        "stepless_hellaswag_lines": len(hella),
        "hellaswag_last": hella[-1],
        "max_tokens_per_s": max(tok_s),
    }


ITER = re.compile(r"^iter (\d+): loss ([\d.]+), time ([\d.]+)ms, mfu (-?[\d.]+)%$")
EVAL = re.compile(r"^step (\d+): train loss ([\d.]+), val loss ([\d.]+)$")


def nanogpt(path: Path, params: dict) -> dict:
    """karpathy/nanoGPT train.py stdout: ``iter N: loss ...`` and ``step N: train loss ...,
    val loss ...`` (mfu is -100.00% until nanoGPT has 5 iterations to average)."""
    train, val, mfu = [], [], []
    for line in _lines(path):
        if match := ITER.match(line):
            train.append((int(match[1]), float(match[2])))
            mfu.append(float(match[4]))
        elif match := EVAL.match(line):
            val.append((int(match[1]), float(match[3])))
    return {
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "val": _series_facts(val),
        "max_mfu_percent": max(mfu),
        "mfu_placeholder_lines": mfu.count(-100.0),
        "ends_with_traceback": _lines(path)[-1].endswith("KeyboardInterrupt"),
    }


LLMC = re.compile(r"^s:(\d+) (trl|tel|eval):([\d.]+)")


def llmc(path: Path, params: dict) -> dict:
    """karpathy/llm.c main.log: ``s:N trl:X lr:.. norm:..`` (train), ``s:N tel:X`` (val
    loss) and ``s:N eval:X`` (HellaSwag accuracy)."""
    kinds: dict[str, list[tuple[int, float]]] = {}
    for line in _lines(path):
        if match := LLMC.match(line):
            kinds.setdefault(match[2], []).append((int(match[1]), float(match[3])))
    return {
        kind: _series_facts(points, params.get("after_step"), params.get("spike_window"))
        if kind == "trl"
        else _series_facts(points)
        for kind, points in sorted(kinds.items())
    }


MEGATRON_ITER = re.compile(r"^\s*iteration\s+(\d+)/\s*(\d+) \|.*\| lm loss: ([\d.E+-]+) \|")
MEGATRON_VAL = re.compile(r"validation loss at iteration (\d+)( on [^|]+?)? \| lm loss value: ([\d.E+-]+)")
DEEPSPEED_STEPS = re.compile(r"^steps: (\d+) loss: ([\d.]+)")


def megatron(path: Path, params: dict) -> dict:
    """Megatron-LM / Megatron-DeepSpeed: the ``iteration N/ M | ... | lm loss: X |`` line,
    periodic ``validation loss at iteration N | lm loss value: X`` and the end-of-training
    ``validation loss at iteration N on <set> | ...`` lines. DeepSpeed also prints its own
    ``steps: N loss: X`` line for the same steps."""
    train: list[tuple[int, float]] = []
    periodic: list[tuple[int, float]] = []
    final: list[tuple[int, float]] = []
    deepspeed_lines = 0
    for line in _lines(path):
        if match := MEGATRON_ITER.match(line):
            train.append((int(match[1]), float(match[3])))
        elif match := MEGATRON_VAL.search(line):
            point = (int(match[1]), float(match[3]))
            (final if match[2] else periodic).append(point)
        elif DEEPSPEED_STEPS.match(line):
            deepspeed_lines += 1
    return {
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "val": _series_facts(periodic),
        "final_eval_lines": len(final),
        "final_eval": list(final[-1]) if final else None,
        "deepspeed_steps_lines": deepspeed_lines,
    }


FAIRSEQ_HYDRA = re.compile(r"^\[[^\]]+\]\[(train_inner|valid|train)\]\[INFO\] - (\{.*\})$")


def fairseq_hydra(path: Path, params: dict) -> dict:
    """fairseq-hydra-train with ``log_format: json``: each progress record is a JSON object
    after ``[<time>][train_inner|valid|train][INFO] - ``; numbers are JSON strings."""
    records: dict[str, list[dict]] = {"train_inner": [], "valid": [], "train": []}
    for line in _lines(path):
        if match := FAIRSEQ_HYDRA.match(line):
            records[match[1]].append(json.loads(match[2]))
    inner = [(int(r["num_updates"]), float(r["loss"])) for r in records["train_inner"]]
    valid = [(int(r["valid_num_updates"]), float(r["valid_loss"])) for r in records["valid"]]
    epochs = [(int(r["train_num_updates"]), float(r["train_loss"])) for r in records["train"]]
    return {
        "train_inner": _series_facts(inner, params.get("after_step"), params.get("spike_window")),
        "valid": _series_facts(valid),
        "epoch_summaries": _series_facts(epochs),
        "last_valid_epoch": int(records["valid"][-1]["epoch"]),
    }


ANSI = re.compile(r"\x1b\[[0-9;]*m")
TITAN = re.compile(
    r"step:\s*(\d+)\s+loss:\s*([\d.]+)\s+grad_norm:\s*([\d.]+)\s+memory:.*?tps:\s*([\d,]+)\s+tflops:\s*([\d,.]+)\s+mfu:\s*([\d,.]+)%"
)


def torchtitan(path: Path, params: dict) -> dict:
    """pytorch/torchtitan metrics line (ANSI colour codes stripped first):
    ``step: N  loss: X  grad_norm: G  memory: ...  tps: T  tflops: F  mfu: M%``."""
    train, mfu, tps = [], [], []
    for line in _lines(path):
        if match := TITAN.search(ANSI.sub("", line)):
            train.append((int(match[1]), float(match[2])))
            tps.append(_num(match[4]))
            mfu.append(_num(match[6]))
    return {
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "lines_with_ansi": sum("\x1b[" in line for line in _lines(path)),
        "max_mfu_percent": max(mfu),
        "last_tps": tps[-1],
    }


TITAN_STEP = re.compile(r" - root - INFO - step:\s*(\d+)\s+loss:\s*([\d.]+)\s.*\btps: ([\d,]+)")
TITAN_VALIDATE = re.compile(r" - root - INFO - validate step:\s*(\d+)\s+loss:\s*([\d.]+)")
TITAN_MESH = re.compile(
    r"Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), dp_shard=(\d+), "
    r"cp=(\d+), tp=(\d+)"
)
TITAN_BATCH = re.compile(r"global batch size (\d+), .*sequence length (\d+)")


def torchtitan_validate(path: Path, params: dict) -> dict:
    """pytorch/torchtitan's logger output without colour codes: `step: N  loss: X ... tps: T ...`, `validate
    step: N  loss: X`, the device mesh (world size pp x dp_replicate x dp_shard x cp x tp) and the batch."""
    lines = _lines(path)
    train, validate, tps = [], [], []
    for line in lines:
        if match := TITAN_STEP.search(line):
            train.append((int(match[1]), float(match[2])))
            tps.append(_num(match[3]))
        elif match := TITAN_VALIDATE.search(line):
            validate.append([int(match[1]), float(match[2])])
    mesh = next(m for line in lines if (m := TITAN_MESH.search(line)))
    batch = next(m for line in lines if (m := TITAN_BATCH.search(line)))
    return {
        "train": _series_facts(train, params.get("after_step"), params.get("spike_window")),
        "validate": validate,
        "world_size": math.prod(int(g) for g in mesh.groups()),
        "tokens_per_step": int(batch[1]) * int(batch[2]),
        "last_tps": tps[-1],
        "killed": " Killed " in lines[-2],
    }


KERAS_HEADER = re.compile(r"^Epoch (\d+)/(\d+)$")
KERAS2_EPOCH = re.compile(r"^(\d+)s - loss: ([\d.]+) - acc: ([\d.]+) - val_loss: ([\d.]+) - val_acc: ([\d.]+)$")


def keras_fit(path: Path, params: dict) -> dict:
    """Keras 2 model.fit(verbose=2) output: `Epoch N/M` headers, each followed (after an early-stopping note at
    most) by `<secs>s - loss: .. - acc: .. - val_loss: .. - val_acc: ..`; each `fit` starts again at Epoch 1, so
    the epoch number here is counted across the fits."""
    train, val_loss, val_acc, seconds, fits, stops = [], [], [], [], 0, 0
    epoch = 0
    for line in _lines(path):
        if match := KERAS_HEADER.match(line):
            fits += match[1] == "1"
        elif match := KERAS2_EPOCH.match(line):
            epoch += 1
            train.append((epoch, float(match[2])))
            val_loss.append((epoch, float(match[4])))
            val_acc.append((epoch, float(match[5])))
            seconds.append(int(match[1]))
        elif line.endswith(": early stopping"):
            stops += 1
    return {
        "fits": fits,
        "early_stops": stops,
        "loss": _series_facts(train),
        "val_loss": _series_facts(val_loss),
        "val_acc": _series_facts(val_acc),
        "total_seconds": sum(seconds),
    }


OLMO_STEP = re.compile(r"\] \[step=(\d+)/(\d+)\]$")
OLMO_PAIR = re.compile(r"^    ([^=]+)=([\d,.]+)$")


def olmo(path: Path, params: dict) -> dict:
    """allenai/OLMo's trainer console: a ``[time] INFO [olmo.train:N, rank=0] [step=N/M]`` line, then one
    indented ``name=value`` line per metric (thousands written with commas: ``76,631``)."""
    blocks: list[tuple[int, dict[str, float]]] = []
    total = None
    for line in _lines(path):
        if match := OLMO_STEP.search(line):
            blocks.append((int(match[1]), {}))
            total = int(match[2])
        elif (match := OLMO_PAIR.match(line)) and blocks:
            blocks[-1][1][match[1]] = _num(match[2])
    series = {
        name: _series_facts([(step, pairs[name]) for step, pairs in blocks if name in pairs])
        for name in params["names"]
    }
    return {"blocks": len(blocks), "planned_steps": total, "series": series}


def lm_eval(path: Path, params: dict) -> dict:
    """lm-evaluation-harness results: v0.3 keys metrics plainly (``acc``), v0.4 as
    ``<metric>,<filter>`` (``acc,none``) and adds groups."""
    results = json.loads(path.read_text())
    return {
        "tasks": len(results["results"]),
        "versions": len(results["versions"]),
        "has_groups": "groups" in results,
        "values": {f"{task}|{metric}": results["results"][task][metric] for task, metric in params["metrics"]},
    }


PARSERS = {
    "hf-trainer-state": hf_trainer_state,
    "tensorboard": tensorboard,
    "csv-table": csv_table,
    "jsonl-table": jsonl_table,
    "build-nanogpt-logtxt": build_nanogpt_logtxt,
    "build-nanogpt-stdout": build_nanogpt_stdout,
    "nanogpt": nanogpt,
    "llmc": llmc,
    "megatron": megatron,
    "fairseq-hydra-json": fairseq_hydra,
    "torchtitan": torchtitan,
    "torchtitan-validate": torchtitan_validate,
    "keras-fit": keras_fit,
    "lm-eval": lm_eval,
    "olmo": olmo,
    "keras-tensorboard": keras_tensorboard,
    **WAVE2_PARSERS,  # the second wave's formats (issue 35)
    **WAVE3_PARSERS,  # the third wave's (issue 35: OpenMMLab's own logs, ms-swift)
    **WAVE4_PARSERS,  # the fourth wave's (issue 45: trainers and formats new to the corpus)
}


# --- the checks -----------------------------------------------------------------------------


def _assert_equal(actual, expected, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (
            f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        )
        for key in expected:
            _assert_equal(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r} != {expected!r}"
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            _assert_equal(got, want, f"{where}[{index}]")
    elif isinstance(expected, float):
        assert not isinstance(actual, bool) and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12), (
            f"{where}: {actual!r} != {expected!r}"
        )
    else:
        assert actual == expected and type(actual) is type(expected), f"{where}: {actual!r} != {expected!r}"


def _check_facts(root: Path, entry: dict) -> None:
    if entry["parser"] in ("tensorboard", "keras-tensorboard"):
        pytest.importorskip("tensorboard", reason="the event-file reader is the [tensorboard] extra")
    parser = PARSERS[entry["parser"]]
    actual = parser(root / entry["path"], entry.get("params", {}))
    _assert_equal(actual, entry["facts"], entry["path"])


@pytest.mark.parametrize("entry", REAL_LOGS, ids=[entry["path"] for entry in REAL_LOGS])
def test_facts_recomputed_from_raw_file(entry: dict) -> None:
    _check_facts(ROOT, entry)


@pytest.mark.slow
@pytest.mark.parametrize("entry", SHARED_LOGS, ids=[f"shared/{entry['path']}" for entry in SHARED_LOGS])
def test_shared_facts_recomputed_from_raw_file(entry: dict) -> None:
    if not SHARED_ROOT.is_dir():
        pytest.skip(f"no shared/real folder at {SHARED_ROOT} (uncommitted files; see SOURCES.md)")
    if not (SHARED_ROOT / entry["path"]).exists():
        pytest.skip(f"{entry['path']} is not in {SHARED_ROOT} (uncommitted file; see SOURCES.md)")
    _check_facts(SHARED_ROOT, entry)


def _corpus_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*") if p.is_file() and p.name not in {"SOURCES.md", "FINDINGS.md"})


def test_every_file_is_small() -> None:
    too_big = [f"{p.relative_to(ROOT)}: {p.stat().st_size}" for p in _corpus_files() if p.stat().st_size >= MAX_BYTES]
    assert not too_big, too_big


def _sources() -> tuple[str, str]:
    """SOURCES.md split into the committed part and the "Files for shared/real" part."""
    text = (ROOT / "SOURCES.md").read_text()
    committed, marker, shared = text.partition("\n## Files for shared/real")
    assert marker, "SOURCES.md has no 'Files for shared/real' section"
    return committed, shared


def _section(sources: str, rel: str) -> str | None:
    section = re.search(rf"^### `{re.escape(rel)}`\n(.*?)(?=^#{{2,3}} |\Z)", sources, re.M | re.S)
    return section[1] if section else None


def test_every_file_is_registered_and_sourced() -> None:
    committed, _ = _sources()
    registered = {entry["path"] for entry in REAL_LOGS}
    for path in _corpus_files():
        rel = path.relative_to(ROOT).as_posix()
        assert rel in registered or rel.split("/")[0] in registered, f"{rel} is not in tests/support/real_logs.py"
        # Each file has a SOURCES.md section headed by its name, holding a 40-hex commit and
        # saying that it was taken from the search index (read_file), not from a snapshot.
        section = _section(committed, rel) or _section(committed, rel.split("/")[0])  # a folder: one section
        assert section, f"{rel} has no section in SOURCES.md"
        assert re.search(r"\bcommit\b.*\b[0-9a-f]{40}\b", section), f"{rel}: no 40-hex commit in SOURCES.md"
        assert "search index read_file" in section, f"{rel}: SOURCES.md does not say it came from the index"
    for entry in REAL_LOGS:
        assert (ROOT / entry["path"]).exists(), entry["path"]


def test_committed_files_are_text_and_shared_files_are_not_committed() -> None:
    # The index serves text only: a committed file is UTF-8 text; binary and snapshot-only
    # files belong to shared/real (SHARED_LOGS), never to tests/data/real.
    for path in _corpus_files():
        path.read_bytes().decode("utf-8")
    for entry in SHARED_LOGS:
        assert not (ROOT / entry["path"]).exists(), f"{entry['path']} must not be in tests/data/real"
    assert not {e["path"] for e in REAL_LOGS} & {e["path"] for e in SHARED_LOGS}


def test_every_shared_file_is_sourced() -> None:
    _, shared = _sources()
    for entry in SHARED_LOGS:
        section = _section(shared, entry["path"])
        assert section, f"{entry['path']} has no section under 'Files for shared/real' in SOURCES.md"
        assert re.search(r"\bcommit\b.*\b[0-9a-f]{40}\b", section), f"{entry['path']}: no 40-hex commit"


def test_corpus_breadth() -> None:
    assert len(_corpus_files()) >= 15
    assert len(REAL_LOGS) >= 15
    assert len({entry["format"] for entry in REAL_LOGS}) >= 10
    kinds = {entry["kind"] for entry in REAL_LOGS}
    assert kinds <= {"tensorboard", "hf-trainer", "lm-eval", "table", "textlog", "mlflow", "wandb"}, kinds
