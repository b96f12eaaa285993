"""Other tools' names for ours: from a source's metric name to yieldgate's canonical name (`yieldgate.names`).

A name maps to one of: a core step column (`loss`, `lr`, ...), an eval key `<task>/<metric>` (the
validation loss is `val/loss`), or, when nothing fits, the extra `imported/<name>` — kept, never dropped.
A unit suffix `_ms`, `_s`, `_min` or `_h` is read off first (`wall_ms` is `wall_s` in milliseconds).
The importers (`ingest/mapping.py`, which adds `--map` overrides) and the Tracker (an eval given as `val_loss`)
read the same table, so a name means one thing wherever it is logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yieldgate.names import (
    CORE_STEP_COLUMNS,
    EXTRA_KEYS,
    VAL_TASK,
    is_extra_key,
    metric_direction,
    retrieval_metric,
    split_retrieval,
    vision_metric,
)

__all__ = ["EXTRA_NAMESPACES", "IMPORTED", "STEP_NAMES", "Target", "guess", "imported", "split_unit"]

IMPORTED = "imported"

# Candidate names of the step counter, most specific first (W&B's own `_step` counts log calls, so last).
STEP_NAMES = (
    "step",
    "global_step",
    "trainer/global_step",
    "train/global_step",
    "iteration",
    "iter",
    "training_iteration",  # Ray Tune's and RLlib's progress.csv
    "current_steps",
    "_step",
    "total_timesteps",
    "timesteps",
    "steps",
    "update",
    "updates",
    "num_updates",
    "episode",
    "episodes",
    "epoch",
)
"""Compared without case (`EPOCH`, `Iter`), with runs of spaces, dashes and dots as one underscore (`total
timesteps`), and on a namespaced name's last part where the whole is none of them (`time/total_timesteps`:
`ingest.core.step_key`). `total_timesteps`: an RL trainer's environment steps (Stable-Baselines3).
`current_steps`: LLaMA-Factory's trainer_log.jsonl. `steps`:
sentence-transformers' evaluator CSVs (its -1, an evaluation at the end of an epoch, is no step: `ingest.tables` then
steps the rows by the epoch). `update`, `num_updates`: fairseq's and RL trainers' optimizer updates; `episode`: an RL
trainer's progress table (where a cumulative count of steps rises beside it, `ingest.stepcount.cumulative_beside`
takes that). `epoch` last: a per-epoch table (Keras' CSVLogger, YOLO's results.csv) has no other counter, and its rows
are then epochs (the import says so)."""

# Seconds per unit of a name's suffix.
_UNITS = {"_ms": 1e-3, "_s": 1.0, "_sec": 1.0, "_min": 60.0, "_h": 3600.0}

# Source spellings of the core step columns (compared after lower-casing and `-`/`.`/space -> `_`).
_CORE_ALIASES = {
    "tokens": [
        "tokens",
        "num_tokens",
        "tokens_seen",
        "num_input_tokens_seen",
        "consumed_tokens",
        "train/tokens",
        "total_tokens",
        "ntokens",
        "throughput/total_tokens",
        "time/token",
    ],
    "samples": ["samples", "num_samples", "consumed_samples", "train/samples", "consumed_train_samples", "time/sample"],
    "wall_s": [
        "wall_s",
        "wall",
        "wall_time",
        "wallclock",
        "elapsed",
        "elapsed_time",
        "time",
        "train_time",
        "total_time",
        "_runtime",
        "runtime",
        "timestamp",
        "datetime",
        "date_time",
        "training_duration",  # AllenNLP's per-epoch records: `0:07:35.750313` since the training began
    ],
    "step_s": ["step_s", "step_time", "iter_time", "time_per_step", "dt", "iteration_time"],
    # detectron2's and OpenMMLab's `data_time`: the seconds an iteration waited for its batch
    "data_wait_s": ["data_wait_s", "data_time", "data_wait", "dataloader_time", "data_load_time"],
    "loss": [
        "loss",
        "train_loss",
        "loss_train",  # the split after the name, as `Loss/train` has it
        "train/loss",
        "training_loss",
        "loss/train",
        "train_loss_step",
        "train/loss_step",
        "reduced_train_loss",
        "trn_loss",
        "batch_loss",  # the loss of the batch just trained on, printed each step (`Epoch 3 - Batch loss: 0.52`)
        "lm_loss",
        "crossentropyloss",
        "xent",  # cross-entropy, as OpenNMT-py's `Step 50/20000; acc: 10.1; ppl: 11400; xent: 9.34` prints it
        "ce_loss",
        "loss/train/total",
        "total_loss",  # detectron2's (beside its terms loss_cls, loss_box_reg, ...): the total is the loss
        "loss_total",
        "logloss",  # CatBoost's learn_error.tsv names its column by the loss function: `Logloss`
        "log_loss",
    ],
    "lr": [
        "lr",
        "learning_rate",
        "train/lr",
        "train/learning_rate",
        "lr_adamw",
        "lr_adam",
        "lr_sgd",
        "optim/learning_rate_group0",
        "optim/lr_group_0",
        "lr/pg0",
    ],
    "grad_norm": [
        "grad_norm",
        "train/grad_norm",
        "gradient_norm",
        "grad_norm_2",
        "gnorm",
        "norm",
        "optim/total_grad_norm",
    ],
    "tokens_per_s": [
        "tokens_per_s",
        "tokens_per_sec",
        "tokens_per_second",
        "tok_per_s",
        "tok/s",
        "tok/sec",
        "tokens/s",
        "tokens/sec",
        "throughput/tokens_per_s",
        "train/tokens_per_s",
        "tps",
        "throughput/tokens_per_sec",
    ],  # Composer's SpeedMonitor (the job's; per device under device/)
    "mfu": ["mfu", "throughput/mfu"],
    "energy_j": ["energy_j", "energy_joules", "energy_joule", "total_energy_j", "gpu_energy_j", "energy_consumed_j"],
}
# Energy in other units: the name's suffix gives the factor to joules.
_ENERGY_UNITS = {"_kwh": 3.6e6, "_wh": 3600.0, "_kj": 1e3, "_mj": 1e6}
_ENERGY_NAMES = {"energy", "total_energy", "gpu_energy", "energy_consumed"}
# Average power over the interval a line covers: integrated over wall_s into energy_j where none is logged.
_POWER_NAMES = {"power_w", "avg_power_w", "gpu_power_w", "power_draw_w", "average_power_w", "power_watts"}
_ALIASES = {alias: col for col, names in _CORE_ALIASES.items() for alias in names}

# Validation metrics: `<prefix><sep>[<source>/]<metric>` with one of these prefixes, the metric one whose
# direction is known (`names.metric_direction`: `eval_wer`, `eval_rougeLsum`, `val/acc`); `eval_runtime`
# and `eval_samples_per_second` are not evaluations.
_VAL_PREFIX = re.compile(r"^(?P<split>eval|val|valid|validation|dev|test)(?:_|/)(?:(?P<source>.+)/)?(?P<metric>[^/]+)$")
# The split after the metric, as PyTorch's TensorBoard tutorial names them (`Loss/train`, `Loss/test`,
# `Accuracy/val`). A `test` split is an evaluation of task `test`, the others of task `val`.
_SPLIT_SUFFIX = re.compile(r"^(?P<metric>[^/]+)/(?P<split>eval|val|valid|validation|dev|test)$")
# A compound name after the prefix (`val_recon_loss`, a loss term; `val_epoch_perplexity`, an aggregate;
# `eval_wiki_loss`, a second eval set) stays one metric of task `val`: only a `/` names a data source.
_VAL_METRICS = {"loss", "bpb", "ppl", "perplexity", "acc", "accuracy", "bits_per_byte"}
_NOT_EVAL_METRICS = {"runtime", "samples_per_second", "steps_per_second", "epoch", "step", "time", "tokens"}
# Other spellings of a validation metric (GPT-NeoX's `validation/lm_loss`, `validation/lm_loss_ppl`).
_VAL_RENAMES = {
    "accuracy": "acc",
    "bits_per_byte": "bpb",
    "perplexity": "ppl",
    "lm_loss": "loss",
    "lm_loss_ppl": "ppl",
    "ce_loss": "loss",
    "cross_entropy": "loss",
    "crossentropyloss": "loss",
    "languagecrossentropy": "loss",
    "languageperplexity": "ppl",
    "loss_epoch": "loss",
    "acc_epoch": "acc",
}  # Lightning's epoch-level validation metrics

# Metric names of eval keys `<task>/<metric>` (lm-eval's among them): such a key is an eval, not an extra.
_EVAL_METRICS = _VAL_METRICS | {
    "acc_norm",
    "exact_match",
    "em",
    "f1",
    "mcc",
    "bleu",
    "rouge1",
    "rouge2",
    "rougeL",
    "ter",
    "chrf",
    "word_perplexity",
    "byte_perplexity",
    "mc1",
    "mc2",
    "pass@1",
    "pass@10",
    "brier_score",
}
_TRAIN_PREFIXES = {"train", "training", "trainer"}

EXTRA_NAMESPACES = {k.split("/")[0] for k in EXTRA_KEYS}
"""Namespaces of extras (`signals`, `device`, ...): a key under one is an extra, any other key with a `/` an eval."""


@dataclass(frozen=True)
class Target:
    """Where one source metric goes: `kind` is `step`, `core`, `eval` or `extra`; `scale` converts units."""

    kind: str
    key: str
    scale: float = 1.0

    def describe(self) -> str:
        """`loss`, `val/loss (eval)`, `wall_s (x0.001)` — for the mapping recorded in the run's meta."""
        text = self.key + (" (eval)" if self.kind == "eval" else "")
        return text + (f" (x{self.scale:g})" if self.scale != 1.0 else "")


