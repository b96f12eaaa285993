"""The data contract's names table (docs/data-contract.md) and the code's constants are one list: this test keeps
them so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yieldgate.ingest.textlog import FORMATS
from yieldgate.names import CORE_STEP_COLUMNS, EXTRA_KEYS, TEXTLOG_FORMATS, is_extra_key, split_eval_key

PAGE = Path(__file__).resolve().parents[1] / "docs" / "data-contract.md"


def page_names() -> dict[str, tuple[str, str]]:
    text = PAGE.read_text()
    block = text[text.index("<!-- names:start -->") : text.index("<!-- names:end -->")]
    rows = {}
    for line in block.splitlines():
        match = re.match(r"^\| `([^`]+)` \| (.+?) \| (core|extras) \|$", line)
        if match:
            rows[match[1]] = (match[2].replace("\\|", "|"), match[3])
    return rows


def test_names_table_matches_the_code():
    expected = {name: (unit, "core") for name, unit in CORE_STEP_COLUMNS.items()}
    expected |= {name: (unit, "extras") for name, unit in EXTRA_KEYS.items()}
    assert page_names() == expected


def test_the_command_line_names_every_textlog_format_there_is():
    assert TEXTLOG_FORMATS == tuple(FORMATS)


def test_every_extra_is_namespaced_and_no_core_name_is():
    assert all(is_extra_key(k) for k in EXTRA_KEYS)
    assert not any(is_extra_key(k) for k in CORE_STEP_COLUMNS)
    assert not is_extra_key("signals/") and not is_extra_key("/x")


@pytest.mark.parametrize(
    ("key", "task", "metric"),
    [
        ("val/loss", "val", "loss"),
        ("val/code/loss", "val/code", "loss"),
        ("lambada_openai/acc", "lambada_openai", "acc"),
    ],
)
def test_split_eval_key(key, task, metric):
    assert split_eval_key(key) == (task, metric)


def test_split_eval_key_refuses_a_bare_name():
    with pytest.raises(ValueError, match="'<task>/<metric>'"):
        split_eval_key("loss")
