"""Values a loop prints in a sentence, and evaluation blocks under a titled rule line; read by the `kv` reader.

- **A value in a sentence beside its counter**: `<name> at <counter> <N> is <value>`, `<name> for <counter> <N>:
  <value>` (Deeplearning4j's ScoreIterationListener: `Score at iteration 100 is 1.3935`; `Loss for epoch 3: 0.41`),
  and the counter first, `<counter> <N>: <name> is <value>` (`Epoch 3: Val acc is 86.0%`).
  The counter is the step (or the epoch, which `stepcount` places), the name the metric.
  A `score` printed so, at a training counter (an iteration, a step, an update, a batch), is the training loss: a
  loop reports the objective it minimises at every iteration; an evaluation's score costs a pass over held-out data
  and is not printed at each iteration. Deeplearning4j's `score` is `Model.score()`, the loss function's value plus
  its regularisation terms. `score` is not an alias of the loss anywhere else: Flair's `DEV : loss 0.17 - score 0.90`
  and a table's `score` column are evaluations or extras as their names say, and a score at an epoch
  (`Best score at epoch 3 is 0.91`) keeps its name.
- **An evaluation block**: a rule line whose title names an evaluation (Deeplearning4j's EvaluativeListener:
  `========================Evaluation Metrics========================`), then indented `name: value` lines
  (` Accuracy:        0.6318`): each value an evaluation (`val_<name>`) at the step of the record before. A line
  counting things (` # of classes:    5`) is no metric. A titled rule that names no evaluation (`=== Training
  Summary ===`, `=== Confusion Matrix ===`) heads no block.
- **A table of splits**: a head naming two or more splits between bars (AllenNLP's trainer after each epoch:
  `Training |  Validation`), then a row per metric under the same prefix, `loss | 0.510 | 0.543` (`N/A` where a split
  has none): the training column's values are the training's, the others evaluations (`val_<name>`, `test_<name>`).
  Its step is the epoch a line said began (`Epoch 0/9`), else the record before's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from yieldgate.ingest.textlog.base import NUM, number
from yieldgate.names import SPLIT_PREFIXES

__all__ = ["eval_block", "names_then_values", "sentence_values", "split_table"]

# `Score at iteration 100 is 1.3935`, `Loss for epoch 3: 0.41`, `train loss after step 20 = 0.3`: a name of up to
# three words (letters first), a preposition, a counter word and its whole number, then `is`/`was`/`:`/`=` and the
# value. Bounded and possessive, so prose without the shape costs one pass.
_COUNTER = r"(?P<counter>iterations?|iters?|steps?|updates?|batch(?:es)?|epochs?|episodes?)"
_SENTENCE = re.compile(
    rf"(?<![\w./-])(?P<name>[A-Za-z_][\w-]{{0,40}}+(?: [A-Za-z_][\w-]{{0,40}}+){{0,2}}) (?:at|for|after|of|in) "
    rf"{_COUNTER}\s*#?(?P<n>\d{{1,12}})\s*(?:is|was|[:=])\s*(?P<value>{NUM})(?![\w.]|[-:]\d)",
    re.IGNORECASE,
)
# The counter first: `Epoch 3: Val acc is 86.0%`, `Iteration 100, loss is 2.3` (a name, then `is`/`was`: a `:` after the
# name is a pair the `kv` reader reads), the value ending the clause. A `%` after the value keeps the number, the name
# says so (`val_acc_pct`).
_LEADING = re.compile(
    rf"(?<![\w./-]){_COUNTER}\s*#?(?P<n>\d{{1,12}})\s*[:,|-]\s*"
    rf"(?P<name>[A-Za-z_][\w-]{{0,40}}+(?: [A-Za-z_][\w-]{{0,40}}+){{0,2}}) (?:is|was)\s+(?P<value>{NUM})"
    r"(?P<pct>%)?(?=\s*(?:$|[,;|]))",  # the value ends the clause (`the model is 5 layers deep` is prose)
    re.IGNORECASE,
)
_ARTICLES = {"the", "a", "an", "our", "current", "info", "debug"}
_PLURAL = {
    "iterations": "iteration",
    "iters": "iter",
    "steps": "step",
    "updates": "update",
    "batches": "batch",
    "epochs": "epoch",
    "episodes": "episode",
}
# The counters a loop reports its objective at each turn of (a `score` there is the loss); an epoch or an episode is
# not one: a score per epoch is as often an evaluation's.
_TRAINING_COUNTERS = {"iteration", "iter", "step", "update", "batch"}


def sentence_values(line: str) -> tuple[dict[str, float], list[tuple[int, int]]]:
    """The values a line prints as sentences (`Score at iteration 100 is 1.39`): {name: value, counter: N} (a training
    counter read as `iteration`, so it is the step; an epoch as `epoch`), and the spans they took, which the other
    readers of the line skip."""
    out: dict[str, float] = {}
    spans = []
    for m in [*_SENTENCE.finditer(line), *_LEADING.finditer(line)]:
        words = [w for w in m["name"].lower().split() if w not in _ARTICLES] or [m["name"].lower()]
        counter = m["counter"].lower()
        counter = _PLURAL.get(counter, counter)
        name = "_".join(re.sub(r"-+", "_", w) for w in words) + ("_pct" if m.re is _LEADING and m["pct"] else "")
        if name == "score" and counter in _TRAINING_COUNTERS:
            name = "loss"
        out.setdefault(name, number(m["value"]))
        out.setdefault("iteration" if counter in _TRAINING_COUNTERS else counter, float(m["n"]))
        spans.append(m.span())
    return out, spans


# A rule line of `=` or `-` (at least three) around a title: `=====Evaluation Metrics=====`, `--- Validation ---`.
_TITLED_RULE = re.compile(r"^\s*[=-]{3,}\s*(?P<title>[A-Za-z][\w &/-]{0,60}?)\s*[=-]{3,}\s*$")
_EVAL_TITLE = re.compile(r"\b(?:eval\w*|validation|valid|test|dev)\b", re.IGNORECASE)
_BODY = re.compile(rf"^\s+(?P<name>[A-Za-z][\w ()/-]{{0,60}}?)\s*:\s*(?P<value>{NUM})\s*$")


def eval_block(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    """The evaluation block `line` (`lines[i]`) heads: (lines it took, {`val_<name>`: value}), no step (the record
    before's); None when the line is no rule titled with an evaluation. Its body is the indented `name: value` lines
    after it (a `# of ...` count among them is skipped)."""
    head = _TITLED_RULE.match(line) if len(line) < 200 and line.lstrip()[:1] in "=-" else None
    if head is None or not _EVAL_TITLE.search(head["title"]):
        return None
    values: dict[str, float] = {}
    n = 1
    while i + n < len(lines):
        text = lines[i + n]
        if text.lstrip().startswith("#") and text[:1].isspace():
            n += 1
            continue
        m = _BODY.match(text)
        if m is None:
            break
        name = re.sub(r"[\s/-]+", "_", m["name"].strip().lower()).replace("(", "").replace(")", "")
        values.setdefault(f"val_{name}", number(m["value"]))
        n += 1
    return n, values


# A line that ends in two or more names joined by commas, then a line that ends in as many numbers so joined, after the
# same prefix (its digits aside: a timestamp may tick between them): detectron2's `copypaste: AP,AP50,AP75,APs,APm,APl`
# then `copypaste: 3.0706,6.8876,2.2430,0.3698,1.2776,3.5768`, a table of one row printed for copying. A `Task: bbox`
# line just before, with the same prefix, names their task.
_NAMES = re.compile(r"^(?P<prefix>.*?[:|>]\s*)(?P<names>[A-Za-z][\w@.%-]{0,40}(?:,\s*[A-Za-z][\w@.%-]{0,40})+)\s*$")
_VALUES = re.compile(rf"^(?P<prefix>.*?[:|>]\s*)(?P<values>(?:{NUM})(?:,\s*(?:{NUM}))+)\s*$")
_TASK = re.compile(r"^(?P<prefix>.*?[:|>]\s*)Task:\s*(?P<task>[A-Za-z][\w-]{0,40})\s*$")


def _masked(prefix: str) -> str:
    return re.sub(r"\d", "0", prefix)


def names_then_values(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    """The names `line` (`lines[i]`) lists and the values the next line lists under the same prefix: (2, {name:
    value}, each name under the task a `Task: <name>` line before gives it), or None where they are not so."""
    head = _NAMES.match(line) if "," in line and len(line) < 500 else None
    if head is None or i + 1 >= len(lines):
        return None
    row = _VALUES.match(lines[i + 1].rstrip("\n"))
    if row is None or _masked(row["prefix"]) != _masked(head["prefix"]):
        return None
    names = [n.strip() for n in head["names"].split(",")]
    values = [number(v.strip()) for v in row["values"].split(",")]
    if len(names) != len(values) or len(set(names)) != len(names):
        return None
    task = _TASK.match(lines[i - 1].rstrip("\n")) if i > 0 else None
    prefix = f"{task['task']}/" if task is not None and _masked(task["prefix"]) == _masked(head["prefix"]) else ""
    return 2, {prefix + name: value for name, value in zip(names, values, strict=True)}


# A table of splits: its head's split names between bars, then `name | value | value` rows (`N/A` where none).
_SPLIT_HEAD = re.compile(r"^(?P<prefix>.*?[-:|>\]]\s+)?(?P<splits>[A-Za-z]{3,10}(?:\s*\|\s*[A-Za-z]{3,10})+)\s*$")
_SPLIT_ROW = re.compile(
    rf"^(?P<prefix>.*?[-:|>\]]\s+)?(?P<name>[A-Za-z_][\w@.-]{{0,60}})\s*(?P<cells>(?:\|\s*(?:{NUM}|N/A)\s*)+)$"
)


def split_table(line: str, lines: Sequence[str], i: int) -> tuple[int, dict[str, float]] | None:
    """The table of splits `line` (`lines[i]`) heads (see the module's notes): (lines it took, values), no step; None
    where the line heads none."""
    head = _SPLIT_HEAD.match(line) if "|" in line and len(line) < 300 else None
    if head is None:
        return None
    splits = [w.strip().lower() for w in head["splits"].split("|")]
    if not all(w in SPLIT_PREFIXES for w in splits) or len(set(splits)) != len(splits):
        return None
    values: dict[str, float] = {}
    n = 1
    while i + n < len(lines) and (row := _SPLIT_ROW.match(lines[i + n].rstrip("\n"))) is not None:
        if _masked((row["prefix"] or "").rstrip()) != _masked((head["prefix"] or "").rstrip()):
            break
        cells = [c.strip() for c in row["cells"].split("|")[1:]]
        if len(cells) != len(splits):
            break
        name = row["name"].lower()
        for split, cell in zip(splits, cells, strict=True):
            if cell != "N/A":
                values.setdefault(SPLIT_PREFIXES[split] + name, number(cell))
        n += 1
    return (n, values) if n > 1 else None
