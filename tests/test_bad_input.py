"""Bad input handed to the `yieldgate` command: malformed, truncated and hostile manifests, recipes,
campaigns and policies, damaged event files, tables with missing columns, non-finite or huge values,
non-UTF-8 text, hostile run names, a ledger from a newer schema. Each is refused with one line on stderr and exit
status 2, and the ledger (which holds a run already) is left exactly as it was; or, where the input is partly good
data (a truncated event file, a diverged loss), imported with a warning that says what was done. Each case keeps
its Reliability row (docs/reliability.md) true (tests/support/reliability.py)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.digest import ledger_digest
from tests.support.reliability import check
from yieldgate.cli import app
from yieldgate.ledger import Ledger

BASE_STEPS = 20


@pytest.fixture(scope="session")
def base_files(tmp_path_factory) -> Path:
    """Imported once per session (each import is a CLI call), then copied for every test."""
    folder = tmp_path_factory.mktemp("base")
    csv = folder / "base.csv"
    csv.write_text(
        "step,tokens,loss,val_loss\n"
        + "".join(f"{s},{s * 1000},{3 / s},{3.1 / s if s % 10 == 0 else ''}\n" for s in range(1, BASE_STEPS + 1))
    )
    _invoke(folder / "ledger.db", "import", "table", str(csv), "--run", "base", code=0)
    return folder


@pytest.fixture
def base(base_files: Path, tmp_path: Path) -> Path:
    """A ledger holding one imported run, `base`, of BASE_STEPS steps and two evals (and its table, base.csv)."""
    for name in ("ledger.db", "base.csv"):
        shutil.copyfile(base_files / name, tmp_path / name)
    return tmp_path / "ledger.db"


def _invoke(ledger: Path, *args: str, code: int) -> tuple[str, str]:
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    if code == 2:
        assert isinstance(result.exception, SystemExit), result.exception  # ours, not an escaped exception
    return result.stdout, result.stderr


def _shown(text: str, tmp_path: Path) -> str:
    """A message as docs/reliability.md shows it: the temp folder dropped, a `|` (of a pattern the message quotes)
    shown as `¦`, since the cell of a Markdown table ends at it, cut at 110 characters."""
    text = text.strip().replace(f"{tmp_path}/", "").replace(str(tmp_path), ".").removeprefix("error: ")
    text = text.replace("|", "¦")
    assert "`" not in text, text  # it goes into a Markdown table cell as code
    return text if len(text) <= 110 else text[:109] + "…"


def _steps(ledger: Path, run: str = "base") -> int:
    with Ledger(ledger, readonly=True) as led:
        return len(led.steps(run))


# -- refused: (fault, writes its files and returns the CLI's arguments, a word the message must contain) --


def _file(name: str, data: str | bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return path

    return make


MANIFEST = {"data": {"sources": [{"name": "web", "weight": 1.0}]}, "seed": 1}
_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefg", "bcdefgh", strict=True)
)


def _with_manifest(name: str, data: str | bytes) -> Callable[[Path], list[str]]:
    make = _file(name, data)
    return lambda tmp: ["import", "table", str(tmp / "base.csv"), "--run", "new", "--manifest", str(make(tmp))]


def _recipe(name: str, data: str | bytes) -> Callable[[Path], list[str]]:
    make = _file(name, data)
    return lambda tmp: ["train", str(make(tmp)), "--tokens", "1000"]


def _campaign(name: str, data: str | bytes) -> Callable[[Path], list[str]]:
    make = _file(name, data)
    return lambda tmp: ["probe", str(make(tmp))]


def _policy(name: str, data: str | bytes) -> Callable[[Path], list[str]]:
    make = _file(name, data)
    return lambda tmp: ["gate", "base", "--policy", str(make(tmp))]


_STAGES = "stages: [{name: a, tokens: 200, compute_share: 0.1}, {name: b, tokens: 100, compute_share: 0.2}]\n"


def _table(name: str, data: str | bytes, *extra: str) -> Callable[[Path], list[str]]:
    make = _file(name, data)
    return lambda tmp: ["import", "table", str(make(tmp)), "--run", "new", *extra]


def _regex_map(line: str, pattern: str) -> Callable[[Path], list[str]]:
    """`import textlog` of a one-line log with a mapping whose `lines` is `pattern`."""
    log, mapping = _file("train.log", line + "\n"), _file("m.yaml", f"lines: ['{pattern}']\n")
    return lambda tmp: ["import", "textlog", str(log(tmp)), "--run", "new", "--map", str(mapping(tmp))]


def _run_name(name: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["import", "table", str(tmp / "base.csv"), "--run", name]


def _event_file(tmp: Path, steps: int = 30) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(tmp / "tb") as writer:
        for s in range(1, steps + 1):
            writer.add_scalar("train/loss", 3.0 / s, s)
    (path,) = (tmp / "tb").iterdir()
    return path.rename(path.with_name("events.out.tfevents.1.host"))  # its own name has a time, host and pid


def _damaged_events(tmp: Path) -> list[str]:
    path = _event_file(tmp)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle: a record's CRC fails
    path.write_bytes(bytes(data))
    return ["import", "tensorboard", str(path), "--run", "new"]


def _fifo(name: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        os.mkfifo(path)  # no writer: a reader that opens it blocks for ever
        return path

    return make


def _folder(name: str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        (tmp / name).mkdir()
        return tmp / name

    return make


def _import(kind: str, make: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["import", kind, str(make(tmp)), "--run", "new"]


def _recipe_path(path: str | Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    """`yieldgate train` on a recipe whose one source is read from `path`."""

    def args(tmp: Path) -> list[str]:
        where = path(tmp) if callable(path) else path
        return _recipe("r.yaml", f"sources: [{{name: mine, path: {where}}}]\n")(tmp)

    return args


def _wandb_log(name: str, values: list[dict[str, str]]) -> Callable[[Path], Path]:
    """A W&B transaction log (LevelDB framing: 32 KiB blocks, a CRC-32 over type byte and fragment) of one
    history record per dict of `key: value_json`, written with wandb's own Record class."""
    import struct
    import zlib

    def make(tmp: Path) -> Path:
        # wandb_internal_pb2 re-exports (`import *`) the module of the installed protobuf's major version, chosen at
        # run time, so mypy sees no Record in it.
        from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]

        out = bytearray(b":W&B\xe1\xbe\x00")
        for step, items in enumerate(values, start=1):
            record = Record()
            record.history.step.num = step
            for key, value in items.items():
                item = record.history.item.add()
                item.key, item.value_json = key, value
            data, first = record.SerializeToString(), True
            while data or first:
                left = 32 * 1024 - len(out) % (32 * 1024)
                if left < 7:
                    out += bytes(left)
                    continue
                chunk, data = data[: left - 7], data[left - 7 :]
                kind = (1 if first else 4) if not data else (2 if first else 3)  # full, first, middle, last
                out += struct.pack("<IHB", zlib.crc32(chunk, zlib.crc32(bytes([kind]))), len(chunk), kind) + chunk
                first = False
        path = tmp / name
        path.write_bytes(bytes(out))
        return path

    return make


