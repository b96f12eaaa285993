"""The fourth wave of real public logs (issue 45): trainers and formats new to the corpus, registry entries in
`tests.support.real_logs`' shape and the independent parsers `tests/test_real_sources.py` measures them with (standard
library only, never yieldgate code).

Provenance in tests/data/real/SOURCES.md. `WAVE4_LOGS` is appended to `REAL_LOGS`, `WAVE4_PARSERS` to its parsers.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from tests.support.real_wave2 import _entry, _series


def _hms(text: str) -> float:
    """Seconds of Python's str(timedelta): `[D day[s], ]H:MM:SS[.ffffff]`."""
    days, _, clock = text.rpartition(", ")
    h, m, s = clock.split(":")
    return (int(days.split()[0]) * 86400 if days else 0) + int(h) * 3600 + int(m) * 60 + float(s)


def allennlp_records(path: Path, params: dict) -> dict:
    """An AllenNLP serialization folder: `metrics_epoch_<N>.json`, one pretty-printed object per epoch (read in the
    order of N), and beside them other JSON files (the final `metrics.json`)."""
    numbered = {int(m[1]): p for p in path.iterdir() if (m := re.fullmatch(r"metrics_epoch_(\d+)\.json", p.name))}
    records = [json.loads(numbered[n].read_text()) for n in sorted(numbered)]
    series = {key: _series([(r["epoch"], r[key]) for r in records]) for key in params["keys"]}
    return {
        "records": len(records),
        "epochs": [r["epoch"] for r in records],
        "other_json": sorted(p.name for p in path.glob("*.json") if p not in numbered.values()),
        "series": series,
        "duration_s": _series([(r["epoch"], _hms(r["training_duration"])) for r in records]),
    }


def st_evaluator_csv(path: Path, params: dict) -> dict:
    """A sentence-transformers evaluator's CSV (`similarity_evaluation_<name>_results.csv`): `epoch`, `steps` (-1: the
    evaluation at the end of the epoch) and one column per similarity function and correlation."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {
        "rows": len(rows),
        "columns": list(rows[0]),
        "steps": sorted({int(r["steps"]) for r in rows}),
        "series": {c: _series([(int(r["epoch"]), float(r[c])) for r in rows]) for c in params["columns"]},
    }


def json_columns(path: Path, params: dict) -> dict:
    """One JSON object of equal-length lists (Keras' `History.history` dumped with json.dump): position i is epoch i."""
    doc = json.loads(path.read_text())
    return {
        "keys": list(doc),
        "lengths": sorted({len(v) for v in doc.values()}),
        "series": {key: _series(list(enumerate(doc[key]))) for key in params["keys"]},
    }


WAVE4_PARSERS = {
    "allennlp-records": allennlp_records,
    "st-evaluator-csv": st_evaluator_csv,
    "json-columns": json_columns,
}

WAVE4_LOGS: list[dict[str, Any]] = [
    _entry(
        "allennlp-scibert-coherence-output",
        "table",
        "allennlp-metrics-epoch-json",
        "allennlp-records",
        "AllenNLP's serialization folder of a SciBERT code-comment coherence classifier, 14 epochs: one pretty-printed "
        "`metrics_epoch_<N>.json` per epoch (N from 0; training_*, validation_* and running best_validation_* "
        "values, a cumulative `training_duration` as H:MM:SS.ffffff) and the final `metrics.json` (the last epoch "
        "again, with test_* values). The validation loss is lowest after epoch 3 (0.395) and rises to 0.750 while "
        "the training loss falls 0.593 -> 0.125: overfitting.",
        {"keys": ["training_loss", "validation_loss", "validation_accuracy"]},
        {
            "records": 14,
            "epochs": list(range(14)),
            "other_json": ["metrics.json"],
            "series": {
                "training_loss": _series([(0, 0.5928729361233612), (13, 0.125472488856758)]) | {"count": 14},
                "validation_loss": {
                    "count": 14,
                    "first": [0, 0.5065801867416927],
                    "last": [13, 0.7502426498436502],
                    "min": [3, 0.394893650497709],
                    "max": [13, 0.7502426498436502],
                },
                "validation_accuracy": {
                    "count": 14,
                    "first": [0, 0.7],
                    "last": [13, 0.8045454545454546],
                    "min": [0, 0.7],
                    "max": [4, 0.8590909090909091],
                },
            },
            "duration_s": _series([(0, 46.104681), (13, 648.458976)]) | {"count": 14},
        },
    ),
    _entry(
        "sentence-transformers-stsb-distilbert-sts-dev-results.csv",
        "table",
        "sentence-transformers-evaluator-csv",
        "st-evaluator-csv",
        "sentence-transformers' EmbeddingSimilarityEvaluator CSV of a DistilBERT fine-tune on STS-B (stsb_multi_mt "
        "en), 25 epochs: `epoch`, `steps` (-1 on every row: each evaluation is at the end of its epoch) and the "
        "Pearson and Spearman correlations per similarity function (cosine, euclidean, manhattan, dot), all rising; "
        "the run's only values are these evaluations (no training loss). CRLF line ends.",
        {"columns": ["cosine_spearman", "cosine_pearson", "dot_spearman"]},
        {
            "rows": 25,
            "columns": [
                "epoch",
                "steps",
                "cosine_pearson",
                "cosine_spearman",
                "euclidean_pearson",
                "euclidean_spearman",
                "manhattan_pearson",
                "manhattan_spearman",
                "dot_pearson",
                "dot_spearman",
            ],
            "steps": [-1],
            "series": {
                "cosine_spearman": _series([(0, 0.8116940708348979), (24, 0.8732526613598429)]) | {"count": 25},
                "cosine_pearson": _series([(0, 0.8163493363975831), (24, 0.8735196671255344)]) | {"count": 25},
                "dot_spearman": {
                    "count": 25,
                    "first": [0, 0.7539935677114966],
                    "last": [24, 0.8158899324358765],
                    "min": [0, 0.7539935677114966],
                    "max": [13, 0.8167604526088117],
                },
            },
        },
    ),
    _entry(
        "keras-history-glove-lstm-tweets-training_history.json",
        "table",
        "keras-history-json",
        "json-columns",
        "Keras' History.history dumped with json.dump: one JSON object of per-epoch lists (accuracy, loss, "
        "val_accuracy, val_loss, learning_rate) of a GloVe + LSTM tweet classifier, 10 epochs, no step anywhere (the "
        "position is the epoch). val_loss is lowest at epoch 5 (0.4651) and rises to 0.5049 while the training loss "
        "falls 0.517 -> 0.316: overfitting.",
        {"keys": ["loss", "val_loss", "val_accuracy"]},
        {
            "keys": ["accuracy", "loss", "val_accuracy", "val_loss", "learning_rate"],
            "lengths": [10],
            "series": {
                "loss": _series([(0, 0.5171560645103455), (9, 0.3156667649745941)]) | {"count": 10},
                "val_loss": {
                    "count": 10,
                    "first": [0, 0.511763870716095],
                    "last": [9, 0.5049303770065308],
                    "min": [5, 0.4650532007217407],
                    "max": [0, 0.511763870716095],
                },
                "val_accuracy": {
                    "count": 10,
                    "first": [0, 0.7809873819351196],
                    "last": [9, 0.7998949289321899],
                    "min": [0, 0.7809873819351196],
                    "max": [5, 0.7998949289321899],
                },
            },
        },
    ),
]
