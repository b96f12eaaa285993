"""`yieldgate serve`: how fast a run page of 1,000,000 steps and the runs page of 1,000 runs load, and how much
memory the server holds while they are read again and again.

Targets (issue #21): a run page with 1M steps loads in < 2 s; the runs page with 1,000 runs in < 1 s; server
memory bounded. Timed against a real `yieldgate serve` process (uvicorn, a new one for each cold load, so no
cache helps, once it answers: its start-up is not the page's): the page and the JSON it draws from, one after
the other; with Chromium installed, also in
headless Chromium from `goto` until the plots near the window are drawn (the runs table filled), on a first visit
(nothing cached) and on later ones (plotly.js cached, as a user's browser keeps it). Memory: the server's resident
set (VmRSS, and its peak VmHWM) after the first load and after 30 and 60 more loads of the big runs' plots
(3 runs x 2 metrics x 3 smoothings in turn: more than the figure cache keeps, so each is drawn anew).

    .venv/bin/python benchmarks/bench_serve.py [--steps 1000000] [--runs 1000] [--no-browser] [--json]

Under load (issue #32 item 5), `--clients 50 --runs 10000`: one server over a ledger of 10,000 runs, one of them
1,000,000 steps (`--ledger PATH` keeps it for the next time: built there when missing), and 50 clients at once,
each asking 6 times in turn for the big run's plots (2 metrics x 3 smoothings: 6 different computations), a
small run's plots, a page of the runs list and a live poll of the big run that asks for its curve; a 503 is asked
again after its Retry-After, its wait counted in the request's time. Measured: the server's peak resident memory
(VmHWM) and what it keeps after (VmRSS), p50 and p99 of the requests' times, the 503s; and, before the clients
come, `/api/runs` (its first page of 500, and its last) on the same server. Targets: peak resident memory <= 600 MB,
`/api/runs` <= 0.5 s, p50 <= 0.5 s (issue #46: no list is served whole).

    .venv/bin/python benchmarks/bench_serve.py --clients 50 --runs 10000 --ledger /tmp/serve_bench/l.db
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from yieldgate.ledger import EvalRecord, Ledger
from yieldgate.manifest import parse_manifest
from yieldgate.serve.views import PLOTLY_JS

BATCH = 50_000  # steps per append_steps call
EVALS = 200  # evaluations of the big run (val/loss and val/web/loss each)
BIG_RUNS = 3  # distinct big runs the memory check reads in turn, each for two metrics


def _big_run(led: Ledger, name: str, n: int, seed: int) -> None:
    """A run as a Tracker writes one: every core column at every step, a warmup-stable-decay LR, the gradient
    noise scale every 10 steps, and EVALS evaluations of two held-out losses."""
    rng = np.random.default_rng(seed)
    led.create_run(
        name,
        manifest=parse_manifest(
            {"hardware": {"device_kind": "H100-SXM", "device_count": 8, "price_per_device_hour": 2.5}, "seed": seed}
        ),
    )
    step = np.arange(1, n + 1)
    tokens = step * 4096.0
    loss = 2.0 + 8.0 * (tokens / 1e6) ** -0.3 + rng.normal(0, 0.01, n)
    lr = np.minimum(step / 2000, 1.0) * np.where(step > 0.9 * n, (n - step) / (0.1 * n), 1.0) * 3e-4
    for start in range(0, n, BATCH):
        sl = slice(start, start + BATCH)
        m = len(step[sl])
        led.append_steps(
            name,
            {
                "step": step[sl],
                "tokens": tokens[sl],
                "samples": step[sl] * 16.0,
                "wall_s": step[sl] * 0.25,
                "step_s": np.full(m, 0.25),
                "data_wait_s": np.full(m, 0.01),
                "loss": loss[sl],
                "lr": lr[sl],
                "grad_norm": rng.random(m),
                "tokens_per_s": 16384 + rng.normal(0, 100, m),
            },
        )
        at = step[sl][::10]
        led.append_steps(name, {"step": at, "signals/gns": 1000 + rng.normal(0, 50, len(at))})
    every = np.linspace(n / EVALS, n, EVALS).astype(int)
    led.append_evals(
        name,
        [
            EvalRecord(step=int(s), tokens=float(s * 4096), task=task, metric="loss", value=float(loss[s - 1] + shift))
            for s in every
            for task, shift in (("val", 0.05), ("val/web", 0.1))
        ],
    )


def build(path: Path, steps: int, runs: int, big_runs: int) -> None:
    with Ledger(path) as led:
        for k in range(big_runs):
            _big_run(led, f"huge{k}", steps, k)
        step = np.arange(1, 101)
        for k in range(runs - big_runs):
            name = f"sweep/lr{k:04d}"
            led.create_run(name)
            led.append_steps(
                name,
                {
                    "step": step,
                    "tokens": step * 1024.0,
                    "wall_s": step * 0.1,
                    "loss": 5.0 - np.log(step) / 3,
                    "tokens_per_s": np.full(100, 10240.0),
                },
            )
            led.append_evals(name, [EvalRecord(step=100, tokens=102400.0, task="val", metric="loss", value=3.5)])
            if k % 3 == 0:
                led.set_status(name, "finished")


class Serve:
    """A `yieldgate serve` process on a free port, stopped on exit."""

    def __init__(self, db: Path, port: int = 0) -> None:
        command = [sys.executable, "-m", "yieldgate", "--ledger", str(db), "serve", "--port", str(port)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("yieldgate serve: http://"):
            raise SystemExit(f"the server did not start: {line}{self.proc.stderr.read() if self.proc.stderr else ''}")
        self.url = line.split()[2].rstrip("/")
        self.get("/static/app.js")  # up: started and warmed (imports, plotly's first figure), as a user finds it

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=120) as response:
            return response.read()

    def memory_mb(self) -> dict[str, float]:
        """The server's resident set now and at its peak (Linux /proc), in MB."""
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) / 1024
        return fields

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _timed(serve: Serve, paths: list[str]) -> tuple[float, int]:
    start, size = time.perf_counter(), 0
    for p in paths:
        size += len(serve.get(p))
    return time.perf_counter() - start, size


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until_drawn(page: Any, url: str) -> float:
    """Seconds from `goto` until the page's first draw: the run's plots near the window drawn (the others draw
    as the reader scrolls to them), or the runs table filled."""
    start = time.perf_counter()
    page.goto(url)
    drawn = (
        "Number(document.body.dataset.draws || 0) >= 1"
        if "/run?" in url
        else "document.querySelectorAll('#runs tbody tr').length > 0"
    )
    while not page.evaluate(drawn):
        time.sleep(0.01)
    return time.perf_counter() - start


