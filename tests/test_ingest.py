"""`import_run` on damaged files of every file-based kind: each mutation ends in an import (with warnings)
or one InputError naming the file — never a traceback, never a half-written run. (MLflow reads a store
through its own client and is not mutated here.)"""

from __future__ import annotations

import json
import random

import pytest

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

    state = TrainerState(global_step=29, log_history=[{"loss": 3 / s, "step": s, "epoch": s / 29} for s in range(1, 30)])
    path = tmp_path / "trainer_state.json"
    state.save_to_json(str(path))
    return path, {}


def _lmeval(tmp_path):
    path = tmp_path / "step100" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"results": {"arc_easy": {"alias": "arc_easy", "acc,none": 0.5,
                                                         "acc_stderr,none": 0.01}}}))
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


MAKERS = {"tensorboard": _tensorboard, "table": _csv, "table-jsonl": _jsonl, "textlog": _textlog,
          "hf-trainer": _hf, "lm-eval": _lmeval, "wandb": _wandb}


def _mutations(data: bytes, rng: random.Random):
    yield "empty", b""
    for frac in (0.1, 0.5, 0.97):
        yield f"truncated at {frac:.0%}", data[: int(len(data) * frac)]
    for k in range(4):
        flipped = bytearray(data)
        for _ in range(3):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        yield f"3 garbage bytes #{k}", bytes(flipped)
    yield "nan", data.replace(b"0.", b"nan", 2)
    yield "binary junk", bytes(rng.randrange(256) for _ in range(300))


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_mutated_files_give_warnings_or_one_input_error(ledger, tmp_path, maker, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    path, extra = MAKERS[maker](tmp_path)
    kind = maker.split("-jsonl")[0]
    assert kind in KINDS
    data = path.read_bytes()
    rng = random.Random(maker)
    for i, (what, mutated) in enumerate(_mutations(data, rng)):
        path.write_bytes(mutated)
        run = f"{maker}-{i}"
        try:
            import_run(ledger, kind, [str(path)], ImportOptions(run=run, **extra))
        except InputError as exc:
            assert str(path) in str(exc) or "--" in str(exc), (what, str(exc))
            assert "\n" not in str(exc), (what, str(exc))
            assert run not in set(ledger.runs()["name"]), what  # nothing half-written
