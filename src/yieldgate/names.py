"""Canonical names of the data contract (DESIGN.md, "The data contract"), with their units.

This module is the code's half of the names table in docs/data-contract.md; `tests/test_names.py` checks that the two
agree. Importers map onto these names, exporters and the report read them: nothing else defines a second
spelling.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
import unicodedata
from typing import Final

from yieldgate.errors import InputError

__all__ = [
    "CORE_STEP_COLUMNS",
    "STEP_VALUE_COLUMNS",
    "EXTRA_KEYS",
    "CHECKPOINT_KEY",
    "RUN_STATUSES",
    "HELD_STATUS",
    "held_by_governor",
    "EVENT_KINDS",
    "EVENT_STATES",
    "VAL_TASK",
    "LOSS_METRIC",
    "BPB_METRIC",
    "PER_UNITS",
    "is_extra_key",
    "unsafe_character",
    "MAX_NAME_CHARS",
    "check_run_name",
    "check_tag",
    "check_note",
    "readable_name",
    "key_problem",
    "split_eval_key",
    "metric_direction",
    "vision_metric",
    "retrieval_metric",
    "split_retrieval",
    "cannot_be_negative",
    "stderr_of",
    "stderr_name",
    "STEP_UNIT",
]

# Core step columns: name -> unit. Stored in the wide core step table; `step` is the key.
CORE_STEP_COLUMNS: Final[dict[str, str]] = {
    "step": "optimizer steps",
    "tokens": "tokens (accepted, cumulative)",
    "samples": "samples (cumulative)",
    "wall_s": "s (cumulative wall clock)",
    "step_s": "s",
    "data_wait_s": "s",
    "loss": "nats/token (training)",
    "lr": "learning rate",
    "grad_norm": "L2 norm (global, pre-clipping)",
    "clipped": "0/1",
    "tokens_per_s": "tokens/s",
    "mfu": "fraction of peak (0-1)",
    "energy_j": "J (cumulative)",
    "cost_usd": "USD (cumulative)",
}

# The value columns of the core table: every core column except the key.
STEP_VALUE_COLUMNS: Final[tuple[str, ...]] = tuple(c for c in CORE_STEP_COLUMNS if c != "step")

# Namespaced extras, stored in the long table (run, step, key, value). A `<...>` segment is a
# placeholder: `signals/grad_norm/<layer>` stands for `signals/grad_norm/blocks.0.attn`, etc.
EXTRA_KEYS: Final[dict[str, str]] = {
    "signals/gns": "tokens (B_simple, global)",
    "signals/gns/<layer>": "tokens (B_simple, one layer)",
    "signals/grad_norm/<layer>": "L2 norm",
    "signals/update_ratio/<layer>": "|update| / |weight|",
    "signals/act_entropy/<layer>": "nats (entropy of softmax over the output features; falls with scale too)",
    "signals/loss_scale": "mixed-precision loss scale",
    "signals/skipped_steps": "steps (cumulative)",
    "signals/loss_var": "nats^2 (per-batch loss variance over a window)",
    "tokens/<source>": "tokens (cumulative, per data source)",
    "stream/repeat_rate": "fraction of samples seen before in the window",
    "time/optimizer_s": "s (optimizer step, host or CUDA-event time)",
    "time/checkpoint_s": "s (checkpoint saves since the step before: Tracker.checkpoint; goodput counts them)",
    "device/cpu_util": "% of one core (this process)",
    "host/load_1m": "runnable tasks (the host's 1-minute load average, every process on it)",
    "host/cpus": "CPUs (the host's, to read host/load_1m per CPU)",
    "host/cpu_wait": "% (of the CPU time this process's threads wanted, spent waiting on a run queue)",
    "host/cpu_steal": "% (of the host's CPU time, given by the hypervisor to other guests)",
    "device/rss_gib": "GiB (this process's resident host memory)",
    "device/mem_peak_gib": "GiB (peak allocated by torch on this process's GPU)",
    "device/gpu_util": "% (mean over this process's GPUs)",
    "device/power_w": "W (sum over this process's GPUs)",
    "device/mem_used_gib": "GiB (sum over this process's GPUs)",
    "device/sm_clock_mhz": "MHz (lowest GPU)",
    "device/temp_c": "°C (hottest GPU)",
    "device/throttle_reasons": "NVML clock-event reason bits that slow the clocks: power cap, thermal, hardware "
    "slowdown (OR over GPUs; idle and operator-set clocks left out)",
    "device/pcie_tx_mb_s": "MB/s",
    "device/pcie_rx_mb_s": "MB/s",
    "dist/tokens_per_s/min": "tokens/s (slowest rank)",
    "dist/tokens_per_s/max": "tokens/s (fastest rank)",
    "dist/step_s/max": "s (slowest rank's step)",
    "imported/<name>": "as logged (an imported metric with no canonical name, under its source name)",
}

CHECKPOINT_KEY: Final = "time/checkpoint_s"

RUN_STATUSES: Final[tuple[str, ...]] = ("running", "finished", "failed", "killed", "imported")
HELD_STATUS: Final = "held"
"""What a run recorded `finished` reads when the gate inside it held and stopped it (`held_by_governor`): computed at
read time, as `stale` and `crashed` are, never stored (the runs table keeps `RUN_STATUSES`)."""
EVENT_KINDS: Final[tuple[str, ...]] = ("diagnosis", "gate", "warning", "fault", "resume")
EVENT_STATES: Final[tuple[str, ...]] = ("open", "resolved")

# What a loss is read per (`per=`): per token as logged, or per byte (bits per byte, through the tokenizer's
# `bytes_per_token`): the unit that compares runs whose tokenizers differ.
PER_UNITS: Final[tuple[str, ...]] = ("token", "byte")

# The trainers' log formats `yieldgate import textlog --format` reads, one reader each in ingest/textlog/
# (tests/test_names.py keeps the two lists one). Here so that the command line names them without importing the
# importers.
TEXTLOG_FORMATS: Final[tuple[str, ...]] = (
    "nanogpt",
    "build-nanogpt",
    "modded-nanogpt",
    "llm.c",
    "megatron",
    "fairseq",
    "keras",
    "tqdm",
    "hf-printed",
    "openmmlab",
    "yolo-txt",
    "metriclogger",
    "kv",
)

# "The validation loss" of a run: task `val`, metric `loss` (per source: task `val/<source>`).
VAL_TASK: Final = "val"
LOSS_METRIC: Final = "loss"
BPB_METRIC: Final = "bpb"
STDERR_SUFFIX: Final = "_stderr"
# Run meta key: what one step of the run is, where it is not an optimizer step: `epoch` for a source that logs one
# row per epoch (Keras, YOLO). The analyses label a step axis by it ("per epoch", not "per 1k steps").
STEP_UNIT: Final = "step_unit"


def is_extra_key(key: str) -> bool:
    """True when `key` is namespaced (`signals/gns`, `tokens/web`): non-empty segments joined by `/`.

    Not only the namespaces of EXTRA_KEYS: real logs carry metrics nobody planned for (`train/perplexity`)."""
    parts = key.split("/")
    return len(parts) >= 2 and all(parts)


_UNSAFE = {
    "Cc": "a control character",
    "Cf": "a format character (bidi controls, zero-width marks)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a lone surrogate (not UTF-8)",
}


def unsafe_character(text: str) -> str | None:
    """The first character of `text` that must not reach a terminal or a log line raw, described (`U+202E
    RIGHT-TO-LEFT OVERRIDE, a format character ...`); None when there is none. Unicode categories Cc (control:
    terminal escapes), Cf (format: bidi overrides that make a name read backwards, zero-width characters that
    make two names look alike), Zl and Zp (line and paragraph separators: a name that breaks a log line), and
    Cs (a lone surrogate: not encodable as UTF-8)."""
    for char in text:
        kind = _UNSAFE.get(unicodedata.category(char))
        if kind is not None:
            name = unicodedata.name(char, "")
            return f"U+{ord(char):04X}{' ' + name if name else ''}, {kind}"
    return None


MAX_NAME_CHARS: Final = 200
"""The longest run name, metric key or eval task/metric name the ledger takes from an import: a name is a label a
person reads, and a longer one is a damaged file (a 16 MB header line once became one metric name)."""


def check_run_name(name: str) -> str:
    """`name` when it may name a run; InputError naming the rule it breaks otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"run name must be a non-empty string, got {name!r}")
    unsafe = unsafe_character(name)
    if name != name.strip() or unsafe is not None or len(name) > MAX_NAME_CHARS:
        raise InputError(
            f"run name {name!r} is not allowed: "
            + (f"it holds {unsafe}; " if unsafe else "")
            + f"use up to {MAX_NAME_CHARS} printable characters, no control characters or surrounding spaces"
        )
    # A name is a key, never a path; "/" namespaces runs (PREFIX/<name>). Path forms that could only be a
    # mistake or an attempt to climb out of a folder are refused.
    if "\\" in name or any(part in ("", ".", "..") for part in name.split("/")):
        raise InputError(
            f"run name {name!r} is not allowed: '/' separates parts of a name, and no part may be "
            "empty, '.' or '..'; backslashes are not allowed"
        )
    return name


