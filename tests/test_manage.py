"""Runs you can manage: rm, rename, tag/untag, note; `runs` filters, sorts and writes CSV; names chosen for a
run that has none or whose name is taken; hyper-parameters in the manifest. Driven as a user would: the CLI over a
ledger file, the Tracker in this process."""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np
import pytest

from yieldgate import api
from yieldgate.errors import InputError, ManifestError, RunReferenced
from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.ledger.pg import masked
from yieldgate.manifest import Manifest, diff, flat_config, parse_manifest

from .test_manifest import BASE


def _run(
    led: Ledger,
    name: str,
    *,
    tokens: float = 300.0,
    wall: float = 30.0,
    status: str = "finished",
    config: dict | None = None,
) -> None:
    led.create_run(name, status=status, manifest=parse_manifest({**BASE, "config": config or {}}))
    led.append_steps(
        name,
        {
            "step": [1, 2, 3],
            "tokens": [tokens / 3, 2 * tokens / 3, tokens],
            "wall_s": [wall / 3, 2 * wall / 3, wall],
            "loss": [3.0, 2.5, 2.0],
            "signals/gns": [1.0, 2.0, 3.0],
        },
    )
    led.append_evals(
        name,
        [EvalRecord(step=s, tokens=tokens * s / 3, task="val", metric="loss", value=3.0 - s / 4) for s in (1, 2, 3)],
    )
    led.add_event(name, "warning", {"what": "a note"})


@pytest.fixture
def ledger_path(ledger_location):
    """Every test here runs on both backends: a SQLite file and a PostgreSQL schema (`cli` and `three` use it)."""
    return ledger_location


def _execute(location, *statements: str) -> None:
    """Statements run on the ledger's own connection, whichever its backend (autocommit on both)."""
    with Ledger(location) as led:
        for statement in statements:
            led._db.execute(statement)


@pytest.fixture
def three(ledger_path):
    with Ledger(ledger_path) as led:
        _run(led, "bs64-seed0", tokens=300.0, wall=30.0)
        _run(led, "bs64-seed1", tokens=600.0, wall=90.0)
        _run(led, "scratch", tokens=150.0, wall=4000.0, status="failed")
    return ledger_path


def _table(path) -> dict[str, int]:
    """Rows per table: what a removal may have touched."""
    with Ledger(path, readonly=True) as led:
        return {
            t: led._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("runs", "step_blocks", "extra_blocks", "evals", "events", "run_tags", "decisions")
        }


# -- rm -------------------------------------------------------------------------------------------------------


def test_rm_takes_the_runs_records_with_it_and_leaves_the_others_whole(cli, three):
    with Ledger(three) as led:
        led.tag_run("bs64-seed1", ["baseline"])
        kept = led.steps("bs64-seed0"), led.extras("bs64-seed0"), led.evals("bs64-seed0")
    removed = cli.json("rm", "bs64-seed1", "scratch", "--yes")
    assert removed == [
        {"name": "bs64-seed1", "steps": 3, "extra_values": 3, "evals": 3, "events": 1},
        {"name": "scratch", "steps": 3, "extra_values": 3, "evals": 3, "events": 1},
    ]
    # One block of core steps and one of extras, 3 evals and an event per run; the survivor's stay as they were.
    assert _table(three) == {
        "runs": 1,
        "step_blocks": 1,
        "extra_blocks": 1,
        "evals": 3,
        "events": 1,
        "run_tags": 0,
        "decisions": 0,
    }
    with Ledger(three) as led:
        assert led.runs()["name"].tolist() == ["bs64-seed0"]
        for before, after in zip(
            kept, (led.steps("bs64-seed0"), led.extras("bs64-seed0"), led.evals("bs64-seed0")), strict=True
        ):
            assert after.equals(before)