# Extras and evals by other names: Megatron's (`loss-scale`, `lm loss validation`, its log's `lm loss value`),
# Composer's `metrics/eval/LanguageCrossEntropy` (its console prefixes `Eval `).
_OTHER_ALIASES = {
    "loss_scale": Target("extra", "signals/loss_scale"),
    "lm_loss_validation": Target("eval", "val/loss"),
    "lm_loss_validation_ppl": Target("eval", "val/ppl"),
    "lm_loss_value": Target("eval", "val/loss"),
    "metrics/eval/languagecrossentropy": Target("eval", "val/loss"),
    "eval_metrics/eval/languagecrossentropy": Target("eval", "val/loss"),
    # Composer's SpeedMonitor logs the training time in hours (its time_unit default)
    # detectron2's accuracy of the training batch's masks, on every training row: not an evaluation
    "mask_rcnn/accuracy": Target("extra", f"{IMPORTED}/mask_rcnn/accuracy"),
    "time/train": Target("core", "wall_s", 3600.0),
    "time/time_elapsed": Target("core", "wall_s"),  # Stable-Baselines3's logger: seconds since learning began
    "train_time/train": Target("core", "wall_s", 3600.0),
}
# Ultralytics YOLO's results.csv scores the validation set under `metrics/`: `metrics/mAP50(B)`,
# `metrics/mAP50-95(M)`, `metrics/precision(B)`, `metrics/recall(B)` ((B) boxes, (M) masks, (P) poses),
# `metrics/accuracy_top1`: evaluations of task `val`. Its direction is the base name's (`map`, `precision`).
_SCORE = re.compile(r"^metrics/(?P<metric>[^/]+)$")
_SCORE_QUALIFIERS = re.compile(r"(?:\([a-z]\)|\d+(?:-\d+)?)$")
# A learning rate per parameter group: Composer's `lr-DecoupledAdamW/group0`; the first group's is the lr.
_LR_GROUP = re.compile(r"^lr_[a-z]+/group_?0$")
# The learning rate by other trainers' names (issue 35): YOLOv5/YOLOv8's `x/lr0` (its first parameter group), and
# Lightning's LearningRateMonitor, `lr-<optimizer or scheduler name>` (`lr-<name>/pg1` its first group when it has
# several); its `lr-<name>-momentum` and `-weight_decay` are not the learning rate.
_LR_OTHER = re.compile(r"^(?:x/lr0|lr-(?!.*-(?:momentum|weight_decay)$)[^/]+(?:/pg1)?)$", re.IGNORECASE)


