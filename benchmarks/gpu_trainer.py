"""A team's own training script, the command trainer of the GPU check's campaign (`gpu_check.py`, part 5).

Written the way a team writes one: it reads the probe's recipe file (sources' paths, weights, shuffled share), loads
its JSON-lines sources with its own loader, trains a small GPT on bytes on the device it is given (bf16 autocast on a
GPU) and records through `Tracker()` with no arguments: inside a campaign the Tracker takes its run, ledger and
manifest from the environment. It notes what it saw of the devices (`devices_seen`), for the check to read.

    python gpu_trainer.py --data recipe.json --tokens 65536 --seed 0 --eval heldout.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os

import torch

from yieldgate import Tracker
from yieldgate.probe.model import GPT, GPTConfig


def load(path: str, shuffled_share: float, gen: torch.Generator) -> torch.Tensor:
    """Each document's bytes; a `shuffled_share` of them with their order shuffled (a damaged copy)."""
    with open(path, encoding="utf-8") as f:
        docs = [torch.tensor(list(json.loads(line)["text"].encode()), dtype=torch.long) for line in f if line.strip()]
    for i in torch.randperm(len(docs), generator=gen)[: round(shuffled_share * len(docs))].tolist():
        docs[i] = docs[i][torch.randperm(len(docs[i]), generator=gen)]
    return torch.cat(docs)


def seen(device: torch.device) -> dict[str, object]:
    """The devices this process was given, as the campaign set them."""
    out: dict[str, object] = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": str(device)}
    if device.type == "cuda":
        out["count"] = torch.cuda.device_count()
        out["uuid"] = str(torch.cuda.get_device_properties(device).uuid)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    recipe = json.load(open(args.data))
    shape, context = recipe["probe"]["model"], recipe["settings"]["context"]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    sources = [load(s["path"], s.get("shuffled_share", 0.0), gen).to(device) for s in recipe["sources"]]
    weights = torch.tensor([s.get("weight", 1.0) for s in recipe["sources"]])
    held = load(args.eval, 0.0, gen).to(device)
    model = GPT(GPTConfig(vocab_size=256, context=context, **shape)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, fused=device.type == "cuda")
    dgen = torch.Generator(device=device).manual_seed(args.seed)
    offsets = torch.arange(context + 1, device=device)

    def batch(data: torch.Tensor, n: int) -> torch.Tensor:
        starts = torch.randint(0, len(data) - context - 1, (n, 1), generator=dgen, device=device)
        return data[starts + offsets]

    steps = max(1, args.tokens // (args.batch * context))
    evals = {round(k * steps / 4) for k in range(5)}
    held_batch = batch(held, 32)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    with Tracker(model=model, optimizer=opt) as tr:
        tr.note("devices_seen", seen(device))
        for step in range(steps + 1):
            if step in evals:
                with torch.no_grad(), autocast:
                    _, val = model(held_batch[:, :-1], held_batch[:, 1:])
                tr.eval({"val/loss": val.float(), "val/bpb": val.float() / math.log(2)})
            if step == steps:
                break
            source = sources[int(torch.multinomial(weights, 1, generator=gen))]  # by the recipe's weights, on the CPU
            rows = batch(source, args.batch)
            opt.zero_grad(set_to_none=True)
            with autocast:
                _, loss = model(rows[:, :-1], rows[:, 1:])
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            tr.step(tokens=rows[:, :-1].numel(), samples=args.batch, loss=loss.detach(), grad_norm=norm)


if __name__ == "__main__":
    main()