def test_rm_asks_first_and_a_no_removes_nothing(cli, three):
    before = _table(three)
    result = cli.runner.invoke(cli_app(), ["--ledger", str(three), "rm", "bs64-*"], input="n\n")
    assert result.exit_code == 1
    assert "2 runs: bs64-seed0, bs64-seed1" in result.stderr and "Nothing removed." in result.stderr
    assert _table(three) == before
    result = cli.runner.invoke(cli_app(), ["--ledger", str(three), "rm", "bs64-*"], input="y\n")
    assert result.exit_code == 0, result.stderr
    assert "removed bs64-seed0: 3 steps, 3 extra values, 3 evals, 1 events" in result.stdout
    with Ledger(three) as led:
        assert led.runs()["name"].tolist() == ["scratch"]


def cli_app():
    from yieldgate.cli import app

    return app


def test_rm_with_a_pattern_that_matches_nothing_removes_nothing(cli, three):
    before = _table(three)
    out = cli("rm", "scratch", "bs128-*", "--yes", code=2)
    assert out.stderr.strip() == (
        f"error: no run named or matching 'bs128-*' in {masked(three)}; `yieldgate runs` lists them"
    )
    assert _table(three) == before


def test_rm_refuses_a_run_a_decision_cites_and_removes_nothing(cli, three):
    with Ledger(three) as led:
        # The gate cites its runs in the evidence (several runs) or by run id (one run).
        led.add_decision("bs64", "approve", evidence={"runs": ["bs64-seed0", "bs64-seed1"]}, rationale="r")
        led.add_decision("scratch", "hold", evidence={"runs": ["scratch"]}, rationale="r", run="scratch")
    before = _table(three)
    out = cli("rm", "scratch", "--yes", code=2)
    assert out.stderr.startswith("error: cannot remove run 'scratch'")
    assert "gate decision #2 (target 'scratch') cites it" in out.stderr
    out = cli("rm", "*", "--yes", code=2)  # all or nothing: the first refusal stops every removal
    assert "gate decision #1 (target 'bs64') cites it" in out.stderr
    assert _table(three) == before
    with pytest.raises(RunReferenced):
        with Ledger(three) as led:
            led.rename_run("bs64-seed0", "renamed")


def test_a_run_a_live_tracker_writes_cannot_be_removed_or_renamed(cli, ledger_path):
    from yieldgate.track import Tracker

    with Tracker("live", ledger=ledger_path) as tr:
        tr.step(tokens=10)
        for args in (("rm", "live", "--yes"), ("rename", "live", "other")):
            out = cli(*args, code=2)
            assert f"it is being written by host {tr.owner.host}, pid {os.getpid()}" in out.stderr
        assert cli.json("runs")[0]["name"] == "live"
    cli("rename", "live", "done")  # closed: its writer is gone
    assert cli.json("rm", "done", "--yes")[0]["steps"] == 1


# -- rename, tag, note ----------------------------------------------------------------------------------------


def test_rename_keeps_the_records_and_refuses_a_taken_or_bad_name(cli, three):
    with Ledger(three) as led:
        led.tag_run("scratch", ["tmp"])
        led.set_note("scratch", "lr too high")
        steps, evals = led.steps("scratch"), led.evals("scratch")
    assert cli.json("rename", "scratch", "lr1e-2") == {"old": "scratch", "new": "lr1e-2"}
    with Ledger(three) as led:
        assert led.steps("lr1e-2").equals(steps) and led.evals("lr1e-2").equals(evals)  # checksums still verify
        assert led.tags("lr1e-2") == ["tmp"] and led.note("lr1e-2") == "lr too high"
        assert len(led.events("lr1e-2")) == 1
    before = _table(three)
    taken = cli("rename", "lr1e-2", "bs64-seed0", code=2).stderr
    assert taken.strip() == (
        f"error: cannot rename run 'lr1e-2' to 'bs64-seed0': a run named 'bs64-seed0' is already "
        f"in {masked(three)}; pick another name"
    )
    assert "is not allowed" in cli("rename", "lr1e-2", "../up", code=2).stderr
    assert "no run named 'missing'" in cli("rename", "missing", "x", code=2).stderr
    assert _table(three) == before


