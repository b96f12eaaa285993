"""The declared Python API: `from yieldgate import ...` gives one function per command, the same numbers as the
CLI, and `import yieldgate` alone does not pull in torch."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import yieldgate
from yieldgate import EvalRecord, Ledger, api
from yieldgate.report.console import clean


def test_every_declared_name_is_there_and_import_stays_light():
    for name in yieldgate.__all__:
        assert getattr(yieldgate, name) is not None, name
    out = subprocess.run(
        [sys.executable, "-c", "import sys, yieldgate; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


@pytest.fixture
def two_runs(ledger_path):
    with Ledger(ledger_path) as led:
        for name, slope in (("a", 1.0), ("b", 2.0)):
            led.create_run(name)
            led.append_steps(
                name,
                {
                    "step": list(range(0, 11)),
                    "tokens": [1000.0 * s for s in range(11)],
                    "wall_s": [10.0 * s for s in range(11)],
                },
            )
            led.append_evals(
                name, [EvalRecord(step=s, task="val", metric="loss", value=10 - slope * s / 2) for s in range(0, 11, 2)]
            )
    return ledger_path


def test_the_api_gives_the_clis_numbers(two_runs, cli):
    def as_json(value):  # what --json prints of a result: tuples as lists, numpy numbers as Python's
        return json.loads(json.dumps(clean(value)))

    assert as_json(yieldgate.yields("a", ledger=two_runs).to_dict()["tranches"]) == cli.json("yield", "a")
    assert (
        as_json(yieldgate.compare("a", "b", ledger=two_runs).to_dict()["speedup"])
        == cli.json("compare", "a", "b")["speedup"]
    )
    with Ledger(two_runs) as led:  # an open Ledger is used as it is
        assert yieldgate.runs(ledger=led)["name"].tolist() == ["a", "b"]
    found = yieldgate.diagnose("a", ledger=two_runs, store=False)
    assert found.to_dict()["run"] == "a"
    assert as_json(api.show("b", ledger=two_runs)) == cli.json("show", "b")


def test_api_errors_speak_of_arguments(two_runs):
    with pytest.raises(yieldgate.InputError, match=r"^metric must be an eval key"):
        yieldgate.yields("a", ledger=two_runs, metric="nonsense")
    with pytest.raises(yieldgate.RunNotFound):
        yieldgate.yields("missing", ledger=two_runs)


def test_runs_can_be_managed_from_python_as_from_the_cli(two_runs, cli):
    assert yieldgate.tag_runs("*", ["base", "v1"], ledger=two_runs) == {"a": ["base", "v1"], "b": ["base", "v1"]}
    assert yieldgate.untag_runs("b", "v1", ledger=two_runs) == {"b": ["base"]}
    yieldgate.note_run("a", "the baseline", ledger=two_runs)
    assert yieldgate.rename_run("b", "steeper", ledger=two_runs) == "steeper"
    picked = yieldgate.runs(["a", "st*"], tags=["base"], status="running", sort="name", reverse=True, ledger=two_runs)
    assert picked["name"].tolist() == [
        r["name"]
        for r in cli.json("runs", "a", "st*", "--tag", "base", "--status", "running", "--sort", "name", "--reverse")
    ]
    assert picked["name"].tolist() == ["steeper", "a"] and picked["note"].tolist()[1] == "the baseline"
    assert [r.to_dict() for r in yieldgate.remove_runs("steep*", ledger=two_runs)] == [
        {"name": "steeper", "steps": 11, "extra_values": 0, "evals": 6, "events": 0}
    ]
    assert [r["name"] for r in cli.json("runs")] == ["a"]
    with pytest.raises(yieldgate.RunNotFound, match="'gone'"):
        yieldgate.remove_runs(["a", "gone"], ledger=two_runs)
    with pytest.raises(yieldgate.InputError, match=r"^tag 'a b' is not allowed"):
        yieldgate.tag_runs("a", "a b", ledger=two_runs)
    assert yieldgate.runs(ledger=two_runs)["tags"].tolist() == [["base", "v1"]]


# Every argument of the Python API that takes one of a set of values, given a value outside it: (what is called,
# the argument the error must name).
BAD_CHOICES = [
    (lambda led, tmp: yieldgate.runs(ledger=led, sort="size"), "sort"),
    (lambda led, tmp: yieldgate.runs(ledger=led, status="done"), "status"),
    (lambda led, tmp: yieldgate.yields("a", ledger=led, per="bit"), "per"),
    (lambda led, tmp: yieldgate.compare("a", "b", ledger=led, primary="nope"), "primary"),
    (lambda led, tmp: yieldgate.compare("a", "b", ledger=led, at="nope"), "at"),
    (lambda led, tmp: yieldgate.compare("a", "b", ledger=led, per="bit"), "per"),
    (lambda led, tmp: yieldgate.import_run("nope", str(tmp / "x.csv"), run="x", ledger=led), "kind"),
    (
        lambda led, tmp: yieldgate.import_run("textlog", str(tmp / "x.log"), run="x", ledger=led, log_format="nope"),
        "log_format",
    ),
    (
        lambda led, tmp: yieldgate.import_run("table", str(tmp / "x.csv"), run="x", ledger=led, join_on="nope"),
        "join_on",
    ),
    (lambda led, tmp: yieldgate.export_run("a", "nope", tmp / "out", ledger=led), "to"),
    # `yieldgate.report` stays the API function although `yieldgate.report.console` is imported (above)
    (lambda led, tmp: yieldgate.report("a", tmp / "r.html", ledger=led, per="bit"), "per"),
]


def test_yieldgate_report_stays_the_function_once_the_report_package_is_imported():
    """Importing a subpackage sets it as an attribute of its parent: `yieldgate.report` became the `report` package
    and `yieldgate.report(...)` raised "'module' object is not callable"."""
    import yieldgate.report.html  # noqa: F401 - the import that shadowed it
    from yieldgate.report import notebook

    assert yieldgate.report is api.report and callable(yieldgate.report)
    assert notebook.__name__ == "yieldgate.report.notebook"


@pytest.mark.parametrize(("call", "parameter"), BAD_CHOICES, ids=[f"{i}-{p}" for i, (_, p) in enumerate(BAD_CHOICES)])
def test_a_bad_choice_is_an_input_error_that_names_the_argument(two_runs, tmp_path, call, parameter):
    """`yieldgate.compare(primary="nope")` was taken as throughput-first: every choice is checked, and the error
    names the argument (as Python spells it) and lists the values it takes."""
    with pytest.raises(yieldgate.InputError, match=rf"^{parameter} must be (one of )?\w") as caught:
        call(two_runs, tmp_path)
    assert caught.value.parameters == (parameter,)
    assert str(caught.value).endswith(("got 'nope'", "got 'bit'", "got 'size'", "got 'done'"))


def test_the_cli_says_the_flag_where_the_library_says_the_argument(two_runs, cli):
    assert (
        cli("compare", "a", "b", "--primary", "nope", code=2).stderr
        == "error: --primary must be learning or throughput, got 'nope'\n"
    )
    assert (
        cli("runs", "--sort", "size", code=2).stderr
        == "error: --sort must be one of name, created, updated, status, steps, tokens, duration, got 'size'\n"
    )
    assert cli("import", "nope", "x.csv", "--run", "x", code=2).stderr.startswith(
        "error: KIND must be one of tensorboard, mlflow, "
    )
    with pytest.raises(yieldgate.InputError, match=r"^primary must be learning or throughput, got 'nope'$"):
        yieldgate.compare("a", "b", ledger=two_runs, primary="nope")


def test_a_message_that_names_two_arguments_names_two_flags_on_the_command_line(two_runs, cli, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("iter 1: loss 2.0\niter 2: loss 1.5\n")
    said = "and log_format nanogpt exclude each other: give one"
    with pytest.raises(yieldgate.InputError, match=f"^patterns {said}$"):
        yieldgate.import_run(
            "textlog", str(log), run="t", ledger=two_runs, patterns=["iter (?P<step>\\d+)"], log_format="nanogpt"
        )
    out = cli(
        "import", "textlog", str(log), "--run", "t", "--pattern", "iter (?P<step>\\d+)", "--format", "nanogpt", code=2
    )
    assert out.stderr == f"error: --pattern {said.replace('log_format', '--format')}\n"
    table = tmp_path / "t.csv"
    table.write_text("step,loss\n1,3.0\n2,2.5\n")
    with pytest.raises(yieldgate.InputError, match=r"^tokens_per_step must be > 0, got -1$"):
        yieldgate.import_run("table", str(table), run="t", ledger=two_runs, tokens_per_step=-1)
    assert (
        cli("import", "table", str(table), "--run", "t", "--tokens-per-step", "-1", code=2).stderr
        == "error: --tokens-per-step must be > 0, got -1\n"
    )


# -- library messages speak of arguments, not flags ------------------------------------------------------------------

SRC = Path(yieldgate.__file__).parent
FLAG = re.compile(r"--[A-Za-z]")


def _flag_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant (an f-string's literal parts too) with `--` and a letter in what the
    module raises or warns: `raise ...(...)`, `warnings.warn(...)` and an importer's `warnings.add(...)`, and the
    body of a function of the module that a raise calls to build its message (`raise InputError(_nothing_read(...))`).
    """
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    said: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            said.append(node.exc)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "warnings"
            and node.func.attr in ("warn", "add")
        ):
            said.append(node)
    found, helpers = [], set()
    for part in said:  # grows by the helpers' bodies, each once
        for node in ast.walk(part):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                if node.func.id not in helpers:
                    helpers.add(node.func.id)
                    helper = functions[node.func.id]
                    said.extend(helper.body[1:] if ast.get_docstring(helper) is not None else helper.body)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and FLAG.search(node.value):
                found.append((node.lineno, node.value))
    return found


