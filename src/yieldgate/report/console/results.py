"""A campaign of imported results on the console: per metric, each smaller scale's decisions against the largest,
the extrapolation across sizes, and (`yieldgate campaign NAME --propose`) the mixture regression and its proposal."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from yieldgate.report.console.decisions import decision_figures
from yieldgate.report.format import fmt

__all__ = ["results_lines", "proposal_lines", "render_results", "render_proposals"]

SHOWN = 0.005
"""A proposed mixture's sources below this weight are summed into one `others` entry."""


def _scale(params: int, tokens: int, run: str | None = None) -> str:
    return f"N = {params:,}, D = {tokens:,}" + (f" (run {run})" if run else "")


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


NOISE = {
    "seeds": "the seeds' spread",
    "replicates": "the replicated recipes' spread, pooled",
    "stderr": "the reported standard errors",
    "given": "the noise given at import",
}


def _decision_line(metric: str, e: dict[str, Any]) -> str:
    where = _scale(e["params"], e["tokens"], e.get("run"))
    if e.get("against") is None:
        return f"{metric} at {where}: no decision ({e.get('reason', 'no larger scale')})"
    ref = e["against"]
    against = _scale(ref["params"], ref["tokens"], ref.get("run")) + (
        "" if ref["largest"] else " (the largest sharing them)"
    )
    line = (
        f"{metric} at {where}: {_pct(e['accuracy'])} of {e['pairs']:,} recipe pairs ordered as at {against} "
        f"({decision_figures(e)}"
    )
    line += f", beyond {NOISE[e['noise']]})" if e.get("noise") else "; give a noise to decide beyond it)"
    if e.get("accuracy_resolved") is not None:
        line += f"; {_pct(e['accuracy_resolved'])} of the {e['resolved_pairs']:,} the larger separates beyond noise"
    return line + f"; compute {e['compute_share']:.2%} of one run there ({e['seeds']} seed(s))"


def _extrapolation_line(metric: str, x: dict[str, Any]) -> str:
    if not x["available"]:
        return f"{metric} extrapolation across sizes: none ({x['reason']}); plain ranking is the default"
    verdict = "beats" if x["beats"] else "does not beat"
    law = f"with exponent {x['exponent']:g}" if x.get("exponent") is not None else f"over {len(x['sizes']) - 1} sizes"
    run = f" (runs {x['run']})" if x.get("run") else ""
    return (
        f"{metric} extrapolation to N = {x['sizes'][-1]:,}{run}: a per-recipe law {law} orders "
        f"{_pct(x['law_accuracy'])} of {x['pairs']:,} pairs right, plain ranking at N = {x['sizes'][-2]:,} "
        f"{_pct(x['plain_accuracy'])}: the law {verdict} it (right where ranking is wrong on {x['law_only']:,} pairs, "
        f"wrong where it is right on {x['plain_only']:,}; compute {x['law_compute_share']:.2%} vs "
        f"{x['plain_compute_share']:.2%} of one run at the target); the default is "
        + ("the law" if x.get("default", "law" if x["beats"] else "plain") == "law" else "plain ranking")
    )


def results_lines(summary: dict[str, Any]) -> list[str]:
    """A results campaign's summary (`analysis.results.summarise_results`), as lines."""
    lines = [f"{summary['campaign']}: {summary['runs']:,} imported runs of {summary['recipes']:,} recipes"]
    for metric, m in summary["metrics"].items():
        big = m["largest"]
        way = "higher" if m["higher_is_better"] else "lower"
        best = ", ".join(f"{e['recipe']} {fmt(e['mean'])}" for e in m["ranking"][:3])
        noise = f"; noise given: {fmt(m['noise_given'])} a run" if m.get("noise_given") is not None else ""
        lines.append(
            f"{metric} ({way} is better): largest scale {_scale(big['params'], big['tokens'], big.get('run'))}, "
            f"{big['recipes']:,} recipes; best there: {best}{noise}"
        )
        lines += [_decision_line(metric, e) for e in m["scales"]]
        lines.append(_extrapolation_line(metric, m["extrapolation"]))
    return lines + [f"note: {n}" for n in summary.get("notes", [])]


def _mixture(mixture: dict[str, float]) -> str:
    shown = sorted(((w, s) for s, w in mixture.items() if w >= SHOWN), reverse=True)
    rest = sum(w for w in mixture.values() if w < SHOWN)
    return ", ".join([f"{s} {w:.3f}" for w, s in shown] + ([f"others {rest:.3f}"] if rest > 0 else []))


def proposal_lines(report: dict[str, Any]) -> list[str]:
    """`analysis.results.mixture_regressions`' report, as lines."""
    lines = []
    for metric, r in report["metrics"].items():
        if not r["available"]:
            lines.append(f"{metric} mixture regression: none ({r['reason']})")
            continue
        fit = r["fit"]
        lines.append(
            f"{metric} mixture regression over {r['runs']:,} runs at N = {r['params']:,}: {fit['model']} ridge "
            f"(penalty {fit['alpha']:g}), cross-validated RMSE {fmt(fit['cv_rmse'])}"
            + ("" if r["lightgbm"] else " (LightGBM not installed: ridge only)")
        )
        for e in r["evaluated"]:
            if not e["available"]:
                lines.append(f"  -> N = {e['params']:,}: none ({e['reason']})")
                continue
            plain = e.get("plain")
            against = (
                f"plain ranking at N = {e['from_params']:,}: {_pct(plain['accuracy'])} (ρ {plain['rho']:.3f})"
                if plain
                else "no plain ranking (these mixtures were not run small)"
            )
            lines.append(
                f"  -> N = {e['params']:,}: {e['mixtures']} mixtures unseen by the fit (fit on {e['fit_on']:,}): "
                f"Spearman ρ {e['rho']:.3f}, decision accuracy {_pct(e['accuracy'])} of {e['pairs']:,} pairs; "
                f"{against}; its pick {e['pick']} ranks {e['pick_rank']} of {e['mixtures']}"
            )
        p = r["proposal"]
        lines.append(
            f"  proposed mixture: {_mixture(p['mixture'])}; predicted {fmt(p['predicted'])} "
            f"[{fmt(p['interval'][0])}, {fmt(p['interval'][1])}] ({p['level']:.0%}) at N = {p['params']:,} "
            f"(mean of the best {p['averaged']} of {p['candidates']:,} candidates; ranks mixtures, not the large "
            "model's value)"
        )
    return lines


def render_results(summary: dict[str, Any], console: Console) -> None:
    for line in results_lines(summary):
        console.print(line, markup=False, highlight=False)


def render_proposals(report: dict[str, Any], console: Console) -> None:
    for line in proposal_lines(report):
        console.print(line, markup=False, highlight=False)