def _browser_times(db: Path, chromium: str, repeats: int) -> dict[str, Any]:
    """Seconds from `goto` until drawn in headless Chromium, each time against a fresh server (cold), median of
    `repeats`: on a first visit (a new browser context: nothing cached), and on later visits (one browser
    profile on disk and one address, as a user's browser meets `yieldgate serve`: plotly.js and the code Chromium
    compiled from it are kept, as plotly.js's versioned, immutable address allows; two visits before the timed
    ones fill that cache). Beside them, how long plotly.js alone takes to start in a blank page, uncached."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {"run": [], "runs": [], "run_cached": [], "plotly": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(repeats):
            with Serve(db) as serve:
                page = browser.new_page()
                times["run"].append(_until_drawn(page, f"{serve.url}/run?name=huge0"))
                times["runs"].append(_until_drawn(page, f"{serve.url}/"))
                page.close()
                page = browser.new_page()
                page.set_content("<!DOCTYPE html><html><body></body></html>")
                start = time.perf_counter()
                page.add_script_tag(url=serve.url + PLOTLY_JS)
                times["plotly"].append(time.perf_counter() - start)
                page.close()
        browser.close()
        port = _free_port()
        with tempfile.TemporaryDirectory() as profile:
            context = pw.chromium.launch_persistent_context(profile, executable_path=chromium, args=["--no-sandbox"])
            for k in range(2 + repeats):
                with Serve(db, port) as serve:
                    page = context.new_page()
                    seconds = _until_drawn(page, f"{serve.url}/run?name=huge0")
                    if k >= 2:
                        times["run_cached"].append(seconds)
                    page.close()
            context.close()
    return {
        "browser_run_page_s": float(np.median(times["run"])),
        "browser_runs_page_s": float(np.median(times["runs"])),
        "browser_run_page_cached_s": float(np.median(times["run_cached"])),
        "browser_plotly_start_s": float(np.median(times["plotly"])),
        "browser_run_page_each_s": times["run"],
        "browser_run_page_cached_each_s": times["run_cached"],
    }


PEAK_TARGET_MB = 600
RUNS_TARGET_S = 0.5
P50_TARGET_S = 0.5
"""Issue #46 item 9: p50 of the requests under 50 clients."""
ASKS = 6  # requests of each client under load
PAGE = "/api/runs?order=newest&offset=0&limit=500"