def test_tag_and_untag_by_name_or_glob(cli, three):
    assert cli.json("tag", "bs64-*", "baseline", "lr=3e-4", "baseline") == [
        {"name": "bs64-seed0", "tags": ["baseline", "lr=3e-4"]},
        {"name": "bs64-seed1", "tags": ["baseline", "lr=3e-4"]},
    ]
    assert cli.json("untag", "bs64-seed1", "lr=3e-4") == [{"name": "bs64-seed1", "tags": ["baseline"]}]
    assert "tags: baseline lr=3e-4" in cli("show", "bs64-seed0").stdout
    before = _table(three)
    bad = cli("tag", "scratch", "ok", "two words", code=2).stderr
    assert bad.startswith("error: tag 'two words' is not allowed: use 1 to 64 letters")
    assert (
        cli("untag", "bs64-seed1", "lr=3e-4", code=2).stderr.strip()
        == "error: run 'bs64-seed1' has no tag 'lr=3e-4'; its tags: baseline"
    )
    assert "no run named or matching 'nope*'" in cli("tag", "nope*", "x", code=2).stderr
    assert _table(three) == before


def test_note_is_kept_replaced_and_removed(cli, three):
    cli("note", "scratch", "diverged at step 2\nrerun with warmup")
    assert cli.json("show", "scratch")["run"]["note"] == "diverged at step 2\nrerun with warmup"
    assert "note: diverged at step 2" in cli("show", "scratch").stdout
    assert cli.json("note", "scratch", "") == {"name": "scratch", "note": None}
    assert cli.json("runs", "scratch")[0]["note"] is None
    bad = cli("note", "scratch", "red \x1b[31mtext", code=2).stderr
    assert "U+001B" in bad and "control character" in bad


