"""The lm-eval importer.

`test_harness_written_results` runs the harness itself offline (`lm_eval.simple_evaluate` with its `dummy`
model on a local multiple-choice task) and saves with its own `EvaluationTracker`. The other tests write
files in the harness's published results format (the layout of `results_<date>.json`: `results` with
`"<metric>,<filter>"` keys, `versions`, `n-shot`, `higher_is_better`, `config`), to pin exact values,
several filters and stderrs that a dummy model cannot produce.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from yieldgate.errors import InputError
from yieldgate.ingest import ImportOptions, import_run


def _results(step: int, acc: float, ppl: float, with_step_in_args: bool = False) -> dict:
    revision = f",revision=step{step}" if with_step_in_args else ""
    return {
        "results": {
            "lambada_openai": {
                "alias": "lambada_openai",
                "perplexity,none": ppl,
                "perplexity_stderr,none": 0.5,
                "acc,none": acc,
                "acc_stderr,none": 0.007,
            },
            "gsm8k": {
                "alias": "gsm8k",
                "exact_match,strict-match": acc / 10,
                "exact_match_stderr,strict-match": "N/A",
                "exact_match,flexible-extract": acc / 5,
                "exact_match_stderr,flexible-extract": 0.002,
            },
        },
        "group_subtasks": {"lambada_openai": [], "gsm8k": []},
        "configs": {"lambada_openai": {"task": "lambada_openai", "output_type": "loglikelihood"}},
        "versions": {"lambada_openai": 1.0, "gsm8k": 3.0},
        "n-shot": {"lambada_openai": 0, "gsm8k": 5},
        "higher_is_better": {"lambada_openai": {"perplexity": False, "acc": True}, "gsm8k": {"exact_match": True}},
        "n-samples": {"lambada_openai": {"original": 5153, "effective": 5153}},
        "config": {"model": "hf", "model_args": f"pretrained=EleutherAI/pythia-160m{revision}", "batch_size": 8},
        "git_hash": "a1b2c3d",
        "date": 1714560000.0,
        "lm_eval_version": "0.4.2",
    }


def _write(folder, step, acc, ppl, **kw):
    path = folder / f"step{step}" / "results_2024-05-01T12-00-00.123456.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_results(step, acc, ppl, **kw), indent=2))
    return path


def test_results_per_checkpoint_become_eval_records_and_capability_yield(ledger, cli, tmp_path):
    for step, acc, ppl in ((1000, 0.30, 40.0), (2000, 0.40, 20.0), (3000, 0.45, 15.0)):
        _write(tmp_path, step, acc, ppl)
    (res,) = import_run(
        ledger,
        "lm-eval",
        [str(tmp_path)],
        ImportOptions(run="pythia", step_pattern=r"step(\d+)", tokens_per_step=2_097_152),
    )
    assert res.evals == 3 * 4 and res.steps == 0
    evals = ledger.evals("pythia")
    acc = evals.query("task == 'lambada_openai' and metric == 'acc'")
    assert acc["step"].tolist() == [1000, 2000, 3000] and acc["value"].tolist() == [0.30, 0.40, 0.45]
    assert acc["tokens"].tolist() == [2_097_152_000.0, 4_194_304_000.0, 6_291_456_000.0]
    # a standard error is its metric's (the strict-match one is "N/A": none), never a metric of its own
    assert set(evals["metric"]) == {"acc", "perplexity", "exact_match,strict-match", "exact_match,flexible-extract"}
    stderr = evals.drop_duplicates(["task", "metric"]).set_index(["task", "metric"])["stderr"]
    assert stderr[("lambada_openai", "acc")] == 0.007 and stderr[("lambada_openai", "perplexity")] == 0.5
    assert stderr[("gsm8k", "exact_match,flexible-extract")] == 0.002
    assert math.isnan(stderr[("gsm8k", "exact_match,strict-match")])
    direction = evals.drop_duplicates(["task", "metric"]).set_index(["task", "metric"])["higher_is_better"]
    assert not direction[("lambada_openai", "perplexity")]
    assert direction[("lambada_openai", "acc")] and direction[("gsm8k", "exact_match,strict-match")]
    assert set(evals["portfolio"]) == {"lm-eval"} and set(evals["portfolio_version"]) == {"0.4.2"}
    tranches = cli.json("yield", "pythia", "--metric", "lambada_openai/acc")
    assert [t["yield_per_btok"] for t in tranches] == pytest.approx([0.10 / 2.097152, 0.05 / 2.097152])


def test_step_from_model_args_and_errors(ledger, tmp_path):
    path = _write(tmp_path, 143000, 0.5, 10.0, with_step_in_args=True)
    (res,) = import_run(ledger, "lm-eval", [str(path)], ImportOptions(run="p"))
    assert set(ledger.evals("p")["step"]) == {143000}
    plain = tmp_path / "results.json"
    plain.write_text(json.dumps(_results(1, 0.5, 10.0)))
    with pytest.raises(
        InputError,
        match=r"give step N \(a released model's checkpoint\) or step_pattern, .*: the file has no 'step' field",
    ):
        import_run(ledger, "lm-eval", [str(plain)], ImportOptions(run="q"))
    with pytest.raises(InputError, match="does not match the file's path"):
        import_run(ledger, "lm-eval", [str(plain)], ImportOptions(run="q", step_pattern=r"ckpt-(\d+)"))
    named = tmp_path / "step-1" / "results.json"  # a step in the path, whatever the temp folder is called
    named.parent.mkdir()
    named.write_text(json.dumps(_results(1, 0.5, 10.0))[:-40])
    with pytest.raises(InputError, match=rf"{named}: line 1: not valid JSON"):
        import_run(ledger, "lm-eval", [str(named)], ImportOptions(run="q", step_pattern=r"step-(\d+)"))
    doc = _results(1, 0.5, 10.0)
    doc["results"]["gsm8k"]["exact_match,strict-match"] = "oops"
    named.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"results.gsm8k.exact_match,strict-match: expected a number, got 'oops'"):
        import_run(ledger, "lm-eval", [str(named)], ImportOptions(run="q", step_pattern=r"step-(\d+)"))
    assert set(ledger.runs()["name"]) == {"p"}


@pytest.mark.slow
def test_harness_written_results(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    lm_eval = pytest.importorskip("lm_eval")
    import huggingface_hub.constants

    # The hub library reads HF_HUB_OFFLINE once, at import: a test that imported it earlier left it online, and
    # the dummy model's tokenizer look-up then retried the unreachable hub for minutes.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(
            json.dumps({"q": f"{a}+{a}=", "choices": [str(2 * a), str(2 * a + 1)], "answer": 0}) + "\n"
            for a in range(8)
        )
    )
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "yg_sums.yaml").write_text(
        "task: yg_sums\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{answer}}'\nmetric_list:\n  - metric: acc\n    aggregation: mean\n"
        "    higher_is_better: true\nmetadata:\n  version: 1.0\n"
    )
    manager = TaskManager(include_path=str(tmp_path / "tasks"), include_defaults=False)
    written = {}
    for step, seed in ((500, 1), (1000, 2)):  # two "checkpoints": the dummy model answers at random
        results = lm_eval.simple_evaluate(
            model="dummy",
            tasks=["yg_sums"],
            task_manager=manager,
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed,
        )
        EvaluationTracker(output_path=str(tmp_path / "out" / f"step{step}")).save_results_aggregated(
            results=results, samples=None
        )
        written[step] = results["results"]["yg_sums"]
    (res,) = import_run(ledger, "lm-eval", [str(tmp_path / "out")], ImportOptions(run="h", step_pattern=r"step(\d+)"))
    evals = ledger.evals("h")
    acc = evals.query("metric == 'acc'")
    assert acc["step"].tolist() == [500, 1000] and set(acc["task"]) == {"yg_sums"}
    assert acc["value"].tolist() == [written[500]["acc,none"], written[1000]["acc,none"]]
    assert acc["higher_is_better"].all()
    assert set(evals["metric"]) == {"acc"}  # `name`, `alias`, `sample_len` are not metrics, `acc_stderr` is acc's
    assert acc["stderr"].tolist() == [written[500]["acc_stderr,none"], written[1000]["acc_stderr,none"]]
    assert set(evals["portfolio_version"]) == {lm_eval.__version__}


def _v03(acc: float) -> dict:
    """A v0.3 results file as the harness wrote them before 0.4 (Pythia's published evals): plain metric
    names, `versions` beside `results`, no `higher_is_better`."""
    return {
        "results": {
            "arc_easy": {"acc": acc, "acc_stderr": 0.01, "acc_norm": acc - 0.05, "acc_norm_stderr": 0.01},
            "lambada_openai": {"ppl": 40.0 - 50 * acc, "ppl_stderr": 1.5, "acc": acc + 0.1, "acc_stderr": 0.006},
        },
        "versions": {"arc_easy": 0, "lambada_openai": 0},
        "config": {"model": "gpt2", "model_args": "pretrained=/ckpt", "num_fewshot": 0, "batch_size": 16},
    }


def test_v03_results_named_by_checkpoint_in_a_folder(ledger, tmp_path):
    """v0.3 files with plain names, the step in each file's name (`160M_step1000.json`), and another JSON in
    the folder that is not results: every metric read, its direction from its name, the stray file skipped."""
    for step, acc in ((1000, 0.40), (3000, 0.48)):
        (tmp_path / f"160M_step{step}.json").write_text(json.dumps(_v03(acc)))
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "checkpoint-2000").mkdir()
    (tmp_path / "ckpt" / "checkpoint-2000" / "eval.json").write_text(json.dumps(_v03(0.45)))
    (tmp_path / "config.json").write_text(json.dumps({"n_layer": 12}))
    (res,) = import_run(ledger, "lm-eval", [str(tmp_path)], ImportOptions(run="v03", tokens_per_step=2e6))
    evals = ledger.evals("v03")
    acc = evals[(evals["task"] == "arc_easy") & (evals["metric"] == "acc")]
    assert acc["step"].tolist() == [1000, 2000, 3000]
    assert acc["value"].tolist() == pytest.approx([0.40, 0.45, 0.48])
    assert acc["tokens"].tolist() == [2e9, 4e9, 6e9]
    assert set(evals["metric"]) == {"acc", "acc_norm", "ppl"}
    ppl = evals[evals["metric"] == "ppl"]
    assert not ppl["higher_is_better"].any() and acc["higher_is_better"].all()
    assert ppl["stderr"].tolist() == [1.5] * 3 and acc["stderr"].tolist() == [0.01] * 3
    assert len(evals) == 3 * 4
    assert any("config.json" in w and "skipped" in w for w in res.warnings)


def test_aggregate_file_of_many_checkpoints(ledger, tmp_path):
    """One JSON with a steps list and per-task lists of values (flat, or per metric), as open-model projects
    publish their evaluation curves; and checkpoints as keys of results files."""
    curves = {
        "steps": [1000, 2000, 4000],
        "tokens": [2.1e9, 4.2e9, 8.4e9],
        "arc_easy": [0.41, 0.47, 0.52],
        "piqa": {"acc": [0.6, 0.63, 0.66], "acc_stderr": [0.01, 0.01, 0.01]},
    }
    path = tmp_path / "eval_curves.json"
    path.write_text(json.dumps({"model": curves}))
    import_run(ledger, "lm-eval", [str(path)], ImportOptions(run="agg"))
    evals = ledger.evals("agg")
    arc = evals[evals["task"] == "arc_easy"]
    assert arc["step"].tolist() == [1000, 2000, 4000] and arc["tokens"].tolist() == [2.1e9, 4.2e9, 8.4e9]
    assert arc["value"].tolist() == [0.41, 0.47, 0.52] and arc["metric"].tolist() == ["score"] * 3
    piqa = evals[(evals["task"] == "piqa") & (evals["metric"] == "acc")]
    assert piqa["value"].tolist() == [0.6, 0.63, 0.66]
    keyed = tmp_path / "all.json"
    keyed.write_text(json.dumps({"step500": _v03(0.3), "step1500": _v03(0.35)}))
    import_run(ledger, "lm-eval", [str(keyed)], ImportOptions(run="keyed"))
    assert sorted(set(ledger.evals("keyed")["step"])) == [500, 1500]
    path.write_text(json.dumps({"steps": [1, 2], "arc_easy": [0.4]}))
    with pytest.raises(InputError, match=r"arc_easy has 1 values for 2 checkpoints"):
        import_run(ledger, "lm-eval", [str(path)], ImportOptions(run="bad"))


def test_results_with_no_metric_is_refused(ledger, tmp_path):
    path = tmp_path / "results_step10.json"
    path.write_text(json.dumps({"results": {}, "versions": {}}))
    with pytest.raises(InputError, match="nothing to import: looked for numeric metrics under 'results'"):
        import_run(ledger, "lm-eval", [str(path)], ImportOptions(run="empty"))
    assert "empty" not in set(ledger.runs()["name"])


REAL_MMLU = Path(__file__).parent / "data" / "real" / "lmeval-v04-llama3-8b-mmlu.json"


@pytest.mark.slow
def test_real_mmlu_standard_errors_are_their_metrics_never_metrics_of_their_own(cli, tmp_path):
    """The real Llama-3-8B MMLU results (62 tasks, each `acc,none` beside `acc_stderr,none`) read as two checkpoints
    of one run: `show`, `yield` and `compare` list 62 accuracies, each with its standard error, and no `*_stderr`
    metric; asking for one as a metric is one line that names the metric it belongs to. A table export of the run
    imports back with the standard errors where they were."""
    for run, steps in (("m", ("1", "2")), ("n", ("1", "3"))):
        for i, step in enumerate(steps):  # the second checkpoint after the first: appended
            cli("import", "lm-eval", str(REAL_MMLU), "--run", run, "--step", step, *(["--append"] if i else []))
    shown = cli.json("show", "m")["evals"]
    assert len(shown) == 62 and not [e for e in shown if "stderr" in e["metric"]]
    by_task = {e["task"]: e for e in shown}
    assert by_task["mmlu_abstract_algebra"]["last_stderr"] == 0.04560480215720683  # the file's acc_stderr,none
    assert by_task["mmlu"]["last_value"] == 0.6504059250818972 and by_task["mmlu"]["count"] == 2
    (tranche,) = cli.json("yield", "m", "--metric", "mmlu/acc")
    assert len(tranche["capability"]) == 61 and not [k for k in tranche["capability"] if "stderr" in k]
    assert "stderr" not in cli("compare", "m", "n", "--json").stdout
    for command in (("yield", "m"), ("compare", "m", "n"), ("forecast", "m", "--next-steps", "10")):
        err = cli(*command, "--metric", "mmlu_anatomy/acc_stderr", code=2).stderr
        assert err.count("\n") == 1 and "standard error of mmlu_anatomy/acc" in err
    table = tmp_path / "m.csv"
    cli("export", "m", str(table), "--to", "table")
    cli("import", "table", str(table), "--run", "back")
    back = {e["task"]: e for e in cli.json("show", "back")["evals"]}
    assert len(back) == 62 and back["mmlu_abstract_algebra"]["last_stderr"] == 0.04560480215720683


def test_a_file_whose_only_change_is_a_standard_error_imports_again(cli, tmp_path):
    """Importing the same file twice is one import; a corrected file is a new one, even when all that changed is a
    standard error (the import's digest once left them out, so the correction was skipped as already imported)."""
    path = tmp_path / "gsm8k.json"
    results = json.loads((REAL_MMLU.parent / "lmeval-v04-llama3-8b-gsm8k.json").read_text())
    path.write_text(json.dumps(results))
    cli("import", "lm-eval", str(path), "--run", "g", "--step", "1")
    assert "already imported" in cli("import", "lm-eval", str(path), "--run", "g", "--step", "1").stdout
    results["results"]["gsm8k"]["exact_match_stderr,strict-match"] = 0.02
    path.write_text(json.dumps(results))
    cli("import", "lm-eval", str(path), "--run", "g", "--step", "1", code=2)  # into a run that exists: asked for
    cli("import", "lm-eval", str(path), "--run", "g", "--step", "1", "--replace")
    (shown,) = [e for e in cli.json("show", "g")["evals"] if e["metric"] == "exact_match,strict-match"]
    assert shown["last_stderr"] == 0.02
