"""tqdm's progress bars with values, as a log file keeps them (PyTorch Lightning's and many hand-written loops'):
the step is the batches counted across epochs."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from yieldgate.ingest.textlog.base import NUM, Record, clock_seconds, number

__all__ = ["scan"]

# tqdm's progress bars as a log file keeps them, each refresh after a carriage return: `Epoch 3:  42%|████ | 197/469
# [00:03<00:04, 55.1it/s, loss=0.412, v_num=0]` (PyTorch Lightning), `epoch 1/10: 100%|███| 153/153 [00:03<00:00,
# 44.5it/s, loss=0.783]` (many hand-written loops). The count is the batches of the bar's epoch, the elapsed time
# the bar's own, and the values after the rate its postfix.
_TQDM = re.compile(
    r"^(?P<desc>[^|]*?):?\s*\d+%\|[^|]*\|\s*(?P<n>\d{1,15})/(?P<total>\d{1,15})\s*"
    r"\[(?P<elapsed>\d+(?::\d+){1,2})<[^,\]]*,[^,\]]*(?:,\s*(?P<post>[^\]]*))?\]"
)
_TQDM_EPOCH = re.compile(r"(?i)\bepoch\s*(?P<epoch>\d+)")
_TQDM_EVAL = re.compile(r"(?i)^\s*(?:valid|validation|val|eval|evaluating|evaluation|test|testing)\b")
_TQDM_PAIR = re.compile(rf"(?<!\w)(\w+)=((?:{NUM}))(?=,|\s|$)")  # tried once per word


def scan(lines: Sequence[str]) -> Iterator[Record]:
    """Each refresh of a training bar with values in its postfix, at step = the batches of the epochs before (each
    bar's total) plus its count, and wall_s = the epochs before's time plus its elapsed time. A value the bar keeps
    showing (Lightning's `val_loss` until the next validation) is read when it changes; a validation bar's values
    at its end are evaluations of the step before it."""
    epoch: int | None = None
    offset, total, before_s, elapsed = 0, 0, 0.0, 0.0  # the batches and seconds of the epochs before this bar
    step = -1  # the last step read
    shown: dict[str, float] = {}  # the values last read of those a bar keeps showing
    validated: dict[str, float] = {}  # the values of the last validation bar read
    last: tuple[int, str] | None = None  # the last (epoch, count) read
    for i, line in enumerate(lines):
        m = _TQDM.search(line) if "%|" in line else None
        if m is None or not m["post"]:
            continue
        pairs = {k: number(v) for k, v in _TQDM_PAIR.findall(m["post"]) if k != "v_num"}
        if not pairs:
            continue
        if _TQDM_EVAL.match(m["desc"]):
            if step >= 0 and m["n"] == m["total"] and pairs != validated:
                validated = pairs
                yield (
                    i,
                    1,
                    {"step": float(step), **{k if k.startswith("val") else f"val_{k}": v for k, v in pairs.items()}},
                )
            continue
        found = _TQDM_EPOCH.search(m["desc"])
        this = int(found["epoch"]) if found else 0
        if epoch is not None and (this != epoch or (last is not None and int(m["n"]) < int(last[1]))):
            # The next epoch's bar, a new fit's, or a bar without an epoch counting from 0 again: counted on.
            offset, before_s, last = offset + total, before_s + elapsed, None
        epoch, total, elapsed = this, int(m["total"]), clock_seconds(m["elapsed"])
        again = (epoch, m["n"]) == last  # the bar drawn again at its count (after a validation, at its end)
        last, step = (epoch, m["n"]), offset + int(m["n"])
        values = {"step": float(step), "wall_s": before_s + elapsed}
        for k, v in pairs.items():
            if (k.startswith("val") and shown.get(k) == v) or (again and not k.startswith("val")):
                continue  # a validation's value still shown since, or the count's training values read already
            shown[k] = v
            values[k] = v
        if len(values) > 2:
            yield i, 1, values
