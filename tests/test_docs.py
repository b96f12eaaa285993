"""The README and the docs site stay short, linked, built and true to the CLI they describe.

The reference pages checked against the code elsewhere: the names table (tests/test_names.py), the Reliability
table (tests/support/reliability.py). The Quickstart is run as written by tests/integration/test_quickstart.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml

from yieldgate.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_LIMIT = 15 * 1024

CODE_BLOCK = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def quickstart(text: str) -> tuple[dict[str, str], list[str]]:
    """The Quickstart page's files (code blocks with a `title="NAME"`) and its commands (console blocks' lines, in
    order, comment lines and trailing comments left out)."""
    files: dict[str, str] = {}
    commands: list[str] = []
    for lang, info, body in CODE_BLOCK.findall(text):
        title = re.search(r'title="([^"]+)"', info)
        if title:
            files[title[1]] = body
        elif lang == "console":
            commands += [c for c in (strip_comment(line) for line in body.splitlines()) if c]
    return files, commands


def strip_comment(line: str) -> str:
    """A console line without its trailing `# ...` (the Quickstart's commands hold no `#` of their own)."""
    return line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (`markdown.extensions.toc.slugify`: lower case, punctuation
    dropped, each run of spaces and dashes one '-'). Spaces alone made `plan --flops` `plan---flops`, where the site
    has `plan-flops`: two links to probes.md passed here and landed at the page's top."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text)


def test_readme_is_at_most_15_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size:,} bytes, over {README_LIMIT:,}: move detail into docs/"


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_reach_a_file_and_heading(page: Path):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve()
        assert dest.is_file(), f"{page.name}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            headings = {slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
            assert anchor in headings, f"{page.name}: link to {target}: no heading with that anchor in {path}"


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    def pages(nav) -> list[str]:
        out: list[str] = []
        for entry in nav:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                out += pages(value) if isinstance(value, list) else [value]
        return out

    nav = pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md"))


def command_names() -> list[str]:
    """Every command of the CLI as typed, group commands with their subcommands (`manifest validate`)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    names = []
    for name, command in group.commands.items():
        subcommands = getattr(command, "commands", None)
        names += [f"{name} {sub}" for sub in subcommands] if subcommands else [name]
    return names


def test_every_command_is_in_the_command_line_overview():
    text = (DOCS / "cli.md").read_text()
    missing = [name for name in command_names() if not re.search(rf"^yieldgate {re.escape(name)}\b", text, re.M)]
    assert not missing, f"docs/cli.md lists no `yieldgate {missing[0]} ...` line (missing: {missing})"


def test_the_overview_names_every_executor_of_probe():
    """Issue #43 item 9: docs/cli.md's `probe` line named local and ray, not slurm; it names what run_campaign takes."""
    from typing import get_args, get_type_hints

    from yieldgate.probe.campaign import run_campaign

    executors = get_args(get_type_hints(run_campaign)["executor"])
    line = next(line for line in (DOCS / "cli.md").read_text().splitlines() if line.startswith("yieldgate probe "))
    assert f"--executor {'|'.join(executors)}]" in line, (executors, line)


def cli_reference() -> str:
    """What `make cli-reference` writes (`typer yieldgate.cli utils docs`), made in this process."""
    from typer.cli import get_docs_for_click
    from typer.core import MARKUP_MODE_KEY

    command = typer.main.get_command(app)
    ctx = typer.Context(command, obj={MARKUP_MODE_KEY: app.rich_markup_mode})
    return get_docs_for_click(obj=command, ctx=ctx, name="yieldgate", title="CLI reference").strip() + "\n"


def test_cli_reference_is_generated_from_the_current_cli():
    """docs/cli-reference.md lists every command and option with its help: a new one fails here until
    `make cli-reference` writes it in."""
    current = cli_reference()
    assert (DOCS / "cli-reference.md").read_text() == current, (
        "docs/cli-reference.md is out of date with the CLI: run `make cli-reference`"
    )
    for name in command_names():
        assert f"## `yieldgate {name}`" in current


def test_quickstart_page_has_its_script_and_commands():
    files, commands = quickstart((DOCS / "quickstart.md").read_text())
    assert list(files) == ["train.py"]
    assert "from yieldgate import Tracker" in files["train.py"]
    assert commands[:2] == [
        "pip install torch --index-url https://download.pytorch.org/whl/cpu",
        "pip install '.[torch]'",
    ]  # the install block every page shares (tests/test_install_docs.py)
    assert commands[3] == "python train.py"
    assert any(c.startswith("yieldgate report quickstart") for c in commands)


