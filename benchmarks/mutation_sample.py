"""The mutation score of the code that decides (issue #44 item 11), estimated on a uniform sample of its mutants.

mutmut (`[tool.mutmut]` in pyproject.toml: gate/, the diagnosis detectors and the plateau test, each mutant against
the fast tier's tests that reach it) makes about 7,200 mutants there; testing every one takes about 16 hours on two
cores (`make mutation`). This draws `--n` of them at random (a fixed `--seed`), has mutmut test those alone, and
prints the share killed with its 95% Wilson interval, the survivors by module, and the names of the survivors (for
`mutmut show NAME`). A mutant no test reaches counts as a survivor.

    .venv/bin/python benchmarks/mutation_sample.py --n 400 --seed 0      # make mutation-sample

mutmut writes its copy of the project to mutants/ (ignored by git) in the repository it is run from.
"""

from __future__ import annotations

import argparse
import math
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = [sys.executable, "-m", "mutmut"]
NOTHING = "no_such_module.x_none__mutmut_0"  # a name no mutant has: mutmut makes the mutants, then stops on it


def statuses() -> dict[str, str]:
    """{mutant: status} as mutmut last recorded them (`not checked` for those never tested)."""
    out = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True, check=True)
    pairs = (line.strip().rsplit(": ", 1) for line in out.stdout.splitlines() if ": " in line)
    return {name: status for name, status in pairs}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a share k/n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400, help="mutants to test (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--children", type=int, default=2, help="mutmut's parallel test processes (default 2)")
    args = parser.parse_args()
    print("making the mutants and the map of which tests reach them (mutmut run; a few minutes)", flush=True)
    subprocess.run([*MUTMUT, "run", "--max-children", str(args.children), NOTHING], cwd=ROOT, capture_output=True)
    names = sorted(statuses())
    if not names:
        print("mutmut made no mutants: is the mutation group installed (make mutation)?", file=sys.stderr)
        return 2
    sample = sorted(random.Random(args.seed).sample(names, min(args.n, len(names))))
    print(f"testing {len(sample)} of {len(names)} mutants (seed {args.seed})", flush=True)
    subprocess.run([*MUTMUT, "run", "--max-children", str(args.children), *sample], cwd=ROOT, check=False)
    seen = statuses()
    status = {name: seen.get(name, "not checked") for name in sample}
    counts = Counter(status.values())
    killed = counts["killed"] + counts["timeout"]  # a mutant that hangs the tests is caught by them
    low, high = wilson(killed, len(sample))
    print(f"\nkilled {killed} of {len(sample)} sampled mutants: {killed / len(sample):.1%} (95% {low:.1%}-{high:.1%})")
    print("by status: " + ", ".join(f"{s} {c}" for s, c in counts.most_common()))
    survivors = sorted(name for name, s in status.items() if s not in ("killed", "timeout"))
    by_module = Counter(name.rsplit(".", 1)[0] for name in survivors)
    print("survivors by module: " + ", ".join(f"{m} {c}" for m, c in by_module.most_common()))
    print("\n".join(f"  {name} ({status[name]})" for name in survivors))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