_TAG = re.compile(r"[\w.:/=+@-]{1,64}")


def check_tag(tag: str) -> str:
    """`tag` when it may tag a run: 1 to 64 letters, digits and `_ . : / = + @ -` (`baseline`, `lr=3e-4`,
    `team/data`); InputError naming the rule otherwise. No spaces or commas: tags are listed joined by them."""
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise InputError(
            f"tag {tag!r} is not allowed: use 1 to 64 letters, digits and _ . : / = + @ - "
            "(no spaces or commas), e.g. 'baseline' or 'lr=3e-4'"
        )
    return tag


def check_note(text: str) -> str:
    """`text` when it may be a run's note: up to 4,000 characters, lines of printable text (line breaks and tabs
    allowed, no terminal escapes or bidi controls); InputError otherwise."""
    if not isinstance(text, str):
        raise InputError(f"a note must be text, got {type(text).__name__}")
    if len(text) > 4000:
        raise InputError(
            f"a note holds at most 4,000 characters, got {len(text):,}: keep longer text in a file and note its path"
        )
    unsafe = unsafe_character(text.replace("\n", "").replace("\t", ""))
    if unsafe is not None:
        raise InputError(f"the note is not allowed: it holds {unsafe}")
    return text


# Words of generated run names (`readable_name`): short, plain, and unlikely to offend in any pairing.
_ADJECTIVES: Final = (
    "amber",
    "bold",
    "brisk",
    "calm",
    "clear",
    "crisp",
    "deft",
    "eager",
    "fair",
    "fleet",
    "fresh",
    "gentle",
    "glad",
    "grand",
    "keen",
    "kind",
    "light",
    "lively",
    "lucid",
    "merry",
    "mild",
    "neat",
    "nimble",
    "noble",
    "plain",
    "proud",
    "quick",
    "quiet",
    "rapid",
    "ready",
    "sharp",
    "sleek",
    "smooth",
    "solid",
    "steady",
    "stout",
    "sunny",
    "swift",
    "tidy",
    "vivid",
    "warm",
    "wise",
)
_NOUNS: Final = (
    "alder",
    "badger",
    "beacon",
    "birch",
    "brook",
    "canyon",
    "cedar",
    "comet",
    "coral",
    "crane",
    "delta",
    "ember",
    "falcon",
    "fern",
    "fjord",
    "finch",
    "glacier",
    "harbor",
    "heron",
    "island",
    "lark",
    "maple",
    "meadow",
    "mesa",
    "otter",
    "owl",
    "pine",
    "plover",
    "quartz",
    "raven",
    "reef",
    "river",
    "robin",
    "sparrow",
    "spruce",
    "summit",
    "tern",
    "thistle",
    "tundra",
    "valley",
    "willow",
    "wren",
)


