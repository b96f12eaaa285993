"""`import_run` on damaged files of every file-based kind: each mutation ends in an import (with warnings)
or one InputError naming the file — never a traceback, never a half-written run. (MLflow: one metric's
history file in a folder store, read through MLflow's own client.) 60 seeded mutations per importer here,
1,000 under `make soak`."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from tests.support.digest import ledger_digest
from tests.support.reliability import check
from yieldgate.errors import InputError
from yieldgate.ingest import KINDS, ImportOptions, import_run


def _tensorboard(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "tb")
    for s in range(1, 30):
        writer.add_scalar("train/loss", 3.0 / s, s)
        writer.add_scalar("eval/loss", 3.2 / s, s)
    writer.close()
    (path,) = (tmp_path / "tb").iterdir()
    return path, {}


def _csv(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss,val_loss\n" + "".join(f"{s},{3 / s},{'' if s % 5 else 3.1 / s}\n" for s in range(1, 30)))
    return path, {}


def _jsonl(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 3 / s}) + "\n" for s in range(1, 30)))
    return path, {}


def _textlog(tmp_path):
    path = tmp_path / "t.log"
    path.write_text("".join(f"step:{s} loss:{3 / s:.4f} time:{s * 100}ms\n" for s in range(1, 30)))
    return path, {"patterns": [r"step:(?P<step>\d+) loss:(?P<loss>\S+) time:(?P<wall_ms>\d+)ms"]}


def _hf(tmp_path):
    from transformers import TrainerState

    state = TrainerState(
        global_step=29, log_history=[{"loss": 3 / s, "step": s, "epoch": s / 29} for s in range(1, 30)]
    )
    path = tmp_path / "trainer_state.json"
    state.save_to_json(str(path))
    return path, {}


def _lmeval(tmp_path):
    path = tmp_path / "step100" / "results.json"
    path.parent.mkdir()
    path.write_text(
        json.dumps({"results": {"arc_easy": {"alias": "arc_easy", "acc,none": 0.5, "acc_stderr,none": 0.01}}})
    )
    return path, {"step_pattern": r"step(\d+)"}


def _wandb(tmp_path):
    import wandb

    from yieldgate.report.export import _wait_for_exit

    run = wandb.init(mode="offline", dir=str(tmp_path), project="p", settings=wandb.Settings(silent=True))
    for s in range(1, 30):
        run.log({"loss": 3 / s}, step=s)
    run.finish()
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    _wait_for_exit(folder)
    (path,) = folder.glob("*.wandb")
    return path, {}


def _parquet(tmp_path):
    import pandas as pd

    path = tmp_path / "m.parquet"
    pd.DataFrame({"step": range(1, 30), "loss": [3 / s for s in range(1, 30)]}).to_parquet(path)
    return path, {}


def _mlflow(tmp_path):
    """A folder store; the file mutated is one metric's history (`timestamp value step` lines)."""
    import mlflow

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    os.environ["MLFLOW_ENABLE_TELEMETRY"] = "false"
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    try:
        mlflow.set_experiment("fuzz")
        with mlflow.start_run() as run:
            for s in range(1, 30):
                mlflow.log_metrics({"loss": 3 / s, "val/loss": 3.1 / s}, step=s)
    finally:
        mlflow.set_tracking_uri(None)
    (path,) = (tmp_path / "mlruns").glob(f"*/{run.info.run_id}/metrics/loss")
    return path, {"sources": [str(tmp_path / "mlruns"), run.info.run_id]}


def _known_log(name):
    """A known trainer's log (tests/data/textlogs), read without a pattern: damage must not fool detection."""

    def make(tmp_path):
        path = tmp_path / name
        path.write_bytes((Path(__file__).parent / "data" / "textlogs" / name).read_bytes())
        return path, {}

    return make


MAKERS = {
    "tensorboard": _tensorboard,
    "table": _csv,
    "table-jsonl": _jsonl,
    "table-parquet": _parquet,
    "textlog": _textlog,
    "hf-trainer": _hf,
    "lm-eval": _lmeval,
    "wandb": _wandb,
    "mlflow": _mlflow,
    "textlog-nanogpt": _known_log("nanogpt.log"),
    "textlog-megatron": _known_log("megatron.log"),
    "textlog-fairseq": _known_log("fairseq.log"),
    "textlog-kv": _known_log("torchtitan.log"),
    "textlog-blocks": _known_log("olmo.log"),
}

# Bytes that real damage and hostile files bring: numbers that overflow or are not numbers, non-UTF-8 text,
# markup, NUL and control characters, a huge length prefix.
_SPLICES = [
    b"nan",
    b"inf",
    b"-inf",
    b"1e309",
    b"-1e400",
    b"9" * 40,
    b"-1",
    b"\xff\xfe",
    b"\xe9",
    b"\x00",
    b"<script>",
    b"\x1b[31m",
    b"\r\n",
    b"\xff" * 8,
    b"{",
    b"]",
    b'"',
    b",",
]