_DEEP = "[" * 100_000 + "]" * 100_000
_DIGITS = "9" * 16_000
_WIDE = (
    "step," + ",".join(f"signals/c{i}" for i in range(10_000)) + "\n1," + ",".join("1" for _ in range(10_000)) + "\n"
)
_json = json.dumps(MANIFEST)
REFUSED: list[tuple[str, Callable[[Path], list[str]], str]] = [
    (
        "manifest: malformed YAML",
        _with_manifest("m.yaml", "data: {sources: [{name: web}]\nseed: 1\n"),
        "malformed YAML",
    ),
    ("manifest: truncated JSON", _with_manifest("m.json", _json[: len(_json) // 2]), "malformed JSON"),
    (
        "manifest: YAML with a Python object tag (code execution)",
        _with_manifest("m.yaml", "!!python/object/apply:os.system ['touch pwned']\n"),
        "malformed YAML",
    ),
    ("manifest: YAML alias bomb (billion laughs)", _with_manifest("m.yaml", _LAUGHS + "seed: *h\n"), "expands"),
    ("manifest: JSON nested 100,000 deep", _with_manifest("m.json", "[" * 100_000 + "]" * 100_000), "nested"),
    (
        "manifest: NaN and Infinity in JSON",
        _with_manifest("m.json", '{"data": {"sources": [{"name": "web", "weight": NaN}]}, "seed": Infinity}'),
        "weight",
    ),
    (
        "manifest: huge integer",
        _with_manifest("m.yaml", "data: {sources: [{name: web}]}\nseed: " + "9" * 5000 + "\n"),
        "cannot be read",
    ),
    (
        "manifest: not UTF-8",
        _with_manifest("m.yaml", "data: {sources: [{name: caf\xe9}]}\n".encode("latin-1")),
        "UTF-8",
    ),
    ("manifest: a list, not a mapping", _with_manifest("m.yaml", "- data\n- seed\n"), "mapping"),
    ("recipe: malformed YAML", _recipe("r.yaml", "sources: [{name: milton\n"), "malformed YAML"),
    (
        "recipe: YAML with a Python object tag (code execution)",
        _recipe("r.yaml", "sources: !!python/object/apply:os.system ['touch pwned']\n"),
        "malformed YAML",
    ),
    (
        "recipe: wrong types and a negative weight",
        _recipe("r.yaml", "sources: [{name: milton, weight: -1}]\nsequence_length: many\n"),
        "weight",
    ),
    ("recipe: not UTF-8", _recipe("r.yaml", b"sources: [{name: \xff\xfe}]\n"), "UTF-8"),
    (
        "campaign: malformed YAML",
        _campaign("c.yaml", "name: c\nrecipes: {a: {sources: [{name: milton}]}\nbudgets: [1]\n"),
        "malformed YAML",
    ),
    (
        "campaign: YAML with a Python object tag (code execution)",
        _campaign("c.yaml", "name: !!python/object/apply:os.system ['touch pwned']\n"),
        "malformed YAML",
    ),
    (
        "campaign: a recipe name that would climb out of run names",
        _campaign("c.yaml", "name: c\nrecipes: {'../x': {sources: [{name: milton}]}}\nbudgets: [1000]\n"),
        "recipe name",
    ),
    (
        "campaign: a misspelt field (seed for seeds)",
        _campaign("c.yaml", "name: c\nrecipes: {a: {sources: [{name: milton}]}}\nbudgets: [1000]\nseed: 3\n"),
        "unknown field",
    ),
    # Values no probe campaign can use: bounded before any work (probe/campaign/spec.py).
    (
        "campaign: seeds: 10**12",
        _campaign(
            "c.yaml", "name: c\nrecipes: {a: {sources: [{name: milton}]}}\nbudgets: [1000]\nseeds: 1000000000000\n"
        ),
        "at most 1000",
    ),
    (
        "campaign: a context of 10**9 tokens",
        _campaign(
            "c.yaml",
            "name: c\nrecipes: {a: {sources: [{name: milton}]}}\nbudgets: [1000]\nprobe: {context: 1000000000}\n",
        ),
        "probe.context",
    ),
    (
        "campaign: a budget of 1e18 tokens",
        _campaign("c.yaml", "name: c\nrecipes: {a: {sources: [{name: milton}]}}\nbudgets: [1000000000000000000]\n"),
        "at most 1e+12",
    ),
    ("policy: malformed YAML", _policy("p.yaml", "name: p\nstages: [{name: a\n"), "malformed YAML"),
    (
        "policy: YAML with a Python object tag (code execution)",
        _policy("p.yaml", "name: !!python/object/apply:os.system ['touch pwned']\n"),
        "malformed YAML",
    ),
    (
        "policy: stages out of order",
        _policy("p.yaml", "name: p\nversion: 1\n" + _STAGES + "requirements: {min_yield_per_btok: 1}\n"),
        "strictly increasing",
    ),
    ("TensorBoard event file with a damaged record", _damaged_events, "CRC"),
    (
        "TensorBoard event file of garbage bytes",
        lambda tmp: [
            "import",
            "tensorboard",
            str(_file("events.out.tfevents.1.host", bytes(range(256)) * 4)(tmp)),
            "--run",
            "new",
        ],
        "CRC",
    ),
    ("CSV without a step column", _table("m.csv", "loss,lr\n3.0,0.1\n2.5,0.1\n"), "no step column"),
    ("CSV with a text cell in a metric column", _table("m.csv", "step,loss\n1,3.0\n2,lots\n"), "expected a number"),
    ("CSV with a NaN step", _table("m.csv", "step,loss\n1,3.0\nnan,2.5\n"), "whole step number"),
    ("CSV with a huge step (1e30)", _table("m.csv", "step,loss\n1,3.0\n1e30,2.5\n"), "whole step number"),
    ("empty CSV", _table("m.csv", ""), "empty"),
    (
        "JSONL with a line cut in half",
        _table("m.jsonl", '{"step": 1, "loss": 3.0}\n{"step": 2, "lo\n{"step": 3, "loss": 2.0}\n'),
        "m.jsonl",
    ),
    ("run name with control characters", _run_name("evil\x1b[31mred"), "not allowed"),
    ("run name climbing out of a folder (../..)", _run_name("../../etc/passwd"), "not allowed"),
    ("run name with a backslash", _run_name("runs\\a"), "not allowed"),
    ("run name with a leading /", _run_name("/abs"), "not allowed"),
    ("run name with a right-to-left override (bidi)", _run_name("exe.\u202etxt"), "RIGHT-TO-LEFT OVERRIDE"),
    ("run name with a zero-width space", _run_name("run\u200b1"), "ZERO WIDTH SPACE"),
    ("run name with a line separator", _run_name("run\u2028error: all good"), "LINE SEPARATOR"),
    ("run name not encodable as UTF-8 (a lone surrogate)", _run_name("run\udcff"), "not UTF-8"),
    (
        "CSV with a metric name holding a bidi override",
        _table("m.csv", "step,train/lo\u202ess\n1,3.0\n2,2.5\n"),
        "RIGHT-TO-LEFT OVERRIDE",
    ),
    # Bounded input: what would hang, run out of memory or end in a traceback is one line instead.
    ("CSV of 10,000 metric columns", _table("m.csv", _WIDE), "more than the 2,000"),
    (
        "JSONL with a value nested 100,000 deep",
        _table("m.jsonl", '{"step": 1, "loss": 3.0}\n{"step": 2, "loss": ' + _DEEP + "}\n"),
        "nested too deeply",
    ),
    (
        "JSONL with a 16,000-digit step",
        _table("m.jsonl", '{"step": 1, "loss": 3.0}\n{"step": ' + _DIGITS + ', "loss": 2.0}\n'),
        "whole step number",
    ),
    (
        "Trainer state (trainer_state.json) nested 100,000 deep",
        _import("hf-trainer", _file("trainer_state.json", '{"log_history": [{"step": 1, "loss": ' + _DEEP + "}]}")),
        "nested too deeply",
    ),
    (
        "Trainer state (trainer_state.json) with a 16,000-digit step",
        _import("hf-trainer", _file("trainer_state.json", '{"log_history": [{"step": ' + _DIGITS + ', "loss": 1}]}')),
        "not a step number",
    ),
    (
        "lm-eval results nested 100,000 deep",
        _import("lm-eval", _file("results.json", '{"step": 1, "results": {"arc": {"acc,none": ' + _DEEP + "}}}")),
        "nested too deeply",
    ),
    (
        "lm-eval aggregate keyed by a 16,000-digit checkpoint",
        _import("lm-eval", _file("agg.json", '{"' + _DIGITS + '": {"results": {"arc": {"acc,none": 0.5}}}}')),
        "no step in its name",
    ),
    (
        "W&B run log with a history value nested 100,000 deep",
        _import("wandb", _wandb_log("run-x.wandb", [{"loss": "3.0"}, {"loss": "2.0", "x": _DEEP}])),
        "nested too deeply",
    ),
    ("table that is /dev/zero", lambda tmp: ["import", "table", "/dev/zero", "--run", "new"], "character device"),
    ("table that is a FIFO (named pipe)", _import("table", _fifo("m.csv")), "FIFO"),
    ("table that is a directory", _import("table", _folder("d.csv")), "is a directory"),
    ("text log that is a FIFO", _import("textlog", _fifo("train.log")), "FIFO"),
    ("TensorBoard event file that is a FIFO", _import("tensorboard", _fifo("events.out.tfevents.1.host")), "FIFO"),
    (
        "TensorBoard event file that is /dev/zero",
        lambda tmp: ["import", "tensorboard", "/dev/zero", "--run", "new"],
        "character device",
    ),
    ("W&B run log that is a FIFO", _import("wandb", _fifo("run-x.wandb")), "FIFO"),
    (
        "Trainer state that is /dev/zero",
        lambda tmp: ["import", "hf-trainer", "/dev/zero", "--run", "new"],
        "character device",
    ),
    ("lm-eval results that are a FIFO", _import("lm-eval", _fifo("results.json")), "FIFO"),
    (
        "manifest that is a FIFO",
        lambda tmp: ["import", "table", str(tmp / "base.csv"), "--run", "new", "--manifest", str(_fifo("m.yaml")(tmp))],
        "FIFO",
    ),
    (
        "manifest that is /dev/zero",
        lambda tmp: ["import", "table", str(tmp / "base.csv"), "--run", "new", "--manifest", "/dev/zero"],
        "character device",
    ),
    ("recipe file that is a FIFO", lambda tmp: ["train", str(_fifo("r.yaml")(tmp)), "--tokens", "1000"], "FIFO"),
    ("recipe source path: /dev/zero", _recipe_path("/dev/zero"), "character device"),
    ("recipe source path: a FIFO", _recipe_path(_fifo("docs.txt")), "FIFO"),
    (
        "policy that is a directory",
        lambda tmp: ["gate", "base", "--policy", str(_folder("p.yaml")(tmp))],
        "is a directory",
    ),
    # Numbers on the command line: what is out of range, or not a finite number, is named.
    ("a float option given nan", lambda tmp: ["yield", "base", "--tranche-tokens", "nan"], "finite number"),
    ("a float option given inf", lambda tmp: ["forecast", "base", "--next-tokens", "inf"], "finite number"),
    ("a float option given a word", lambda tmp: ["forecast", "base", "--next-tokens", "lots"], "takes a number"),
    ("a negative tranche size", lambda tmp: ["yield", "base", "--tranche-tokens", "-5"], "tranche_tokens"),
    (
        "an interval coverage above 1",
        lambda tmp: ["forecast", "base", "--next-tokens", "1000", "--level", "1.5"],
        "between 0 and 1",
    ),
    # Lines and names past any real log's: refused before they are parsed (a 100 MB header took minutes).
    ("CSV with a 4 MB header line", _table("m.csv", "step,loss" + "x" * 4_000_000 + "\n1,2\n"), "a line of"),
    ("JSONL with a 4 MB line", _table("m.jsonl", '{"step": 1, "' + "x" * 4_000_000 + '": 2}\n'), "a line of"),
    (
        "text log with a 4 MB line",
        _import("textlog", _file("train.log", "step 1: loss " + "9" * 4_000_000 + "\n")),
        "a line of",
    ),
    (
        "CSV with a metric name of 500 characters",
        _table("m.csv", "step," + "x" * 500 + "\n1,2\n"),
        "longer than the 200",
    ),
    # An output path that names a database: refused before anything is written (the ledger was replaced).
    (
        "report written onto the ledger itself",
        lambda tmp: ["report", "base", "-o", str(tmp / "ledger.db")],
        "an SQLite database or its log",
    ),
    (
        "report written onto the ledger's write-ahead log",
        lambda tmp: ["report", "base", "-o", str(tmp / "ledger.db-wal")],
        "an SQLite database or its log",
    ),
    (
        "export to MLflow whose store is the ledger itself",
        lambda tmp: ["export", "base", str(tmp / "ledger.db"), "--to", "mlflow"],
        "a yieldgate ledger, not an MLflow store",
    ),
    (
        "export to MLflow whose store is a text file",
        lambda tmp: ["export", "base", str(_file("notes.txt", "x")(tmp)), "--to", "mlflow"],
        "a file, not an MLflow store",
    ),
    (
        "import from MLflow whose store is a yieldgate ledger",
        lambda tmp: ["import", "mlflow", str(tmp / "ledger.db"), "--run", "new"],
        "a yieldgate ledger, not an MLflow store",
    ),
    ("merge of the ledger into itself", lambda tmp: ["merge", str(tmp / "ledger.db")], "the ledger itself"),
    # An import into a run that exists never overwrites it (yieldgate.ingest.guard).
    (
        "import into a run that exists, without --replace or --append",
        lambda tmp: ["import", "table", str(_file("m.csv", "step,loss\n1,9\n2,8\n")(tmp)), "--run", "base"],
        "--replace",
    ),
    (
        "import --append of steps at or before the run's last",
        lambda tmp: [
            "import",
            "table",
            str(_file("m.csv", "step,loss\n15,9\n25,8\n")(tmp)),
            "--run",
            "base",
            "--append",
        ],
        "step 15 is at or before",
    ),
    # Issue #46, item 8: inputs that hung, printed a traceback or were taken silently.
    (
        "text-log mapping whose `lines` regex backtracks exponentially (`(a+)+`: 60 s on a 41-character line)",
        _regex_map("a" * 40 + "b", "^(?P<loss>a+)+$"),
        "repeats a part that itself repeats",
    ),
    (
        "text-log mapping whose `lines` regex chooses between overlapping branches inside a repeat (`(a¦aa)+b`, "
        "54 s on a 41-character line)",
        _regex_map("a" * 40, "^(?P<loss>(a|aa)+)b$"),
        "(a|aa)+",
    ),
    (
        "text-log mapping whose `lines` regex repeats a scan 12 times (`(.*a){12}x`: n^12 on a line)",
        _regex_map("a" * 40, "^(?P<loss>(.*a){12})x$"),
        "repeats a part that itself repeats or chooses",
    ),
    (
        "mapping with 3,000 `names:` entries (a million took 120 s)",
        lambda tmp: [
            *_table("m.csv", "step,loss\n1,2\n")(tmp),
            "--map",
            str(_file("m.json", json.dumps({"names": {f"signals/k{i}": f"c{i}" for i in range(3000)}}))(tmp)),
        ],
        "at most 2,000",
    ),
    (
        "mapping whose `step:` names a field the table lacks",
        _table("m.csv", "step,loss\n1,2\n", "--map", "step=nope"),
        "which the source does not have",
    ),
    (
        "mapping with `iters_per_epoch: 0`",
        _table(
            "m.csv",
            "epoch,iter,loss\n1,1,2\n",
            "--map",
            "epoch=epoch",
            "--map",
            "iter=iter",
            "--map",
            "iters_per_epoch=0",
        ),
        "iters_per_epoch must be a whole number >= 1",
    ),
    (
        "mapping with `iters_per_epoch: -1`",
        _table(
            "m.csv",
            "epoch,iter,loss\n1,1,2\n",
            "--map",
            "epoch=epoch",
            "--map",
            "iter=iter",
            "--map",
            "iters_per_epoch=-1",
        ),
        "iters_per_epoch must be a whole number >= 1",
    ),
    (
        "`--map step=a --map step=b`",
        _table("m.csv", "a,b,loss\n1,1,2\n", "--map", "step=a", "--map", "step=b"),
        "contradict each other",
    ),
    (
        "`import auto` of a FIFO (it blocked)",
        lambda tmp: ["import", "auto", str(_fifo("train.log")(tmp)), "--run", "new"],
        "is a FIFO",
    ),
    (
        "campaign: a trainer script named without a suffix that is not there (`python nope`)",
        lambda tmp: [
            _file("a.jsonl", '{"text": "x"}\n')(tmp).name and "probe",
            str(
                _file(
                    "c.yaml",
                    "name: own\nrecipes: {a: {sources: [{name: a, path: a.jsonl}]}}\nseeds: 1\nbudgets: [100]\n"
                    "trainer: {command: 'python nope --data {recipe_file}'}\n",
                )(tmp)
            ),
        ],
        "names the script 'nope'",
    ),
]


@pytest.mark.parametrize("fault, args, word", REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_input_is_refused_in_one_line_and_the_ledger_is_unchanged(base, tmp_path, fault, args, word, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything a hostile file managed to run would write `pwned` here
    before = ledger_digest(base)
    _, err = _invoke(base, *args(tmp_path), code=2)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and word in err, err
    assert ledger_digest(base) == before
    assert not (tmp_path / "pwned").exists()
    check(fault, f"refused, exit 2, ledger unchanged: `{_shown(err, tmp_path)}`", str(BASE_STEPS - _steps(base)))


# -- accepted with a warning: the input is partly or wholly good data -----------------------------------

LONG_VALUE = [  # (format, file, import kind, content with {d} for the 16,000 digits)
    ("CSV", "m.csv", "table", "step,loss\n1,3.0\n2,{d}\n3,2.0\n"),
    (
        "JSONL",
        "m.jsonl",
        "table",
        '{{"step": 1, "loss": 3.0}}\n{{"step": 2, "loss": {d}}}\n{{"step": 3, "loss": 2.0}}\n',
    ),
    # fairseq's lines: a key before a long run of digits was tried at every digit (15 s a line)
    (
        "text log",
        "train.log",
        "textlog",
        "| train_inner | epoch 001:   1 / 10 loss=3.0, num_updates=1\n"
        "| train_inner | epoch 001:   2 / 10 loss={d}, num_updates=2\n"
        "| train_inner | epoch 001: {d}\n"
        "| train_inner | epoch 001:   3 / 10 loss=2.0, num_updates=3\n",
    ),
    # tqdm's bars and the Hugging Face Trainer's console: a count or a key before the digits
    (
        "tqdm bar",
        "bar.log",
        "textlog",
        "Epoch 0:  10%|█ | 1/10 [00:01<00:09, 1.0it/s, loss=3.0]\r"
        "Epoch 0:  20%|██ | 2/10 [00:02<00:08, 1.0it/s, loss={d}]\r"
        "Epoch 0:  25%|██ | {d}/10 [00:02<00:08, 1.0it/s, x{d}=1]\r"
        "Epoch 0:  30%|███ | 3/10 [00:03<00:07, 1.0it/s, loss=2.0]\n",
    ),
    (
        "HF console",
        "hf.log",
        "textlog",
        " 10%|█ | 1/10 [00:01<00:09, 1.0it/s]{{'loss': 3.0}}\n"
        " 20%|██ | 2/10 [00:02<00:08, 1.0it/s]{{'loss': {d}.0}}\n"
        " 25%|██ | {d}/10 [00:02<00:08, 1.0it/s]{d}\n"
        " 30%|███ | 3/10 [00:03<00:07, 1.0it/s]{{'loss': 2.0}}\n",
    ),
]


@pytest.mark.parametrize("fmt, name, kind, content", LONG_VALUE, ids=[v[0] for v in LONG_VALUE])
def test_a_16000_digit_value_imports_in_under_a_second(base, tmp_path, fmt, name, kind, content):
    import time

    from yieldgate.ingest import ImportOptions, import_run

    path = tmp_path / name
    path.write_text(content.format(d="9" * 16_000))
    with Ledger(base) as ledger:  # what `yieldgate import` calls, timed without the command line's start-up
        start = time.perf_counter()
        (result,) = import_run(ledger, kind, [str(path)], ImportOptions(run="new"))
        elapsed = time.perf_counter() - start
    warnings = result.warnings
    with Ledger(base, readonly=True) as led:
        loss = led.steps("new")["loss"].tolist()
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    bits = math.log(2) if fmt == "text log" else 1.0  # fairseq's losses are in bits: read in nats
    assert loss == [pytest.approx(3.0 * bits), float("inf"), pytest.approx(2.0 * bits)]
    assert any("nan/inf" in w for w in warnings) and all(len(w) < 300 for w in warnings), warnings
    check(
        f"{fmt} with a 16,000-digit value",
        "imported in < 1 s as inf (past float range, as 1e309), with the nan/inf warning",
        str(3 - len(loss)),
    )


@pytest.mark.slow
def test_a_metric_name_mlflow_refuses_is_one_line_on_export(base, tmp_path):
    from mlflow.tracking import MlflowClient

    csv = tmp_path / "odd.csv"
    csv.write_text(
        "step,loss,signals/../x\n1,3.0,1\n2,2.5,1\n"
    )  # a name MLflow reads as a path that resolves elsewhere
    _invoke(base, "import", "table", str(csv), "--run", "odd", code=0)
    before = ledger_digest(base)
    _, err = _invoke(base, "export", "odd", str(tmp_path / "mlruns"), "--to", "mlflow", code=2)
    assert err.startswith("error: ") and err.count("\n") == 1 and "MLflow refused" in err and "signals/../x" in err, err
    assert ledger_digest(base) == before
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    (exp,) = client.search_experiments()
    assert client.search_runs([exp.experiment_id]) == []  # the run made for the export was deleted
    check(
        "export to MLflow of a metric name MLflow refuses (`a/../b`)",
        f"refused, exit 2, no MLflow run left: `{_shown(err, tmp_path)}`",
        "0",
    )


def test_an_import_into_a_run_a_live_tracker_writes_is_refused(base, tmp_path):
    """Even with --replace: an import never splices its rows into a live run (yieldgate.ingest.guard)."""
    from yieldgate import Tracker

    with Tracker("live", ledger=base) as tr:
        tr.step(tokens=1000, loss=1.0)
        _, err = _invoke(base, "import", "table", str(tmp_path / "base.csv"), "--run", "live", "--replace", code=2)
        assert err.count("\n") == 1 and "live Tracker" in err, err
    with Ledger(base, readonly=True) as led:
        assert led.steps("live")["step"].tolist() == [1] and led.superseded("live").empty
    shown = _shown(err, tmp_path).replace(str(os.getpid()), "PID")
    shown = shown[: shown.index("(host ") + 6] + "…, pid PID, …): an import never writes a live run"
    check(
        "import into a run a live Tracker writes, with --replace too",
        f"refused, exit 2, the run unchanged: `{shown}`",
        "0",
    )


@pytest.mark.slow
def test_a_campaign_whose_every_probe_fails_exits_2_naming_the_first_failure(base, tmp_path):
    broken = "{sources: [{name: nowhere, path: " + str(tmp_path / "no-such-dir") + "}]}"
    spec = tmp_path / "c.yaml"
    spec.write_text(f"name: f\nrecipes: {{a: {broken}, b: {broken}}}\nseeds: [0]\nbudgets: [1000]\n")
    _, err = _invoke(base, "probe", str(spec), "--workers", "1", code=2)
    line = err.strip().splitlines()[-1]  # the progress bar goes to stderr before it
    assert line.startswith("error: campaign 'f': all 2 probe(s) failed") and "neither a built-in source" in line, err
    with Ledger(base, readonly=True) as led:  # each failure is stored with its reason
        assert {led.run_info(r)["status"] for r in ("f/a/s0/t1000", "f/b/s0/t1000")} == {"failed"}
    check(
        "campaign whose every probe fails",
        "exit 2, one line naming the first failure (each failure stored in its "
        "run's meta); before: exit 0 with nothing ranked",
        "0",
    )


def test_a_ledger_with_a_damaged_schema_text_is_refused_in_one_line(base, tmp_path):
    db = sqlite3.connect(base)
    db.execute("PRAGMA writable_schema = ON")  # the CREATE TABLE text SQLite keeps, cut short
    db.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE runs (id INTEGER PRIMARY KEY, na' WHERE name = 'runs'")
    db.commit()
    db.close()
    raw = base.read_bytes()
    for args in (["runs"], ["show", "base"], ["import", "table", str(tmp_path / "base.csv"), "--run", "x"]):
        _, err = _invoke(base, *args, code=2)
        assert err.startswith("error: ") and err.count("\n") == 1 and "malformed database schema" in err, err
    assert base.read_bytes() == raw
    check(
        "ledger whose schema text is damaged",
        f"refused by every command, exit 2, file unchanged: `{_shown(err, tmp_path)}`",
        "0 (nothing read)",
    )


@pytest.mark.parametrize("empty", [False, True], ids=["another-programs-database", "zero-byte-file"])
def test_a_ledger_path_naming_another_programs_file_is_left_as_it_was(base, tmp_path, empty):
    """--ledger mistyped onto another program's SQLite database: every command refuses it, in one line, before
    writing. Onto a zero-byte file: a read sees no runs and leaves it zero bytes (a write makes it a ledger)."""
    path = tmp_path / "app.db"
    if empty:
        path.touch()
    else:
        with sqlite3.connect(path) as db:
            db.executescript("CREATE TABLE users (id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'ada');")
    raw = path.read_bytes()
    if empty:
        out, _ = _invoke(path, "runs", "--json", code=0)
        assert json.loads(out) == []
    else:
        for args in (["runs"], ["show", "base"], ["import", "table", str(tmp_path / "base.csv"), "--run", "x"]):
            _, err = _invoke(path, *args, code=2)
            assert err.startswith("error: ") and err.count("\n") == 1 and "not a yieldgate ledger" in err, err
    assert path.read_bytes() == raw and not list(tmp_path.glob("app.db-*"))
    check(
        "ledger path naming a zero-byte file" if empty else "ledger path naming another program's SQLite database",
        "read as an empty ledger, file left at 0 bytes (before: a read wrote a 120 KB ledger into it)"
        if empty
        else f"refused by every command, exit 2, file unchanged: `{_shown(err, tmp_path)}` (before: our tables "
        "added to it)",
        "0",
    )


def test_truncated_event_file_keeps_the_records_before_the_cut(base, tmp_path):
    path = _event_file(tmp_path, steps=30)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])  # a writer killed mid-record
    out, _ = _invoke(base, "import", "tensorboard", str(path), "--run", "new", "--json", code=0)
    (warning,) = json.loads(out)[0]["warnings"]
    assert "cut off" in warning, warning
    imported = _steps(base, "new")
    assert imported == 29 and _steps(base) == BASE_STEPS
    check(
        "TensorBoard event file truncated mid-record",
        f"imported, exit 0, one warning: `{_shown(warning, tmp_path)}`",
        f"{30 - imported} (the cut record)",
    )


def test_nan_inf_and_huge_values_are_kept_as_data_with_a_warning(base, tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("step,loss,grad_norm\n1,3.0,1\n2,nan,1e308\n3,inf,1e309\n4,2.0,-1e400\n")
    out, _ = _invoke(base, "import", "table", str(csv), "--run", "new", "--json", code=0)
    warnings = json.loads(out)[0]["warnings"]
    with Ledger(base, readonly=True) as led:
        steps = led.steps("new")
    assert steps["step"].tolist() == [1, 2, 3, 4]
    loss, grad = steps["loss"].tolist(), steps["grad_norm"].tolist()
    assert loss[0] == 3.0 and loss[1] != loss[1] and loss[2] == float("inf") and loss[3] == 2.0
    assert grad == [1.0, 1e308, float("inf"), float("-inf")]
    assert len(warnings) == 2 and all("nan/inf" in w for w in warnings), warnings
    check(
        "CSV with NaN, Inf and huge (1e309) values",
        "imported as NaN / ±inf (a diverged loss is data), exit 0, "
        f"one warning per column: `{_shown(warnings[0], tmp_path)}`",
        str(4 - len(steps)),
    )


def test_a_table_not_in_utf8_is_read_with_a_warning(base, tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_bytes("step,loss,p\xe9rte\n1,3.0,1\n2,2.5,1\n".encode("latin-1"))  # a Latin-1 column name
    out, _ = _invoke(base, "import", "table", str(csv), "--run", "new", "--json", code=0)
    (warning,) = json.loads(out)[0]["warnings"]
    assert "not UTF-8" in warning and "m.csv:1" in warning, warning
    imported = _steps(base, "new")
    check(
        "CSV or text log not in UTF-8",
        f"imported, exit 0, one warning: `{_shown(warning, tmp_path)}`",
        str(2 - imported),
    )


# -- a ledger from a newer schema -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_ledger_from_a_newer_schema_is_refused_and_not_modified(base, tmp_path):
    db = sqlite3.connect(base)
    db.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_from_the_future', 0)")
    db.commit()
    db.close()
    before, raw = ledger_digest(base), base.read_bytes()
    errors = []
    for args in (["runs"], ["compare", "base", "base"], ["import", "table", str(tmp_path / "base.csv"), "--run", "x"]):
        # The real command in its own process: what a user sees, traceback or not.
        proc = subprocess.run(
            [sys.executable, "-m", "yieldgate", "--ledger", str(base), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "newer yieldgate" in proc.stderr and "9999_from_the_future" in proc.stderr
        errors.append(proc.stderr)
    assert ledger_digest(base) == before and base.read_bytes() == raw
    check(
        "ledger written by a newer schema version",
        f"refused by every command, exit 2, file unchanged: `{_shown(errors[0], tmp_path)}`",
        str(BASE_STEPS - _steps_raw(base)),
    )


def _steps_raw(path: Path) -> int:
    """Step rows of `base`, read without yieldgate (which refuses this ledger)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT COALESCE(SUM(n), 0) FROM step_blocks JOIN runs ON runs.id = step_blocks.run_id "
            "WHERE runs.name = 'base'"
        ).fetchone()[0]
    finally:
        db.close()


# -- the Tracker: a bad run name is refused at construction; a bad metric key never reaches the loop ---------


def test_the_tracker_refuses_a_bad_run_name_and_leaves_bad_metric_keys_out(tmp_path):
    import math

    from yieldgate.errors import InputError
    from yieldgate.track.tracker import Tracker, TrackerConfig

    path = tmp_path / "t.db"
    with pytest.raises(InputError, match="RIGHT-TO-LEFT OVERRIDE"):
        Tracker("exe.\u202etxt", ledger=path)
    bad = {"signals/x\u2028error: all good": 1.0, "signals/zero\u200bwidth": 2.0, "nonamespace": 3.0, "signals/ok": 4.0}
    with Tracker("t", ledger=path, config=TrackerConfig(flush_every_s=0.05, log_every_steps=5)) as tr:
        for i in range(1, 21):
            tr.step(tokens=128, samples=1, loss=1.0 / i, extras=bad)  # never raises into the loop
        tr.eval({"val/loss": 0.5, "val\u202e/acc": 0.9})
    assert tr.stats["dropped_rows"] == 0 and tr.stats["faults"] >= 4
    with Ledger(path, readonly=True) as led:
        steps = led.steps("t")
        assert steps["step"].tolist() == list(range(1, 21)) and math.isclose(steps["loss"].iloc[-1], 1 / 20)
        assert [k for k in led.extra_keys("t") if not k.startswith(("device/", "host/"))] == ["signals/ok"]
        assert led.evals("t")[["task", "metric"]].values.tolist() == [["val", "loss"]]
    check(
        "Tracker: metric keys with a line separator, a zero-width or bidi character, or no namespace",
        "each left out of the rows (an eval key: of the eval) and reported once; the loop never sees an error; a "
        "run name holding one is refused by the constructor",
        "0 (the steps' other values are kept)",
    )