def _ask(serve: Serve, path: str) -> tuple[float, int]:
    """Seconds until `path` is answered 200, asking again after each 503's Retry-After; and the 503s met."""
    start, busy = time.perf_counter(), 0
    while True:
        try:
            serve.get(path)
            return time.perf_counter() - start, busy
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise
            busy += 1
            time.sleep(float(exc.headers.get("retry-after", "1")))


def _client_paths(client: int, runs: int) -> list[str]:
    """What client `client` asks for, in turn: the big run's plots (its own metric and smoothing of six), a small
    run's plots, a page of the runs list, a live poll of the big run that asks for its curve."""
    looks = [(m, s) for m in ("val/loss", "val/web/loss") for s in (0.0, 0.6, 0.9)]
    out = []
    for k in range(ASKS):
        metric, smooth = looks[(client + k) % len(looks)]
        small = f"sweep/lr{(client * ASKS + k) % max(1, runs - 1):04d}"
        out.append(
            [
                f"/api/run/figures?name=huge0&metric={metric}&smooth={smooth}",
                f"/api/run/figures?name={small}",
                PAGE,
                "/api/run/live?name=huge0&after=999000&evals=0&curve_after=",
            ][(client + k) % 4]
        )
    return out


def _kind(path: str) -> str:
    """What a request under load asks for: the runs list's page, the big run's plots, a small run's, a live poll."""
    if path.startswith("/api/runs"):
        return "runs page"
    if path.startswith("/api/run/live"):
        return "live poll"
    return "big run plots" if "name=huge" in path else "small run plots"


def under_load(db: Path, clients: int, runs: int, repeats: int) -> dict[str, Any]:
    """`clients` at once against one server (module docstring); `/api/runs` timed first, median of `repeats`."""
    figures: dict[str, Any] = {"clients": clients}
    with Serve(db) as serve:
        figures["memory_start_mb"] = serve.memory_mb()
        last = f"/api/runs?order=oldest&offset={max(0, runs - 500)}&limit=500"  # no list is served whole (#46)
        for name, path in (("runs_page_api_s", PAGE), ("runs_last_page_api_s", last)):
            figures[name] = float(np.median([_timed(serve, [path])[0] for _ in range(repeats)]))
        times: list[float] = []
        kinds: dict[str, list[float]] = {}
        busy: list[int] = []
        errors: list[str] = []
        lock = threading.Lock()

        def client(i: int) -> None:
            for path in _client_paths(i, runs):
                try:
                    seconds, refused = _ask(serve, path)
                except Exception as exc:  # a failure is reported, not hidden: the run is said to have failed
                    with lock:
                        errors.append(f"{path}: {exc}")
                    continue
                with lock:
                    times.append(seconds)
                    kinds.setdefault(_kind(path), []).append(seconds)
                    busy.append(refused)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        figures["load_s"] = time.perf_counter() - start
        figures["memory_after_mb"] = serve.memory_mb()
    figures.update(
        requests=len(times),
        p50_s=float(np.percentile(times, 50)) if times else None,
        p99_s=float(np.percentile(times, 99)) if times else None,
        answered_503=int(sum(busy)),
        p50_by_kind_s={k: float(np.percentile(v, 50)) for k, v in sorted(kinds.items())},
        errors=errors,
    )
    return figures


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def _print_load(f: dict[str, Any], runs: int, steps: int) -> None:
    peak = f["memory_after_mb"]["VmHWM"]
    print(
        f"/api/runs over {runs:,} runs: a page of 500 in {f['runs_page_api_s']:.2f} s "
        f"(target <= {RUNS_TARGET_S} s: {_met(f['runs_page_api_s'] <= RUNS_TARGET_S)}); the last page in "
        f"{f['runs_last_page_api_s']:.2f} s"
    )
    print(
        f"{f['clients']} clients at once, {ASKS} requests each ({f['requests']} answered in {f['load_s']:.0f} s; "
        f"one run of {steps:,} steps): p50 {f['p50_s']:.2f} s (target <= {P50_TARGET_S} s: "
        f"{_met(f['p50_s'] <= P50_TARGET_S)}), p99 {f['p99_s']:.2f} s; {f['answered_503']} answers "
        f"503 (asked again after Retry-After); {len(f['errors'])} errors"
    )
    print("p50 by request: " + ", ".join(f"{k} {v:.2f} s" for k, v in f["p50_by_kind_s"].items()))
    print(
        f"server memory: peak {peak:.0f} MB resident (target <= {PEAK_TARGET_MB} MB: "
        f"{_met(peak <= PEAK_TARGET_MB)}); {f['memory_after_mb']['VmRSS']:.0f} MB kept after; "
        f"{f['memory_start_mb']['VmRSS']:.0f} MB at the start"
    )
    for e in f["errors"][:5]:
        print(f"  error: {e}")


