"""TensorBoard event files, read without TensorFlow.

The TFRecord framing (length, masked CRC-32C of the length, payload, masked CRC-32C of the payload) is read
here with `struct`, each CRC checked with google-crc32c's C implementation; the payloads are parsed by
TensorBoard's own protobuf class `Event`. TensorBoard's pure-Python record reader does the same framing
about 1.5x slower than tbparse; this one is several times faster (benchmarks/bench_import.py).

Scalars come as `simple_value` (torch's SummaryWriter, TF1) or as 0-d numeric tensors (TF2's
`tf.summary.scalar`); other summaries (histograms, images, text) are skipped. Each events file's events of
one step form one row; the rows of several files (a resumed run writes a new file) are cleaned together.
`wall_time` (the events' Unix time) becomes `wall_s`, counted from the first scalar event.

Damage: a CRC mismatch or an undecodable record is an error naming the file and byte offset. A record cut
off at the end of a file (a writer still running or killed mid-write) is dropped with a warning and the
records before it are kept.
"""

from __future__ import annotations

import os
import re
import struct
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from yieldgate.errors import InputError
from yieldgate.ingest.clean import check_columns, own_export, pivot, placeholder
from yieldgate.ingest.types import Rows, Warnings
from yieldgate.util.inputs import check_regular, open_regular

__all__ = ["read", "read_scalars", "event_files", "run_folders"]

_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def event_files(source: Path) -> list[Path]:
    """The event files of a directory (recursively, sorted by path: by time within one folder), or the file."""
    if not source.is_dir():
        if not source.exists():
            raise InputError(f"{source}: no such file or directory; expected a TensorBoard log directory")
        check_regular(source, "a TensorBoard event file or log directory")  # a FIFO or /dev/zero: refused
        return [source]
    files = sorted(p for p in source.rglob("*") if p.is_file() and "tfevents" in p.name)
    if not files:
        raise InputError(f"{source}: no TensorBoard event files (events.out.tfevents.*) in this directory")
    return files


# Bytes read at a time: an import holds this much of an event file (plus its largest record), never the file;
# event files that hold histograms and images run to gigabytes.
_CHUNK = 4 << 20