def test_readme_quickstart_commands_are_the_docs():
    """The README's Quickstart commands are the page's, which tests/integration/test_quickstart.py runs."""
    readme_commands = quickstart(README.read_text())[1]
    docs_commands = quickstart((DOCS / "quickstart.md").read_text())[1]

    def unmade(commands: list[str]) -> list[str]:
        return [c for c in commands if not c.startswith("make ")]

    assert unmade(readme_commands) == unmade(docs_commands)


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path):
    pytest.importorskip("mkdocs", reason="the docs group is not installed: pip install --group docs")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("yieldgate.api.import_run", "Tracker.step", "Ledger.append_steps"):
        assert name in api, f"the Python API page lacks {name}: mkdocstrings rendered nothing for it"


def test_a_broken_anchor_fails_the_strict_build():
    """Issue #43 item 11: gate.md and yields.md linked probes.md by headings' old slugs and the strict build passed.
    mkdocs (>= 1.6) checks anchors when `validation.anchors` says so; with `strict`, a warning fails the build."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["validation"]["anchors"] == "warn", config.get("validation")


@pytest.mark.slow
def test_the_strict_build_fails_on_a_link_to_a_missing_heading(tmp_path: Path):
    """The docs as they are, plus one link to a heading probes.md lacks: the build fails and names it."""
    pytest.importorskip("mkdocs", reason="the docs group is not installed: pip install --group docs")
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "src").symlink_to(ROOT / "src")
    page = tmp_path / "docs" / "gate.md"
    page.write_text(page.read_text() + "\nSee [the law](probes.md#no-such-heading).\n")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode != 0 and "does not contain an anchor '#no-such-heading'" in result.stderr, result.stderr


def shown_commands(text: str) -> list[str]:
    """Every `yieldgate ...` command a page shows: lines of its code blocks and its inline code spans."""
    spans = [line for _, _, body in CODE_BLOCK.findall(text) for line in body.splitlines()]
    spans += re.findall(r"`(yieldgate [^`]+)`", CODE_BLOCK.sub("", text))
    out = []
    for span in spans:
        span = re.sub(r"^\$ |^(?:[A-Z_]+=\S+ )+", "", strip_comment(span))
        if span.startswith("yieldgate "):
            out.append(span)
    return out


def test_every_option_a_page_shows_exists():
    """A command shown in the README or the docs uses only options the CLI has (a renamed flag fails here)."""
    group = typer.main.get_command(app)
    global_opts = {o for p in group.params for o in p.opts}
    wrong = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        if page.name == "cli-reference.md":
            continue
        for shown in shown_commands(page.read_text()):
            words = [w.strip("[](),.'\"") for w in shown.split()[1:]]
            while words and words[0] in global_opts:
                words = words[2:] if words[0] == "--ledger" else words[1:]
            if not words or words[0] not in group.commands:
                wrong.append(f"{page.name}: `{shown}`: no such command")
                continue
            command = group.commands[words[0]]
            if getattr(command, "commands", None) and len(words) > 1 and words[1] in command.commands:
                command = command.commands[words[1]]
            opts = {o for p in command.params for o in p.opts} | global_opts | {"--help"}
            flags = {w.split("=")[0].split("|")[0] for w in words if w.startswith("-") and len(w) > 1}
            wrong += [f"{page.name}: `{shown}`: {flag} is no option of it" for flag in sorted(flags - opts)]
    assert not wrong, "\n".join(wrong)


def blocks(page: str, lang: str) -> list[str]:
    return [body for kind, _, body in CODE_BLOCK.findall((DOCS / page).read_text()) if kind == lang]


def test_the_manifest_page_example_is_a_valid_manifest_and_the_example_file(tmp_path: Path):
    from yieldgate.manifest import load_manifest

    (example,) = blocks("manifests.md", "yaml")
    (tmp_path / "manifest.yaml").write_text(example)
    manifest = load_manifest(tmp_path / "manifest.yaml")
    assert manifest.data is not None and [s.name for s in manifest.data.sources] == ["web", "code"]
    assert load_manifest(ROOT / "examples" / "manifest.yaml") == manifest, (
        "examples/manifest.yaml is the page's example"
    )


def test_the_gate_page_policy_is_the_example_file():
    from yieldgate.gate.policy import load_policy, parse_policy

    shown = parse_policy(yaml.safe_load(blocks("gate.md", "yaml")[0]), origin="docs/gate.md")
    assert shown == load_policy(ROOT / "examples" / "policy.yaml")


def test_the_api_page_ledger_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The Python API page's Ledger example, as written, with the manifest page's example as its manifest.yaml."""
    from yieldgate import Ledger

    monkeypatch.chdir(tmp_path)
    (tmp_path / "manifest.yaml").write_text(blocks("manifests.md", "yaml")[0])
    (example,) = [b for b in blocks("api.md", "python") if "with Ledger(" in b]
    exec(compile(example, "docs/api.md", "exec"), {})
    with Ledger(tmp_path / "yieldgate.db", readonly=True) as ledger:
        steps = ledger.steps("bs64-fp16", ["tokens", "loss"])
        assert steps["loss"].tolist() == [10.9, 10.1]
        assert ledger.extras("bs64-fp16", ["signals/gns"])["value"].tolist() == [812.0]
