"""RegMix's published results (Liu et al., 2024; ../shared/tables/regmix/, SOURCES.md) as one results table in
yieldgate's long-form format (docs/importing.md), for `yieldgate import results`.

    python benchmarks/regmix_table.py [FOLDER] [--out regmix.csv] [--metrics pile_cc,github]

Recipes: `train-<index>` (the 512 mixtures run at 1M parameters only), `test-<index>` (the 256 run at 1M and at
60M) and `big-<index>` (the 64 run at 1B). Tokens, from the paper (section 4): 1B for the 1M and 60M models, 25B
for the 1B models. The 1M models' figure agrees with the repository's proxy settings (sail-sg/regmix at 1678465,
`model_training/config_proxy_training.py`: 1,000 steps of 512 sequences; `lit_gpt/config.py`: `tinyllama_1M`'s
block of 2,048 tokens; 1.05B tokens in all); the 60M models' settings are not in the repository, so theirs rests on
the paper alone. Metrics: `val/<domain>/loss`, one per Pile domain's validation loss. Weights: `w:<domain>` from
the `train_the_pile_<domain>` columns, divided by their sum: the published weights are rounded to three decimals,
so a row sums to 1 only within 0.004 (the format asks 1 within 1e-6). One seed per run (seed 0).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the repository; a worktree elsewhere falls back to /work/shared, as the tests do.
FOLDER = next(
    (p for p in (ROOT.parent / "shared" / "tables" / "regmix", Path("/work/shared/tables/regmix")) if p.is_dir()),
    ROOT.parent / "shared" / "tables" / "regmix",
)
WEIGHT, LOSS = "train_the_pile_", ("metric/the_pile_", "_val_loss")
# (recipe prefix, mixture file, loss file, params, tokens)
PARTS = [
    ("train", "train_mixture_1m.csv", "train_pile_loss_1m.csv", 1_000_000, 1_000_000_000),
    ("test", "test_mixture_1m.csv", "test_pile_loss_1m.csv", 1_000_000, 1_000_000_000),
    ("test", "test_mixture_60m.csv", "test_pile_loss_60m.csv", 60_000_000, 1_000_000_000),
    ("big", "test_mixture_1B.csv", "test_pile_loss_1B.csv", 1_000_000_000, 25_000_000_000),
]


def _read(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="") as fh:
        return {row["index"]: row for row in csv.DictReader(fh)}


def rows(folder: Path = FOLDER, metrics: set[str] | None = None) -> list[dict[str, object]]:
    """The table's rows (dicts of the format's columns); `metrics`: the domains to keep (all when None)."""
    out: list[dict[str, object]] = []
    for prefix, mixture_file, loss_file, params, tokens in PARTS:
        mixtures, losses = _read(folder / mixture_file), _read(folder / loss_file)
        for index, loss in losses.items():
            raw = {k.removeprefix(WEIGHT): float(v) for k, v in mixtures[index].items() if k.startswith(WEIGHT)}
            total = sum(raw.values())
            weights = {f"w:{k}": v / total for k, v in raw.items()}
            for column, value in loss.items():
                if not column.startswith(LOSS[0]):
                    continue
                domain = column.removeprefix(LOSS[0]).removesuffix(LOSS[1])
                if metrics is None or domain in metrics:
                    out.append(
                        {
                            "recipe": f"{prefix}-{index}",
                            "params": params,
                            "tokens": tokens,
                            "seed": 0,
                            "metric": f"val/{domain}/loss",
                            "value": value,
                            **weights,
                        }
                    )
    return out


def write(path: Path, table: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=FOLDER)
    parser.add_argument("--out", type=Path, default=Path("regmix.csv"))
    parser.add_argument("--metrics", help="comma-separated Pile domains (default: all 13)")
    args = parser.parse_args()
    table = rows(args.folder, set(args.metrics.split(",")) if args.metrics else None)
    write(args.out, table)
    print(f"{len(table):,} rows -> {args.out}")


if __name__ == "__main__":
    main()