def load_main(args: argparse.Namespace) -> None:
    """`--clients`: the measure under load, on the ledger `--ledger` names (built there when missing) or a new one."""
    with tempfile.TemporaryDirectory() as tmp:
        db = args.ledger or Path(tmp) / "bench.db"
        if not db.exists():
            db.parent.mkdir(parents=True, exist_ok=True)
            build(db, args.steps, args.runs, 1)
        result = under_load(db, args.clients, args.runs, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        _print_load(result, args.runs, args.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="HTTP timings only")
    parser.add_argument("--clients", type=int, default=0, help="measure under this many clients at once instead")
    parser.add_argument("--ledger", type=Path, help="with --clients: the ledger to use, built there when missing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.clients:
        load_main(args)
        return
    figures: dict[str, Any] = {"steps": args.steps, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        start = time.perf_counter()
        build(db, args.steps, args.runs, BIG_RUNS)
        figures["build_s"] = time.perf_counter() - start
        run_page = ["/run?name=huge0", "/api/run/figures?name=huge0"]
        runs_page = ["/", "/api/runs"]
        cold_run, cold_runs = [], []
        for _ in range(args.repeats):
            with Serve(db) as serve:
                seconds, size = _timed(serve, run_page)
                cold_run.append(seconds)
                figures["run_page_bytes"] = size
                seconds, size = _timed(serve, runs_page)
                cold_runs.append(seconds)
                figures["runs_page_bytes"] = size
        figures["run_page_s"] = float(np.median(cold_run))
        figures["runs_page_s"] = float(np.median(cold_runs))
        with Serve(db) as serve:
            _timed(serve, run_page)
            figures["memory_after_first_mb"] = serve.memory_mb()
            figures["run_page_warm_s"] = _timed(serve, run_page)[0]
            for k in range(60):  # 3 runs x 2 metrics x 3 smoothings in turn: the 8 the figure cache keeps never hit
                metric = ("val/loss", "val/web/loss")[k // BIG_RUNS % 2]
                smooth = (0.0, 0.6, 0.9)[k // (2 * BIG_RUNS) % 3]
                _timed(serve, [f"/api/run/figures?name=huge{k % BIG_RUNS}&metric={metric}&smooth={smooth}"])
                if k + 1 in (30, 60):
                    figures[f"memory_after_{k + 1}_mb"] = serve.memory_mb()
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium and not args.no_browser:
            figures.update(_browser_times(db, chromium, args.repeats))
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"run page, {args.steps:,} steps (page + its JSON, {figures['run_page_bytes'] / 1e3:.0f} kB): "
        f"{figures['run_page_s']:.2f} s cold, median of {args.repeats} (target < 2 s); "
        f"{figures['run_page_warm_s']:.2f} s reloaded"
    )
    print(
        f"runs page, {args.runs:,} runs (page + its JSON, {figures['runs_page_bytes'] / 1e3:.0f} kB): "
        f"{figures['runs_page_s']:.2f} s cold (target < 1 s)"
    )
    if "browser_run_page_s" in figures:
        each = ", ".join(f"{t:.2f}" for t in figures["browser_run_page_each_s"])
        cached = ", ".join(f"{t:.2f}" for t in figures["browser_run_page_cached_each_s"])
        print(f"in headless Chromium, goto until drawn (median of {args.repeats}, each from a fresh server):")
        print(
            f"  run page, later visits (plotly.js and its compiled code cached): "
            f"{figures['browser_run_page_cached_s']:.2f} s (each: {cached} s; target < 2 s)"
        )
        print(
            f"  run page, first visit (nothing cached): {figures['browser_run_page_s']:.2f} s (each: {each} s), "
            f"of which plotly.js alone takes {figures['browser_plotly_start_s']:.2f} s to start in a blank page"
        )
        print(f"  runs page: {figures['browser_runs_page_s']:.2f} s (target < 1 s)")
    first, mid, last = (figures[f"memory_after_{k}_mb"] for k in ("first", 30, 60))
    print(
        f"server memory: {first['VmRSS']:.0f} MB resident after the first run page (peak {first['VmHWM']:.0f} MB); "
        f"{mid['VmRSS']:.0f} MB after 30 more plots of the {BIG_RUNS} big runs, each drawn anew (peak "
        f"{mid['VmHWM']:.0f} MB), "
        f"{last['VmRSS']:.0f} MB after 60 (peak {last['VmHWM']:.0f} MB)"
    )
    print(f"(ledger built in {figures['build_s']:.0f} s)")


if __name__ == "__main__":
    main()