def _normal(name: str) -> str:
    return re.sub(r"[-. ]", "_", name.strip().lower())


def split_unit(name: str) -> tuple[str, float]:
    """`wall_ms` -> (`wall`, 0.001): a name without its unit suffix, and seconds per that unit (1 without one)."""
    for suffix, scale in _UNITS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], scale
    return name, 1.0


def imported(name: str) -> Target:
    """The extra `imported/<name>` a name with no canonical name is kept under."""
    parts = [p for p in re.split(r"/+", name.strip()) if p]
    return Target("extra", "/".join([IMPORTED, *parts]) if parts else f"{IMPORTED}/unnamed")


def _canonical(name: str) -> Target | None:
    """A name already canonical — what yieldgate's own table export writes — maps to itself."""
    if name in CORE_STEP_COLUMNS and name != "step":
        return Target("core", name)
    parts = name.split("/")
    if is_extra_key(name) and parts[0] in EXTRA_NAMESPACES | {IMPORTED}:
        return Target("extra", name)
    metric = parts[-1].split(",")[0].removesuffix("_stderr")
    if is_extra_key(name) and parts[0] not in _TRAIN_PREFIXES and (metric in _EVAL_METRICS or "," in parts[-1]):
        return Target("eval", name)
    return None


def _section_dropped(norm: str) -> str:
    """`grad_norm/grad_norm` -> `grad_norm`, `lm_loss_training/lm_loss` -> `lm_loss`: a TensorBoard section
    named after its one tag (Megatron-DeepSpeed's layout) says nothing the tag does not."""
    section, _, tag = norm.partition("/")
    if tag and "/" not in tag and (section.startswith(tag) or tag.startswith(section)):
        return tag
    return norm