def readable_name(number: int) -> str:
    """A run name a person can say and remember: a random adjective and noun, then `number`
    (`brisk-otter-7`). The caller makes it unique (`Ledger.free_name`)."""
    return f"{secrets.choice(_ADJECTIVES)}-{secrets.choice(_NOUNS)}-{int(number)}"


def key_problem(key: str) -> str | None:
    """Why `key` cannot name a step value (a core column or a namespaced extra), or None when it can."""
    if not isinstance(key, str):
        return f"is not text ({type(key).__name__})"
    unsafe = unsafe_character(key)
    if unsafe is not None:
        return f"holds {unsafe}"
    if key not in CORE_STEP_COLUMNS and not is_extra_key(key):
        return f"needs a namespace (e.g. 'signals/{key}'), or must be a core column"
    return None


def split_eval_key(key: str) -> tuple[str, str]:
    """Split a flat eval key into (task, metric): the last segment is the metric.

    `val/loss` -> ("val", "loss"); `val/code/loss` -> ("val/code", "loss");
    `lambada_openai/acc` -> ("lambada_openai", "acc").
    """
    task, sep, metric = key.rpartition("/")
    if not sep or not task or not metric:
        raise ValueError(f"eval key {key!r} must be '<task>/<metric>', e.g. 'val/loss'")
    return task, metric


