"""The files a user hands yieldgate (manifests, recipes, campaigns, policies, pipelines): read as YAML or JSON, and
validated as a pydantic model with one-line messages that name the field (`data.sources[2].weight: must be >= 0,
got -0.5`) and, for an unknown field, the fields allowed there.

Nothing here knows a particular model: `manifest.py` holds the manifest's, and each file-backed part its own.
"""

from __future__ import annotations

import difflib
import json
import reprlib
import typing
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml
from pydantic import BaseModel

from yieldgate.errors import InputError, ManifestError
from yieldgate.util.inputs import read_regular

__all__ = ["read_structured_file", "validate", "format_validation_error"]


def read_structured_file(path: str | Path) -> Any:
    """Read a YAML or JSON file (YAML only through safe loading) into plain Python data."""
    path = Path(path)
    data = read_regular(path, "a YAML or JSON file")  # a FIFO or /dev/zero is refused, not read forever
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    try:
        if path.suffix.lower() == ".json":
            return _bounded(json.loads(text), path)
        return _bounded(yaml.safe_load(text), path)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: malformed JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a manifest; check the brackets") from None
    except ValueError as exc:  # a number past Python's 4,300-digit limit for reading integers from text
        raise InputError(f"{path}: a value cannot be read ({str(exc).split(';')[0]}); no field takes it") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise InputError(f"{where}: malformed YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from None


# A manifest holds hundreds of values; YAML aliases can make a small file expand to billions ("billion
# laughs"), which would be stored, hashed and printed in full. Past this many values a file is refused.
_MAX_VALUES = 100_000


def _bounded(data: Any, path: Path) -> Any:
    """`data` unchanged, or InputError when it expands to more than _MAX_VALUES values (counted with
    aliases expanded, without recursion, stopping at the limit)."""
    stack, seen = [data], 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > _MAX_VALUES:
            raise InputError(
                f"{path}: expands to more than {_MAX_VALUES:,} values (YAML aliases?); a manifest "
                "holds far fewer, so write it out without the aliases"
            )
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return data


_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxdict, _short.maxlevel = 60, 60, 4, 4, 2


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class _Shown:
    """A value as an error message shows it: its repr, cut short (a hostile file's value can be huge)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return _short.repr(self.value)


def _fields_at(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> list[str]:
    """The field names a mapping at `loc` (a pydantic error location) may hold, following `model`'s field types
    through optional values, lists and mappings; [] when the way is lost."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int) or part == "__root__":
            continue
        field = model.model_fields.get(part)
        model = _model_in(field.annotation) if field is not None else None
    return sorted(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field type (`Source`, `Source | None`, `list[Source]`, `dict[str, Source]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _unknown_field(name: Any, allowed: list[str]) -> str:
    if not allowed:
        return "unknown field (check its spelling)"
    close = difflib.get_close_matches(str(name), allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown field ({hint}the fields here: {', '.join(allowed)})"


def _describe(err: Any, model: type[BaseModel] | None = None) -> str:
    kind, ctx, value = err["type"], err.get("ctx") or {}, _Shown(err.get("input"))
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
    if kind in bounds:
        bound = next(iter(ctx.values()))
        return f"must be {bounds[kind]} {bound}, got {value!r}"
    if kind == "missing":
        return "required, but missing"
    if kind == "extra_forbidden":
        return _unknown_field(err["loc"][-1], _fields_at(model, tuple(err["loc"][:-1])))
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {value!r}"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    if kind in ("too_short", "string_too_short"):
        return f"{err['msg'].lower()}, got {value!r}"
    return f"{err['msg'].lower()}, got {value!r}"


def format_validation_error(
    exc: pydantic.ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> str:
    """One line naming each failing field: `data.sources[2].weight: must be >= 0, got -0.5`; an unknown field
    with the fields `model` allows there (and the closest one)."""
    parts = []
    for err in exc.errors():
        # Model-level validators report at the model's own location, with no trailing field.
        loc = _loc(tuple(p for p in err["loc"] if p != "__root__"))
        where = ".".join(x for x in (prefix, loc) if x)
        parts.append(f"{where}: {_describe(err, model)}" if where else _describe(err, model))
    return "; ".join(parts)


M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Any, origin: str, example: str) -> M:
    """Validate plain data as `model`; errors are one line naming `origin` and the field.

    Every file-backed model (manifests, recipes, campaigns, policies, pipelines) goes through here."""
    if data is None:
        raise ManifestError(f"{origin}: empty; expected a mapping such as {example}")
    if not isinstance(data, dict):
        raise ManifestError(
            f"{origin}: expected a mapping at the top level (such as {example}), got {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ManifestError(f"{origin}: {format_validation_error(exc, model=model)}") from None
