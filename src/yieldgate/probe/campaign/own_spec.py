"""A campaign's own trainer (`trainer:` in the campaign file): a command template run once per probe, or a Python
callable called in the worker, and the checks made before any probe starts (`preflight`).

```yaml
trainer:
  command: torchrun --nproc-per-node {gpus} train.py --data {recipe_file} --max-tokens {tokens} --seed {seed}
  env: {WANDB_MODE: disabled}
  workdir: .          # relative to the campaign file (default: its folder)
  timeout: 3600       # seconds per probe
  gpus: 1             # GPUs per probe ({gpus}; each probe gets its own through CUDA_VISIBLE_DEVICES)
  import: {path: "{probe_dir}/trainer_state.json", kind: hf-trainer}   # only for a script that uses no Tracker
  slurm: {slurm_partition: gpu}   # executor slurm: submitit's parameters
```

`callable: package.module:function` instead of `command:` is called with one `ProbeJob`. The template's fields are
`FIELDS`, and `{model.<field>}` for each field of the model entry (`{model.width}`).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import shutil
import socket
import string
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yieldgate.errors import InputError

__all__ = [
    "TrainerSpec",
    "ImportSpec",
    "ProbeJob",
    "FIELDS",
    "template_fields",
    "render",
    "preflight",
    "command_interpreter",
    "tracker_import_problem",
]

FIELDS = (
    "recipe_file",
    "recipe",
    "tokens",
    "seed",
    "run",
    "model",
    "gpus",
    "workdir",
    "probe_dir",
    "campaign",
    "ledger",
    "manifest_file",
    "python",
)
"""The fields a command template may name (with `model.<field>` for each of the model entry's fields). `{python}` is
the interpreter of the worker that runs the probe, the one running yieldgate: on Ray and Slurm a command runs in each
node's environment, where a bare `python` may be another interpreter, without yieldgate."""
MODEL_FIELDS = ("layers", "width", "heads")


class ImportSpec(BaseModel):
    """What a probe's script wrote, read into its run after it exits: any file `yieldgate import` reads."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1)
    """A template (the command's fields) of the file or folder to import, e.g. `{probe_dir}/trainer_state.json`."""
    kind: str = Field(min_length=1)
    """Its format, as `yieldgate import KIND` names it: hf-trainer, tensorboard, textlog, table, ..."""


class TrainerSpec(BaseModel):
    """A campaign's own trainer (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    command: str | None = None
    call: str | None = Field(default=None, alias="callable")
    """`package.module:function`, called with one `ProbeJob`."""
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    """Where the command runs (relative: to the campaign file; default its folder, or the current directory)."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds a probe may take; past it the probe is stopped and recorded failed."""
    gpus: int = Field(default=0, ge=0, le=1024)
    """GPUs per probe."""
    imports: ImportSpec | None = Field(default=None, alias="import")
    slurm: dict[str, Any] = Field(default_factory=dict)
    """Executor slurm: submitit's parameters (`slurm_partition`, `slurm_account`, `timeout_min`, ...); `array: false`
    submits one job per probe instead of one job array."""
    outputs: str | None = None
    """Folder of the probes' own folders (`{probe_dir}`: its recipe file, output log, anything the script writes);
    default `<workdir>/yieldgate-probes`."""

    @model_validator(mode="after")
    def _one(self) -> TrainerSpec:
        if (self.command is None) == (self.call is None):
            raise ValueError(
                "trainer needs exactly one of command: (a template) or callable: (package.module:function)"
            )
        return self

    def key_part(self) -> dict[str, Any]:
        """What the probe's key depends on: what runs (a new timeout or workdir trains nothing again)."""
        return {
            "command": self.command,
            "callable": self.call,
            "env": self.env,
            "import": self.imports.model_dump() if self.imports else None,
        }

    def anchored(self, base: Path) -> TrainerSpec:
        """With `workdir` and `outputs` absolute, relative ones taken from `base` (the campaign file's folder)."""
        workdir = Path(self.workdir).expanduser() if self.workdir else base
        workdir = workdir if workdir.is_absolute() else base / workdir
        outputs = Path(self.outputs).expanduser() if self.outputs else workdir / "yieldgate-probes"
        outputs = outputs if outputs.is_absolute() else workdir / outputs
        return self.model_copy(update={"workdir": str(workdir.resolve()), "outputs": str(outputs.resolve())})


@dataclass(frozen=True)
class ProbeJob:
    """What a callable trainer is given: the command template's fields, typed."""

    recipe_file: str
    """The probe's resolved recipe (JSON; YAML reads it too): sources with weights and paths, filters, tokenizer."""
    recipe: str
    tokens: int
    seed: int
    run: str
    model: dict[str, int]
    """The model entry: layers, width, heads."""
    gpus: int
    workdir: str
    probe_dir: str
    campaign: str
    ledger: str
    manifest_file: str
    python: str = sys.executable
    """The interpreter of the worker running the probe (`{python}`), which imports yieldgate."""

    def fields(self) -> dict[str, Any]:
        return asdict(self)


def _parsed(template: str, where: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InputError(f"{where}: {exc} in {template!r}; write a literal brace as {{{{ or }}}}") from None


def template_fields(template: str, where: str) -> list[str]:
    """The fields `template` names; InputError for one that does not exist, one with a format spec or a conversion
    (`{tokens:>999999999}` built a 3 GB string; a field is its value, formatted by the script), or a malformed
    template. Made before any probe starts."""
    allowed = set(FIELDS) | {f"model.{f}" for f in MODEL_FIELDS}
    names, state = [], ""
    for literal, name, spec, conversion in _parsed(template, where):
        state, escaped = _quote_state(literal, state)
        if name is None:
            continue
        if escaped:
            raise InputError(
                f"{where}: {{{name}}} follows a backslash, which would escape its value's first character; "
                "remove the backslash"
            )
        if name not in allowed:
            raise InputError(
                f"{where} names {{{name}}}, which is not a field; use one of "
                + ", ".join(f"{{{f}}}" for f in (*FIELDS, *(f"model.{f}" for f in MODEL_FIELDS)))
            )
        if spec or conversion:
            given = (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise InputError(
                f"{where}: {{{name}{given}}} has a format spec or conversion; a field takes none: write {{{name}}} and "
                "format the value in the script"
            )
        names.append(name)
    return names


def _value(job: ProbeJob, name: str) -> str:
    fields = job.fields()
    if name == "model":
        return json.dumps(job.model, separators=(",", ":"))
    if name.startswith("model."):
        return str(job.model[name.partition(".")[2]])
    return str(fields[name])


def _quote_state(text: str, state: str) -> tuple[str, bool]:
    """The POSIX shell's quoting state after `text`, from `state`: '' (unquoted), "'" or '"'; and whether `text` ends
    in a backslash that escapes what follows."""
    escaped = False
    for c in text:
        if escaped:
            escaped = False
        elif state == "'":
            state = "" if c == "'" else state
        elif c == "\\":
            escaped = True
        elif c == '"':
            state = "" if state == '"' else '"'
        elif c == "'" and not state:
            state = "'"
    return state, escaped


def _shell_word(value: str, state: str) -> str:
    """`value` as the shell will read it back exactly, and as part of the word it stands in, in quoting `state`: quoted
    outside quotes; inside double quotes with `\\ $ ` "` escaped (no expansion, no command substitution); inside
    single quotes by closing them around its own quoting."""
    if state == '"':
        return "".join("\\" + c if c in '\\$`"' else c for c in value)
    if state == "'":
        return "'" + shlex.quote(value) + "'"
    return shlex.quote(value)


def render(template: str, job: ProbeJob, *, quote: bool) -> str:
    """The template with the job's fields. `quote`: for a shell, each field's value reaches the command as written,
    whatever quoting surrounds the field in the template (`{workdir}`, `"{workdir}"`, `'{workdir}'`): never split,
    globbed or expanded, a `$(...)` in a folder's name never run. Without `quote`, a path: the values as they are."""
    out, state = [], ""
    for literal, name, _, _ in _parsed(template, "template"):
        out.append(literal)
        state, _ = _quote_state(literal, state)
        if name is not None:
            value = _value(job, name)
            out.append(_shell_word(value, state) if quote else value)
    return "".join(out)


def preflight(trainer: TrainerSpec) -> None:
    """Everything that can be checked before a probe starts, each failure one line naming the field and the fix:
    the template's fields, the command's script, the callable, the workdir, the env."""
    workdir = Path(trainer.workdir or ".")
    if not workdir.is_dir():
        raise InputError(f"trainer.workdir {str(workdir)!r} is not a folder; create it or fix the path")
    for key, value in trainer.env.items():
        if not key or "=" in key or "\0" in key + value:
            raise InputError(f"trainer.env has a bad variable name {key!r}; use NAME: value")
    if trainer.imports is not None:
        from yieldgate.ingest import KINDS

        template_fields(trainer.imports.path, "trainer.import.path")
        if trainer.imports.kind not in KINDS:
            raise InputError(
                f"trainer.import.kind {trainer.imports.kind!r} is not a format yieldgate imports; use one of "
                + ", ".join(KINDS)
            )
    if trainer.command is not None:
        template_fields(trainer.command, "trainer.command")
        _check_script(trainer.command, workdir)
    if trainer.call is not None:
        check_callable(trainer.call)


INTERPRETERS = ("python", "python3", "bash", "sh", "zsh")
"""Commands whose first word that is not an option is the script they run (`python -u train.py`), suffix or not."""
TAKES_VALUE = ("-W", "-X", "-o", "-O")
"""Their options that take the next word as their value."""


TRACKER_CHECKED = "YIELDGATE_TRACKER_CHECKED"
"""The interpreter found able to import the Tracker, set by the check for the processes it starts (local workers)."""
LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "lightning")
"""Commands that start Python scripts with the interpreter of their own installation (their script's shebang)."""


def command_interpreter(command: str) -> str | None:
    """The Python interpreter a trainer command starts: its first word (after `env` and NAME=value words) where it is
    a `python...` (`{python}`: this one), or a launcher's (`LAUNCHERS`) from its script's shebang; None where the
    command starts something else (a shell script), which is its own to check."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # `_check_script` says what is wrong with the quotes
    words = [w for w in words if w != "env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]
    if not words:
        return None
    first = words[0]
    if first == "{python}":
        return sys.executable
    if "{" in first:
        return None
    name = Path(first).name
    if re.fullmatch(r"python[0-9.]*", name):
        return first
    if name in LAUNCHERS:
        found = shutil.which(first)
        try:
            line = Path(found).read_text(errors="replace").split("\n", 1)[0] if found else ""
        except OSError:
            return None
        shebang = line[2:].split() if line.startswith("#!") else []
        return shebang[-1] if shebang and "python" in Path(shebang[-1]).name else None
    return None


def tracker_import_problem(command: str, env: dict[str, str], workdir: str) -> str | None:
    """One line, where the interpreter `command` starts (`command_interpreter`) cannot import yieldgate's Tracker in
    the probe's environment and workdir: the error, where, and the fix; None where it can (or none is known). A
    probe's `Tracker()` is how it writes the ledger: without it every probe fails after its training."""
    python = command_interpreter(command)
    if python is None:
        return None
    found = shutil.which(python, path=env.get("PATH", os.environ.get("PATH")))
    # Paths as found, links not followed: a virtual environment's python is a link to one without its packages.
    where = os.path.abspath(found) if found else python
    if where in (os.path.abspath(sys.executable), os.environ.get(TRACKER_CHECKED)):
        return None  # this very interpreter (it runs yieldgate), or one checked by the process that started this one
    try:
        done = subprocess.run(
            [python, "-c", "from yieldgate.track import Tracker"],
            cwd=workdir or None,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"cannot be run ({exc})" if isinstance(exc, OSError) else "did not import it within 300 s"
    else:
        if done.returncode == 0:
            os.environ[TRACKER_CHECKED] = where  # the worker processes this one starts need not check it again
            return None
        lines = done.stderr.strip().splitlines()
        why = f"cannot import yieldgate's Tracker ({lines[-1] if lines else f'exit status {done.returncode}'})"
    return (
        f"trainer.command's interpreter {python!r} on {socket.gethostname()} {why}: a command runs in each worker's "
        f"environment; name the interpreter by its full path, or start the command with {{python}} (this "
        f"worker's: {sys.executable})"
    )


def _check_script(command: str, workdir: Path) -> None:
    """Each word ending in .py / .sh that holds no field must be a file, and so must the script an interpreter runs
    (`python nope`: no suffix), unless it runs a module or a string (`-m`, `-c`); relative paths: the workdir's."""
    try:
        words = [w.rstrip(";&|)").lstrip("(") for w in shlex.split(command)]
    except ValueError as exc:
        raise InputError(f"trainer.command cannot be split into words ({exc}): {command!r}; fix its quotes") from None
    scripts = [w for w in words if w.endswith((".py", ".sh"))]
    for i, word in enumerate(words):
        if Path(word).name.rstrip("0123456789.") in INTERPRETERS:
            rest = iter(words[i + 1 :])
            for arg in rest:
                if arg in ("-m", "-c", "-"):
                    break
                if arg in TAKES_VALUE:
                    next(rest, None)
                elif not arg.startswith("-"):
                    scripts.append(arg)
                    break
    for word in dict.fromkeys(scripts):
        if "{" in word or "$" in word:
            continue
        path = Path(os.path.expanduser(word))
        path = path if path.is_absolute() else workdir / path
        if not path.is_file():
            raise InputError(
                f"trainer.command names the script {word!r}, which is not a file in {workdir}; fix the path "
                "(relative paths are taken from trainer.workdir)"
            )


def check_callable(ref: str) -> None:
    """That `package.module:function` names a module that can be found and a function it defines at its top level,
    without running the module (a trainer's imports can take seconds, and it runs in the workers anyway)."""
    import ast
    import importlib.util

    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise InputError(f"trainer.callable {ref!r} must be package.module:function")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        spec, why = None, str(exc)
    else:
        why = "not found on the Python path"
    if spec is None:
        raise InputError(f"trainer.callable {ref!r}: cannot import {module!r} ({why}); install it or fix the name")
    if spec.origin is None or not spec.origin.endswith(".py"):
        return  # a built-in or compiled module: checked when it is called
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    if name not in defined:
        raise InputError(f"trainer.callable {ref!r}: {module!r} has no function {name!r}; fix the name")


def resolve_callable(ref: str) -> Any:
    """The function `package.module:function` names; InputError naming the fix."""
    module, sep, name = ref.partition(":")
    if not sep or not module or not name:
        raise InputError(f"trainer.callable {ref!r} must be package.module:function")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(
            f"trainer.callable {ref!r}: cannot import {module!r} ({exc}); install it or fix the name"
        ) from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise InputError(f"trainer.callable {ref!r}: {module!r} has no function {name!r}; fix the name")
    return fn
