"""A nanoGPT-style training script, written the way a team writes its own: it reads its data mixture from a recipe
file (sources' paths, weights and shuffled share), loads JSON-lines and Parquet files with its own loader, trains a
tiny GPT on bytes and records through `Tracker()` with no arguments: inside a yieldgate campaign the Tracker takes its
run, ledger and manifest from the environment; outside one it records a run of its own.

    python nanogpt_train.py --data recipe.json --max-tokens 20000 --seed 0 --eval heldout.jsonl
"""

import argparse
import json
import math
import os
import signal
import sys

import pyarrow.parquet as pq
import torch
from torch import nn
from torch.nn import functional as F

from yieldgate import Tracker


def load_texts(path):
    if path.endswith(".parquet"):
        return [t for t in pq.read_table(path, columns=["text"]).column("text").to_pylist() if t]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def load_source(source, gen):
    """Each document's bytes; a `shuffled_share` of the documents gets its token order shuffled (a damaged copy)."""
    docs = [torch.tensor(list(t.encode("utf-8")), dtype=torch.long) for t in load_texts(source["path"])]
    shuffled = int(round(source.get("shuffled_share", 0.0) * len(docs)))
    for i in torch.randperm(len(docs), generator=gen)[:shuffled].tolist():
        docs[i] = docs[i][torch.randperm(len(docs[i]), generator=gen)]
    return torch.cat(docs)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, context, vocab=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, vocab))

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x)


def batch(data, weights, size, context, gen):
    picks = torch.multinomial(weights, size, replacement=True, generator=gen)
    rows = []
    for p in picks.tolist():
        start = torch.randint(len(data[p]) - context - 1, (1,), generator=gen).item()
        rows.append(data[p][start : start + context + 1])
    rows = torch.stack(rows)
    return rows[:, :-1], rows[:, 1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args()
    recipe = json.load(open(args.data))
    model_cfg, context = recipe["probe"]["model"], recipe["settings"]["context"]
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    data = [load_source(s, gen) for s in recipe["sources"]]
    weights = torch.tensor([s.get("weight", 1.0) for s in recipe["sources"]])
    held = torch.cat([torch.tensor(list(t.encode("utf-8"))) for t in load_texts(args.eval)])
    model = GPT(model_cfg["layers"], model_cfg["width"], model_cfg["heads"], context)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    steps = max(1, args.max_tokens // (args.batch * context))
    faults = os.environ.get("TRAIN_FAULTS", "")  # a test's faults: run -> exit1 | sigkill
    fault = json.load(open(faults)).get(os.environ.get("YIELDGATE_RUN")) if os.path.exists(faults) else None
    if fault == "exit1":
        sys.exit(f"cannot read {recipe['sources'][0]['path']}: simulated loader failure")
    tr = Tracker(model=model, optimizer=opt)
    for step in range(1, steps + 1):
        lr = args.lr * min(1.0, step / max(1, steps // 10)) * 0.5 * (1 + math.cos(math.pi * step / steps))
        for group in opt.param_groups:  # linear warmup, cosine decay
            group["lr"] = lr
        x, y = batch(data, weights, args.batch, context, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        tr.step(tokens=x.numel(), loss=loss.item(), lr=lr)
        if fault in ("sigkill", "sigterm") and step == steps // 2:  # the process is killed mid-run
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL if fault == "sigkill" else signal.SIGTERM)
        if step % max(1, steps // 4) == 0 or step == steps:
            with torch.no_grad():
                ex = held[: (len(held) - 1) // context * context].view(-1, context)[:16]
                ey = held[1 : ex.numel() + 1].view(-1, context)[:16]
                val = F.cross_entropy(model(ex).flatten(0, 1), ey.flatten()).item()
            tr.eval({"val/loss": val, "val/bpb": val / math.log(2)})
    tr.close()


if __name__ == "__main__":
    main()
