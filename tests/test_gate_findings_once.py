"""The gate lists each open finding's run once per cause (issue #43 item 10): three findings of one cause on one run
read `schedule on camp/base/s0, camp/base/s0, camp/base/s0`. Held as golden text (tests/data/golden/text/), with the
rule checked on generated findings."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_golden_text import held
from yieldgate.gate.gate import _opened


def test_the_gate_lists_each_run_once_per_cause():
    """Three schedule findings on s0 (two stored events, one found by the gate), one on s1, a damaged update on s0:
    each run once per cause, its events beside it; `found by the gate` when nothing is stored."""
    faults = [
        {"cause": "schedule", "run": "camp/base/s0", "event": 5},
        {"cause": "schedule", "run": "camp/base/s0", "event": 3},
        {"cause": "schedule", "run": "camp/base/s0", "event": None},
        {"cause": "schedule", "run": "camp/base/s1", "event": None},
        {"cause": "damaged_update", "run": "camp/base/s0", "event": 7},
    ]
    gate_only = [{**f, "event": None} for f in faults]
    held("gate-findings", _opened(faults) + "\n" + _opened(gate_only) + "\n")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["schedule", "damaged_update"]),
            st.sampled_from(["a/s0", "a/s1", "b/s0"]),
            st.none() | st.integers(1, 9),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_the_gate_names_each_cause_once_and_each_of_its_runs_once(faults):
    """Any findings: each cause is named once, each of its runs once after it, with every stored event of that run
    and cause beside it; nothing else."""
    said = _opened([{"cause": c, "run": r, "event": e} for c, r, e in faults]).removesuffix(" (found by the gate)")
    groups = dict(part.split(" on ", 1) for part in said.split("; "))
    assert sorted(groups) == sorted({c for c, _, _ in faults})
    for cause, listed in groups.items():
        runs = re.findall(r"(\S+?)(?: \(events? ([\d, ]+)\))?(?:, |$)", listed)
        assert [r for r, _ in runs] == list(dict.fromkeys(r for c, r, _ in faults if c == cause))
        for run, events in runs:
            stored = sorted({e for c, r, e in faults if c == cause and r == run and e is not None})
            assert ([int(x) for x in events.split(", ")] if events else []) == stored
