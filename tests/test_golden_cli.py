"""Golden files: what every `--json` command prints on one fixed ledger, byte for byte.

The ledger is written from fixed numbers, with no training: a campaign of probes (two recipes x three seeds x two
budgets, ranked and stored as `yieldgate probe` would), three scout runs of one recipe at a third budget, and a real
nanoGPT log imported from tests/data/real. Each case runs one command as a user would (typer's CliRunner) with
`--json` on its own copy of that ledger, after the commands it needs first (`decisions` after a `gate`), and its
stdout must equal `tests/data/golden/<case>.json` once `normalise` has replaced what differs from one build of the
same ledger to the next (temporary folders, wall-clock times, measured durations). Numbers are held to 1e-6 of
their value rather than to their last digit: a fresh clone installs the newest numpy and scipy, and a new release
moves a fitted curve within its optimiser's tolerance (the gate's forecast by 4e-8 of its value, other numbers in
their fifteenth digit), which is no change of output. `differences` says where two outputs part.

They pin the CLI's output across a restructuring that should change nothing. When a change of output is intended,
rewrite the files and review the diff:

    YIELDGATE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_cli.py

A new `--json` command fails `test_every_json_command_has_a_golden_file_or_a_reason` until it has a case here or a
line in LEFT_OUT.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from yieldgate import EvalRecord, Ledger, Manifest
from yieldgate.cli import app

REPO = Path(__file__).parents[1]
GOLDEN = Path(__file__).parent / "data" / "golden"
UPDATE = os.environ.get("YIELDGATE_UPDATE_GOLDEN") == "1"

# -- the fixed ledger ------------------------------------------------------------------------------------------------

TOKENIZER = {"name": "bpe-512", "vocab_size": 512}
CAMPAIGN: dict[str, Any] = {
    "name": "camp",
    "recipes": {
        "base": {
            "sources": [{"name": "shakespeare-modern", "weight": 0.6}, {"name": "milton", "weight": 0.4}],
            "tokenizer": TOKENIZER,
        },
        "wide": {
            "sources": [{"name": "shakespeare-modern", "weight": 0.3}, {"name": "milton", "weight": 0.7}],
            "tokenizer": TOKENIZER,
        },
    },
    "seeds": 3,
    # Two budgets: a third would make the stored summary fit a forecast per recipe (400 refits each, ~4 s).
    "budgets": [60_000, 150_000],
    "eval_sources": ["shakespeare-modern", "milton"],
    "probe": {"evals": 6},
    "level": 0.9,
}
TOKENS_PER_STEP = 1024  # the probe's 16 sequences x 64 tokens
TOKENS_PER_S = {"base": 20_000.0, "wide": 16_000.0}
CURVE_SCALE = {"base": 1.0, "wide": 1.08}
"""wide learns less per token (a higher curve) and moves tokens slower: compare has a verdict to give."""
BYTES_PER_TOKEN = 2.5


def val_loss(recipe: str, seed: int, tokens: float, k: int) -> float:
    """The k-th evaluation's validation loss: a power law in tokens, shifted by seed, with a fixed wobble of
    +-0.008 (eval noise for the yield bands and the forecast's interval)."""
    wobble = 0.004 * ((7 * k + 3 * seed) % 5 - 2)
    return 1.6 + CURVE_SCALE[recipe] * 180.0 * (tokens + 2000.0) ** -0.5 + 0.01 * (seed - 1) + wobble


def manifest(recipe: dict, seed: int) -> Manifest:
    """A probe's manifest: the recipe with each source's unique tokens (for `plan` and the gate's supply check)."""
    sources = [{**s, "unique_tokens": 400_000} for s in recipe["sources"] if s["weight"] > 0]
    return Manifest.model_validate(
        {
            "data": {"sources": sources, "tokenizer": {**TOKENIZER, "bytes_per_token": BYTES_PER_TOKEN}},
            "model": {
                "name": "probe-gpt",
                "params": 45_000,
                "non_embedding_params": 12_000,
                "layers": 2,
                "width": 64,
                "heads": 4,
                "context": 64,
            },
            "optimisation": {"optimizer": "adamw", "lr": 3e-3, "schedule": "constant", "batch_size": 16},
            "hardware": {"device_kind": "cpu", "device_count": 1, "price_per_device_hour": 0.5},
            "seed": seed,
        }
    )


def write_run(led: Ledger, run: str, recipe: str, seed: int, tokens: int, evals: int) -> None:
    """A finished run of `recipe`: a step record per 1,024 tokens and `evals` + 1 evaluations (step 0 included) of
    the validation loss, bits per byte overall and per source, and one hard slice."""
    steps = tokens // TOKENS_PER_STEP
    t = [s * TOKENS_PER_STEP for s in range(steps + 1)]
    led.append_steps(
        run,
        {
            "step": list(range(steps + 1)),
            "tokens": [float(x) for x in t],
            "wall_s": [x / TOKENS_PER_S[recipe] for x in t],
            "loss": [val_loss(recipe, seed, x, s) + 0.05 for s, x in enumerate(t)],
            "lr": [3e-3] * (steps + 1),
            "grad_norm": [1.0 + 0.5 / (1 + s) for s in range(steps + 1)],
        },
    )
    records = []
    for k in range(evals + 1):
        step = round(k * steps / evals)
        at = step * TOKENS_PER_STEP
        loss = val_loss(recipe, seed, at, k)
        bpb = loss / math.log(2) / BYTES_PER_TOKEN
        records += [
            EvalRecord(step=step, tokens=at, task="val", metric="loss", value=loss),
            EvalRecord(step=step, tokens=at, task="val", metric="bpb", value=bpb),
            EvalRecord(step=step, tokens=at, task="val/shakespeare-modern", metric="bpb", value=bpb - 0.02),
            EvalRecord(step=step, tokens=at, task="val/milton", metric="bpb", value=bpb + 0.02 * CURVE_SCALE[recipe]),
            EvalRecord(step=step, tokens=at, task="hard/archaic", metric="bpb", value=bpb + 0.3),
        ]
    led.append_evals(run, records)
    led.set_status(run, "finished")


def build_ledger(path: Path) -> None:
    """The fixed ledger. The campaign is planned and summarised with the functions `yieldgate probe` uses (the
    only internals this module imports: probes are otherwise reached only by training); a restructuring that moves
    them changes these imports, never the golden files."""
    from yieldgate.analysis.campaign import summarise
    from yieldgate.probe.campaign import Campaign, plan

    campaign = Campaign.model_validate(CAMPAIGN)
    with Ledger(path) as led:
        led.put_campaign(campaign.name, campaign.model_dump(mode="json"), campaign.content_hash())
        for spec in sorted(plan(campaign), key=lambda s: (s.tokens, s.recipe_name, s.seed)):
            led.create_run(
                spec.run, manifest=manifest(CAMPAIGN["recipes"][spec.recipe_name], spec.seed), source="probe"
            )
            led.set_meta(spec.run, "probe", spec.meta())
            write_run(led, spec.run, spec.recipe_name, spec.seed, spec.tokens, evals=6)
        led.set_campaign_summary(campaign.name, summarise(led, campaign.name).to_dict())
        # Scouts of base at 30k tokens, run by hand (no probe meta: the campaign's summary leaves them out). With
        # them `gate camp/base` has three budgets to fit one law over; with two it would fit every seed on its own
        # (600 refits, ~9 s).
        for seed in range(3):
            run = f"camp/base/s{seed}/t30000"
            led.create_run(run, manifest=manifest(CAMPAIGN["recipes"]["base"], seed))
            write_run(led, run, "base", seed, 30_000, evals=5)
    runner = CliRunner()
    real = REPO / "tests" / "data" / "real" / "nanogpt-mitos-char-results.txt"
    result = runner.invoke(app, ["--ledger", str(path), "import", "textlog", str(real), "--run", "mitos-char"])
    assert result.exit_code == 0, result.stderr


DOCUMENTS = {
    "a.txt": "the quick brown fox jumps over the lazy dog\nand runs far away into the hills\n",
    "b.txt": "the quick brown fox jumps over the lazy dog\nand runs far away into the hills\n",
    "c.txt": "the quick brown fox jumps over the lazy cat\nand runs far away into the hills\n",
    "d.txt": "an entirely different document about ledgers, yields and gates\n",
    "e.txt": "short\n",
}
"""The documents `dedup` and `audit` read: an exact pair (a, b), a near copy (c), one of 63 characters (d), one too
short for any pipeline (e)."""


def pipeline(docs: Path, min_chars: int, near: float, *, exact: bool = False) -> dict:
    """A pipeline over `docs` whose tagged slice is c and d."""
    stages = [{"kind": "min_chars", "params": {"min": min_chars}}]
    stages += [{"kind": "dedup", "dedup": {"kind": "exact"}}] if exact else []
    stages += [{"name": "near", "kind": "dedup", "dedup": {"kind": "near", "shingle": "word:2", "threshold": near}}]
    return {
        "input": {"paths": [str(docs)], "chunk_chars": None},
        "tag": {"field": "id", "regex": "[cd]\\.txt"},
        "stages": stages,
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A folder with the fixed ledger (`fixed.db`), the documents (`docs/`) and pipelines over them: one of three
    stages, and a pair (a, b) whose every row differs in what it keeps of the tagged slice (at equal tagged
    retention `audit A B` takes the faster stage, as measured: not the same from one run to the next)."""
    folder = tmp_path_factory.mktemp("golden-data")
    build_ledger(folder / "fixed.db")
    docs = folder / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text)
    for name, spec in (
        ("pipeline.yaml", pipeline(docs, 20, 0.5, exact=True)),
        ("a.yaml", pipeline(docs, 20, 0.5)),
        ("b.yaml", pipeline(docs, 70, 0.9)),
    ):
        (folder / name).write_text(yaml.safe_dump(spec))
    return folder


# -- the cases -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One command as a user types it (without `--ledger` and `--json`), after `before` (commands it needs first).
    `{repo}`, `{data}`, `{tmp}` and `{ledger}` stand for this checkout, the `data` fixture's folder, the case's own
    temporary folder and its copy of the ledger."""

    args: tuple[str, ...]
    before: tuple[tuple[str, ...], ...] = ()


POLICY = "{repo}/examples/policy.yaml"
CASES = {
    "runs": Case(("runs",)),
    "show": Case(("show", "camp/base/s0/t150000")),
    "show-imported": Case(("show", "mitos-char")),
    "yield": Case(("yield", "camp/base/s0/t150000")),
    "waste": Case(("waste", "camp/base/*")),
    "compare": Case(("compare", "camp/base/s*/t150000", "camp/wide/s*/t150000")),
    "forecast": Case(("forecast", "camp/base/s0/t150000", "--next-tokens", "350000", "--threshold", "500")),
    "report": Case(("report", "camp/base/s*/t150000", "camp/wide/s*/t150000", "-o", "{tmp}/report.html")),
    "campaign": Case(("campaign", "camp")),
    "campaign-list": Case(("campaign",)),
    "check": Case(("check",)),
    "plan": Case(("plan", "camp/base", "--policy", POLICY)),
    "manifest-validate": Case(("manifest", "validate", "{repo}/examples/manifest.yaml")),
    "manifest-diff": Case(("manifest", "diff", "camp/base/s0/t150000", "camp/wide/s0/t150000")),
    "dedup": Case(("dedup", "{data}/docs", "--near", "0.5", "--shingle", "word:2")),
    "audit": Case(("audit", "{data}/pipeline.yaml")),
    "audit-pair": Case(("audit", "{data}/a.yaml", "{data}/b.yaml")),
    "export": Case(("export", "mitos-char", "{tmp}/mitos-char.csv", "--to", "table")),
    # Commands that write, each on its own copy of the ledger.
    "tag": Case(("tag", "camp/base/*", "baseline", "team/data")),
    "untag": Case(("untag", "camp/base/s0/t150000", "team/data"), before=(("tag", "camp/base/*", "team/data"),)),
    "note": Case(("note", "mitos-char", "overfits from step 1000: the val loss turns up")),
    "rename": Case(("rename", "camp/wide/s2/t60000", "wide-seed2")),
    "rm": Case(("rm", "camp/wide/s*/t60000", "--yes")),
    "diagnose": Case(("diagnose", "mitos-char")),
    "gate": Case(("gate", "camp/base", "--policy", POLICY)),
    "decisions": Case(("decisions",), before=(("gate", "camp/base", "--policy", POLICY),)),
    "import": Case(("import", "textlog", "{repo}/tests/data/textlogs/nanogpt.log", "--run", "nanogpt-shakespeare")),
    "import-explain": Case(("import", "--explain", "{repo}/tests/data/textlogs/coqui-tts.log")),
    "merge": Case(("merge", "{data}/fixed.db", "--run", "mitos-char"), before=(("rm", "mitos-char", "--yes"),)),
    "ledger-copy": Case(("ledger", "copy", "{ledger}", "{tmp}/copy.db")),
}

LEFT_OUT = {
    # Each trains the reference GPT (seconds to minutes; a fixed ledger cannot stand in for a training): their
    # --json is read by tests/integration/test_probe.py, tests/test_probe_batch.py and
    # tests/integration/test_campaign.py (`make test-all`).
    # `campaign` is covered: it prints the summary `probe` stored, which the fixture stores without training.
    "train": "trains a probe",
    "batch-check": "trains the baseline and the candidate",
    "probe": "trains a campaign's probes",
}
"""`--json` commands without a golden file, and why."""


def normalise(text: str, places: dict[str, Path]) -> str:
    """`text` with what differs between two builds of the same ledger replaced, and nothing else:

    - the folders of `places` (pytest's temporary folders, this checkout), wherever a path shows them (a file
      read or written, a ledger's location, a dedup cluster's members), by `<name>`;
    - `created_at` and `updated_at`: when the fixture wrote a run, campaign or decision (the wall clock);
    - `digest` (`ledger copy`): a sha256 over every row of the ledger, those times included;
    - `seconds`, `docs_per_s` and `mb_per_s` (`audit`, `ledger copy`): durations measured as the command ran.
    """
    for name, path in sorted(places.items(), key=lambda kv: -len(str(kv[1]))):
        for form in {str(path), str(path.resolve())}:
            text = text.replace(form, f"<{name}>")
    value = r'("[^"]*"|-?[0-9][0-9.eE+-]*|null)'
    for keys, placeholder in (
        ("created_at|updated_at", "<time>"),
        ("digest", "<digest>"),
        ("seconds|docs_per_s|mb_per_s", "<measured>"),
    ):
        text = re.sub(rf'("(?:{keys})": ){value}', rf'\1"{placeholder}"', text)
    return text


def invoke(ledger: Path, args: list[str]) -> str:
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args])
    assert result.exit_code == 0 and result.exception is None, (args, result.exit_code, result.stderr)
    return result.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, data, tmp_path):
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    places = {"repo": REPO, "data": data, "tmp": tmp_path}
    fill = {"ledger": ledger, **places}
    for args in CASES[case].before:
        invoke(ledger, [a.format(**fill) for a in args])
    out = normalise(invoke(ledger, [*(a.format(**fill) for a in CASES[case].args), "--json"]), places)
    golden = GOLDEN / f"{case}.json"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out)
        return
    assert golden.exists(), f"{golden} is missing: YIELDGATE_UPDATE_GOLDEN=1 writes it"
    parted = differences(json.loads(out), json.loads(golden.read_text()))
    assert not parted, f"{case}: output differs from {golden} at {parted[:5]} (intended? YIELDGATE_UPDATE_GOLDEN=1)"


