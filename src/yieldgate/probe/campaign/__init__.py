"""Probe campaigns: recipes x seeds x token budgets (x model sizes), each a small real training into the ledger.

A campaign file (YAML or JSON) names its recipes (inline, or a path relative to the campaign file), seeds,
budgets and the probe's settings; `plan` expands it into `ProbeSpec`s, `run_campaign` trains the ones the
ledger does not already hold, in worker processes (`executor="local"`) or as Ray tasks (`executor="ray"`).

**Keys.** A probe is known by its key: the hash of its recipe (with the data settings that shape the resolved
tokens), seed, budget, model size, probe settings and eval sources. Its run, `CAMPAIGN/RECIPE/s<seed>/t<tokens>`
(`/m<layers>x<width>` added when the campaign has several model sizes), carries the key in its meta (`probe`). A
re-run skips every probe whose run is finished with the same key; a failed, killed or half-written probe is trained
again from scratch. A probe that raises is recorded as `failed` with its error (meta `error`) and the campaign goes
on.

**Scheduling.** Largest budgets first (the longest jobs start first, so workers finish together); each worker
uses cores / workers torch threads.
"""

from yieldgate.probe.campaign.executors import CampaignRun, Progress, cores, pending, quiet_mfu_warnings, run_campaign
from yieldgate.probe.campaign.run import run_probe
from yieldgate.probe.campaign.spec import (
    Campaign,
    DataSettings,
    ModelSize,
    ProbeSettings,
    ProbeSpec,
    load_campaign,
    plan,
    with_eval_sources,
)

__all__ = [
    "Campaign",
    "CampaignRun",
    "DataSettings",
    "ModelSize",
    "ProbeSettings",
    "ProbeSpec",
    "Progress",
    "cores",
    "load_campaign",
    "pending",
    "plan",
    "quiet_mfu_warnings",
    "run_campaign",
    "run_probe",
    "with_eval_sources",
]
