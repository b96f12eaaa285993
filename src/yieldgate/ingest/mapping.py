"""The importers' mapping of a source's metric names: `--map KEY=SOURCE_NAME` overrides first, then the guess of
`yieldgate.aliases`, resolved to one target per name so that no two names write one key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from yieldgate.aliases import EXTRA_NAMESPACES, IMPORTED, Target, guess, imported, split_unit
from yieldgate.errors import InputError
from yieldgate.names import CORE_STEP_COLUMNS, is_extra_key

if TYPE_CHECKING:
    from yieldgate.ingest.clean import Warnings

__all__ = ["none_known", "parse_map_options", "resolve_mapping"]


def _target_of(key: str) -> Target:
    """The target named by the KEY of `--map KEY=SOURCE`."""
    base, scale = split_unit(key)
    if key in CORE_STEP_COLUMNS:
        return Target("step" if key == "step" else "core", key)
    if base + "_s" in ("wall_s", "step_s") and scale != 1.0:
        return Target("core", base + "_s", scale)
    if is_extra_key(key):
        if key.split("/")[0] in EXTRA_NAMESPACES | {IMPORTED}:
            return Target("extra", key)
        return Target("eval", key)
    raise InputError(
        f"map {key}=...: {key!r} is neither a core column ({', '.join(CORE_STEP_COLUMNS)}), an "
        "eval key such as val/loss, nor a namespaced extra such as signals/gns",
        parameter="map",
    )


def parse_map_options(options: Iterable[str]) -> dict[str, str]:
    """`["val/loss=eval_ce", ...]` -> {source name: canonical key}."""
    out = {}
    for opt in options:
        key, sep, source = opt.partition("=")
        if not sep or not key or not source:
            raise InputError(f"map {opt!r}: expected KEY=SOURCE_NAME, e.g. val/loss=eval/ce_loss", parameter="map")
        _target_of(key)
        out[source] = key
    return out


def resolve_mapping(
    names: Iterable[str], overrides: Mapping[str, str] | None = None, step_name: str | None = None
) -> dict[str, Target]:
    """The target of every source name: `overrides` ({source: key}) first, then the guess.

    `step_name` is the source column holding the step (None when the format has its own step counter).
    Two source names guessed onto one core column or eval key: the first keeps it, the others become
    `imported/<name>` extras, so no value is silently overwritten.
    """
    overrides = dict(overrides or {})
    out: dict[str, Target] = {}
    taken: set[str] = set()
    names = list(names)
    missing = [s for s in overrides if s not in names]
    if missing:
        raise InputError(
            f"map ...={missing[0]}: no metric {missing[0]!r} in the source; it has {', '.join(sorted(names)[:20])}",
            parameter="map",
        )
    for name in names:
        if name in overrides:
            out[name] = _target_of(overrides[name])
            taken.add(out[name].key)
    for name in names:
        if name in out:
            continue
        if name == step_name:
            out[name] = Target("step", "step")
            continue
        target = guess(name)
        if target.kind != "extra" and (target.key in taken or target.key == "step"):
            target = imported(name)
        out[name] = target
        taken.add(target.key)
    return out


def none_known(source: str, targets: Mapping[str, Target], warnings: Warnings) -> None:
    """Say, in one line, when no metric of the source has a name yieldgate knows (its clock aside): which it kept
    as extras, and how to name them."""
    extras = [t.key for t in targets.values() if t.key.startswith(f"{IMPORTED}/")]
    if not extras or any(t.kind in ("core", "eval") and t.key != "wall_s" for t in targets.values()):
        return
    listed = ", ".join(extras[:6]) + (f" and {len(extras) - 6} more" if len(extras) > 6 else "")
    warnings.add(
        "unknown-names",
        f"{source}: none of its {len(extras)} metric name(s) is one yieldgate knows: kept as extras {listed}; "
        "to read them as yieldgate's own, name them with map KEY=SOURCE_NAME (loss=..., val/loss=..., tokens=...)",
    )