def stderr_of(metric: str) -> str | None:
    """The metric whose standard error `metric` names, or None when it names none: lm-eval writes the standard error
    of `acc` as `acc_stderr` (v0.3; v0.4's `acc_stderr,none` reads as that), of `exact_match,strict-match` as
    `exact_match_stderr,strict-match`. A standard error is not a metric: the ledger keeps it beside its metric's
    value (`EvalRecord.stderr`)."""
    base, comma, rest = metric.partition(",")
    if not base.endswith(STDERR_SUFFIX) or len(base) == len(STDERR_SUFFIX):
        return None
    return base[: -len(STDERR_SUFFIX)] + comma + rest


def stderr_name(metric: str) -> str:
    """The name of `metric`'s standard error as a flat column (`acc` -> `acc_stderr`), which `stderr_of` reads
    back: how a table export writes it."""
    base, comma, rest = metric.partition(",")
    return base + STDERR_SUFFIX + comma + rest


# Metric direction (DESIGN.md, "Metric direction"): losses, perplexities, bits per byte and error rates
# fall; accuracies and overlap scores rise. Compared on the metric's base name (lower-cased, before an
# lm-eval filter: `acc,none` -> `acc`).
_LOWER_IS_BETTER = frozenset(
    {
        "loss",
        "nll",
        "bpb",
        "bits_per_byte",
        "ppl",
        "perplexity",
        "word_perplexity",
        "byte_perplexity",
        "wer",
        "cer",
        "ter",
        "error",
        "err",
        "error_rate",
        "mse",
        "mae",
        "rmse",
        "brier_score",
        "stderr",
        "likelihood_difference",
        "pct_stereotype",
    }
)  # CrowS-Pairs: lm-eval's own task config says lower
_HIGHER_IS_BETTER = frozenset(
    {
        "acc",
        "acc_norm",
        "accuracy",
        "f1",
        "bleu",
        "sacrebleu",
        "rouge1",
        "rouge2",
        "rougel",
        "rougelsum",
        "exact_match",
        "em",
        "mcc",
        "matthews_correlation",
        "precision",
        "recall",
        "auc",
        "roc_auc",
        "chrf",
        "meteor",
        "pearson",
        "spearmanr",
        "mc1",
        "mc2",
        "map",
        "mrr",
        "ndcg",
        "bertscore",
        "score",
        "fscore",
        "fmeasure",
        "f_score",
        "f_measure",
        "hmean",  # the harmonic mean of precision and recall, as PaddleOCR's detection metric names its F-score
        # vision: top-k accuracy (timm's `top1`, torchvision's and DeiT's `acc1`), overlap and image quality
        "top1",
        "top5",
        "acc1",
        "acc5",
        "auroc",
        "iou",
        "miou",
        "dice",
        "psnr",
        "ssim",
    }
)


