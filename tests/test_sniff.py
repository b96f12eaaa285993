"""Issue 45, item 11: `import auto` tells a text log from a table and from a JSON document by its structure, never by
its first character or a count of commas: a printed log whose lines start with `[` or hold commas goes to the
text-log reader (which reads it, or refuses it describing it), never to a "not a CSV table (Error tokenizing data)"
or "JSON that does not parse" refusal; tables and JSON documents are still told as such."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ingest.sniff import kind_of
from yieldgate.ledger import Ledger

NAMES = ["step", "loss", "lr", "epoch", "acc", "grad_norm", "tokens"]


@st.composite
def printed_logs(draw) -> str:
    """Lines as trainers print them: `name: value` / `name=value` / `name value` pairs joined by `, `, ` | ` or
    spaces, after an optional `[timestamp]`, `[rank0]:` or `{` prefix, with as many or different numbers of pairs."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=5, unique=True))
    pair = draw(st.sampled_from(["{}: {}", "{}={}", "{} {}", "'{}': {}"]))
    join = draw(st.sampled_from([", ", " | ", "  "]))
    head = draw(st.sampled_from(["", "[2024-05-01 10:00:{:02d}] ", "[rank0]: ", "{{", "[INFO] "]))
    ragged = draw(st.booleans())
    lines = []
    for i in range(draw(st.integers(2, 30))):
        shown = names[: 2 + i % (len(names) - 1)] if ragged else names
        body = join.join(pair.format(n, round(1.0 + i * 0.25 + len(n), 4)) for n in shown)
        lines.append(head.format(i % 60) + body + ("}" if head == "{{" else ""))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("n", [6, pytest.param(1000, marks=pytest.mark.slow)])
def test_a_printed_log_is_never_taken_for_a_table_or_a_json_document(n, tmp_path):
    @given(printed_logs())
    def prop(text):
        path = tmp_path / "train.log"
        path.write_text(text)
        assert kind_of(path) == "textlog", text
        with Ledger(":memory:") as led:
            try:
                import_run(led, "auto", [str(path)], ImportOptions(run="r"))
            except InputError as exc:
                said = str(exc)
                assert "not a CSV table" not in said and "JSON that does not parse" not in said, said

    settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))(prop)()


@pytest.mark.parametrize(
    "text",
    [
        "step=1, loss=2.5, lr=0.1\nstep=2, loss=2.4, lr=0.1\nstep=3, loss=2.3, lr=0.1\n",  # as many commas a line
        "[2024-01-01 10:00:00] step=1 loss=2.5\n[2024-01-01 10:00:05] step=2 loss=2.4\n",  # starts like JSON
        "step=1, loss=2.5\nstep=2, loss=2.4, lr=0.1\n",  # a comma more on a later line
    ],
    ids=["commas", "brackets", "ragged"],
)
def test_such_a_log_is_read_as_the_text_log_it_is(text, ledger, tmp_path):
    path = tmp_path / "train.log"
    path.write_text(text)
    (res,) = import_run(ledger, "auto", [str(path)], ImportOptions(run="r"))
    assert "read as kv" in res.source
    assert ledger.steps("r", nullable=True)["loss"].tolist()[:2] == [2.5, 2.4]


def test_a_log_that_no_reader_knows_is_refused_by_the_text_log_reader_not_the_table_reader(ledger, tmp_path):
    path = tmp_path / "train.log"
    path.write_text("[2024-01-01 10:00:00] starting run\n[2024-01-01 10:00:01] phase A done, 12 items\n")
    with pytest.raises(InputError) as refused:
        import_run(ledger, "auto", [str(path)], ImportOptions(run="r"))
    assert "JSON" not in str(refused.value) and "CSV" not in str(refused.value)
    assert ledger.runs().empty


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("step,loss,lr\n1,2.5,0.1\n2,2.4,0.1\n", "table"),
        ('"step","train/loss"\n"1","2.5"\n"2","2.4"\n', "table"),  # W&B quotes every field
        ("epoch\ttrain_loss\n0\t1.5\n1\t1.2\n", "table"),
        ("step,loss,grad_norm layer 12\n1,2.5,0.3\n2,2.4,0.2\n", "table"),  # one name that ends in a number
        ('{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 2.4}\n', "table"),
        (json.dumps({"log_history": [{"step": 1, "loss": 2.0}]}), "hf-trainer"),
    ],
)
def test_tables_and_json_documents_are_still_told_as_such(text, kind, tmp_path):
    path = tmp_path / "data.txt"
    path.write_text(text)
    assert kind_of(path) == kind


def test_a_json_document_of_no_known_shape_is_refused_as_json(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("[1, 2, 3]\n")
    with pytest.raises(InputError, match="a JSON list"):
        kind_of(path)
