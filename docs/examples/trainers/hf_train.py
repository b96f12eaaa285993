"""A Hugging Face `Trainer` script on a tiny GPT-2 built in code, recording through yieldgate's callback. It reads its
data mixture from a recipe file (sources' paths, weights, shuffled share) and loads JSON-lines and Parquet files with
its own loader (the `datasets`-free way: json and pyarrow). `train(job)` is what a campaign calls
(`trainer: {callable: hf_train:train}`); `python hf_train.py --data recipe.json --max-tokens N --seed S` runs it alone.
Inside a campaign the callback's Tracker takes the probe's run, ledger and manifest from the environment.
"""

import argparse
import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from yieldgate.track.integrations.hf import YieldgateCallback


def load_texts(path):
    if str(path).endswith(".parquet"):
        return [t for t in pq.read_table(path, columns=["text"]).column("text").to_pylist() if t]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def load_source(source, rng):
    docs = [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.int64) for t in load_texts(source["path"])]
    for i in rng.permutation(len(docs))[: int(round(source.get("shuffled_share", 0.0) * len(docs)))]:
        docs[i] = rng.permutation(docs[i])  # the damaged share: each document's token order shuffled
    return np.concatenate(docs)


class Windows(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = torch.as_tensor(np.stack(rows))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def bpb(eval_pred):
    return {"bpb": float(np.mean(eval_pred.predictions)) / math.log(2)}


def token_loss(logits, labels):  # per-sequence mean loss, so evaluation keeps no logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), reduction="none")


def train(job):
    recipe = json.loads(Path(job.recipe_file).read_text())
    context, batch = recipe["settings"]["context"], 8
    rng = np.random.default_rng(job.seed)
    data = [load_source(s, rng) for s in recipe["sources"]]
    weights = np.array([s.get("weight", 1.0) for s in recipe["sources"]])
    steps = max(1, job.tokens // (batch * context))
    picks = rng.choice(len(data), size=steps * batch, p=weights / weights.sum())
    rows = [data[p][(s := rng.integers(len(data[p]) - context)) : s + context] for p in picks]
    held = np.concatenate([np.frombuffer(t.encode(), dtype=np.uint8) for t in load_texts(_eval_file(job))])
    eval_rows = [held[i * context : (i + 1) * context].astype(np.int64) for i in range(16)]
    torch.manual_seed(job.seed)
    m = job.model
    config = GPT2Config(
        vocab_size=256, n_positions=context, n_embd=m["width"], n_layer=m["layers"], n_head=m["heads"],
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    args = TrainingArguments(
        output_dir=str(Path(job.probe_dir) / "hf"),
        max_steps=steps,
        per_device_train_batch_size=batch,
        per_device_eval_batch_size=16,
        learning_rate=1e-2,
        warmup_steps=max(1, steps // 10),
        eval_strategy="steps",
        eval_steps=max(1, steps // 2),
        logging_steps=max(1, steps // 4),
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=job.seed,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=args,
        train_dataset=Windows(rows),
        eval_dataset=Windows(eval_rows),
        compute_metrics=bpb,
        preprocess_logits_for_metrics=token_loss,
        callbacks=[YieldgateCallback()],
    )
    trainer.train()


def _eval_file(job):
    path = Path(os.environ.get("EVAL_FILE", "heldout.jsonl"))
    return path if path.is_absolute() else Path(job.workdir) / path


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    job = argparse.Namespace(
        recipe_file=a.data, tokens=a.max_tokens, seed=a.seed, probe_dir=".", workdir=".",
        model={"layers": 1, "width": 32, "heads": 2},
    )
    train(job)
