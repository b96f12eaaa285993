"""Campaigns whose trainer is the team's: a separate nanoGPT-style script run as a command (`Tracker()` with no
arguments), a Hugging Face `Trainer` script called in the worker (`callable:`, the yieldgate callback), both reading
their recipe file and loading a JSON-lines and a Parquet corpus with their own loaders; on local workers, on a Ray
cluster of three nodes, and as Slurm jobs. Three recipes, one a known-damaged control (`shuffled_share: 1.0`), two
seeds, two budgets; probes that die (SIGKILL, exit 1, SIGTERM) are recorded with their output's tail, and a re-run
trains only them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from yieldgate.analysis.campaign import summarise
from yieldgate.cli import app
from yieldgate.gate.gate import gate
from yieldgate.gate.policy import parse_policy
from yieldgate.ledger import Ledger
from yieldgate.probe.campaign import load_campaign, run_campaign

pytestmark = pytest.mark.slow  # real trainings in separate scripts: `make test-all`

TRAINERS = Path(__file__).parents[2] / "docs" / "examples" / "trainers"
BUDGETS = [8192, 16384]
HF_BUDGETS = [16384, 32768]
RECIPES: dict[str, dict[str, Any]] = {
    "shakespeare": {"sources": [{"name": "shakespeare", "path": "shakespeare.jsonl"}]},
    "mix": {
        "sources": [
            {"name": "shakespeare", "path": "shakespeare.jsonl", "weight": 0.7},
            {"name": "milton", "path": "milton.parquet", "weight": 0.3},
        ]
    },
    "control": {"sources": [{"name": "shakespeare", "path": "shakespeare.jsonl", "shuffled_share": 1.0}]},
}
"""The control is known damaged: every document's token order shuffled (what the scripts do with the share)."""
POLICY = {
    "name": "own-trainer",
    "version": 1,
    "primary": "learning",
    "stages": [
        {"name": "scout", "tokens": 8192, "compute_share": 0.02},
        {"name": "probe", "tokens": 16384, "compute_share": 0.06},
        {"name": "pilot", "tokens": 65536, "compute_share": 0.12},
        {"name": "full", "tokens": 1000000, "compute_share": 0.8},
    ],
    "requirements": {"min_yield_per_btok": 1000, "min_seeds": 2, "min_tokens_per_param": 0.1, "level": 0.8},
}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_team_data(tmp_path_factory.mktemp("team-data"))