# -- runs -----------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_runs_filters_by_glob_tag_and_status_and_sorts(cli, three):
    cli("tag", "bs64-seed1", "baseline")
    cli("tag", "scratch", "baseline", "tmp")
    names = lambda *args: [r["name"] for r in cli.json("runs", *args)]  # noqa: E731
    assert names("bs64-*") == ["bs64-seed0", "bs64-seed1"]
    assert names("--tag", "baseline") == ["bs64-seed1", "scratch"]
    assert names("--tag", "baseline", "--tag", "tmp") == ["scratch"]
    assert names("--status", "failed") == ["scratch"]
    assert names("--status", "failed", "--status", "finished", "bs64-seed1") == ["bs64-seed1"]
    assert names("nothing-*") == []  # a filter may match nothing
    assert names("--sort", "tokens", "--reverse") == ["bs64-seed1", "bs64-seed0", "scratch"]
    assert names("--sort", "duration", "--reverse", "--limit", "1") == ["scratch"]
    assert names("--sort", "name", "--reverse") == ["scratch", "bs64-seed1", "bs64-seed0"]
    run = cli.json("runs", "bs64-seed1")[0]
    assert run["duration_s"] == 90.0 and run["tags"] == ["baseline"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", run["created_at"])
    table = cli("runs", "--sort", "tokens").stdout
    assert "created" in table and "duration" in table and "1h06m" in table and "1m30s" in table
    assert "sort must be one of name, created" in cli("runs", "--sort", "size", code=2).stderr
    assert "status must be one of running" in cli("runs", "--status", "done", code=2).stderr
    assert "tag 'a b' is not allowed" in cli("runs", "--tag", "a b", code=2).stderr
    assert "give one" in cli("runs", "--csv", "--json", code=2).stderr


def test_runs_csv_and_tsv_hold_every_run_with_its_columns(cli, three):
    cli("tag", "scratch", "baseline", "tmp")
    cli("note", "scratch", "a, b\tc\nd")
    rows = list(csv.DictReader(io.StringIO(cli("runs", "--csv").stdout)))
    assert [r["name"] for r in rows] == ["bs64-seed0", "bs64-seed1", "scratch"]
    last = rows[-1]
    assert last["tags"] == "baseline tmp" and last["note"] == "a, b\tc\nd" and last["status"] == "failed"
    assert float(last["duration_s"]) == 4000.0 and float(last["tokens"]) == 150.0 and last["steps"] == "3"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", last["created_at"])
    assert last["last_eval_task"] == "val" and float(last["last_eval_value"]) == 2.25
    tsv = cli("runs", "--tsv").stdout.splitlines()
    assert len(tsv) == 4 and tsv[0].split("\t") == list(rows[0])
    assert tsv[3].split("\t")[list(rows[0]).index("note")] == "a, b c d"  # no tab or line break inside a field


def test_an_older_ledger_gets_its_durations_on_upgrade(ledger_path):
    with Ledger(ledger_path) as led:
        led.create_run("old")
        led.append_steps("old", {"step": [1, 2, 3], "wall_s": [1.5, None, 7.25]})
        led.append_steps("old", {"step": [4], "wall_s": [float("nan")]})
        led.create_run("no-clock")
        led.append_steps("no-clock", {"step": [1], "loss": [2.0]})
    # Back to the schema before 0007_run_lifecycle, as an older yieldgate left it.
    _execute(
        ledger_path,
        "DROP INDEX step_blocks_summary",
        "ALTER TABLE step_blocks DROP COLUMN wall_s_max",
        "DROP TABLE run_tags",
        "ALTER TABLE runs DROP COLUMN note",
        "DELETE FROM schema_migrations WHERE name IN ('0007_run_lifecycle', '0009_listing_index', "
        "'0010_record_checksums')",
    )
    with Ledger(ledger_path) as led:
        runs = led.runs().set_index("name")
    assert runs.loc["old", "duration_s"] == 7.25 and np.isnan(runs.loc["no-clock", "duration_s"])


# -- names ----------------------------------------------------------------------------------------------------


def test_a_tracker_without_a_name_gets_a_readable_unique_one(ledger_path):
    from yieldgate.track import Tracker

    names = []
    for _ in range(2):
        with Tracker(ledger=ledger_path) as tr:
            tr.step(tokens=10)
            names.append(tr.run)
    assert all(re.fullmatch(r"[a-z]+-[a-z]+-\d+", n) for n in names) and names[0] != names[1]
    assert names[1].endswith("-2")  # numbered by the runs so far
    with Ledger(ledger_path) as led:
        assert sorted(led.runs()["name"]) == sorted(names)


def test_a_taken_name_gets_a_suffix_when_asked_and_resume_continues(ledger_path):
    from yieldgate.track import Tracker
    from yieldgate.track.integrations import TrackerArgs

    with Tracker("exp", ledger=ledger_path) as tr:
        tr.step(tokens=10)
    with pytest.raises(InputError, match="already exists"):
        Tracker("exp", ledger=ledger_path, suffix_if_taken=False)
    args = TrackerArgs("exp", ledger=ledger_path)  # what both framework callbacks open
    for expected in ("exp-2", "exp-3"):
        tr = args.open(model=None, optimizer=None, scaler=None, step=0)
        tr.step(tokens=10)
        tr.close()
        assert tr.run == expected
    resumed = TrackerArgs("exp", ledger=ledger_path, resume=True).open(model=None, optimizer=None, scaler=None, step=1)
    resumed.step(tokens=10)
    resumed.close()
    assert resumed.run == "exp"
    with Ledger(ledger_path) as led:
        assert led.runs()["name"].tolist() == ["exp", "exp-2", "exp-3"]
        assert led.steps("exp")["step"].tolist() == [1, 2]


def test_free_name_counts_on_from_the_names_taken(ledger):
    assert ledger.free_name("a_b") == "a_b"
    ledger.create_run("a_b")
    ledger.create_run("axb-2")  # `_` is a LIKE wildcard: axb-2 is not a_b's
    assert ledger.free_name("a_b") == "a_b-2"
    ledger.create_run("a_b-2")
    assert ledger.free_name("a_b") == "a_b-3"


# -- hyper-parameters -----------------------------------------------------------------------------------------


def test_tracker_hparams_become_the_manifests_config(ledger_path):
    from yieldgate.track import Tracker

    hparams = {"lr": 3e-4, "optimizer": {"betas": (0.9, 0.95), "name": "adamw"}, "layers": 12}
    with Tracker(
        "hp", ledger=ledger_path, manifest={"seed": 1, "config": {"lr": 1.0, "warmup": 100}}, hparams=hparams
    ) as tr:
        tr.step(tokens=10)
    with Ledger(ledger_path) as led:
        manifest = led.manifest("hp")
    assert manifest.seed == 1
    assert manifest.config == {
        "lr": 3e-4,
        "warmup": 100,
        "layers": 12,
        "optimizer": {"betas": [0.9, 0.95], "name": "adamw"},
    }
    assert flat_config(manifest.config) == {
        "layers": 12,
        "lr": 3e-4,
        "optimizer.betas": [0.9, 0.95],
        "optimizer.name": "adamw",
        "warmup": 100,
    }
    with pytest.raises(ManifestError, match=r"Tracker\(hparams=...\): config.optimizer.fn: function is not a JSON"):
        Tracker("bad", ledger=ledger_path, hparams={"optimizer": {"fn": lambda: 0}})


def test_a_manifest_without_config_keeps_its_hash():
    # The hash of test_manifest.BASE as yieldgate computed it before `config` existed (commit bfb088c).
    assert parse_manifest(BASE).content_hash() == "420453debad0a909636a7fb32751c15afef91e16d4698ab1de26317c9a1e6f0e"
    assert parse_manifest({**BASE, "config": {"lr": 1}}).content_hash() != parse_manifest(BASE).content_hash()


def test_config_differences_are_confounders_and_seeds_are_not(cli, ledger_path):
    a, b = (
        Manifest(config={"lr": 3e-4, "training": {"seed": 1}}),
        Manifest(config={"lr": 1e-3, "training": {"seed": 2}}),
    )
    assert [d.field for d in diff(a, b)] == ["config.lr", "config.training.seed"]
    with Ledger(ledger_path) as led:
        _run(led, "lr-a", config={"lr": 3e-4, "training": {"seed": 1}, "width": 64})
        _run(led, "lr-b", config={"lr": 1e-3, "training": {"seed": 2}, "width": 128})
        _run(led, "seed-b", config={"lr": 3e-4, "training": {"seed": 2}, "width": 64})
        by_lr = api.compare("lr-a", "lr-b", ledger=led, per="token")
        by_seed = api.compare("lr-a", "seed-b", ledger=led, per="token")
    assert [c["field"] for c in by_lr.confounders] == ["config.lr", "config.width"]
    assert by_seed.confounders == []
    assert "config: lr=0.0003, training.seed=1, width=64" in cli("show", "lr-a").stdout


@pytest.mark.slow  # imports transformers (4-5 s per worker): the full tier (make test-all)
def test_hf_callback_hparams_from_training_arguments_and_model_config(tmp_path):
    transformers = pytest.importorskip("transformers")
    from yieldgate.track.integrations.hf import trainer_hparams

    args = transformers.TrainingArguments(
        str(tmp_path / "out"),
        learning_rate=3e-4,
        per_device_train_batch_size=8,
        seed=7,
        report_to="none",
        hub_token="secret-token",
    )

    class Model:  # what the Trainer hands the callback: anything with a `config`
        config = transformers.GPT2Config(n_layer=2, n_embd=64)

    hp = trainer_hparams(args, Model())
    assert hp["training"]["learning_rate"] == 3e-4 and hp["training"]["per_device_train_batch_size"] == 8
    assert hp["training"]["seed"] == 7 and hp["training"]["lr_scheduler_type"] == "linear"
    assert not {"output_dir", "logging_dir", "hub_token", "report_to"} & set(hp["training"])
    assert "secret-token" not in repr(hp)
    assert hp["model"]["n_layer"] == 2 and hp["model"]["model_type"] == "gpt2"
    assert not any(k.startswith("_") or k == "transformers_version" for k in hp["model"])
    Manifest(config=hp)  # JSON all through


@pytest.mark.slow  # trains or runs a real trainer: the full tier (make test-all)
def test_lightning_callback_hparams_from_save_hyperparameters():
    L = pytest.importorskip("lightning.pytorch")
    import torch

    from yieldgate.track.integrations.lightning import lightning_hparams

    class Module(L.LightningModule):
        def __init__(self, lr: float = 3e-4, widths: tuple[int, ...] = (64, 128), dtype=torch.bfloat16) -> None:
            super().__init__()
            self.save_hyperparameters()

    class Data(L.LightningDataModule):
        def __init__(self, batch_size: int = 32) -> None:
            super().__init__()
            self.save_hyperparameters()

    assert lightning_hparams(Module(lr=1e-3), Data()) == {
        "lr": 1e-3,
        "widths": [64, 128],
        "dtype": "torch.bfloat16",
        "datamodule": {"batch_size": 32},
    }
    assert lightning_hparams(Module(), None)["lr"] == 3e-4


@pytest.mark.slow
def test_a_lightning_script_run_twice_records_two_runs_with_their_hparams(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    import torch

    from yieldgate.track.integrations.lightning import YieldgateCallback

    class Tiny(L.LightningModule):
        def __init__(self, lr: float = 0.1, width: int = 8) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.embed = torch.nn.Embedding(16, width)
            self.head = torch.nn.Linear(width, 16)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.head(self.embed(x)).flatten(0, 1), y.flatten())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    data = torch.randint(0, 16, (12, 5), generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data[:, :-1], data[:, 1:]), batch_size=4)
    ledger = tmp_path / "l.db"
    for lr in (0.1, 0.2):  # the same script, run again with another learning rate
        trainer = L.Trainer(
            max_steps=3,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=tmp_path,
            callbacks=[YieldgateCallback("exp", ledger=ledger)],
        )
        trainer.fit(Tiny(lr=lr), loader)
    with Ledger(ledger) as led:
        runs = led.runs()
        assert runs["name"].tolist() == ["exp", "exp-2"] and runs["status"].tolist() == ["finished", "finished"]
        assert [led.manifest(n).config for n in ("exp", "exp-2")] == [{"lr": 0.1, "width": 8}, {"lr": 0.2, "width": 8}]
        assert runs["steps"].tolist() == [3, 3]