# Vision evaluators' scores (COCO's AP/AR family as detectron2 `bbox/AP50`, `segm/APs`, `bbox/AP-<class>` and
# OpenMMLab `bbox_mAP_50`, `coco/bbox_mAP_s` write them; panoptic PQ, SQ, RQ and their things and stuff parts
# (`PQ_th`, `PQ_st`: any other suffix is no panoptic score, e.g. `PQ_spearman` a dataset's); pose PCK and AUC;
# top-k accuracy, bare as timm's `top1` or namespaced as mmpretrain's `accuracy/top1`; mmseg's aAcc/mAcc) rise. Pose
# and flow errors fall.
_VISION_HIGHER = re.compile(
    r"^(?:(?:bbox|segm|mask|box|keypoints?|kpt)_)?(?:m?ap|ar)(?:_?\d+(?:[-_:]\d+)?|_?[sml]|_(?:small|medium|large))?"
    r"(?:-.+)?$|^(?:pq|sq|rq)(?:_(?:th|st|things|stuff))?$|^pckh?(?:@[\d.]+)?$|^auc$|^(?:acc(?:uracy)?_)?top[-_]?\d+$|^[am]acc$|^miou$"
)
_VISION_LOWER = frozenset({"nme", "epe", "mpjpe", "pa_mpjpe", "pa-mpjpe", "mpjpe_pa"})
# Scores that cannot be negative: a -1 there is an evaluator's "not computed" (pycocotools' AP of an area range with
# no objects, as OpenMMLab logs `coco/bbox_mAP_s: -1.0`), not a value.
_NON_NEGATIVE = frozenset({"acc", "accuracy", "precision", "recall", "f1", "iou", "miou", "dice", "auroc", "map"})


# Retrieval and embedding evaluators' scores (sentence-transformers, MTEB, BEIR) rise: a correlation of predicted with
# gold similarity, per similarity function or not (`cosine_spearman`, `spearman_cosine`, `pearson_dot`, `spearman_max`,
# `spearmanr`), and a ranking score at a cutoff or of a similarity function (`ndcg@10`, `cos_sim-MRR@10`,
# `map_at_100`, `Recall@10`, `P@1`, `cosine_accuracy`, `hit_rate@5`; `Prec@1`, the top-1 accuracy as copies of PyTorch's
# ImageNet example name it). A threshold (`cosine_accuracy_threshold`) is no score.
# A reinforcement-learning agent's reward or return rises (Stable-Baselines3's `eval/mean_reward`, its rollout's
# `ep_rew_mean`, `episode_return`); its spread over episodes (`std_reward`) says nothing of which way is better.
_RETURNS = frozenset({"reward", "rewards", "rew", "return", "returns"})
_SPREADS = frozenset({"std", "stddev", "var", "variance"})

SPLIT_PREFIXES = {"training": "", "train": "", "validation": "val_", "val": "val_", "valid": "val_", "dev": "val_"}
SPLIT_PREFIXES |= {"eval": "val_", "evaluation": "val_", "test": "test_"}
"""The words a data split is named by (a table's `validation` key, a printed `Training | Validation` head) and the
prefix its values take: none for the training's, `val_` for a held-out split's, `test_` for the test set's."""


def is_reward(metric: str) -> bool:
    """True when `metric` names a reinforcement-learning reward or return (`mean_reward`, `ep_rew_mean`,
    `episode_return`), not its spread over episodes (`std_reward`)."""
    tokens = re.split(r"[_/]", metric.split(",")[0].strip().lower())
    return bool(_RETURNS.intersection(tokens)) and _SPREADS.isdisjoint(tokens)


_CORRELATIONS = frozenset({"spearman", "spearmanr", "pearson", "pearsonr", "kendall", "kendalltau"})
_RANKING = frozenset(
    {"ndcg", "mrr", "map", "ap", "recall", "precision", "prec", "accuracy", "acc", "f1", "hit", "hits", "hit_rate"}
    | {"r", "p"}
)
_SIMILARITY = frozenset(
    {"cosine", "cos", "sim", "cossim", "dot", "product", "euclidean", "manhattan", "max", "ip", "l2"}
)
_CUTOFF = re.compile(r"^(?P<head>.+?)(?:@|_at_)(?:\d+|k)$")


