"""What an own-trainer probe's run says of itself (issue #44 items 7 and 8), on constructed ledgers: its manifest holds
the model's shape and the context only where the campaign declares them (a script builds its own model: the
reference GPT's 2 x 64 was written into every probe's manifest, and the Tracker's MFU read it), the parameters its
Tracker measured reach the manifest the gate reads, each source's unique tokens are measured where the recipe names
the script's tokenizer file, and a probe whose training loss was recorded NaN ends failed, where a loss never
recorded is no NaN."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yieldgate.ledger import Ledger
from yieldgate.probe.campaign import Campaign, plan
from yieldgate.probe.campaign.own import ProbeFailed, _diverged, _finish, _job, _manifest
from yieldgate.probe.campaign.spec import ProbeSpec

CAMPAIGN: dict[str, Any] = {
    "name": "own",
    "recipes": {"clean": {"sources": [{"name": "plays", "path": "plays.jsonl"}]}},
    "seeds": 1,
    "budgets": [8192],
    "trainer": {"command": "python train.py --data {recipe_file}"},
}
PARAMS = 65_536
"""What the Tracker measured of the script's model (a bigram table of 256 x 256), as its `model` meta says."""


def probe(workdir: Path, **over: Any) -> ProbeSpec:
    """The campaign's one probe as a worker gets it: through the JSON the executors send."""
    campaign = Campaign.model_validate({**CAMPAIGN, **over})
    campaign.trainer = campaign.trainer.anchored(workdir)  # type: ignore[union-attr]  # the campaign has one
    (spec,) = plan(campaign)
    return ProbeSpec.from_json(json.loads(json.dumps(spec.to_json())))


@settings(max_examples=30, deadline=None)
@given(
    models=st.one_of(
        st.none(),
        st.tuples(st.integers(1, 8), st.integers(1, 8), st.sampled_from([1, 2, 4])).map(
            lambda t: {"layers": t[0], "width": t[1] * t[2] * 8, "heads": t[2]}
        ),
    ),
    context=st.one_of(st.none(), st.integers(2, 4096)),
    sequence_length=st.one_of(st.none(), st.integers(1, 4096)),
)
def test_the_manifest_holds_the_shape_only_where_the_campaign_declares_it(models, context, sequence_length):
    recipe = {"sources": [{"name": "plays", "path": "plays.jsonl"}], "sequence_length": sequence_length}
    over: dict[str, Any] = {"recipes": {"clean": recipe}}
    if models is not None:
        over["models"] = [models]
    if context is not None:
        over["probe"] = {"context": context}
    spec = probe(Path("/nonexistent"), **over)
    manifest = _manifest(spec, spec.trainer)
    model = manifest.model
    assert manifest.data is not None
    if models is None and context is None:
        assert model is None  # nothing declared: not the reference GPT's 2 x 64, context 64
    else:
        assert model is not None
        shape = (model.layers, model.width, model.heads)
        assert shape == ((models["layers"], models["width"], models["heads"]) if models else (None, None, None))
        assert model.context == context and model.params is None
    # The recipe's own sequence length stands unless the campaign declares the context.
    assert manifest.data.sequence_length == (context if context is not None else sequence_length)


def ledger_with_probe(folder: Path, spec: ProbeSpec, losses: list[float | None], meta_params: int | None) -> str:
    """A ledger holding the probe's run as its script's Tracker leaves it: the manifest the worker wrote, a step per
    loss (None: a step whose loss was never recorded), a finite evaluation, and the model's parameters in its meta."""
    location = str(folder / "y.db")
    with Ledger(location) as led:
        manifest = _manifest(spec, spec.trainer)  # type: ignore[arg-type]  # an own-trainer campaign's probe
        led.create_run(spec.run, manifest=manifest, status="running", if_exists="replace")
        rows = [
            {"step": i + 1, "tokens": 1024 * (i + 1), **({} if v is None else {"loss": v})}
            for i, v in enumerate(losses)
        ]
        led.append_steps(spec.run, rows)
        led.append_evals(
            spec.run,
            [
                {"step": len(losses), "tokens": 1024 * len(losses), "task": "val", "metric": m, "value": v}
                for m, v in (("loss", 3.0), ("bpb", 3.0 / math.log(2)))
            ],
        )
        if meta_params is not None:
            led.set_meta(spec.run, "model", {"params": meta_params, "from": "tracker: the model handed over"})
    return location


def finish(folder: Path, spec: ProbeSpec, location: str) -> None:
    _finish(spec, spec.trainer, _job(spec, spec.trainer, location), location)  # type: ignore[arg-type]