@pytest.mark.slow
def test_a_trainer_script_run_twice_records_two_runs_with_their_hparams(tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch

    from yieldgate.track.integrations.hf import YieldgateCallback

    ids = torch.randint(0, 16, (8, 9), generator=torch.Generator().manual_seed(0))
    examples = [{"input_ids": row, "labels": row} for row in ids]
    ledger = tmp_path / "hf.db"
    for lr in (3e-3, 1e-3):  # the same script, run again with another learning rate
        model = transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=16, n_positions=16)
        )
        args = transformers.TrainingArguments(
            str(tmp_path / "out"),
            max_steps=2,
            per_device_train_batch_size=4,
            learning_rate=lr,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            disable_tqdm=True,
        )
        transformers.Trainer(
            model=model, args=args, train_dataset=examples, callbacks=[YieldgateCallback("gpt2", ledger=ledger)]
        ).train()
    with Ledger(ledger) as led:
        runs = led.runs()
        assert runs["name"].tolist() == ["gpt2", "gpt2-2"] and runs["steps"].tolist() == [2, 2]
        configs = [led.manifest(n).config for n in ("gpt2", "gpt2-2")]
    assert [c["training"]["learning_rate"] for c in configs] == [3e-3, 1e-3]
    assert configs[0]["model"]["n_embd"] == 16 and "output_dir" not in configs[0]["training"]


