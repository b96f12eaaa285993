"""The declared Python API: `from yieldgate import ...` gives one function per command, the same numbers as the
CLI, and `import yieldgate` alone does not pull in torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import yieldgate
from yieldgate import EvalRecord, Ledger, api
from yieldgate.report.console import clean


def test_every_declared_name_is_there_and_import_stays_light():
    for name in yieldgate.__all__:
        assert getattr(yieldgate, name) is not None, name
    out = subprocess.run([sys.executable, "-c", "import sys, yieldgate; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture
def two_runs(ledger_path):
    with Ledger(ledger_path) as led:
        for name, slope in (("a", 1.0), ("b", 2.0)):
            led.create_run(name)
            led.append_steps(name, {"step": list(range(0, 11)), "tokens": [1000.0 * s for s in range(11)],
                                    "wall_s": [10.0 * s for s in range(11)]})
            led.append_evals(name, [EvalRecord(step=s, task="val", metric="loss", value=10 - slope * s / 2)
                                    for s in range(0, 11, 2)])
    return ledger_path


def test_the_api_gives_the_clis_numbers(two_runs, cli):
    def as_json(value):  # what --json prints of a result: tuples as lists, numpy numbers as Python's
        return json.loads(json.dumps(clean(value)))

    assert as_json(yieldgate.yields("a", ledger=two_runs).to_dict()["tranches"]) == cli.json("yield", "a")
    assert as_json(yieldgate.compare("a", "b", ledger=two_runs).to_dict()["speedup"]) == \
        cli.json("compare", "a", "b")["speedup"]
    with Ledger(two_runs) as led:  # an open Ledger is used as it is
        assert yieldgate.runs(ledger=led)["name"].tolist() == ["a", "b"]
    found = yieldgate.diagnose("a", ledger=two_runs, store=False)
    assert found.to_dict()["run"] == "a"


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
    assert picked["name"].tolist() == [r["name"] for r in cli.json("runs", "a", "st*", "--tag", "base", "--status",
                                                                    "running", "--sort", "name", "--reverse")]
    assert picked["name"].tolist() == ["steeper", "a"] and picked["note"].tolist()[1] == "the baseline"
    assert [r.to_dict() for r in yieldgate.remove_runs("steep*", ledger=two_runs)] == [
        {"name": "steeper", "steps": 11, "extra_values": 0, "evals": 6, "events": 0}]
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
    (lambda led, tmp: yieldgate.import_run("textlog", str(tmp / "x.log"), run="x", ledger=led, log_format="nope"),
     "log_format"),
    (lambda led, tmp: yieldgate.import_run("table", str(tmp / "x.csv"), run="x", ledger=led, join_on="nope"),
     "join_on"),
    (lambda led, tmp: yieldgate.export_run("a", "nope", tmp / "out", ledger=led), "to"),
    # api.report: `yieldgate.report` is the subpackage once `yieldgate.report.console` is imported (above)
    (lambda led, tmp: api.report("a", tmp / "r.html", ledger=led, per="bit"), "per"),
]


@pytest.mark.parametrize(("call", "parameter"), BAD_CHOICES, ids=[f"{i}-{p}" for i, (_, p) in enumerate(BAD_CHOICES)])
def test_a_bad_choice_is_an_input_error_that_names_the_argument(two_runs, tmp_path, call, parameter):
    """`yieldgate.compare(primary="nope")` was taken as throughput-first: every choice is checked, and the error
    names the argument (as Python spells it) and lists the values it takes."""
    with pytest.raises(yieldgate.InputError, match=rf"^{parameter} must be (one of )?\w") as caught:
        call(two_runs, tmp_path)
    assert caught.value.parameters == (parameter,)
    assert str(caught.value).endswith(("got 'nope'", "got 'bit'", "got 'size'", "got 'done'"))


def test_the_cli_says_the_flag_where_the_library_says_the_argument(two_runs, cli):
    assert cli("compare", "a", "b", "--primary", "nope", code=2).stderr == \
        "error: --primary must be learning or throughput, got 'nope'\n"
    assert cli("runs", "--sort", "size", code=2).stderr == \
        "error: --sort must be one of name, created, updated, status, steps, tokens, duration, got 'size'\n"
    assert cli("import", "nope", "x.csv", "--run", "x", code=2).stderr.startswith(
        "error: KIND must be one of tensorboard, mlflow, ")
    with pytest.raises(yieldgate.InputError, match=r"^primary must be learning or throughput, got 'nope'$"):
        yieldgate.compare("a", "b", ledger=two_runs, primary="nope")