def _mutations(data: bytes, rng: random.Random, n: int):
    """`n` damaged copies of `data`, seeded: the classic cases first, then random damage of every kind."""
    fixed = [
        ("empty", b""),
        ("nan", data.replace(b"0.", b"nan", 2)),
        ("binary junk", bytes(rng.randrange(256) for _ in range(300))),
    ]
    fixed += [(f"truncated at {frac:.0%}", data[: int(len(data) * frac)]) for frac in (0.1, 0.5, 0.97)]
    yield from fixed[:n]
    for k in range(n - len(fixed)):
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            how = rng.randrange(6)
            at = rng.randrange(len(out) + 1)
            if how == 0 and out:  # flipped bytes
                for _ in range(rng.randint(1, 4)):
                    out[rng.randrange(len(out))] = rng.randrange(256)
            elif how == 1:  # cut short
                del out[at:]
            elif how == 2:  # a span lost
                del out[at : at + rng.randint(1, 64)]
            elif how == 3:  # a span written twice (a log appended twice, a retried write)
                out[at:at] = out[at : at + rng.randint(1, 256)]
            elif how == 4:  # a hostile or non-finite token spliced in
                out[at:at] = rng.choice(_SPLICES)
            else:  # a token replaced by one
                for old in (b"0.", b"1", b"3", b"e"):
                    if old in out:
                        i = out.find(old, rng.randrange(len(out)))
                        if i >= 0:
                            out[i : i + len(old)] = rng.choice(_SPLICES)
                            break
        yield f"random #{k}", bytes(out)


def _fuzz(ledger, tmp_path, maker, n, monkeypatch):
    """Every mutation ends in an import (with warnings) or one InputError naming the source; a refused one
    leaves the ledger's content exactly as it was. Anything else (another exception) fails the test."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    path, extra = MAKERS[maker](tmp_path)
    kind = maker if maker in KINDS else maker.rsplit("-", 1)[0]
    assert kind in KINDS
    sources = extra.pop("sources", [str(path)])
    data = path.read_bytes()
    import_run(ledger, kind, sources, ImportOptions(run="base", **extra))  # the untouched file imports
    base_rows = len(ledger.steps("base")) + len(ledger.evals("base"))
    refused = 0
    for i, (what, mutated) in enumerate(_mutations(data, random.Random(f"{maker}-{n}"), n)):
        path.write_bytes(mutated)
        run = f"{maker}-{i}"
        before = ledger_digest(ledger.location)
        try:
            import_run(ledger, kind, sources, ImportOptions(run=run, **extra))
        except InputError as exc:
            refused += 1
            assert str(path) in str(exc) or any(s in str(exc) for s in sources) or "--" in str(exc), (what, str(exc))
            assert "\n" not in str(exc), (what, str(exc))
            assert ledger_digest(ledger.location) == before, what  # nothing half-written
    check(
        f"{maker} file, {FUZZ_N} seeded mutations ({SOAK_N:,} in `make soak`)",
        "each imported (with warnings) or refused in one line naming the file; refused ones leave the ledger "
        "unchanged; no other exception",
        str(base_rows - len(ledger.steps("base")) - len(ledger.evals("base"))),
    )
    return refused


FUZZ_N, SOAK_N = 60, 1000


@pytest.mark.slow
@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_mutated_files_give_warnings_or_one_input_error(ledger, tmp_path, maker, monkeypatch):
    _fuzz(ledger, tmp_path, maker, FUZZ_N, monkeypatch)


@pytest.mark.soak
@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_mutated_files_soak(ledger, tmp_path, maker, monkeypatch):
    _fuzz(ledger, tmp_path, maker, SOAK_N, monkeypatch)


_LFS = (
    b"version https://git-lfs.github.com/spec/v1\n"
    b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345678\n"
)
_HTML = b'<!DOCTYPE html>\n<html lang="en"><head><title>train.log at main</title></head><body></body></html>\n'


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("events.out.tfevents.1.host", "tensorboard"),
        ("m.csv", "table"),
        ("train.log", "textlog"),
        ("trainer_state.json", "hf-trainer"),
        ("results_step10.json", "lm-eval"),
        ("train.log.gz", "textlog"),
    ],
)
def test_a_placeholder_says_what_it_is(ledger, tmp_path, name, kind):
    """A Git LFS pointer, an empty file or a saved web page in a log's place is named for what it is."""
    import gzip

    path = tmp_path / name
    for data, says in (
        (
            _LFS,
            r"this is a Git LFS pointer \(a 12,345,678-byte file stored elsewhere\), not the file "
            r"itself: run `git lfs pull`",
        ),
        (_HTML, "this is an HTML page, not .*: a web page was saved in the file's place"),
        (b"  \n", "the file is empty"),
        (b"", "empty"),
    ):
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        with pytest.raises(InputError, match=says) as err:
            import_run(ledger, kind, [str(path)], ImportOptions(run="p"))
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert len(ledger.runs()) == 0


def test_an_import_that_reads_nothing_is_refused(ledger, tmp_path):
    """Zero rows is an error that says what was looked for and what was found, never an empty run."""
    path = tmp_path / "m.csv"
    path.write_text("step,note\n1,\n2,\n")
    with pytest.raises(
        InputError,
        match=r"m.csv: nothing to import: looked for rows with a step and at least one "
        r"metric and found no metric at all",
    ):
        import_run(ledger, "table", [str(path)], ImportOptions(run="t"))
    assert len(ledger.runs()) == 0


def test_a_metric_name_with_a_control_character_is_refused_naming_the_file(ledger, tmp_path):
    """A damaged log's metric name holding a control character (found by the mutation soak on a Megatron log) is
    refused in one line that names the file, and nothing is written."""
    path = tmp_path / "m.csv"
    path.write_text("step,loss,tflop_per_\x11_gpu\n1,5.0,10\n2,4.0,11\n")
    with pytest.raises(InputError, match=r"m\.csv: the metric name .* holds U\+0011") as err:
        import_run(ledger, "table", [str(path)], ImportOptions(run="c"))
    assert "\n" not in str(err.value) and len(ledger.runs()) == 0