def write_team_data(folder: Path) -> Path:
    """The team's data, written from the built-in texts: Shakespeare as JSON-lines, Milton as Parquet, held-out
    Shakespeare as JSON-lines (the common yardstick every script evaluates on), and a tokenizer file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from yieldgate.data.corpus import documents, load_corpus, split_by_work

    train, held = split_by_work(load_corpus(stdlib_bytes=0))

    def docs(works, source, n):
        return [t for _, t in documents([w for w in works if w.source == source])][:n]

    for name, texts in (
        ("shakespeare.jsonl", docs(train, "shakespeare-modern", 200)),
        ("heldout.jsonl", docs(held, "shakespeare-modern", 20)),
    ):
        (folder / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    pq.write_table(pa.table({"text": docs(train, "milton", 200)}), folder / "milton.parquet")
    (folder / "bytes-tokenizer.json").write_text(json.dumps({"type": "bytes", "vocab_size": 256}))
    return folder


def campaign_file(folder: Path, name: str, trainer: dict, recipes: dict | None = None, **over) -> Path:
    recipes = {k: {**v, "tokenizer": {"name": "bytes-tokenizer.json"}} for k, v in (recipes or RECIPES).items()}
    spec = {
        "name": name,
        "recipes": recipes,
        "seeds": 2,
        "budgets": BUDGETS,
        "models": [{"layers": 1, "width": 32, "heads": 2}],
        "probe": {"context": 32},
        "trainer": trainer,
        **over,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def nanogpt(faults: Path | None = None) -> dict:
    env = {"TRAIN_FAULTS": str(faults)} if faults else {}
    script = TRAINERS / "nanogpt_train.py"
    return {
        "command": f"{sys.executable} {script} --data {{recipe_file}} --max-tokens {{tokens}} --seed {{seed}} "
        "--eval heldout.jsonl",
        "env": env,
        "timeout": 300,
    }


def order(summary: dict, budget: int) -> list[str]:
    return [e["recipe"] for e in summary["rankings"][str(budget)]["bpb"]["order"]]


def check_manifests(led: Ledger, folder: Path, name: str) -> None:
    """Every probe's manifest holds its recipe (the sources' paths), the tokenizer's content hash, the model entry
    and the seed; its run meta says where it ran."""
    digest = hashlib.sha256((folder / "bytes-tokenizer.json").read_bytes()).hexdigest()
    runs = [r for r in led.runs()["name"] if r.startswith(f"{name}/")]
    assert len(runs) == 12
    for run in runs:
        m = led.manifest(run)
        meta = led.meta(run)
        assert m is not None and m.data is not None and m.model is not None
        recipe = run.split("/")[1]
        assert [s.path for s in m.data.sources] == [s["path"] for s in RECIPES[recipe]["sources"]]
        assert m.data.tokenizer is not None and m.data.tokenizer.content_hash == digest
        assert (m.model.layers, m.model.width, m.model.heads) == (1, 32, 2)
        assert m.config["seed"] == meta["probe"]["seed"] == int(run.split("/")[2][1:])
        assert meta["host"]["host"]


@pytest.fixture(scope="module")
def local(data) -> dict:
    """The nanoGPT campaign on two local workers: first with three probes that die (SIGKILL mid-run, exit 1, SIGTERM
    mid-run), then re-run once the faults are gone."""
    faults = data / "faults.json"
    faults.write_text(
        json.dumps({"nano/mix/s1/t16384": "sigkill", "nano/control/s0/t8192": "exit1", "nano/mix/s0/t8192": "sigterm"})
    )
    path = campaign_file(data, "nano", nanogpt(faults))
    ledger = str(data / "nano.db")
    first = run_campaign(load_campaign(path), ledger, workers=2)
    shown = CliRunner().invoke(app, ["--ledger", ledger, "campaign", "nano"])
    faults.unlink()
    second = run_campaign(load_campaign(path), ledger, workers=2)
    with Ledger(ledger) as led:
        summary = summarise(led, "nano").to_dict()
    return {"first": first, "second": second, "summary": summary, "ledger": ledger, "shown": shown}


def test_a_nanogpt_script_with_a_bare_tracker_is_a_probe(local, data):
    summary = local["summary"]
    for budget in BUDGETS:  # the damaged control ranks last at both budgets
        assert order(summary, budget)[-1] == "control", summary["rankings"][str(budget)]
    # The recipes train on different sources, but the team's trainer scores them: no built-in "eval_sources" note.
    assert not [n for n in summary["notes"] if "eval_sources" in n], summary["notes"]
    with Ledger(local["ledger"]) as led:
        check_manifests(led, data, "nano")
        policy = parse_policy(POLICY, origin="test")
        decisions = {r: gate(led, f"nano/{r}/*", policy).decision for r in RECIPES}
    # The known answer: the damaged control is rejected (even its optimistic forecast yield is below the threshold);
    # the clean recipes are not, and two seeds leave their intervals too wide to approve: hold.
    assert decisions == {"shakespeare": "hold", "mix": "hold", "control": "reject"}, decisions


def test_failed_probes_keep_their_output_and_only_they_train_again(local):
    first, second = local["first"], local["second"]
    shown = local["shown"]  # `yieldgate campaign nano` between the two: each failure with its output's tail
    assert shown.exit_code == 0, shown.output
    assert "9 of 12 probes done, 0 running, 2 failed, 1 stopped by SIGTERM, 0 left" in shown.output
    assert "simulated loader failure" in shown.output and "step 32: loss" in shown.output
    assert set(first.failed) == {"nano/mix/s1/t16384", "nano/control/s0/t8192", "nano/mix/s0/t8192"}
    assert "killed by signal 9" in first.failed["nano/mix/s1/t16384"]
    assert "exited with status 1" in first.failed["nano/control/s0/t8192"]
    assert "SIGTERM" in first.failed["nano/mix/s0/t8192"]
    assert len(first.finished) == 9
    assert sorted(second.finished) == sorted(first.failed) and len(second.skipped) == 9 and not second.failed
    with Ledger(local["ledger"]) as led:
        attempts = {r: led.meta(r)["attempts"] for r in led.runs()["name"]}
        statuses = set(led.runs()["status"])
    assert statuses == {"finished"}
    assert {r: n for r, n in attempts.items() if n != 1} == {r: 2 for r in first.failed}  # none trained twice


def hf_trainer() -> dict:
    return {"callable": "hf_train:train", "env": {"EVAL_FILE": "heldout.jsonl"}, "timeout": 300}


def test_a_hugging_face_trainer_script_is_a_probe(data, monkeypatch):
    """The HF `Trainer` script, called in the workers (`callable:`): its callback's Tracker writes the probe."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TRAINERS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(TRAINERS))
    # The HF GPT-2 learns past unigram statistics more slowly than the nanoGPT loop: at these budgets a mixture
    # with 30% Milton scores worse on held-out Shakespeare than the shuffled control (which keeps Shakespeare's
    # unigrams), so here the mixture is 10% Milton and the budgets are twice the nanoGPT campaign's.
    plays, poems = RECIPES["mix"]["sources"]
    mix = {"sources": [{**plays, "weight": 0.9}, {**poems, "weight": 0.1}]}
    path = campaign_file(data, "hf", hf_trainer(), recipes={**RECIPES, "mix": mix}, budgets=HF_BUDGETS)
    ledger = str(data / "hf.db")
    done = run_campaign(load_campaign(path), ledger, workers=2)
    assert not done.failed and len(done.finished) == 12
    with Ledger(ledger) as led:
        summary = summarise(led, "hf").to_dict()
        check_manifests(led, data, "hf")
    for budget in HF_BUDGETS:
        assert order(summary, budget)[-1] == "control", summary["rankings"][str(budget)]