def retrieval_metric(metric: str) -> bool:
    """True when `metric` names a retrieval or embedding evaluator's score (see `_RANKING`): a metric only an
    evaluation computes, so a column of that name is an evaluation wherever it is logged. `ndcg` or `recall` alone
    is not one (`metric_direction` knows them): it needs its cutoff or its similarity function to say so."""
    # `dot_score` (sentence-transformers 2) is the dot product; `score` alone is no similarity (`f1_score` is sklearn's)
    base = re.sub(r"[-\s]", "_", metric.split(",")[0].strip().lower()).replace("dot_score", "dot")
    cut = _CUTOFF.match(base)
    tokens = [t for t in (cut["head"] if cut else base).split("_") if t]
    scored = [t for t in tokens if t not in _SIMILARITY]
    name = "_".join(scored)
    if name in _CORRELATIONS:
        return True
    return name in _RANKING and (cut is not None or (len(scored) < len(tokens) and name not in ("r", "p")))


def split_retrieval(name: str) -> tuple[str, str] | None:
    """(evaluation set, metric) of a name that ends in a retrieval or embedding score (`retrieval_metric`), as the
    sentence-transformers trainer writes them after its `eval_` prefix: `sts-dev_spearman_cosine` -> (`sts-dev`,
    `spearman_cosine`), `NanoMSMARCO_cosine_ndcg@10` -> (`NanoMSMARCO`, `cosine_ndcg@10`); ('', name) for a score
    alone (`cos_sim-MRR@10`); None when the name ends in none. The longest score wins."""
    parts = name.split("_")
    for i in range(len(parts)):
        metric = "_".join(parts[i:])
        if retrieval_metric(metric):
            return "_".join(parts[:i]), metric
    return None


def vision_metric(metric: str) -> bool:
    """True when `metric` names a vision evaluator's score or error (`AP50`, `bbox_mAP`, `PCK`, `top1`, `NME`): a
    metric only an evaluation computes, so a column of that name is an evaluation wherever it is logged."""
    base = metric.split(",")[0].strip().lower()
    return bool(_VISION_HIGHER.match(base)) or base in _VISION_LOWER


def cannot_be_negative(metric: str) -> bool:
    """True when no value of `metric` is below 0 (AP/AR, accuracies, overlap scores, PCK, AUC)."""
    base = metric.split(",")[0].strip().lower()
    return bool(_VISION_HIGHER.match(base)) or base in _NON_NEGATIVE or base in _VISION_LOWER


@functools.lru_cache(maxsize=1024)  # a name per evaluation record: an import asks once per record
def metric_direction(metric: str) -> bool | None:
    """True when a higher value of `metric` is better, False when lower is, None when the name does not say.

    Known names and their families: `rougeLsum`, `f1_macro`, `accuracy_top5`, `pass@10`, `AP50`, `bbox_mAP_s`,
    `PCK`, the retrieval and embedding scores (`spearman_cosine`, `ndcg@10`, `cos_sim-MRR@10`: `retrieval_metric`)
    and `negative_mse` rise; `val_loss`, `lm_loss`, `eval_wer`, `NME` and a standard error (`acc_stderr`) fall."""
    base = metric.split(",")[0].strip().lower()
    if base.endswith("_threshold"):  # the cut a score was read at (sentence-transformers' `cosine_f1_threshold`)
        return None
    if base in _LOWER_IS_BETTER or base.endswith(("_stderr", "_loss", "_ppl", "_perplexity", "_error", "_wer", "_cer")):
        return False
    if base in _VISION_LOWER:
        return False
    if base in _HIGHER_IS_BETTER or base.startswith(("pass@", "rouge", "bleu")) or _VISION_HIGHER.match(base):
        return True
    if retrieval_metric(base):
        return True
    if is_reward(base):
        return True
    negated = base.removeprefix("negative_").removeprefix("neg_")
    if negated != base and metric_direction(negated) is False:  # sentence-transformers' `negative_mse`
        return True
    head = base.split("_")[0]
    if head in _HIGHER_IS_BETTER:
        return True
    return False if head in _LOWER_IS_BETTER else None


def held_by_governor(meta: str | None) -> bool:
    """Whether a run's meta as stored (JSON text) says the gate inside it held and stopped it (`governor.held`,
    `gate/live.py`); parsed only where the text names a hold."""
    if not meta or '"held": {' not in meta:
        return False
    governor = json.loads(meta).get("governor")
    return isinstance(governor, dict) and isinstance(governor.get("held"), dict)
