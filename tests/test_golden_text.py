"""Golden text: the wording of what a user reads, held byte for byte (issue #43 item 10, "one rule, one wording").

tests/test_golden_cli.py holds every `--json` output; these hold the sentences the JSON does not carry, on the same
fixed ledger: a campaign screen (its ranking's ties and its decision accuracy's abstentions read one rule; a title
has no empty clause), the report's runs table and diagnoses (the count is what `yieldgate diagnose` finds, not only
what was stored) and an import without tokens (it says how to give
them). Numbers here are plain arithmetic on the fixed ledger's numbers (means, t-intervals, interpolation), no fit,
so no digit depends on the CPU or the BLAS. When a change of wording is intended, rewrite the files and review the
diff:

    YIELDGATE_UPDATE_GOLDEN=1 python -m pytest tests/test_golden_text.py
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_golden_cli import GOLDEN, REPO, UPDATE, data, normalise  # noqa: F401 - `data`: the fixture
from yieldgate.cli import app
from yieldgate.ledger import Ledger
from yieldgate.report.console import accuracy_lines, ranking_tables

TEXT = GOLDEN / "text"
WIDTH = "100"


def held(case: str, text: str) -> None:
    path = TEXT / f"{case}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing: YIELDGATE_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(), f"{case}: the text differs from {path} (intended? YIELDGATE_UPDATE_GOLDEN=1)"


def cli(ledger: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--ledger", str(ledger), *args], env={"COLUMNS": WIDTH})
    assert result.exit_code == 0 and result.exception is None, (args, result.stderr)
    return result.stdout


def test_a_campaign_screen_reads_one_noise_rule(data, tmp_path):  # noqa: F811 - the fixture imported
    """`yieldgate campaign camp`'s rankings and decision accuracy: each budget's ties and each smaller budget's
    abstentions are the same pairs (`ranking.resolved_pairs`), said in one wording; a budget without hard slices
    titles none. Held: the ranking tables' titles and rows, and the decision accuracy lines, as the screen prints
    them."""
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    shown = cli(ledger, "campaign", "camp")
    with Ledger(ledger, readonly=True) as led:
        summary = led.campaign("camp")["summary"]
    for budget, scores in summary["rankings"].items():
        ties = {frozenset((e["recipe"], t)) for e in scores["bpb"]["order"] for t in e["ties"]}
        tied = {frozenset((p["a"], p["b"])) for p in scores["bpb"]["pairs"] if not p["resolved"]}
        assert ties == tied, budget
        entry = summary["decision_accuracy"].get(budget)
        if entry is not None:  # a smaller budget: it abstains on exactly its ranking's ties
            assert entry["decided_pairs"] == len(scores["bpb"]["pairs"]) - len(tied), budget
    lines = [" ".join(line.split()) for line in accuracy_lines(summary)]
    assert all(line in " ".join(shown.split()) for line in lines)
    bare = {
        **summary,
        "rankings": {
            b: {k: v for k, v in s.items() if not k.startswith("hard/")} for b, s in summary["rankings"].items()
        },
    }
    tables = [
        "\n".join([title, " | ".join(headers), *(" | ".join(row) for row in rows)])
        for title, headers, rows in ranking_tables(summary) + ranking_tables(bare)
    ]
    held("campaign", "\n\n".join(tables) + "\n\n" + "\n".join(lines) + "\n")


def test_the_report_counts_what_diagnose_finds(data, tmp_path):  # noqa: F811
    """The nanoGPT run was never diagnosed; `diagnose` finds it overfitting. The report's runs table counts that
    finding and its diagnoses section lists it, found now and not stored. Held: the two tables, the finding's
    evidence and advice (the detector's numbers, not this page's wording) left out."""
    ledger = tmp_path / "ledger.db"
    shutil.copy(data / "fixed.db", ledger)
    cli(ledger, "report", "mitos-char", "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    sections = [page[page.index(f"<h2>{h}</h2>") :].split("\n", 1)[0] for h in ("Runs", "Diagnoses")]
    diagnoses = re.sub(
        r'<td class="json">.*?</details></td><td>[^<]*</td>', "<td>(evidence)</td><td>(advice)</td>", sections[1]
    )
    held("report-diagnoses", sections[0] + "\n" + diagnoses + "\n")


def test_an_import_without_tokens_says_how_to_give_them(tmp_path):
    """The nanoGPT log counts no tokens: after its warnings, a note names the flags that give them (a command's flags:
    the CLI says it, the library does not); imported with them, no note."""
    ledger = tmp_path / "ledger.db"
    real = REPO / "tests" / "data" / "real" / "nanogpt-mitos-char-results.txt"
    out = cli(ledger, "import", "textlog", str(real), "--run", "mitos-char")
    parts = [" ".join(part.split()) for part in re.split(r"\n(?=warning: |note: )", out)[1:]]
    said = "\n".join(part for part in parts if part.startswith("note: "))  # the importer's warnings are not ours
    held("import-no-tokens", normalise(said, {"repo": REPO}) + "\n")
    assert "note: mitos-char: no token counts" in said and "--tokens-per-step" in said
    again = cli(ledger, "import", "textlog", str(real), "--run", "m2", "--tokens-per-step", "16384")
    assert "no token counts" not in again


@pytest.mark.parametrize("case", ["campaign", "report-diagnoses", "import-no-tokens"])
def test_every_text_golden_file_is_made_by_a_test(case):
    assert (TEXT / f"{case}.txt").exists() or UPDATE, case
    assert not re.search(r"/tmp/|pytest-of-", (TEXT / f"{case}.txt").read_text() if not UPDATE else ""), case