def test_merge_brings_a_runs_tags_and_note_along(cli, tmp_path, ledger_path):
    node = tmp_path / "node.db"
    with Ledger(node) as led:
        _run(led, "n7")
        led.tag_run("n7", ["node7", "baseline"])
        led.set_note("n7", "from node 7")
    cli("merge", str(node))
    (run,) = cli.json("runs")
    assert (run["name"], run["tags"], run["note"]) == ("n7", ["baseline", "node7"], "from node 7")


def _named_rank(rank: int, init_file: str, ledger: str, out: str) -> None:
    import torch.distributed as dist

    from yieldgate.track import Tracker

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    with Tracker("exp", ledger=ledger, suffix_if_taken=True) as tr:  # what a re-run DDP script's callback opens
        tr.step(tokens=10)
    with open(f"{out}.{rank}", "w") as f:
        f.write(tr.run)
    dist.destroy_process_group()


@pytest.mark.slow
def test_every_rank_learns_the_name_rank_0_picked(tmp_path):
    import multiprocessing as mp

    ledger = tmp_path / "d.db"
    with Ledger(ledger) as led:
        led.create_run("exp", status="finished")
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_named_rank, args=(r, str(tmp_path / "init"), str(ledger), str(tmp_path / "name")))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert [(tmp_path / f"name.{r}").read_text() for r in range(2)] == ["exp-2", "exp-2"]
    with Ledger(ledger) as led:
        assert led.runs()["name"].tolist() == ["exp", "exp-2"] and led.steps("exp-2")["tokens"].tolist() == [20.0]


