"""The commands that worked around `api` (issue #30, "One front door") now call one api function each: its typed
result is what `--json` prints, its errors name the arguments (the CLI spells them as flags), and what the CLI
showed around the work (a progress bar, a ledger opened read-only first) stays as it was."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

import yieldgate
from yieldgate import EvalRecord, InputError, Ledger, api
from yieldgate.gate.draft import RecordedDecision
from yieldgate.gate.gate import gate
from yieldgate.gate.policy import load_policy
from yieldgate.manifest import ManifestCheck, ManifestDiff
from yieldgate.report.console import WorkProgress

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples" / "manifest.yaml"
POLICY = REPO / "examples" / "policy.yaml"


def test_manifest_validate_and_diff_are_typed_results_the_cli_prints(cli, ledger_path, tmp_path):
    checked = api.validate_manifest(MANIFEST)
    assert isinstance(checked, ManifestCheck)
    assert checked.to_dict() == cli.json("manifest", "validate", str(MANIFEST))
    other = yaml.safe_load(MANIFEST.read_text())
    other["seed"] = 12345
    with Ledger(ledger_path) as led:
        led.create_run("other", manifest=yieldgate.Manifest.model_validate(other))
    diffed = api.manifest_diff(str(MANIFEST), "other", ledger=ledger_path)
    assert isinstance(diffed, ManifestDiff)
    assert [(d.field, d.b) for d in diffed.differences] == [("seed", 12345)]
    assert diffed.to_dict() == cli.json("manifest", "diff", str(MANIFEST), "other")
    with pytest.raises(yieldgate.RunNotFound, match="neither a manifest file nor a run"):
        api.manifest_diff(str(MANIFEST), "nope", ledger=ledger_path)


def test_dedup_and_audit_give_what_the_cli_prints(cli, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {"a.txt": "one two three four five\n", "b.txt": "one two three four five\n"}.items():
        (docs / name).write_text(text)
    assert api.dedup(docs).to_dict() == cli.json("dedup", str(docs))
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        yaml.safe_dump({"input": {"paths": [str(docs)]}, "stages": [{"kind": "dedup", "dedup": {"kind": "exact"}}]})
    )
    ours, theirs = api.audit(pipeline).to_dict(), cli.json("audit", str(pipeline))
    measured = ("seconds", "docs_per_s", "mb_per_s")
    strip = lambda stages: [{k: v for k, v in s.items() if k not in measured} for s in stages]  # noqa: E731
    assert strip(ours["stages"]) == strip(theirs["stages"])


def test_a_copied_ledger_through_the_api(ledger_path, tmp_path):
    with Ledger(ledger_path) as led:
        led.create_run("r")
    copied = api.copy_ledger(ledger_path, tmp_path / "copy.db")
    assert copied.to_dict()["rows"]["runs"] == 1
    with Ledger(tmp_path / "copy.db", readonly=True) as led:
        assert led.run_names() == ["r"]


@pytest.fixture
def three_seeds(ledger_path):
    """Three finished seeds with two evaluations each: too few to fit (a hold, decided in well under a second)."""
    with Ledger(ledger_path) as led:
        for seed in range(3):
            run = f"base/s{seed}"
            led.create_run(run)
            led.append_steps(run, {"step": list(range(11)), "tokens": [1000.0 * s for s in range(11)]})
            led.append_evals(
                run, [EvalRecord(step=s, task="val", metric="loss", value=5 - 0.1 * s - 0.01 * seed) for s in (0, 10)]
            )
            led.set_status(run, "finished")
    return ledger_path


def test_the_gate_gives_the_decision_with_the_id_it_is_kept_under(three_seeds, cli):
    decided = api.gate("base/s*", POLICY, ledger=three_seeds)
    assert isinstance(decided, RecordedDecision) and decided.id == 1
    assert list(decided.to_dict())[:2] == ["id", "target"]
    unrecorded = api.gate("base/s*", POLICY, ledger=three_seeds, record=False)
    assert unrecorded.id is None and unrecorded.decision == decided.decision
    with Ledger(three_seeds, readonly=True) as led:
        assert gate(led, "base/s*", load_policy(POLICY)).rationale == decided.rationale
    assert [d["id"] for d in cli.json("decisions")] == [1]


def test_the_gate_decides_on_a_read_only_ledger_before_it_writes(tmp_path):
    """The CLI opened the ledger read-only to decide: a target that is not there made no ledger file. Through the
    api it is the same."""
    missing = tmp_path / "none.db"
    with pytest.raises(yieldgate.YieldgateError):
        api.gate("base/s*", POLICY, ledger=missing)
    assert not missing.exists()


def test_train_names_its_arguments_and_the_cli_its_flags(cli, tmp_path):
    recipe = tmp_path / "r.yaml"  # never read: the arguments are checked first
    with pytest.raises(InputError, match=r"^resume_from and cooldown_tokens go together$") as caught:
        api.train(recipe, resume_from="x/s0/t1")
    assert caught.value.parameters == ("resume_from", "cooldown_tokens")
    with pytest.raises(InputError, match=r"^give tokens \(the probe's budget\), or resume_from with cooldown_tokens$"):
        api.train(recipe)
    assert cli("train", str(recipe), code=2).stderr == (
        "error: give --tokens (the probe's budget), or --resume-from with --cooldown-tokens\n"
    )
    assert cli("train", str(recipe), "--cooldown-tokens", "10", code=2).stderr == (
        "error: --resume-from and --cooldown-tokens go together\n"
    )


@pytest.mark.slow  # both import torch (~8 s on a busy 2-core machine when no test before has)
def test_batch_check_and_probe_check_their_setup_before_any_progress(tmp_path):
    heard: list[object] = []
    with pytest.raises(InputError, match=r"^batch_check.precision must be one of fp32, bf16, fp16, got 'fp8'$"):
        api.batch_check(precision="fp8", progress=lambda done, total: heard.append((done, total)))
    campaign = tmp_path / "c.yaml"
    campaign.write_text((REPO / "examples" / "campaign.yaml").read_text())
    with pytest.raises(InputError, match=r"^executor must be one of local, ray, slurm, got 'nope'") as caught:
        api.probe(campaign, ledger=tmp_path / "l.db", executor="nope", display=lambda total: heard.append(total))
    assert caught.value.parameters == ("executor",)
    assert heard == [] and not (tmp_path / "l.db").exists()


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80), out


def test_a_work_progress_shows_nothing_until_the_work_begins():
    """`train` failing on its arguments printed the error alone; the bar appears with the first stage."""
    console, out = _console()
    with pytest.raises(InputError), WorkProgress(console):
        raise InputError("bad")
    assert out.getvalue() == ""
    console, out = _console()
    with WorkProgress(console) as bar:  # not a terminal: a plain line per stage (tests/test_progress.py)
        bar.update("r/s0/t10: preparing data")
        bar.update("r/s0/t10: training")
        bar.update(completed=3, total=4)
    said = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert said[-2:] == ["r/s0/t10: preparing data", "r/s0/t10: training"]
    console, out = _console()
    with WorkProgress(console, lines=False) as bar:
        bar.update("r: training", completed=1, total=2)
    assert out.getvalue() == ""
