"""A campaign's own trainer: what is refused before any probe starts (exit 2, one line naming the field and the fix,
no ledger written), the command template's fields, the GPUs each local probe gets, and a bare `Tracker()` inside a
probe taking its run, ledger and manifest from the environment, and the rows its Tracker could only spill brought in
when the probe ends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.support.reliability import check
from yieldgate.cli import app
from yieldgate.errors import InputError
from yieldgate.probe.campaign.executors import device_groups
from yieldgate.probe.campaign.own_spec import ProbeJob, render

GOOD = {
    "name": "own",
    "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}},
    "seeds": 1,
    "budgets": [100],
    "trainer": {"command": "python train.py --data {recipe_file} --seed {seed}"},
}


def refused(tmp_path: Path, trainer: dict, **over) -> str:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**GOOD, **over, "trainer": trainer}))
    db = tmp_path / "y.db"
    result = CliRunner().invoke(app, ["--ledger", str(db), "probe", str(path)])
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert not db.exists()  # refused before anything was written
    return lines[0]


@pytest.mark.parametrize(
    ("trainer", "over", "says"),
    [
        (
            {"command": "python missing.py --data {recipe_file}"},
            {},
            "names the script 'missing.py', which is not a file",
        ),
        ({"command": "python train.py --data {recipe}; bash run.sh"}, {}, "names the script 'run.sh'"),
        ({"command": "python train.py --steps {steps}"}, {}, "trainer.command names {steps}, which is not a field"),
        ({"command": "python -u nope --data {recipe_file}"}, {}, "names the script 'nope', which is not a file"),
        ({"command": "python train.py --t {tokens:>999999999}"}, {}, "{tokens:>999999999} has a format spec"),
        ({"command": "python train.py --s {seed!r}"}, {}, "{seed!r} has a format spec or conversion"),
        ({"command": "python train.py --d \\{workdir}"}, {}, "{workdir} follows a backslash"),
        ({"command": "python train.py --w {model.depth}"}, {}, "names {model.depth}, which is not a field"),
        ({"callable": "json.decoder:nothing"}, {}, "'json.decoder' has no function 'nothing'"),
        ({"callable": "no_such_module_x:train"}, {}, "cannot import 'no_such_module_x'"),
        ({"callable": "train"}, {}, "must be package.module:function"),
        ({"command": "python train.py", "workdir": "nowhere"}, {}, "trainer.workdir"),
        ({"command": "python train.py", "timeout": 0}, {}, "timeout"),
        ({"command": "python train.py", "env": {"A=B": "1"}}, {}, "trainer.env has a bad variable name"),
        ({"command": "python train.py", "import": {"path": "{probe_dir}/x", "kind": "csv"}}, {}, "trainer.import.kind"),
        ({"command": "python train.py", "callable": "json:dumps"}, {}, "exactly one of command"),
        (
            {"command": "python train.py"},
            {"recipes": {"a": {"sources": [{"name": "a", "path": "gone.jsonl"}]}}},
            "recipes.a.sources[0].path 'gone.jsonl' does not exist",
        ),
        (
            {"command": "python train.py"},
            {"recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl", "text_field": "body"}]}}},
            "has no text field 'body' (it has: text); set the source's text_field",
        ),
    ],
)
def test_bad_trainers_are_refused_before_any_probe(tmp_path, trainer, over, says):
    assert says in refused(tmp_path, trainer, **over)


def test_template_fields_render_quoted():
    job = ProbeJob(
        recipe_file="/p q/recipe.json",
        recipe="mix",
        tokens=1000,
        seed=2,
        run="c/mix/s2/t1000",
        model={"layers": 1, "width": 32, "heads": 2},
        gpus=1,
        workdir="/w",
        probe_dir="/p q",
        campaign="c",
        ledger="/l.db",
        manifest_file="/p q/manifest.json",
    )
    assert render("t.py {recipe_file} --w {model.width} --s {seed}", job, quote=True) == (
        "t.py '/p q/recipe.json' --w 32 --s 2"
    )
    assert render("{model}", job, quote=False) == '{"layers":1,"width":32,"heads":2}'


def test_each_local_probe_gets_its_own_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4")
    assert device_groups(2) == ["0,1", "2,3"]
    assert device_groups(1) == ["0", "1", "2", "3", "4"]
    with pytest.raises(InputError, match="trainer.gpus is 6 but this machine has 5 GPU"):
        device_groups(6)


@pytest.mark.slow  # a Tracker's writer thread and torch, 2.8 s
def test_a_bare_tracker_in_a_probe_writes_the_probes_run(tmp_path, monkeypatch):
    from yieldgate.ledger import Ledger
    from yieldgate.track import Tracker

    db = tmp_path / "y.db"
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"data": {"sources": [{"name": "a", "path": "a.jsonl"}]}, "config": {"seed": 3}}))
    monkeypatch.setenv("YIELDGATE_RUN", "camp/a/s3/t100")
    monkeypatch.setenv("YIELDGATE_LEDGER", str(db))
    monkeypatch.setenv("YIELDGATE_MANIFEST", str(manifest))
    monkeypatch.setenv("YIELDGATE_CAMPAIGN", "camp")
    with Tracker() as tr:
        tr.step(tokens=100, loss=3.0)
        tr.eval({"val/bpb": 2.0})
    with Ledger(db) as led:
        assert list(led.runs()["name"]) == ["camp/a/s3/t100"]
        m = led.manifest("camp/a/s3/t100")
        assert m is not None and m.config["seed"] == 3 and m.data is not None and m.data.sources[0].path == "a.jsonl"
        assert len(led.evals("camp/a/s3/t100")) == 1


@pytest.mark.slow  # a Tracker's writer thread and torch, 1.7 s
def test_rows_a_probes_tracker_could_only_spill_are_brought_in_when_it_ends(tmp_path, monkeypatch):
    """The ledger stayed locked past the last flush's wait: the Tracker left its rows in a spill file, which the
    probe's end (`own._finish`) merges, instead of failing the probe as one that wrote nothing."""
    import sqlite3
    import time

    from yieldgate.ledger import Ledger
    from yieldgate.probe.campaign import own
    from yieldgate.track import Tracker, TrackerConfig, writer

    monkeypatch.setattr(writer, "CLOSE_BUSY_TIMEOUT_S", 0.2)
    db, run = tmp_path / "y.db", "camp/a/s0/t100"
    with Tracker(run, ledger=db, config=TrackerConfig(flush_every_s=30)) as tr:
        for step in range(10):
            tr.step(tokens=100, loss=3.0 - 0.1 * step)
        tr.eval({"val/bpb": 2.0})
        time.sleep(0.3)  # the writer has opened the ledger; its only flush is the last
        locker = sqlite3.connect(db, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
    locker.execute("COMMIT")
    assert tr.stats["spilled_rows"] == 10 and tr.stats["spill_path"] is not None
    with Ledger(db) as led:
        assert led.steps(run).empty
        own._merge_spills(led, run)
        assert led.steps(run)["step"].tolist() == list(range(1, 11)) and len(led.evals(run)) == 1


def test_a_team_tokenizer_has_one_hash_whether_a_probe_or_a_recipe_reads_it(tmp_path):
    """The own trainer's manifest and the recipe's resolution (`data.recipe.team_tokenizer`) hash a tokenizer folder
    the same way: the sha256 of its tokenizer.json."""
    from tokenizers import Tokenizer, models

    from yieldgate.data.recipe import team_tokenizer
    from yieldgate.probe.campaign.own import _content_hash

    folder = tmp_path / "tok"
    folder.mkdir()
    Tokenizer(models.BPE()).save(str(folder / "tokenizer.json"))
    (folder / "special_tokens_map.json").write_text("{}")
    assert _content_hash(folder) == team_tokenizer(folder)[1] == _content_hash(folder / "tokenizer.json")


NASTY = st.text(alphabet=list(" '\"$`\\;&|()*?~!#\n\tab/é-{}"), max_size=12)


@settings(max_examples=25, deadline=None)
@given(value=NASTY)
def test_a_field_reaches_the_command_as_written_whatever_quotes_surround_it(tmp_path_factory, value):
    """Issue #46, item 6: a field inside double quotes let a `$(...)` in a folder's name run, and a path with a
    space reached the script with literal quotes. Rendered for `sh`, each field is one word, exactly its value,
    bare, in double quotes, in single quotes, or inside a longer word of either."""
    folder = tmp_path_factory.mktemp("q")
    job = _job(workdir=value)
    template = "printf '%s\\0' {workdir} \"{workdir}\" '{workdir}' \"a {workdir}b\" 'a {workdir}b' a{workdir}b"
    out = subprocess.run(
        ["sh", "-c", render(template, job, quote=True)], cwd=folder, capture_output=True, check=True
    ).stdout.decode()
    assert out.split("\0")[:-1] == [value] * 3 + [f"a {value}b"] * 2 + [f"a{value}b"]
    assert list(folder.iterdir()) == []  # nothing the value spelled was run


def test_a_command_substitution_in_a_folder_name_is_never_run(tmp_path):
    folder = tmp_path / "$(touch pwned)x y"
    folder.mkdir()
    template = 'printf "%s\\n" "{workdir}" > seen.txt'
    subprocess.run(["sh", "-c", render(template, _job(workdir=str(folder)), quote=True)], cwd=tmp_path, check=True)
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "seen.txt").read_text() == f"{folder}\n"
    check(
        'campaign: a trainer command with a field in double quotes (`"{workdir}"`) and `$(touch pwned)` and a '
        "space in the folder's name",
        "the folder's name reaches the script as one word, exactly as written; nothing in it is run (before: the "
        "`$(...)` ran, and a path with a space reached the script with literal quotes)",
        "0",
    )


def test_a_format_spec_in_a_template_is_refused_before_any_probe(tmp_path):
    line = refused(tmp_path, {"command": "python train.py --t {tokens:>999999999}"}).removeprefix("error: ")
    shown = line if len(line) <= 110 else line[:109] + "…"
    check(
        "campaign: a trainer command field with a format spec (`{tokens:>999999999}`)",
        f"refused before any probe, exit 2, ledger unchanged: `{shown}` (before: a 3.1 GB string, then a crash)",
        "0",
    )


def _job(**over: Any) -> ProbeJob:
    fields = {
        "recipe_file": "/p/recipe.json",
        "recipe": "mix",
        "tokens": 1000,
        "seed": 2,
        "run": "c/mix/s2/t1000",
        "model": {"layers": 1, "width": 32, "heads": 2},
        "gpus": 1,
        "workdir": "/w",
        "probe_dir": "/p",
        "campaign": "c",
        "ledger": "/l.db",
        "manifest_file": "/p/manifest.json",
    }
    return ProbeJob(**{**fields, **over})
