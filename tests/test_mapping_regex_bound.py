"""A mapping's `lines` regexes are bounded before any line is read (issue #46 item 8): a repeat of a part that itself
repeats (`(a+)+`), an alternation inside a repeat without bound (`(a|aa)+`), or a scan repeated more than three times
(`(.*a){12}`) can take minutes on one line it almost matches, and is refused with the rewrite that is safe; the
patterns a log mapping is written with pass."""

from __future__ import annotations

import pytest

from yieldgate.errors import InputError
from yieldgate.ingest.mapping import _bounded_regex

CATASTROPHIC = [
    r"(a+)+$",
    r"(\w*\s?)*$",
    r"(a|aa)+b",
    r"(a|a)*x",
    r"(?:loss|lo)+=",
    r"(.*a){12}x",
    r"(\d+){4}",
    r"^(([a-z])+.)+[A-Z]([a-z])+$",
]
SAFE = [
    r"^Epoch (?P<epoch>\d+).*loss[:=] ?(?P<loss>[\d.]+)",
    r"(?:loss|cost)=(?P<loss>[\d.]+)",
    r"(\d+\.){3}\d+",
    r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}",
    r"(a|b)*c",  # one character from a set: no choice to backtrack into
    r"(?>a|aa)+b",  # the atomic group the refusal advises
    r"(a+)++",  # the possessive repeat the refusal advises
    r"step (?P<step>\d+)\s+\|\s+(?P<name>\w+)=(?P<value>\S+)",
]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_regex_that_can_backtrack_without_end_is_refused_with_the_safe_rewrite(pattern):
    with pytest.raises(InputError) as refused:
        _bounded_regex("m.yaml: lines[0]", pattern)
    said = str(refused.value)
    assert said.startswith(f"m.yaml: lines[0]: {pattern!r} repeats a part") and "(?>a|aa)+" in said and "\n" not in said


@pytest.mark.parametrize("pattern", SAFE)
def test_the_patterns_of_log_mappings_and_the_advised_rewrites_pass(pattern):
    assert _bounded_regex("m.yaml: lines[0]", pattern) == pattern