def test_the_walk_finds_a_flag_in_what_is_raised_or_warned():
    """The walk below cannot pass by missing what it looks for."""
    source = '''
def _why(n):
    """Docstrings are not messages: --ok."""
    return f"{n}: name it with --map KEY=NAME"

def f(x):
    warnings.warn("fine")
    if x:
        raise InputError(f"--tokens-per-step must be > 0, got {x}")
    warnings.add("tokens", f"{x}: use --devices N")
    raise InputError(_why(x))
'''
    assert [line for line, _ in _flag_strings(ast.parse(source))] == [9, 10, 4]


def test_no_library_message_names_a_flag():
    """The library speaks of its arguments (`tokens_per_step must be > 0`); `cli.FLAGS` spells them as flags on
    the command line. The cli package alone may say `--`."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if SRC / "cli" in path.parents:
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(SRC)}:{line}: {text!r}" for line, text in _flag_strings(tree)]
    assert found == []


def _parameters_named() -> set[str]:
    """Every argument the library's errors name: a literal `parameter=` of an InputError, and the first argument of
    `check_choice`."""
    named: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            given = [k.value for k in node.keywords if k.arg == "parameter"]
            if isinstance(node.func, ast.Name) and node.func.id == "check_choice":
                given.append(node.args[0])
            for value in given:
                if isinstance(value, ast.Constant | ast.Tuple):  # errors.check_choice passes its own argument on
                    literal = ast.literal_eval(value)
                    named |= {literal} if isinstance(literal, str) else set(literal)
    return named


def test_every_argument_an_error_names_has_its_flag():
    """An error that names an argument the CLI has no spelling for would print the Python name on the command
    line."""
    from yieldgate.cli import FLAGS

    named = _parameters_named()
    assert {"primary", "at", "tokens_per_step", "map"} <= named  # the walk sees both forms
    assert named <= set(FLAGS), named - set(FLAGS)


# -- the CLI's work goes through api ----------------------------------------------------------------------------------

# Commands whose work does not go through `api` yet: this list may only shrink. A command that imports a library
# module other than `api` (constants aside), `report.console` (rendering) or the two fronts it starts (the
# dashboard, the demo), or calls a method of an open ledger itself, does its work around the door.
BYPASSING: set[str] = set()
_THROUGH = (
    "yieldgate",
    "yieldgate.api",
    "yieldgate.errors",
    "yieldgate.report.console",
    "yieldgate.serve",
    "yieldgate.demo",
)


def _command_name(function: ast.FunctionDef) -> str | None:
    for decorator in function.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "command"
            and isinstance(decorator.func.value, ast.Name)
        ):
            group = {"app": "", "manifest_app": "manifest ", "ledger_app": "ledger "}[decorator.func.value.id]
            given = function.name.replace("_", "-")
            if decorator.args:
                arg = decorator.args[0]
                assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), ast.dump(arg)
                given = arg.value
            return group + given
    return None


def _works_around_api(function: ast.FunctionDef, helpers: dict[str, ast.FunctionDef]) -> bool:
    bodies, seen = [function], {function.name}
    for body in bodies:
        for node in ast.walk(body):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module not in _THROUGH
                and not all(alias.name.isupper() for alias in node.names)
            ):
                return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("ledger", "side")
            ):
                return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in helpers
                and node.func.id not in seen
            ):
                seen.add(node.func.id)
                bodies.append(helpers[node.func.id])
    return False


def test_the_commands_that_work_around_api_are_a_shrinking_list():
    trees = [ast.parse(path.read_text()) for path in sorted((SRC / "cli").glob("*.py"))]
    functions = {f.name: f for tree in trees for f in tree.body if isinstance(f, ast.FunctionDef)}
    commands = {name: f for f in functions.values() if (name := _command_name(f)) is not None}
    assert len(commands) == 31 and BYPASSING <= set(commands)
    assert {name for name, f in commands.items() if _works_around_api(f, functions)} == BYPASSING