@pytest.mark.parametrize("models", [None, [{"layers": 1, "width": 32, "heads": 2}]])
def test_the_parameters_the_tracker_measured_reach_the_manifest_the_gate_reads(tmp_path, models):
    spec = probe(tmp_path, **({"models": models} if models else {}))
    location = ledger_with_probe(tmp_path, spec, [5.0, 4.0, 3.5], PARAMS)
    finish(tmp_path, spec, location)
    with Ledger(location, readonly=True) as led:
        manifest = led.manifest(spec.run)
        status = led.runs().set_index("name").loc[spec.run, "status"]
    assert manifest is not None and manifest.model is not None and status == "finished"
    assert manifest.model.params == PARAMS  # what gate.requirements' tokens per parameter reads
    if models:  # the declared shape stays beside the measured parameters
        assert (manifest.model.layers, manifest.model.width, manifest.model.heads) == (1, 32, 2)


def test_a_script_whose_tracker_measured_no_model_leaves_the_parameters_unknown(tmp_path):
    spec = probe(tmp_path)
    location = ledger_with_probe(tmp_path, spec, [5.0, 4.0], None)
    finish(tmp_path, spec, location)
    with Ledger(location, readonly=True) as led:
        manifest = led.manifest(spec.run)
    assert manifest is not None and manifest.model is None  # nothing made up


LOSS = st.one_of(
    st.floats(0.0, 20.0),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.none(),  # a step whose loss was never recorded
)


def stored(losses: list[float | None]) -> pd.DataFrame:
    """The step records as `Ledger.steps(nullable=True)` returns them: a recorded NaN is NaN, a loss never recorded
    <NA>."""
    values = np.array([0.0 if v is None else v for v in losses], dtype="float64")
    mask = np.array([v is None for v in losses])
    return pd.DataFrame({"step": np.arange(1, len(losses) + 1), "loss": pd.arrays.FloatingArray(values, mask)})


def diverged_at(losses: list[float | None]) -> str | None:
    """What the probe's failure says, from the rule: the first recorded non-finite loss and how many there are."""
    bad = [i for i, v in enumerate(losses) if v is not None and not math.isfinite(v)]
    if not bad:
        return None
    recorded = sum(v is not None for v in losses)
    return (
        f"the training loss is {losses[bad[0]]} at step {bad[0] + 1:,}, and non-finite at {len(bad):,} of "
        f"{recorded:,} steps recorded"
    )


@settings(max_examples=100, deadline=None)
@given(losses=st.lists(LOSS, min_size=1, max_size=40))
def test_a_training_loss_recorded_non_finite_is_a_divergence_and_one_never_recorded_is_not(losses):
    assert _diverged(stored(losses)) == diverged_at(losses)


@pytest.mark.parametrize(
    "losses",
    [
        [5.0, 4.0, math.nan, math.nan],  # diverged late: the evaluations before it finite
        [5.0, None, 4.0, None],  # losses not recorded on every step: no divergence
        [None, math.inf, 3.0],
        [None, None, None],  # no training loss recorded at all
    ],
)
def test_the_ledger_keeps_a_recorded_nan_apart_from_a_loss_never_recorded_and_the_probe_fails_on_it(tmp_path, losses):
    spec = probe(tmp_path)
    location = ledger_with_probe(tmp_path, spec, losses, PARAMS)
    expected = diverged_at(losses)
    if expected is None:
        finish(tmp_path, spec, location)
    else:
        with pytest.raises(ProbeFailed, match=re.escape(f"NaN loss: the training diverged ({expected})")):
            finish(tmp_path, spec, location)
    with Ledger(location, readonly=True) as led:
        status = led.runs().set_index("name").loc[spec.run, "status"]
    assert status == ("running" if expected else "finished")  # the caller records the failure (`_record_end`)


def test_unique_tokens_are_measured_where_the_recipe_names_the_scripts_tokenizer(tmp_path, monkeypatch):
    """A word-level tokenizer file: the unique tokens are the words of the documents the recipe's exact dedup keeps
    (the repeated document counted once); without the tokenizer file they are not counted in another's tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    monkeypatch.setenv("YIELDGATE_CACHE", str(tmp_path / "cache"))
    words = ["to", "be", "or", "not", "that", "is", "the", "question"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "words.json"))
    docs = ["to be or not to be", "that is the question", "to be or not to be"]
    (tmp_path / "plays.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    recipe = {"sources": [{"name": "plays", "path": "plays.jsonl"}], "dedup": {"kind": "exact"}}
    named = {**recipe, "tokenizer": {"name": "words", "path": "words.json"}}
    spec = probe(tmp_path, recipes={"clean": named})
    manifest = _manifest(spec, spec.trainer)
    assert manifest.data is not None
    (source,) = manifest.data.sources
    assert source.unique_tokens == 6 + 4 and source.documents == 3
    assert source.path == "plays.jsonl"  # the recipe as written; only the count is added
    unnamed = probe(tmp_path, recipes={"clean": recipe})
    manifest = _manifest(unnamed, unnamed.trainer)
    assert manifest.data is not None and manifest.data.sources[0].unique_tokens is None
