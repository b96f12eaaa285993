"""A probe's key holds the fingerprint of the team's data files: a campaign re-run after a data file was rewritten
trains again rather than skipping probes trained on other data; the built-in corpus's keys do not change."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from yieldgate.probe.campaign import load_campaign
from yieldgate.probe.campaign.spec import plan

CAMPAIGN = {
    "name": "own",
    "recipes": {"a": {"sources": [{"name": "a", "path": "a.jsonl"}]}, "b": {"sources": [{"name": "shakespeare"}]}},
    "seeds": 1,
    "budgets": [100],
    "trainer": {"command": "python train.py --data {recipe_file} --seed {seed}"},
}


def keys(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CAMPAIGN))
    return {s.recipe_name: s.key for s in plan(load_campaign(path))}


def test_a_rewritten_data_file_is_a_new_key(tmp_path):
    data = tmp_path / "a.jsonl"
    data.write_text('{"text": "first"}\n')
    before = keys(tmp_path)
    assert keys(tmp_path) == before  # the same data: the same keys, so a re-run skips them
    data.write_text('{"text": "rewritten"}\n')
    after = keys(tmp_path)
    assert after["a"] != before["a"]  # trained again on the new data
    assert after["b"] == before["b"]  # a recipe of the built-in corpus keeps its key


def test_a_file_that_cannot_be_read_keeps_the_plan_whole(tmp_path):
    data = tmp_path / "a.jsonl"
    data.write_text('{"text": "first"}\n')
    before = keys(tmp_path)
    moved = tmp_path / "elsewhere.jsonl"
    os.replace(data, moved)  # `yieldgate campaign` on a ledger whose data has moved still plans: not done
    gone = keys(tmp_path)
    assert gone["a"] != before["a"] and gone["b"] == before["b"]