def guess(name: str) -> Target:
    """The canonical target of a source metric name (an `imported/<name>` extra when nothing fits)."""
    if _normal(name) in _OTHER_ALIASES:  # before the namespaces: Composer's `time/train` is hours, not an extra
        return _OTHER_ALIASES[_normal(name)]
    if _LR_OTHER.match(name.strip()):
        return Target("core", "lr")
    canonical = _canonical(name)
    if canonical is not None and canonical.kind != "eval":
        return canonical
    norm = _section_dropped(_normal(name))
    if norm in _OTHER_ALIASES:
        return _OTHER_ALIASES[norm]
    if norm.startswith("epoch/") and norm.count("/") == 1:  # Keras' W&B callback: `epoch/loss`, `epoch/val_loss`
        return guess(name.split("/", 1)[1])
    for prefix in ("", "train/", "train_", "training/", "trainer/"):
        if norm.startswith(prefix) and norm[len(prefix) :] in _ALIASES:
            return Target("core", _ALIASES[norm[len(prefix) :]])
        if norm.startswith(prefix) and _LR_GROUP.match(norm[len(prefix) :]):
            return Target("core", "lr")
    for suffix, factor in _ENERGY_UNITS.items():
        if norm.endswith(suffix) and norm[: -len(suffix)] in _ENERGY_NAMES:
            return Target("core", "energy_j", factor)
    if norm in _POWER_NAMES:
        return Target("extra", "device/power_w")
    base, scale = split_unit(norm)
    if scale != 1.0 or base != norm:
        for candidate in (base + "_s", base):
            col = _ALIASES.get(candidate)
            if col in ("wall_s", "step_s", "data_wait_s"):
                return Target("core", col, scale)
    score = _SCORE.match(name.strip())
    if score and metric_direction(_score_base(score["metric"])) is not None:
        return Target("eval", f"{VAL_TASK}/{score['metric']}")
    vision = _vision_eval(name.strip())
    if vision is not None:
        return vision
    m = _VAL_PREFIX.match(norm) or _SPLIT_SUFFIX.match(norm)
    if (
        m
        and m["metric"] not in _NOT_EVAL_METRICS
        and (m["metric"] in _VAL_METRICS or m["metric"] in _VAL_RENAMES or metric_direction(m["metric"]) is not None)
    ):
        split = "test" if m["split"] == "test" else VAL_TASK
        source = m.groupdict().get("source")
        task = split if source is None else f"{split}/{source}"
        return Target("eval", f"{task}/{_VAL_RENAMES.get(m['metric'], m['metric'])}")
    return canonical or _retrieval_eval(name.strip()) or imported(name)


def _score_base(metric: str) -> str:
    """`mAP50-95(B)` -> `map`, `precision(M)` -> `precision`: a score's name without its qualifiers."""
    base = metric.lower()
    while (stripped := _SCORE_QUALIFIERS.sub("", base)) != base:
        base = stripped
    return base


def _vision_eval(name: str) -> Target | None:
    """A vision, retrieval or embedding evaluator's score as an evaluation: `bbox/AP50`, `coco/bbox_mAP` and
    `mteb_sts/spearman` keep their task (`bbox`, `coco`, `mteb_sts`), a bare `bbox_mAP`, `PCK` or `cosine_spearman`
    is of task `val`; one under a split prefix (`val/...`) is left to the split rules."""
    task, _, metric = name.rpartition("/")
    if not (vision_metric(metric) or retrieval_metric(metric)) or _VAL_PREFIX.match(_normal(name)):
        return None
    if not task:
        return Target("eval", f"{VAL_TASK}/{metric}")
    head = task.split("/")[0].lower()
    if head in _TRAIN_PREFIXES or head in EXTRA_NAMESPACES or head == IMPORTED or not is_extra_key(name):
        return None
    return Target("eval", name)


# A split prefix as the sentence-transformers trainer writes it before its evaluator's name: `eval_sts-dev_...`.
_SPLIT_PREFIX = re.compile(r"^(?P<split>eval|val|valid|validation|dev|test)[_/](?P<rest>.+)$", re.IGNORECASE)


def _retrieval_eval(name: str) -> Target | None:
    """A retrieval or embedding score after its evaluation set's name, under a split prefix or not, as an evaluation
    of that set (`names.split_retrieval`): `eval_sts-dev_spearman_cosine` is task `sts-dev`, metric
    `spearman_cosine`; `eval_cosine_accuracy` task `val`. A training split's (`train_cosine_accuracy`) is no
    evaluation."""
    prefixed = _SPLIT_PREFIX.match(name)
    rest = prefixed["rest"] if prefixed else name
    found = split_retrieval(rest)
    if found is None or "/" in rest:
        return None
    dataset, metric = found
    if dataset.split("_")[0].lower() in _TRAIN_PREFIXES:
        return None
    split = "test" if prefixed and prefixed["split"].lower() == "test" else VAL_TASK
    return Target("eval", f"{dataset or split}/{metric}")