def test_the_campaign_on_a_ray_cluster_of_three_nodes(local, data):
    """The nanoGPT campaign as Ray tasks on a head and two worker nodes (one CPU each): the same ranking as on local
    workers, with the probes spread over the nodes (each probe's node in its run meta)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 2**20, "include_dashboard": False},
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
        cluster.wait_for_nodes()
        path = campaign_file(data, "nano-ray", nanogpt())
        ledger = str(data / "ray.db")
        heard: dict[str, list[tuple[int, int]]] = {}  # each probe's progress, reported from its node
        done = run_campaign(
            load_campaign(path),
            ledger,
            executor="ray",
            workers=3,
            address=cluster.address,
            progress=lambda run, step, steps: heard.setdefault(run, []).append((step, steps)),
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert not done.failed and len(done.finished) == 12
    assert sorted(heard) == sorted(done.finished), heard  # every probe's steps reached the terminal
    with Ledger(ledger) as led:
        summary = summarise(led, "nano-ray").to_dict()
        nodes = {led.meta(r)["host"]["node"] for r in led.runs()["name"]}
    assert len(nodes) > 1, nodes
    for budget in BUDGETS:
        assert order(summary, budget) == order(local["summary"], budget)


TABLE_TRAINER = {
    # A trainer that writes no Tracker records, only a CSV log the campaign imports (`yieldgate import table`).
    "command": 'echo "$CUDA_VISIBLE_DEVICES" > {probe_dir}/gpus.txt; '
    "printf 'step,tokens,loss,val_bpb\\n1,100,3.0,\\n2,200,2.5,2.{seed}\\n' > {probe_dir}/log.csv",
    "import": {"path": "{probe_dir}/log.csv", "kind": "table"},
}


def table_campaign(folder: Path, name: str, **trainer) -> Path:
    return campaign_file(
        folder,
        name,
        {**TABLE_TRAINER, **trainer},
        budgets=[200],
        recipes={"a": RECIPES["mix"], "b": RECIPES["control"]},
    )


def test_an_imported_log_on_local_gpus(data, monkeypatch):
    """A script with no Tracker: its log is imported (and the campaign says so); each local probe gets its own GPU
    group through CUDA_VISIBLE_DEVICES."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    ledger = str(data / "table.db")
    done = run_campaign(load_campaign(table_campaign(data, "table", gpus=2)), ledger, workers=2)
    assert sorted(done.imported) == sorted(done.finished) and len(done.finished) == 4
    with Ledger(ledger) as led:
        devices = {r: led.meta(r)["host"]["devices"] for r in led.runs()["name"]}
        assert set(devices.values()) <= {"0,1", "2,3"}
        for run, group in devices.items():  # the script saw the group it was given
            assert led.meta(run)["imported_from"].startswith("table: ")
            assert (data / "yieldgate-probes" / run / "gpus.txt").read_text().strip() == group
            assert len(led.evals(run)) == 1


