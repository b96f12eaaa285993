"""Imports and runs that miss what yieldgate reads say so, in one line, with the fix (issue #36 item 11): a table
whose columns are all unknown names the extras it kept and points to `map`; a Tracker never given tokens says at
close that the run has no token axis."""

from __future__ import annotations

import logging

import yieldgate
from yieldgate import Tracker
from yieldgate.ledger import Ledger


def _csv(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("step,foo,bar\n1,0.5,3\n2,0.4,3\n3,0.3,3\n")
    return path


def test_a_table_of_unknown_columns_names_its_extras_and_map(tmp_path):
    (res,) = yieldgate.import_run("table", str(_csv(tmp_path)), run="t", ledger=tmp_path / "t.db")
    assert res.steps == 3  # imported all the same
    said = [w for w in res.warnings if "imported/foo" in w]
    assert len(said) == 1 and "\n" not in said[0]
    assert "imported/bar" in said[0] and "map KEY=SOURCE_NAME" in said[0] and "--map" not in said[0]


def test_the_cli_spells_map_as_its_flag(cli, tmp_path):
    out = cli("import", "table", str(_csv(tmp_path)), "--run", "t", "--json").stdout
    assert "--map KEY=SOURCE_NAME" in out and "imported/foo" in out


def test_a_table_with_a_known_name_says_nothing_of_it(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("step,loss,foo\n1,2.0,3\n2,1.9,3\n")
    (res,) = yieldgate.import_run("table", str(path), run="t", ledger=tmp_path / "t.db")
    assert not any("map KEY=" in w for w in res.warnings), res.warnings


def _no_tokens_said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no token axis" in r.getMessage()]


def test_a_tracker_never_given_tokens_says_so_once_at_close(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="yieldgate.track")
    with Tracker("nt", ledger=tmp_path / "nt.db") as tr:
        for _ in range(3):
            tr.step(tokens=0, loss=1.0)
        assert not _no_tokens_said(caplog)
    said = _no_tokens_said(caplog)
    assert len(said) == 1 and "\n" not in said[0]
    assert "tr.step(tokens=...)" in said[0] and "per token" in said[0] and "equal tokens" in said[0]
    with Ledger(tmp_path / "nt.db", readonly=True) as led:
        assert len(led.steps("nt")) == 3


def test_a_tracker_given_tokens_says_nothing_of_them(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="yieldgate.track")
    with Tracker("t", ledger=tmp_path / "t.db") as tr:
        tr.step(tokens=64, loss=1.0)
    assert not _no_tokens_said(caplog)
