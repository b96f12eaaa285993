"""Every shape of one run reads back as that run, or is refused: never as a different run (issue 45).

`tests/support/loggen.py` renders one synthetic run (epochs of iterations, a loss, evaluations that fall and rise, a
restart, a second writer) in many shapes: JSON lines, CSV, `key: value` and `key=value` text, bracketed and plain
progress pairs in either order, tqdm bars with their values after or before the bar, multi-line blocks; timestamps or
per-iteration times; a global step, an epoch with a count within it, or both. Each is imported with `import auto`
as a user would, and the stored run compared with the one the generator wrote (`loggen.compare`). A refusal that
gives the iterations of an epoch to name is run as it says.
"""

from __future__ import annotations

import collections
import random
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.loggen import AXES, Shape, compare, expected, render, shape_from
from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run
from yieldgate.ledger import Ledger


def outcome(shape: Shape, folder: Path) -> tuple[str, str]:
    """(`same`, ''), (`refused`, the message) or (`different`, how): the shape imported and read back."""
    path = render(shape, folder)
    with Ledger(":memory:") as led:
        try:
            import_run(led, "auto", [str(path)], ImportOptions(run="r"))
        except InputError as exc:
            return "refused", str(exc)
        diffs = compare(led, "r", expected(shape))
    return ("different", "; ".join(diffs)) if diffs else ("same", "")


def advice_read(shape: Shape, message: str, folder: Path) -> list[str] | None:
    """A refusal that asks for the iterations of an epoch, run as it says with the shape's own count: how the run it
    reads differs from the one written (None when the refusal gives other advice, or a loader that shrank after a
    resume needs more than one count)."""
    m = re.search(r"map (epoch=\S+ map iter=\S+ map iters_per_epoch=N(?: map first_epoch=0)?)", message)
    if m is None or shape.shrink:
        return None
    options = [p.replace("=N", f"={shape.iters}") for p in m[1].split() if p != "map"]
    with Ledger(":memory:") as led:
        import_run(led, "auto", [str(render(shape, folder))], ImportOptions(run="r", map=options))
        return compare(led, "r", expected(shape))


shapes = st.builds(
    Shape,
    **{axis: st.sampled_from(values) for axis, values in AXES.items()},
    iters=st.integers(6, 20),
    epochs=st.integers(3, 6),
    seed=st.integers(0, 10**6),
).map(Shape.normalized)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes)
def test_a_shape_reads_back_as_the_run_or_is_refused(shape):
    with tempfile.TemporaryDirectory() as folder:
        got, why = outcome(shape, Path(folder))
        assert got != "different", f"{shape.name()}: read as a different run: {why}"
        if got == "refused":
            assert (advice_read(shape, why, Path(folder)) or []) == [], f"{shape.name()}: the advice misread: {why}"


def test_the_generator_s_axes_are_at_least_eight():
    assert len(AXES) >= 8 and all(len(values) >= 2 for values in AXES.values())


@pytest.mark.slow
def test_a_thousand_shapes_read_back_as_the_run_and_none_as_another():
    """1,200 shapes drawn over the generator's axes (seeded): at least 95% read back as the run, the rest refused
    (each refusal that asks for an epoch's size read right when given it), none read as a different run."""
    rng = random.Random(45)
    counts: collections.Counter[str] = collections.Counter()
    by_axis: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    different, advice_wrong, advised = [], [], 0
    for _ in range(1200):
        shape = shape_from(rng)
        with tempfile.TemporaryDirectory() as folder:
            got, why = outcome(shape, Path(folder))
            if got == "refused":
                diffs = advice_read(shape, why, Path(folder))
                advised += diffs is not None
                if diffs:
                    advice_wrong.append(f"{shape.name()}: {diffs}")
        counts[got] += 1
        for axis in ("layout", "counter", "clock", "restart", "writers"):
            by_axis[f"{axis}={getattr(shape, axis)}"][got] += 1
        if got == "different":
            different.append(f"{shape.name()}: {why}")
    total = sum(counts.values())
    figures = (
        f"{total} shapes over {len(AXES)} axes: {counts['same']} read back as the run "
        f"({counts['same'] / total:.1%}), {counts['refused']} refused ({advised} of them asking for an epoch's size, "
        f"read right when given it), {counts['different']} read as a different run; by axis: "
        + ", ".join(f"{k} {dict(v)}" for k, v in sorted(by_axis.items()))
    )
    assert not different and not advice_wrong, figures + "\n" + "\n".join(different[:5] + advice_wrong[:5])
    assert counts["same"] >= 0.95 * total, figures
    print(figures)