@pytest.mark.skipif(not os.environ.get("YIELDGATE_TEST_SLURM_CONF"), reason="no Slurm cluster: make slurm-start")
def test_probes_as_slurm_jobs(data, monkeypatch):
    """Executor slurm on the one-node cluster of `.ci/slurm`: each probe a task of one job array, through submitit."""
    monkeypatch.setenv("SLURM_CONF", os.environ["YIELDGATE_TEST_SLURM_CONF"])
    assert shutil.which("sbatch")
    ledger = str(data / "slurm.db")
    done = run_campaign(load_campaign(table_campaign(data, "slurm")), ledger, executor="slurm", workers=2)
    assert not done.failed and len(done.finished) == 4
    with Ledger(ledger) as led:
        jobs = {led.meta(r)["host"].get("slurm_job_id") for r in led.runs()["name"]}
        assert None not in jobs and len(jobs) == 4
        assert all(led.runs()["status"] == "finished")


def test_a_real_sigkill_of_the_worker_is_not_left_running(data):
    """A probe whose worker and script are SIGKILLed together leaves its run `running` in the ledger; the campaign
    reports it failed (its writer is dead), and the next run takes it over and trains it."""
    ledger = str(data / "kill.db")
    path = table_campaign(data, "kill", command="sleep 20")
    proc = subprocess.Popen(
        [sys.executable, "-m", "yieldgate", "--ledger", ledger, "probe", str(path), "--workers", "1"],
        cwd=data,
        start_new_session=True,
    )
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if Path(ledger).exists():
            with Ledger(ledger, readonly=True) as led:
                if "running" in set(led.runs()["status"]):
                    break
        time.sleep(0.5)
    os.killpg(proc.pid, 9)
    proc.wait()
    for _ in range(20):  # the workers die with it (their parent gone, they are reaped a moment later)
        out = CliRunner().invoke(app, ["--ledger", ledger, "campaign", "kill"])
        if "1 failed" in out.output:
            break
        time.sleep(0.5)
    assert "0 running, 1 failed" in out.output and "its process is gone" in out.output, out.output


DOCS = Path(__file__).parents[2] / "docs"


