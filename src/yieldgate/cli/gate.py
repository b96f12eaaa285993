"""The gate commands: decide a target's next stage, plan a policy's data supply, list the decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from yieldgate.cli.common import JsonOption, _float_option, _ledger, _print_json, _where, app, console
from yieldgate.report.console import decision_record, render_decision, render_decisions, render_plan


@app.command("gate")
def gate_(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="Run, seed group (glob) or campaign recipe ({campaign}/{recipe}/*).")],
    policy: Annotated[Path, typer.Option("--policy", help="Policy file (YAML or JSON): stages and requirements.")],
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 on hold and 4 on reject (for CI).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Decide whether TARGET has earned its next stage of compute under a policy: approve, hold (with what to
    run next) or reject. The decision is stored with the policy, its hash and the evidence; a hold or a reject
    still exits 0 unless --strict.

    Example: yieldgate gate 'milton/s*/t150000' --policy examples/policy.yaml --strict
    """
    from yieldgate import api

    decision = api.gate(target, policy, ledger=_where(ctx))
    if as_json:
        _print_json(decision.to_dict())
    else:
        assert decision.id is not None  # kept: api.gate records by default
        render_decision(decision, console, decision.id)
    if strict and decision.decision != "approve":
        raise typer.Exit(3 if decision.decision == "hold" else 4)


@app.command()
def plan(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            help="Run, seed group (glob) or campaign recipe; or a recipe or manifest file (YAML/JSON) not trained yet."
        ),
    ],
    policy: Annotated[Path, typer.Option("--policy", help="Policy file (YAML or JSON): its stages, and max_epochs.")],
    flops: Annotated[
        float | None,
        _float_option("--flops", help="FLOP budget C: the compute-optimal N and D (C = 6ND) from the L(N, D) law."),
    ] = None,
    scaling: Annotated[
        str | None,
        typer.Option(
            "--scaling",
            help="Campaign recipe (CAMPAIGN/RECIPE) of 3 or more model sizes to fit L(N, D) from (default: the "
            "target's own campaign, when it has 3 or more sizes).",
        ),
    ] = None,
    params: Annotated[
        int | None,
        typer.Option(
            "--params", min=1, help="Planned model's non-embedding parameters N (default: the target's manifest's)."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The data supply of every stage of a policy: for each source, the tokens the stage draws from it, how many
    times that passes its unique tokens (epochs), what the repetition is worth as new tokens (Muennighoff et al.
    2023), and which sources to grow before a stage passes the policy's max_epochs. With an L(N, D) law (Hoffmann
    et al. 2022, fitted over a campaign's probes of 3 or more sizes): each stage's predicted loss for the planned
    model, whether the stage leaves it undertrained, and for --flops the compute-optimal N and D. Nothing is stored.

    Example: yieldgate plan 'camp/two' --policy examples/policy.yaml

    Example: yieldgate plan recipe.yaml --policy examples/policy.yaml --json

    Example: yieldgate plan 'sizes/clean/*/*/m3x64' --policy policy.yaml --flops 1e13 --params 2000000
    """
    from yieldgate import api

    with _ledger(ctx) as ledger:
        result = api.plan(target, policy, ledger=ledger, flops=flops, scaling=scaling, params=params)
    if as_json:
        _print_json(result.to_dict())
    else:
        render_plan(result.to_dict(), console)


@app.command()
def decisions(
    ctx: typer.Context,
    target: Annotated[str | None, typer.Argument(help="Only the decisions on this target (as it was gated).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The audit trail of gate decisions, oldest first: when, target, stage, decision, policy and rationale;
    --json adds the policy and the evidence of each.

    Example: yieldgate decisions 'milton/s*/t150000' --json
    """
    from yieldgate import api

    rows = [decision_record(r) for r in api.decisions(target, ledger=_where(ctx))]
    if as_json:
        _print_json(rows)
    else:
        render_decisions(rows, console, target)