def _records(path: Path, warnings: Warnings) -> Iterator[tuple[list[int], list[bytes]]]:
    """Offsets and payloads of a TFRecord file's records, CRCs verified, a chunk's worth at a time (one tight
    loop per chunk: this is the hot path)."""
    import google_crc32c

    unpack_header, unpack_crc, crc_of = _HEADER.unpack_from, _CRC.unpack_from, google_crc32c.value
    with open_regular(path, "a TensorBoard event file") as fh:
        buf = fh.read(_CHUNK)
        if not buf:  # a writer that opened its file and was stopped before the first record
            warnings.add("empty", f"{path}: empty event file; skipped")
            return
        problem = placeholder(path, buf[:1024], "a TensorBoard event file")
        if problem is not None:
            raise InputError(problem)
        base, at, end = 0, 0, len(buf)  # buf[0] is the file's byte `base`; `at` indexes buf
        offsets: list[int] = []
        payloads: list[bytes] = []
        while True:
            more = None
            if end - at < 12:
                more = fh.read(_CHUNK)
                if not more and at < end:
                    warnings.add(
                        "truncated",
                        f"{path}: offset {base + at}: record header cut off at the end of "
                        f"the file ({end - at} bytes); records before it kept",
                    )
            else:
                length, length_crc = unpack_header(buf, at)
                crc = crc_of(buf[at : at + 8])
                if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
                    raise InputError(
                        f"{path}: offset {base + at}: record length fails its CRC; the file is damaged "
                        "or not a TensorBoard event file"
                    )
                start, stop = at + 12, at + 12 + length + 4
                if stop > end:
                    # The record runs past the buffer: read on, no further than the file goes (a damaged length
                    # must not make us allocate it).
                    left = os.fstat(fh.fileno()).st_size - base - end
                    more = fh.read(min(max(stop - end, _CHUNK), left)) if left > 0 else b""
                    if not more:
                        warnings.add(
                            "truncated",
                            f"{path}: offset {base + at}: last record cut off ({end - start} "
                            f"of {length + 4} bytes); records before it kept",
                        )
            if more is None:
                payload = buf[start : start + length]
                crc = crc_of(payload)
                if (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF != unpack_crc(buf, start + length)[0]:
                    raise InputError(f"{path}: offset {base + at}: record payload fails its CRC; the file is damaged")
                offsets.append(base + at)
                payloads.append(payload)
                at = stop
                continue
            if offsets:  # the buffer's records, before it is read on or the file ends
                yield offsets, payloads
                offsets, payloads = [], []
            if not more:
                return
            buf, base, at = buf[at:] + more, base + at, 0
            end = len(buf)


_TENSOR_DTYPES = {
    1: ("float_val", np.float32),
    2: ("double_val", np.float64),
    3: ("int_val", np.int32),
    9: ("int64_val", np.int64),
    19: ("half_val", np.float16),
}


def _tensor_scalar(tensor) -> float | None:
    """The value of a 0-d numeric TensorProto (TF2 scalars), else None."""
    if tensor.tensor_shape.dim or tensor.dtype not in _TENSOR_DTYPES:
        return None
    field, dtype = _TENSOR_DTYPES[tensor.dtype]
    if tensor.tensor_content:
        return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    vals = getattr(tensor, field)
    if not vals:
        return None
    if tensor.dtype == 19:  # half_val holds the fp16 bit patterns
        return float(np.array([vals[0]], dtype=np.uint16).view(np.float16)[0])
    return float(vals[0])


def read_scalars(files: Sequence[Path], warnings: Warnings) -> pd.DataFrame:
    """Every scalar of the files, long form: file, offset, step, wall_time, tag, value. Records are parsed as
    they are read and only scalars are kept, in typed arrays (8 bytes a number, a code per tag)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    parse = Event.FromString
    file_of, offsets, steps = array("q"), array("q"), array("q")
    walls, values, tag_of = array("d"), array("d"), array("q")
    codes: dict[str, int] = {}
    add_file, add_offset, add_step, add_wall, add_tag, add_value = (
        a.append for a in (file_of, offsets, steps, walls, tag_of, values)
    )
    for index, path in enumerate(files):
        for at, payloads in _records(path, warnings):
            for k, payload in enumerate(payloads):
                try:
                    event = parse(payload)
                except DecodeError:
                    raise InputError(f"{path}: offset {at[k]}: record is not a TensorBoard Event") from None
                for v in event.summary.value:
                    kind = v.WhichOneof("value")
                    if kind == "simple_value":
                        value = v.simple_value
                    elif kind != "tensor" or (value := _tensor_scalar(v.tensor)) is None:
                        continue
                    code = codes.get(v.tag)
                    if code is None:
                        code = codes[v.tag] = len(codes)
                        check_columns(len(codes), f"{path}: offset {at[k]} (tags)")
                    add_file(index)
                    add_offset(at[k])
                    add_step(event.step)
                    add_wall(event.wall_time)
                    add_tag(code)
                    add_value(value)
    names = np.array(list(codes) or [""], dtype=object)
    ints, floats = (lambda a: np.frombuffer(a, dtype=np.int64)), (lambda a: np.frombuffer(a, dtype=np.float64))
    return pd.DataFrame(
        {
            "file": ints(file_of),
            "offset": ints(offsets),
            "step": ints(steps),
            "wall_time": floats(walls),
            "tag": names[ints(tag_of)],
            "value": floats(values),
        }
    )


_AXIS = re.compile(r"^(?P<base>.+) vs (?P<axis>samples|tokens|steps|iterations)$", re.IGNORECASE)


def _other_axes(scalars: pd.DataFrame, warnings: Warnings) -> pd.DataFrame:
    """Megatron logs each metric twice more against other x-axes (`lm loss vs samples`, `... vs tokens`,
    their "step" being the samples or tokens consumed). Read as metrics they would be rows at step 10^9.
    They are dropped; each `X vs tokens` (`samples`) event, paired with the `X` event written just before it
    in the same file with the same value, gives the run's tokens (samples) at that `X` event's step."""
    axes = {tag: m for tag in pd.unique(scalars["tag"]) if (m := _AXIS.match(tag))}  # a few tags, many events
    if not axes:
        return scalars
    other = scalars["tag"].isin(axes).to_numpy()
    derived = []
    for tag, m in axes.items():
        name = m["axis"].lower()
        if name not in ("tokens", "samples"):
            continue
        own = scalars[scalars["tag"] == m["base"]]
        for file, vs in scalars[scalars["tag"] == tag].groupby("file"):
            mine = own[own["file"] == file].sort_values("offset")
            if mine.empty:
                continue
            at = np.searchsorted(mine["offset"].to_numpy(), vs["offset"].to_numpy()) - 1
            paired = (at >= 0) & np.isclose(mine["value"].to_numpy()[np.maximum(at, 0)], vs["value"].to_numpy())
            hit = mine.iloc[at[paired]]
            derived.append(
                pd.DataFrame(
                    {
                        "file": file,
                        "offset": hit["offset"].to_numpy(),
                        "step": hit["step"].to_numpy(),
                        "wall_time": hit["wall_time"].to_numpy(),
                        "tag": name,
                        "value": vs["step"].to_numpy()[paired].astype(np.float64),
                    }
                )
            )
    tags = sorted(axes)
    warnings.add(
        "axes",
        f"{len(tags)} tag(s) logged against samples or tokens instead of steps "
        f"({', '.join(tags[:3])}{', ...' if len(tags) > 3 else ''}): not read as metrics; their "
        "x-axis gives the tokens and samples at each step",
    )
    kept = scalars[~other]
    if derived:
        pairs = pd.concat(derived).drop_duplicates(["file", "step", "tag"])
        kept = pd.concat([kept, pairs[~pairs["tag"].isin(kept["tag"].unique())]], ignore_index=True)
    return kept.sort_values(["file", "offset"], kind="stable").reset_index(drop=True)


# DeepSpeed's Monitor writes `Train/Samples/<name>` (`train_loss`, `lr`, `loss_scale`, `elapsed_time_ms_*`) at x =
# the samples trained so far, not the step: on a step axis a batch of 32 samples would read as 32 steps. Its engine
# writes the loss in `backward()`, before the step's samples are counted, and the rest in `step()`, after: a step's
# loss stands one batch before its LR.
_DEEPSPEED = "Train/Samples/"
_DEEPSPEED_BEFORE = {"train_loss"}


def _deepspeed_samples(scalars: pd.DataFrame, warnings: Warnings) -> pd.DataFrame:
    """DeepSpeed Monitor's scalars under their own names (`train_loss`, `lr`) at the step, and `samples` at each:
    the step is the samples over the batch, the samples between consecutive logged points (its Monitor writes
    every step), where every x is a multiple of it; the loss, logged before its step's samples, one batch on.
    Otherwise the x stays the step, with a warning that the steps count samples."""
    if not any(str(tag).startswith(_DEEPSPEED) for tag in pd.unique(scalars["tag"])):  # a few tags, many events
        return scalars
    on_samples = scalars["tag"].str.startswith(_DEEPSPEED).to_numpy()
    x = np.unique(scalars["step"].to_numpy()[on_samples])
    gaps = np.diff(x)
    batch = int(pd.Series(gaps).mode().min()) if len(gaps) else 0
    ours = scalars[on_samples]
    ours = ours.assign(tag=ours["tag"].str.removeprefix(_DEEPSPEED))
    if batch > 0 and not (x % batch).any():
        before = ours["tag"].isin(_DEEPSPEED_BEFORE).to_numpy()
        ours = ours.assign(step=ours["step"].to_numpy() + np.where(before, batch, 0))  # the samples through its step
        first = ours.drop_duplicates(["file", "step"])
        samples = first.assign(tag="samples", value=first["step"].astype(np.float64))
        ours = pd.concat([ours, samples], ignore_index=True).assign(step=lambda f: f["step"] // batch)
        warnings.add(
            "deepspeed",
            f"DeepSpeed Monitor's {_DEEPSPEED}* scalars are logged against samples: step = samples / {batch:,} (the "
            "samples between consecutive logged steps; the loss, logged before its step's samples are counted, one "
            "batch on), and the samples kept as such",
        )
    else:
        warnings.add(
            "deepspeed",
            f"DeepSpeed Monitor's {_DEEPSPEED}* scalars are logged against samples, at irregular intervals (no "
            "batch size divides them all): the steps of this run count samples",
        )
    kept = pd.concat([scalars[~on_samples], ours], ignore_index=True)
    return kept.sort_values(["file", "offset"], kind="stable").reset_index(drop=True)


# fairseq (and metaseq) with --tensorboard-logdir write one folder per progress bar, the same statistic names in
# each at step = num_updates: `train_inner/` (every --log-interval updates), `train/` (each epoch's means, at its
# last update) and one per validation subset (`valid/`, `valid_wiki/`, `test/`). Its losses are in bits.
def _fairseq_layout(files: Sequence[Path], scalars: pd.DataFrame, warnings: Warnings) -> pd.DataFrame:
    """The scalars of a fairseq log directory under the names its text log is read by (`textlog.fairseq`: losses in
    nats, a validation subset's losses as evaluations), without the per-epoch means (not a step's values) and a
    validation's other statistics (its speed, `best_loss`)."""
    from yieldgate.ingest.textlog.fairseq import fairseq_name

    roots = {f.parent.parent for f in files if f.parent.name == "train_inner"}
    if not roots:
        return scalars
    codes, pairs = pd.factorize(pd.MultiIndex.from_arrays([scalars["file"], scalars["tag"]]))
    names, scales = np.empty(len(pairs), dtype=object), np.ones(len(pairs))
    dropped: set[str] = set()
    for k, (i, tag) in enumerate(pairs):
        folder = files[i].parent
        if folder.parent not in roots or folder.name == "train_inner":
            named = fairseq_name(tag, False, None) if folder.parent in roots else None
            names[k], scales[k] = named or (tag, 1.0)
        elif folder.name == "train":
            names[k] = None
        else:  # a validation subset: `valid`, `valid_<name>` (as the text log names it), or any other name
            subset = None if folder.name == "valid" else folder.name.removeprefix("valid_")
            named = fairseq_name(tag, True, subset)
            names[k], scales[k] = named or (None, 1.0)
            if named is None:
                dropped.add(f"{folder.name}/{tag}")
    kept = names[codes] != None  # noqa: E711 (an object array: elementwise)
    warnings.add(
        "fairseq",
        "fairseq TensorBoard log: train_inner/ read as the training, losses from bits to nats; train/ (each "
        "epoch's means) skipped"
        + (f"; validation statistics not read: {', '.join(sorted(dropped)[:4])}" if dropped else ""),
    )
    out = scalars.assign(tag=names[codes], value=scalars["value"].to_numpy() * scales[codes])[kept]
    return _in_written_order(out)


def _in_written_order(scalars: pd.DataFrame) -> pd.DataFrame:
    """Scalars of folders one process wrote in turn, in the order written (each file's own order kept): a
    validation's row comes after the training rows before it, not after the whole training (where its clock
    would read as a timer reset)."""
    written = scalars.groupby("file", sort=False)["wall_time"].cummax().to_numpy()
    return scalars.iloc[np.argsort(written, kind="stable")].reset_index(drop=True)


# A loop's own split folders: `SummaryWriter(log / "train")` beside `SummaryWriter(log / "val")` (or `valid`,
# `validation`, `eval`, `dev`, `test`, with a `_<name>` of a second set), the same tag names in each. Read as they
# are, the validation's `loss` is merged into the training row of its step. Keras' own tags in `train/` and
# `validation/` are read by `_keras_layout`; fairseq's folders by `_fairseq_layout`.
_TRAIN_FOLDER = re.compile(r"^(?:train|training)$")
_EVAL_FOLDER = re.compile(r"^(?P<split>val|valid|validation|eval|dev|test)(?:[_-](?P<name>.+))?$")


def _split_folders(files: Sequence[Path], scalars: pd.DataFrame, warnings: Warnings) -> pd.DataFrame:
    """The scalars with the tags of evaluation folders beside a `train` folder named as evaluations (`eval/loss`,
    `eval/<name>/loss`; a `test` folder's as `test/loss`), in the order written."""
    parents = {f.parent.parent for f in files if _TRAIN_FOLDER.match(f.parent.name)}
    parents -= {f.parent.parent for f in files if f.parent.name == "train_inner"}
    prefix = np.full(len(files), "", dtype=object)
    for i, f in enumerate(files):
        m = _EVAL_FOLDER.match(f.parent.name)
        if m and f.parent.parent in parents:
            task = "test" if m["split"] == "test" else "eval"
            prefix[i] = f"{task}/{m['name']}/" if m["name"] else f"{task}/"
    found = _prefixed(files, scalars, prefix)
    if found is None:
        return scalars
    tags, _, folders = found
    split = np.array([bool(_TRAIN_FOLDER.match(f.parent.name) or p) for f, p in zip(files, prefix, strict=True)])
    in_split = scalars[split[scalars["file"].to_numpy()]]
    if in_split["tag"].str.fullmatch(_KERAS_TAG).all():  # Keras' own names: `_keras_layout` reads them
        return scalars
    warnings.add(
        "split-folders",
        f"{', '.join(folders)}: evaluations beside a train/ folder, their tags read as eval/<tag> (test/<tag> for a "
        "test folder)",
    )
    return _in_written_order(scalars.assign(tag=tags))


def _prefixed(
    files: Sequence[Path], scalars: pd.DataFrame, prefix: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """The tags with their file's prefix (`eval/` for an evaluation folder's, "" for others), which scalars got
    one, and those files' folders; None when no scalar did (no folder matched, or its files hold no scalars)."""
    if not prefix.any():
        return None
    of_row = prefix[scalars["file"].to_numpy()]
    evaluated = of_row != ""
    if not evaluated.any():
        return None
    tags = np.where(evaluated, of_row + scalars["tag"].to_numpy(dtype=object), scalars["tag"])
    return tags, evaluated, sorted({str(f.parent) for f, p in zip(files, prefix, strict=True) if p})


# TF Estimator writes a run's evaluations into the model directory that holds the training's event files, in
# `eval/` (and `evaluate(name=N)`'s in `eval_N/`), under the training's own tag names (`loss`, `accuracy`) at the
# global step. Read as they are, an evaluation's `loss` is taken for the training loss at that step.
_ESTIMATOR_EVAL = re.compile(r"^eval(?:_(?P<name>.+))?$")


def _estimator_layout(files: Sequence[Path], scalars: pd.DataFrame, warnings: Warnings) -> pd.DataFrame:
    """The scalars with the tags of an Estimator's evaluation folders named as evaluations (`eval/loss`,
    `eval/<name>/loss`): an `eval` or `eval_<name>` folder beside the event files of the training it evaluates."""
    trained = {f.parent for f in files if not _ESTIMATOR_EVAL.match(f.parent.name)}
    prefix = np.full(len(files), "", dtype=object)
    for i, f in enumerate(files):
        m = _ESTIMATOR_EVAL.match(f.parent.name)
        if m and f.parent.parent in trained:
            prefix[i] = f"eval/{m['name']}/" if m["name"] else "eval/"
    found = _prefixed(files, scalars, prefix)
    if found is None:
        return scalars
    tags, evaluated, folders = found
    warnings.add(
        "estimator",
        f"TF Estimator layout: the scalars in {', '.join(folders)} are evaluations of the training beside them, "
        "read as eval/<tag> (their `loss` is the validation loss)",
    )
    # Their clock is not the training's (an evaluator may run beside it, on a checkpoint some steps behind): the
    # step's time is the training's.
    return scalars.assign(tag=tags, wall_time=np.where(evaluated, np.nan, scalars["wall_time"].to_numpy(dtype=float)))


# Keras' TensorBoard callback writes one run as two folders of one log directory, `train/` and `validation/`,
# with the same tag names in both: `epoch_<metric>` at step = epoch (History's `<metric>` and `val_<metric>`),
# `batch_<metric>` at step = batch with `update_freq='batch'` or N, and `evaluation_<metric>_vs_iterations`
# (validation at step = batches trained) since TF 2.2. Read file by file, the validation folder is a second run
# that restarts at step 0 over the training values.
_KERAS_SPLITS = {"train": "", "validation": "val_"}
_KERAS_TAG = re.compile(r"^(?:(?P<kind>epoch|batch)_(?P<metric>.+)|evaluation_(?P<eval>.+)_vs_iterations)$")


def _keras_layout(
    files: Sequence[Path], scalars: pd.DataFrame, warnings: Warnings
) -> tuple[pd.DataFrame, np.ndarray, bool]:
    """The scalars of a Keras log directory renamed to History's names (`loss`, `val_loss`), the row group of
    each (the n-th event file of `train/` and of `validation/` are one run, so their values of one step form one
    row), and whether the steps count epochs. Anything else is returned as it is, one group per file."""
    group = scalars["file"].to_numpy()
    split = np.array([f.parent.name if f.parent.name in _KERAS_SPLITS else "" for f in files], dtype=object)
    in_split = split[group] != ""
    if not in_split.any():
        return scalars, group, False
    parts = scalars["tag"][in_split].str.extract(_KERAS_TAG)
    if parts.isna().all(axis=1).any():  # a tag Keras does not write: not its layout
        return scalars, group, False
    batches = bool((parts["kind"] == "batch").any())
    prefix = np.array([_KERAS_SPLITS.get(s, "") for s in split], dtype=object)[group[in_split]]
    # Batch steps: the training's `batch_*` and the validation's `evaluation_*_vs_iterations`; epoch steps:
    # `epoch_*` of both. The other axis's tags cannot share the rows and are left out.
    axis_tag = parts["metric"].where(parts["kind"] == ("batch" if batches else "epoch"))
    if batches:
        axis_tag = axis_tag.fillna(parts["eval"].where(prefix == "val_"))
    kept = axis_tag.notna().to_numpy()
    if not kept.all():
        left = sorted(set(scalars["tag"][in_split][~kept]))
        warnings.add(
            "keras",
            f"{len(left)} Keras tag(s) logged against {'epochs' if batches else 'batches'} while the run's steps "
            f"count {'batches' if batches else 'epochs'} ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''}): "
            "left out",
        )
    renamed = scalars["tag"].to_numpy(dtype=object).copy()
    renamed[np.flatnonzero(in_split)[kept]] = prefix[kept] + axis_tag.to_numpy(dtype=object)[kept]
    # One row group per n-th file of each split (a resumed fit writes a second file in each); files outside
    # the two folders keep groups of their own.
    rank: dict[str, int] = {}
    order = np.zeros(len(files), dtype=np.int64)
    for i, s in enumerate(split):
        order[i] = rank.get(s, 0) if s else len(files) + i
        rank[s] = rank.get(s, 0) + 1
    out = scalars.assign(tag=renamed)
    keep = np.ones(len(out), dtype=bool)
    keep[np.flatnonzero(in_split)[~kept]] = False
    tag = "batch" if batches else "epoch"
    warnings.add(
        "keras",
        f"Keras TensorBoard log (its train/ and validation/ folders are one run): tags read by Keras' History "
        f"names (train/{tag}_loss as loss, validation/{tag if not batches else 'evaluation'}_loss"
        f"{'_vs_iterations' if batches else ''} as val_loss)" + ("" if batches else "; steps in this run count epochs"),
    )
    return out[keep].reset_index(drop=True), order[group[keep]], not batches


# A log directory of several runs (`SummaryWriter(f"runs/{name}")`, Lightning's `version_N/`): each run folder
# holds event files itself. A folder named as a split of one run (train/, val/, eval_<name>/, fairseq's
# train_inner/) belongs to the folder above it, and a folder inside a run folder (`add_scalars`' sub-writers,
# Estimator's eval/) to that run; every folder beside fairseq's train_inner/ is one of its validation subsets.
_SPLIT_FOLDER = re.compile(
    r"^(?:train|training|train_inner|validation|(?:val|valid|eval|dev|test)(?:[_-].+|\d+)?)$", re.IGNORECASE
)


def run_folders(root: Path, files: Sequence[Path]) -> dict[str, list[Path]]:
    """The event files of a log directory by run folder (its path under `root`), in the order given; one entry,
    under "", when they are all one run."""
    fairseq = {f.parent.parent for f in files if f.parent.name == "train_inner"}  # its other folders: any name
    homes = {
        f: f.parent.parent if _SPLIT_FOLDER.match(f.parent.name) or f.parent.parent in fairseq else f.parent
        for f in files
    }
    tops = {h for h in homes.values() if not any(p in homes.values() for p in h.parents)}
    if len(tops) < 2:
        return {"": list(files)}
    runs: dict[str, list[Path]] = {}
    for f, home in homes.items():
        top = next(t for t in tops if t == home or t in home.parents)
        runs.setdefault(top.relative_to(root).as_posix(), []).append(f)
    return dict(sorted(runs.items()))


def read(sources: Sequence[str], opts, warnings: Warnings) -> list:
    """Importer entry point: one run from event directories or files; a single directory whose event files sit
    in several run folders (`run_folders`), one run per folder, named PREFIX/<folder>."""
    files = [f for s in sources for f in event_files(Path(s))]
    runs = run_folders(Path(sources[0]), files) if len(sources) == 1 and Path(sources[0]).is_dir() else {"": files}
    if len(runs) == 1:
        return [_read_run(", ".join(sources), files, warnings)]
    return [_read_run(str(Path(sources[0]) / name), found, warnings, suffix=name) for name, found in runs.items()]


def _read_run(source: str, files: Sequence[Path], warnings: Warnings, suffix: str | None = None):
    """One run from its event files."""
    from yieldgate.ingest import Read

    scalars = read_scalars(files, warnings)
    if scalars.empty:
        empty = sum(1 for f in files if f.stat().st_size == 0)
        raise InputError(
            f"{source}: no scalar summaries in {len(files)} event file(s)"
            + (f" ({empty} of them empty)" if empty else "")
        )
    scalars = _other_axes(scalars, warnings)
    scalars = _deepspeed_samples(scalars, warnings)
    scalars = _fairseq_layout(files, scalars, warnings)
    scalars = _estimator_layout(files, scalars, warnings)
    scalars = _split_folders(files, scalars, warnings)
    scalars, group, epochs = _keras_layout(files, scalars, warnings)
    file_of, offset = scalars["file"].to_numpy(), scalars["offset"].to_numpy()
    rows = pivot(
        ", ".join(map(str, files)),
        group,
        scalars["step"].to_numpy(),
        scalars["tag"],
        scalars["value"].to_numpy(),
        scalars["wall_time"].to_numpy(),
        lambda i: f"{files[file_of[i]]}: offset {offset[i]}",
        warnings,
    )
    if any(name.startswith("yieldgate/") for name in rows.values):  # `yieldgate export --to tensorboard`
        return Read(source, own_export(rows, warnings, step="yieldgate/step", prefix="yieldgate/"), suffix=suffix)
    rows.epochs = epochs or _steps_are_epochs(rows, source, warnings)
    return Read(source, rows, start_unix=float(scalars["wall_time"].min()), suffix=suffix)


def _steps_are_epochs(rows: Rows, source: str, warnings: Warnings) -> bool:
    """Whether the run logged against epochs: an `epoch` tag whose value is its step at every point (a loop that
    writes `add_scalar(tag, value, epoch)` beside the epoch itself), which the import then says, as a per-epoch
    table's does."""
    name = next((n for n in rows.values if n.lower() in ("epoch", "epochs", "train/epoch")), None)
    if name is None:
        return False
    present = rows.present[name]
    if present.sum() < 2 or not np.array_equal(rows.values[name][present], rows.step[present].astype(float)):
        return False
    warnings.add("epoch", f"{source}: its {name!r} tag equals its step: steps in this run count epochs")
    return True