def docs_folder(data: Path, folder: Path) -> dict[str, str]:
    """docs/own-trainer.md's files written into `folder`, with the data the page names: the team's Shakespeare as
    `data/plays.jsonl`, its Milton as `data/poems.jsonl`, the held-out Shakespeare as `heldout.jsonl`. Returns the
    page's files by name."""
    import pyarrow.parquet as pq

    from tests.test_docs import quickstart

    files, _ = quickstart((DOCS / "own-trainer.md").read_text())
    for name, body in files.items():
        (folder / name).write_text(body)
    (folder / "data").mkdir()
    shutil.copy(data / "shakespeare.jsonl", folder / "data" / "plays.jsonl")
    shutil.copy(data / "heldout.jsonl", folder / "heldout.jsonl")
    poems = pq.read_table(data / "milton.parquet").column("text").to_pylist()
    (folder / "data" / "poems.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in poems))
    return files


def shell(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """`command` run by bash in `folder` as a user would, yieldgate's interpreter first on PATH, no ledger set."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    env.pop("YIELDGATE_LEDGER", None)
    return subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True)


def text_bytes(path: Path) -> int:
    """The UTF-8 bytes of a JSON-lines file's texts: a byte-level script's unique tokens of it (no filter, no dedup)."""
    return sum(len(json.loads(line)["text"].encode()) for line in path.read_text().splitlines() if line.strip())


def test_the_docs_page_examples_run_as_written(data, tmp_path):
    """docs/own-trainer.md: its files (the command trainer, the callable trainer, their campaigns) and its commands,
    run as written in a folder holding the data the page names; the sources' `unique_tokens:` it shows are the bytes
    of that data's texts (train.py trains on bytes), as the page's command counts them."""
    from tests.test_docs import quickstart

    files = docs_folder(data, tmp_path)
    assert {"train.py", "campaign.yaml", "my_trainer.py", "campaign-callable.yaml"} <= set(files)
    _, commands = quickstart((DOCS / "own-trainer.md").read_text())
    for command in commands:
        done = shell(command, tmp_path)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    with Ledger(str(tmp_path / "yieldgate.db")) as led:
        assert set(led.runs()["status"]) == {"finished"} and len(led.runs()) == 5
        assert order(summarise(led, "own").to_dict(), 8192)[-1] == "control"
    declared = {
        s["name"]: s["unique_tokens"]
        for r in yaml.safe_load(files["campaign.yaml"])["recipes"].values()
        for s in r["sources"]
    }
    assert declared == {n: text_bytes(tmp_path / "data" / f"{n}.jsonl") for n in ("plays", "poems")}


def test_a_campaign_of_one_recipe_as_the_docs_write_it_is_gated_with_nothing_unknown(data, tmp_path):
    """Issue #44 items 7 and 8: docs/own-trainer.md's script and its `clean` recipe, at three seeds and three budgets
    (what the gate needs), summarise (one recipe ended in a traceback once), and `gate` under examples/policy.yaml
    finds nothing unknown: each manifest's model is the script's bigram table (256 x 256 parameters, measured by its
    Tracker; no shape declared, so none recorded: it was the reference GPT's 2 x 64), and the sources' unique
    tokens are the `unique_tokens:` the page shows. The decision holds on a real finding: 50,000 tokens are 0.76 a
    parameter of that table, where the policy asks 10."""
    from yieldgate.gate.policy import load_policy

    files = docs_folder(data, tmp_path)
    spec = yaml.safe_load(files["campaign.yaml"])
    one = {**spec, "name": "own-one", "recipes": {"clean": spec["recipes"]["clean"]}, "seeds": 3}
    (tmp_path / "one.yaml").write_text(yaml.safe_dump({**one, "budgets": [8192, 16384, 32768]}))
    done = shell("yieldgate probe one.yaml --workers 2", tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout[-2000:], done.stderr[-3000:])
    assert "own-one: 32,768 tokens per probe" in done.stdout and "forecast clean: 32,768 -> 65,536" in done.stdout
    with Ledger(str(tmp_path / "yieldgate.db")) as led:
        runs = list(led.runs()["name"])
        manifests = [led.manifest(r) for r in runs]
        decision = gate(led, "own-one/clean/*", load_policy(DOCS.parent / "examples" / "policy.yaml"))
    assert len(runs) == 9
    for m in manifests:
        assert m is not None and m.model is not None and m.data is not None
        assert m.model.params == 256 * 256 and m.model.layers is None and m.model.context is None
        assert m.data.sources[0].unique_tokens == text_bytes(tmp_path / "data" / "plays.jsonl")
    checks = {c.name: c for c in decision.checks}
    assert not [c for c in decision.checks if "unknown" in c.detail], decision.checks
    assert checks["data supply"].passed and checks["seeds"].passed and checks["lower bound above threshold"].passed
    assert checks["tokens per parameter"].detail == "scout: 0.763 tokens per parameter, the policy needs 10"
    assert decision.decision == "hold"


def test_an_own_trainer_probe_whose_training_loss_went_nan_fails_and_is_not_ranked(data, tmp_path):
    """Issue #44 item 8: the docs' script, where seed 1's loss turns NaN halfway (an overflow its optimizer step then
    skips, as a GradScaler does: the weights, and so the evaluations, stay finite) ends failed, with why, and the
    campaign ranks seed 0 alone (it ended finished and was ranked)."""
    files = docs_folder(data, tmp_path)
    anchor = "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"
    assert anchor in files["train.py"]
    overflow = (
        "    if args.seed == 1 and step > steps // 2:\n"
        "        loss = loss * float('nan')  # an overflow\n"
        "    opt.zero_grad()\n    loss.backward()\n"
        "    if torch.isfinite(loss):  # a step whose loss overflowed is skipped\n        opt.step()\n"
    )
    (tmp_path / "train.py").write_text(files["train.py"].replace(anchor, overflow))
    spec = yaml.safe_load(files["campaign.yaml"])
    nan = {**spec, "name": "nan", "recipes": {"clean": spec["recipes"]["clean"]}, "seeds": 2}
    (tmp_path / "nan.yaml").write_text(yaml.safe_dump(nan))
    done = shell("yieldgate probe nan.yaml --workers 2", tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "1 of 2 probe(s) failed; the first, nan/clean/s1/t8192: NaN loss: the training diverged" in done.stderr
    with Ledger(str(tmp_path / "yieldgate.db")) as led:
        status = dict(zip(led.runs()["name"], led.runs()["status"], strict=True))
        error = led.meta("nan/clean/s1/t8192")["error"]
        evals = led.evals("nan/clean/s1/t8192")
        summary = summarise(led, "nan").to_dict()
    assert status == {"nan/clean/s0/t8192": "finished", "nan/clean/s1/t8192": "failed"}
    assert error.startswith("NaN loss: the training diverged (the training loss is nan at step 5, and non-finite at")
    assert evals["value"].notna().all()  # the evaluations were finite: only the training loss says it
    (entry,) = summary["rankings"]["8192"]["bpb"]["order"]
    assert entry["recipe"] == "clean" and entry["seeds"] == 1