def differences(got: Any, want: Any, where: str = "$") -> list[str]:
    """The places where two parsed outputs part: any key, length, type or text, or a number beyond 1e-6 of its
    value (JSON's integers and floats alike; ``True`` is no number here)."""
    if _number(got) and _number(want):
        same = math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12) or (math.isnan(got) and math.isnan(want))
        return [] if same else [f"{where}: {got!r} != {want!r}"]
    if isinstance(got, dict) and isinstance(want, dict):
        if got.keys() != want.keys():
            return [f"{where}: keys {sorted(got.keys() ^ want.keys())} on one side only"]
        return [d for key in got for d in differences(got[key], want[key], f"{where}.{key}")]
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in differences(g, w, f"{where}[{i}]")]
    return [] if type(got) is type(want) and got == want else [f"{where}: {got!r} != {want!r}"]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_differences_hold_numbers_to_1e_6_and_everything_else_exactly():
    assert differences({"a": [591.2446124596074, "x"]}, {"a": [591.2445893912708, "x"]}) == []
    assert differences({"a": 1.0}, {"a": 1.00001}) == ["$.a: 1.0 != 1.00001"]
    assert differences({"a": 0.0}, {"a": 1e-9}) == ["$.a: 0.0 != 1e-09"]
    assert differences([math.nan], [math.nan]) == [] and differences([math.nan], [0.0]) == ["$[0]: nan != 0.0"]
    assert differences({"a": True}, {"a": 1}) == ["$.a: True != 1"]
    assert differences({"a": [1]}, {"a": [1, 2]}) == ["$.a: 1 items != 2"]
    assert differences({"a": 1}, {"b": 1}) == ["$: keys ['a', 'b'] on one side only"]
    assert differences("x", "y") == ["$: 'x' != 'y'"]


ROOT = typer.main.get_command(app)


def _json_commands(group, prefix: str = ""):
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _json_commands(command, f"{prefix}{name} ")
        elif any("--json" in p.opts for p in command.params):
            yield f"{prefix}{name}"


def _command_of(args: tuple[str, ...]) -> str:
    """The (sub)command a case runs: `manifest diff` of ("manifest", "diff", ...)."""
    group, words = ROOT, list[str]()
    for word in args:
        assert isinstance(group, typer.core.TyperGroup)  # a command without subcommands returned below
        group = group.commands[word]
        words.append(word)
        if not isinstance(group, typer.core.TyperGroup):
            return " ".join(words)
    raise AssertionError(f"{args} names no command")


def test_every_json_command_has_a_golden_file_or_a_reason():
    covered = {_command_of(c.args) for c in CASES.values()}
    json_commands = set(_json_commands(ROOT))
    assert json_commands - covered == set(LEFT_OUT), "a --json command needs a case in CASES or a reason in LEFT_OUT"
    assert not covered & set(LEFT_OUT)
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(CASES), "a golden file without a case, or the reverse"
