"""The hf-trainer importer, on a trainer_state.json written by a real (tiny, CPU) Trainer run."""

from __future__ import annotations

import json

import pytest
import torch

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run

# A real Trainer run (6 s, most of it importing transformers): the fast tier reads the public trainer_state.json
# files in tests/data/real instead (tests/test_real_sources.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def state_file(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("hf")
    transformers.set_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16)
    )
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (64, 16), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp / "out"),
        max_steps=6,
        per_device_train_batch_size=4,
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=3,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
        include_num_input_tokens_seen=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:8])
    trainer.train()
    path = tmp / "trainer_state.json"
    trainer.state.save_to_json(str(path))  # the Trainer's own writer, as in every checkpoint folder
    return path


def test_trainer_state_log_history_becomes_steps_evals_and_summary(ledger, cli, state_file):
    history = json.loads(state_file.read_text())["log_history"]
    (res,) = import_run(ledger, "hf-trainer", [str(state_file)], ImportOptions(run="hf"))
    assert res.mapping["loss"] == "loss" and res.mapping["learning_rate"] == "lr"
    assert res.mapping["eval_loss"] == "val/loss (eval)" and res.mapping["num_input_tokens_seen"] == "tokens"
    assert res.mapping["summary/train_loss"] == "imported/summary/train_loss"
    logged = [h for h in history if "loss" in h]
    steps = ledger.steps("hf").set_index("step")
    assert steps.index.tolist() == [2, 3, 4, 6]
    assert steps.loc[[h["step"] for h in logged], "loss"].tolist() == [h["loss"] for h in logged]
    assert steps.loc[[h["step"] for h in logged], "grad_norm"].tolist() == [h["grad_norm"] for h in logged]
    val = ledger.evals("hf")
    assert val["step"].tolist() == [3, 6]
    assert val["value"].tolist() == [h["eval_loss"] for h in history if "eval_loss" in h]
    (summary,) = [h for h in history if "train_loss" in h]
    mean = ledger.extras("hf", ["imported/summary/train_loss"])
    assert mean["step"].tolist() == [6] and mean["value"].tolist() == [summary["train_loss"]]
    assert res.warnings == []
    assert len(cli.json("yield", "hf")) == 1


def test_checkpoint_folder_and_damaged_files(ledger, state_file, tmp_path):
    import_run(ledger, "hf-trainer", [str(state_file.parent)], ImportOptions(run="dir"))
    assert len(ledger.steps("dir")) == 4
    text = state_file.read_text()
    bad = tmp_path / "trainer_state.json"
    bad.write_text(text[: len(text) // 2])  # a checkpoint copied half-way
    with pytest.raises(InputError, match=rf"{bad}: line \d+: not valid JSON"):
        import_run(ledger, "hf-trainer", [str(bad)], ImportOptions(run="bad"))
    bad.write_text(json.dumps({"global_step": 3}))
    with pytest.raises(InputError, match="no 'log_history' list"):
        import_run(ledger, "hf-trainer", [str(bad)], ImportOptions(run="bad"))
    bad.write_text(json.dumps({"log_history": [{"loss": 1.0}]}))
    with pytest.raises(InputError, match=r"log_history has no entry with a step \(1 entries\)"):
        import_run(ledger, "hf-trainer", [str(bad)], ImportOptions(run="bad"))
    nan = json.loads(text)
    nan["log_history"][0]["loss"] = float("nan")  # json writes NaN, as the Trainer does for a diverged loss
    bad.write_text(json.dumps(nan))
    (res,) = import_run(ledger, "hf-trainer", [str(bad)], ImportOptions(run="nan"))
    assert res.warnings == [f"{bad}:log_history[0]: loss is nan/inf on 1 row(s); kept as recorded"]
    assert "bad" not in set(ledger.runs()["name"])


def test_stepless_entries_go_to_the_summary_and_eval_metrics_are_evals(ledger, cli, state_file, tmp_path):
    """A script that appends `trainer.predict()` results (no step) and a speech model's WER: the file reads
    entry by entry, and eval_wer / eval_accuracy are evaluations, not extras."""
    state = json.loads(state_file.read_text())
    history = state["log_history"]
    evals = [h for h in history if "eval_loss" in h]
    for k, h in enumerate(evals):
        h["eval_wer"], h["eval_accuracy"] = 0.5 - 0.1 * k, 0.6 + 0.1 * k
    history.append({"test_loss": 3.25, "test_wer": 0.31, "test_runtime": 1.5})
    history.append("not an entry")
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state))
    (res,) = import_run(ledger, "hf-trainer", [str(path)], ImportOptions(run="asr"))
    assert res.warnings == [
        f"{path}: 2 log_history entries without a step (first: log_history[{len(history) - 2}]) "
        "kept in the run's summary, not as rows"
    ]
    assert res.mapping["eval_wer"] == "val/wer (eval)" and res.mapping["eval_accuracy"] == "val/acc (eval)"
    assert res.mapping["eval_runtime"].startswith("imported/")
    got = ledger.evals("asr")
    wer = got[got["metric"] == "wer"]
    assert wer["step"].tolist() == [h["step"] for h in evals]
    assert wer["value"].tolist() == pytest.approx([0.5, 0.4])
    assert not wer["higher_is_better"].any() and got[got["metric"] == "acc"]["higher_is_better"].all()
    assert ledger.meta("asr")["summary"] == {"test_loss": 3.25, "test_wer": 0.31, "test_runtime": 1.5}
    assert len(ledger.steps("asr")) == 4
