"""The probe trainer on the built-in corpus: a real (small) training into the ledger."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from yieldgate.data import corpus
from yieldgate.data.recipe import resolve
from yieldgate.errors import InputError
from yieldgate.ledger import Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.probe.config import Faults, ProbeConfig, wsd
from yieldgate.probe.trainer import train_probe

pytestmark = pytest.mark.slow  # real trainings, probes or processes: `make test-all`

RECIPE = {
    "sources": [
        {"name": "shakespeare-modern", "weight": 0.5},
        {"name": "shakespeare-folio", "weight": 0.3},
        {"name": "milton", "weight": 0.2},
    ],
    "filters": [{"kind": "min_chars", "params": {"min": 200}}],
    "dedup": {"kind": "exact"},
    "tokenizer": {"name": "bpe-512", "vocab_size": 512},
}


@pytest.fixture(scope="module")
def data():
    recipe = parse_manifest({"data": RECIPE}).data
    return resolve(recipe, seed=0, max_chars_per_source=400_000)


def probe(data, ledger, run, **kw):
    cfg = ProbeConfig(tokens=24_576, batch_size=8, context=64, evals=4, eval_sequences=16, threads=2, **kw)
    return train_probe(data, cfg, run=run, ledger=str(ledger))


def test_resolution_accounts_for_sources_tokenizer_and_dedup(data):
    recipe = data.recipe
    assert recipe.tokenizer.content_hash and recipe.tokenizer.vocab_size == 512
    assert 1.5 < data.bytes_per_token < 6.0
    assert all(s.unique_tokens and s.unique_tokens > 0 for s in recipe.sources)
    assert data.stats["dedup"]["kind"] == "exact"
    # Milton's byte-identical second copies are removed by exact dedup: accepted (past the filters) exceeds
    # unique (past dedup) for Milton, and equals it where nothing repeats.
    assert data.stats["dedup"]["removed_docs"] > 0
    milton = next(s for s in recipe.sources if s.name == "milton")
    assert milton.accepted_tokens > milton.unique_tokens
    assert recipe.accepted_tokens == sum(s.accepted_tokens for s in recipe.sources)
    assert all(len(s.held_out) > 0 for s in data.sources.values())


def test_held_out_plays_are_held_out_in_both_editions(data):
    works = corpus.load_corpus(stdlib_bytes=0)
    train, held = corpus.split_by_work([w for w in works if w.source != "python-stdlib"], seed=0)
    train_groups, held_groups = {w.group for w in train}, {w.group for w in held}
    assert not train_groups & held_groups
    for group in held_groups:
        if group.startswith("shakespeare/"):
            editions = {w.edition for w in works if w.group == group}
            assert {w.edition for w in held if w.group == group} == editions


def test_a_probe_records_steps_sources_evals_manifest_and_signals(data, tmp_path):
    path = tmp_path / "p.db"
    final = probe(data, path, "p")
    with Ledger(path, readonly=True) as led:
        steps, evals, extras, manifest = led.steps("p"), led.evals("p"), led.extras("p"), led.manifest("p")
        status = led.run_info("p")["status"]
    assert status == "finished" and len(steps) == 48
    assert steps["tokens"].iloc[-1] == 24_576
    keys = set(extras["key"])
    assert {"tokens/shakespeare-modern", "tokens/shakespeare-folio", "tokens/milton"} <= keys
    assert {"signals/gns", "stream/repeat_rate", "signals/update_ratio/blocks.0.qkv"} <= keys
    got = {f"{t}/{m}" for t, m in zip(evals["task"], evals["metric"], strict=True)}
    assert set(manifest.evals.tasks) == got
    assert {"hard/rare/bpb", "hard/folio/bpb", "val/milton/acc", "val/shakespeare-folio/bpb"} <= got
    assert evals["portfolio"].unique().tolist() == ["probe"]
    assert manifest.data.tokenizer.content_hash == data.recipe.tokenizer.content_hash
    assert manifest.optimisation.schedule == "wsd"
    with Ledger(path, readonly=True) as led:
        assert led.meta("p")["recipe"]["dedup"]["removed_docs"] == data.stats["dedup"]["removed_docs"]
    val = evals[(evals.task == "val") & (evals.metric == "loss")].sort_values("step")["value"].to_numpy()
    assert val[-1] < val[0] - 0.5, "a real probe learns"
    assert final["val/loss"] == pytest.approx(val[-1])
    lr = steps["lr"].to_numpy()
    assert lr[0] < lr[10] and lr[-1] < lr[20]  # warmup, stable, decay


def test_same_seed_same_losses_other_seed_differs(data, tmp_path):
    path = tmp_path / "d.db"
    probe(data, path, "a", seed=3)
    probe(data, path, "b", seed=3)
    probe(data, path, "c", seed=4)
    with Ledger(path, readonly=True) as led:
        a, b, c = (led.steps(n)["loss"].to_numpy() for n in "abc")
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_faults_are_off_by_default_and_change_the_run(data, tmp_path):
    cfg = ProbeConfig(tokens=10_000)
    assert cfg.faults == Faults()
    assert wsd(1, 100, cfg) < wsd(50, 100, cfg) == cfg.lr > wsd(100, 100, cfg)
    no_warm = ProbeConfig(tokens=10_000, faults=Faults(no_warmup=True, lr_multiplier=30))
    assert wsd(1, 100, no_warm) == 30 * cfg.lr
    path = tmp_path / "f.db"
    probe(data, path, "loop", faults=Faults(loop_examples=20, nan_at_step=5))
    with Ledger(path, readonly=True) as led:
        repeat = led.extras("loop", ["stream/repeat_rate"])["value"].to_numpy()
        loss = led.steps("loop", ["grad_norm"])["grad_norm"].to_numpy()
    assert repeat[-1] == 1.0 and repeat[0] == 0.0
    assert np.isnan(loss[4]) and np.isfinite(loss[5])  # the NaN step was skipped, training went on


def test_train_command(tmp_path, cli):
    recipe = tmp_path / "milton.yaml"
    recipe.write_text(
        "sources:\n  - {name: milton}\n  - {name: shakespeare-folio, weight: 0.5}\n"
        "tokenizer: {name: bpe-256, vocab_size: 300}\n"
    )
    out = cli.json("train", str(recipe), "--tokens", "4096", "--seed", "1")
    assert out["run"] == "milton/s1/t4096" and out["final"]["val/loss"] > 0
    listed = cli.json("runs")
    assert listed[0]["name"] == "milton/s1/t4096" and listed[0]["tokens"] == 4096
    cool = cli.json(
        "train", str(recipe), "--seed", "1", "--resume-from", "milton/s1/t4096", "--cooldown-tokens", "1024"
    )
    assert cool["run"] == "milton/s1/t4096/cooldown1024" and cool["final"]["val/loss"] > 0
    assert {r["name"]: r["tokens"] for r in cli.json("runs")}["milton/s1/t4096/cooldown1024"] == 4096 + 1024
    assert "go together" in cli("train", str(recipe), "--resume-from", "milton/s1/t4096", code=2).stderr
    assert "give --tokens" in cli("train", str(recipe), code=2).stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - {name: milton, weight: -1}\n")
    assert "sources[0].weight: must be >= 0" in cli("train", str(bad), "--tokens", "10", code=2).stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("sources:\n  - {name: wikipedia}\n")
    assert "neither a built-in source" in cli("train", str(unknown), "--tokens", "10", code=2).stderr


def test_curricula_order_the_sources(data, tmp_path):
    """ordered_by_source: one source after another; staged: each stage's weights while it lasts."""
    from yieldgate.probe.parts import Sampler

    cfg = ProbeConfig(tokens=8 * 64 * 20, batch_size=8, context=64)
    ordered = data.recipe.model_copy(deep=True)
    ordered.curriculum = parse_manifest(
        {"data": {**RECIPE, "curriculum": {"kind": "ordered_by_source"}}}
    ).data.curriculum
    sampler = Sampler(dataclasses.replace(data, recipe=ordered), cfg, 20)
    firsts = [sampler.batch()[2] for _ in range(20)]
    assert firsts[0] == {"shakespeare-modern": 512, "shakespeare-folio": 0, "milton": 0}
    assert firsts[-1] == {"shakespeare-modern": 0, "shakespeare-folio": 0, "milton": 512}
    staged = parse_manifest(
        {
            "data": {
                **RECIPE,
                "curriculum": {
                    "kind": "staged",
                    "stages": [
                        {"until_tokens": 5120, "weights": {"milton": 1}},
                        {"until_tokens": 10240, "weights": {"shakespeare-folio": 1}},
                    ],
                },
            }
        }
    ).data
    sampler = Sampler(dataclasses.replace(data, recipe=staged), cfg, 20)
    counts = [sampler.batch()[2] for _ in range(20)]
    assert all(c["milton"] == 512 for c in counts[:10]) and all(c["shakespeare-folio"] == 512 for c in counts[10:])
    # Stages at shares of the run: the same phases at any budget, as `plan` counts them (`supply.drawn_tokens`),
    # and after the last stage the recipe's own weights.
    from yieldgate.data.supply import drawn_tokens

    shares = parse_manifest(
        {
            "data": {
                **RECIPE,
                "curriculum": {
                    "kind": "staged",
                    "stages": [
                        {"until_share": 0.25, "weights": {"milton": 1}},
                        {"until_share": 0.5, "weights": {"shakespeare-folio": 1}},
                    ],
                },
            }
        }
    ).data
    for steps in (20, 80):
        tokens = 8 * 64 * steps
        sampler = Sampler(dataclasses.replace(data, recipe=shares), dataclasses.replace(cfg, tokens=tokens), steps)
        counts = [sampler.batch()[2] for _ in range(steps)]
        quarter = steps // 4
        assert all(c["milton"] == 512 for c in counts[:quarter])
        assert all(c["shakespeare-folio"] == 512 for c in counts[quarter : 2 * quarter])
        drawn = {name: sum(c[name] for c in counts) for name in counts[0]}
        assert drawn["milton"] > tokens // 4 and drawn["shakespeare-modern"] > 0  # the recipe's weights after
        expected = drawn_tokens(shares, tokens)
        assert all(abs(drawn[n] - expected[n]) < 0.12 * tokens for n in drawn), (drawn, expected)
    for stages, message in [
        ([{"weights": {"milton": 1}}], "until_tokens or at until_share"),
        ([{"until_tokens": 5, "until_share": 0.5, "weights": {"milton": 1}}], "give one"),
        ([{"until_tokens": 5, "weights": {"milton": 1}}, {"until_share": 1.0, "weights": {}}], "not a mix"),
        ([{"until_share": 1.5, "weights": {"milton": 1}}], "until_share"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_manifest({"data": {**RECIPE, "curriculum": {"kind": "staged", "stages": stages}}})


def test_a_cooldown_continues_a_probe_from_its_checkpoint_as_a_linked_run(data, tmp_path):
    """The plateau's discriminating experiment on a real probe: a constant-LR probe saves its state; the cooldown
    continues it exactly (same weights: its first evaluation is the probe's last), the LR falls linearly to 0, the
    step and token counts go on, and `diagnose`'s signals of the original carry the cooldown run."""
    from yieldgate.analysis.diagnose import load_signals
    from yieldgate.probe.cooldown import cooldown_probe

    path = tmp_path / "c.db"
    probe(data, path, "flat", decay_frac=0.0)
    final = cooldown_probe(data, source_run="flat", cooldown_tokens=8 * 64 * 16, run="flat/cool", ledger=str(path))
    with Ledger(path, readonly=True) as led:
        meta, cool_meta = led.meta("flat"), led.meta("flat/cool")
        steps, cool = led.steps("flat"), led.steps("flat/cool")
        evals, cool_evals = led.evals("flat"), led.evals("flat/cool")
        sig = load_signals(led, "flat")
    assert 0 < meta["checkpoint"]["bytes"] < 2_000_000 and meta["checkpoint"]["step"] == 48
    assert cool_meta["cooldown_of"] == "flat" and cool_meta["cooldown"]["start_lr"] == steps["lr"].iloc[-1] == 3e-3
    assert cool["step"].tolist() == list(range(49, 65)) and cool["tokens"].iloc[0] == steps["tokens"].iloc[-1] + 512
    lr = cool["lr"].to_numpy()
    assert lr[-1] == 0.0 and np.allclose(np.diff(lr), -3e-3 / 16)
    val = lambda e: e[(e.task == "val") & (e.metric == "loss")].set_index("step")["value"]  # noqa: E731
    assert val(cool_evals)[48] == val(evals)[48]  # the state was restored exactly
    assert final["val/loss"] == val(cool_evals)[64]
    assert list(sig.cooldowns) == ["flat/cool"] and sig.cooldowns["flat/cool"]["step"].iloc[0] == 49
    with pytest.raises(InputError, match="run 'flat/cool' cannot be continued: the run saved no checkpoint"):
        cooldown_probe(data, source_run="flat/cool", cooldown_tokens=512, run="x", ledger=str(path))