@pytest.mark.parametrize(
    "args", [("rm", "a", "--yes"), ("rename", "a", "b"), ("tag", "a", "x"), ("untag", "a", "x"), ("note", "a", "text")]
)
def test_a_command_that_changes_runs_creates_no_ledger(cli_for, tmp_path, args):
    ledger_path = tmp_path / "yieldgate.db"  # a file that is not there (a PostgreSQL database must exist anyway)
    out = cli_for(ledger_path)(*args, code=2)
    assert out.stderr.strip() == (
        f"error: {ledger_path}: no ledger there; give the file the runs are in (the ledger "
        "argument, or $YIELDGATE_LEDGER)"
    )
    assert not ledger_path.exists()
    import yieldgate

    with pytest.raises(InputError, match="no ledger there"):
        yieldgate.note_run("a", "text", ledger=ledger_path)
    assert not ledger_path.exists()


@pytest.mark.parametrize("sort", [None, "tokens"])
def test_listing_runs_loads_neither_pandas_nor_numpy_nor_pydantic(ledger_path, three, sort):
    """`yieldgate runs` must start fast (< 1 s over 10,000 runs: benchmarks/bench_ledger.py): pandas, numpy and
    pydantic (the manifest's models, or typer's option checks from 0.29 on) take ~0.7 s to import. The listing
    reads the ledger into plain dicts; this checks it stays that way."""
    import subprocess
    import sys

    args = ["--sort", sort] if sort else []
    probe = (
        "import sys\nfrom yieldgate.cli import main\nsys.argv = ['yieldgate', '--ledger', sys.argv[1], 'runs', "
        "*sys.argv[2:]]\ntry:\n    main()\nfinally:\n    print('loaded:', sorted(m for m in ('pandas.core', "
        "'numpy', 'pydantic', 'yieldgate.manifest', 'scipy', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(ledger_path), *args], capture_output=True, text=True, timeout=60
    )
    assert "bs64-seed0" in out.stdout and "loaded: []" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("lookup", [1000, 0])
def test_a_page_of_runs_has_the_totals_of_the_whole_listing(ledger_path, three, lookup, monkeypatch):
    """`list_runs` reads steps and evals for the runs it shows only; what it shows equals the full records, when
    they are looked up by name and when they are read in one pass (`LOOKUP_RUNS` 0)."""
    from yieldgate.analysis.listing import list_runs, select_runs

    monkeypatch.setattr("yieldgate.ledger.runs.LOOKUP_RUNS", lookup)
    with Ledger(ledger_path) as led:
        led.create_run("empty")
        everything = led.run_records()
        for kwargs in ({"limit": 2}, {"limit": 2, "sort": "tokens"}, {"patterns": ["bs64-*"]}, {"limit": 0}):
            rows, matched = list_runs(led, **kwargs)
            assert (rows, matched) == select_runs(everything, **kwargs)
        bare = led.run_records(totals=False)
    assert {r["steps"] for r in bare} == {None}
    empty = next(r for r in everything if r["name"] == "empty")
    assert empty["steps"] == 0 and empty["tokens"] is None and empty["last_eval_value"] is None
    assert next(r for r in everything if r["name"] == "bs64-seed1")["last_eval_value"] == 2.25
