"""The survey's claims, tested (lab_models/experiments/claims.py): each claim's record, its arms' runs queued on the
job manager, the scoring of their finished runs as one more job, and each claim's verdict with its interval.

    claims() -> pandas.DataFrame                        one row per claim: id, statement, paper, paper_figure, metric,
                                                        arms, ...
    claim_results(home=None, preset="tiny", seeds=3)    -> pandas.DataFrame, one row per claim: id, effect, low, high
                                                        (95%), verdict (holds, reversed, not resolved, or not run),
                                                        seeds, budget_flops, ...
    claim_records() -> the records, in order            claim("7") / claim("electra-per-flop") -> one record
    start_claims(jobs, ["7"], preset="tiny", seeds=3)   -> the scoring job's id (the arm runs queued before it)
    claim_result(jobs, "7", setup) -> ClaimResult        claims_results(jobs, setup) -> every claim's, in order
    claim_curves(jobs, "7", setup) -> pandas.DataFrame   the arms' validation bits per byte against training FLOPs

`start_claims` queues every arm run that is not finished (the zoo's own runs count: an arm without arguments is the
zoo's run of its family), then the scoring job (`python -m lab_models claims --score-only ...`, a job folder in
<home>/claims/), which the queue starts once the runs ahead of it are done: it fine-tunes and scores the finished runs
and writes the tables. The same claims from the CLI (`python -m lab_models claims`) train and score in one command.
"""
from __future__ import annotations

import sys

import pandas as pd

from lab_models.experiments import claims as _claims
from lab_models.home import lab_home as _lab_home
from lab_models.messages import LabError
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.store import RunStore

__all__ = ["Claim", "ClaimArm", "ClaimResult", "ClaimsSetup", "ClaimVerdict", "CLAIM_METRICS", "CLAIM_VERDICTS",
           "CLAIM_VERDICT_TEXT", "claims", "claim_records", "claim_results", "claim", "compare_arms", "start_claims", "stop_claims", "claim_result", "claims_results",
           "claim_progress", "claim_curves", "claims_table", "claims_markdown", "claims_score_jobs"]

Claim = _claims.Claim
ClaimArm = _claims.Arm
ClaimResult = _claims.ClaimResult
ClaimsSetup = _claims.ClaimsSetup
ClaimVerdict = _claims.Verdict
CLAIM_METRICS = _claims.METRICS
CLAIM_VERDICTS = (_claims.HOLDS, _claims.REVERSED, _claims.NOT_RESOLVED)
CLAIM_VERDICT_TEXT = dict(_claims.VERDICT_TEXT)
compare_arms = _claims.compare_arms
claims_markdown = _claims.claims_markdown


def claims() -> pd.DataFrame:
    """The claims as a table, one row per claim: id (its key), number, statement (and statement_zh), paper,
    paper_figure, metric, arms, baseline, challenger (the arms' keys), seeds, why_differs."""
    return _claims.claims_records_frame()


def claim_records() -> tuple[Claim, ...]:
    """Every claim record, in order."""
    return _claims.CLAIMS


def claim_results(home=None, *, preset: str = "tiny", seeds: int = _claims.DEFAULT_SEEDS,
                  budget_flops: float | None = None) -> pd.DataFrame:
    """Every claim's verdict as its runs and kept scores stand in the lab home (nothing is trained or scored here;
    `python -m lab_models claims` or `start_claims` does that): one row per claim with id, effect (challenger minus
    baseline, positive in the claimed direction), low and high (its 95% interval), verdict ("holds", "reversed",
    "not resolved", or "not run"), seeds, budget_flops, and the rest of `ClaimResult.row`."""
    setup = _claims.ClaimsSetup(preset=preset, seeds=seeds, budget_flops=budget_flops)
    return claims_table(claims_results(RunStore(_lab_home(home)), setup))


def claim(name) -> Claim:
    """One claim by its number or key; LabError naming the choices otherwise."""
    return _claims.claim_by_name(name)


def _claims_of(names) -> tuple[Claim, ...]:
    if names is None or isinstance(names, str):
        return _claims.parse_claims(names)
    chosen = {_claims.claim_by_name(name).key for name in names}
    if not chosen:
        raise LabError("Choose at least one claim.")
    return tuple(record for record in _claims.CLAIMS if record.key in chosen)


def start_claims(jobs: JobManager, names=None, *, preset: str = "tiny", seeds: int = _claims.DEFAULT_SEEDS,
                 device: str = "auto", budget_flops: float | None = None) -> str:
    """Queue the arm runs of the named claims (None or "all": every claim) that are not finished, then the job that
    scores them; return the scoring job's id. LabError before anything is queued for a bad claim or setting."""
    chosen = _claims_of(names)
    setup = _claims.ClaimsSetup(preset=preset, seeds=seeds, device=device, budget_flops=budget_flops)
    for arm in _claims.claim_arms(chosen):
        setup.arm_zoo(arm)
    _claims.start_claim_runs(jobs, chosen, setup)
    folder = _claims.new_score_job_dir(jobs.home, preset)
    command = [sys.executable, "-m", "lab_models", "claims", "--score-only", "--claims",
               ",".join(str(record.number) for record in chosen), "--preset", preset, "--seeds", str(seeds),
               "--device", device, "--home", str(jobs.home), "--job-dir", str(folder)]
    if budget_flops is not None:
        command += ["--budget-flops", repr(float(budget_flops))]
    return jobs.start_command("claims", command, folder, device=device, total_steps=1,
                              request={"claims": [record.key for record in chosen], "preset": preset, "seeds": seeds})


def claims_score_jobs(jobs: RunStore) -> list[dict]:
    """The scoring jobs of the lab home, newest first: {"job_id", "claims", "state", "step", "total_steps",
    "message"}."""
    folder = jobs.home / _claims.CLAIMS_DIR
    rows = []
    if not folder.is_dir():
        return rows
    for job_dir in sorted(folder.glob("score-*"), reverse=True):
        if not job_dir.is_dir():
            continue
        request = _claims.read_json(job_dir / "job.json")
        status = jobs.status(job_dir.name)
        rows.append({"job_id": job_dir.name, "claims": request.get("claims") or [], "state": status.get("state"),
                     "step": status.get("step"), "total_steps": status.get("total_steps"),
                     "message": status.get("message")})
    return rows


def stop_claims(jobs: JobManager, names=None, setup: ClaimsSetup = ClaimsSetup()) -> list[str]:
    """Stop the named claims' queued and running arm runs and their queued or running scoring jobs (each run
    checkpoints; starting again continues). Returns what was stopped."""
    chosen = _claims_of(names)
    stopped = _claims.stop_claim_runs(jobs, chosen, setup)
    keys = {record.key for record in chosen}
    for job in claims_score_jobs(jobs):
        if job["state"] in ("queued", "running") and keys & set(job["claims"]):
            jobs.stop(job["job_id"])
            stopped.append(job["job_id"])
    return stopped


def claim_result(jobs: RunStore, name, setup: ClaimsSetup = ClaimsSetup()) -> ClaimResult:
    """The claim as its runs and kept scores stand now (nothing is trained or scored here)."""
    return _claims.claim_result(jobs, claim(name), setup)


def claims_results(jobs: RunStore, setup: ClaimsSetup = ClaimsSetup()) -> list[ClaimResult]:
    """Every claim's result, in order."""
    store = _claims.listed(jobs)  # the lab home's runs read once for all claims
    return [_claims.claim_result(store, record, setup) for record in _claims.CLAIMS]


def claim_progress(jobs: RunStore, name, setup: ClaimsSetup = ClaimsSetup()) -> dict:
    """arm key -> its runs (`ZooRun`: state, step, total steps, seed), for a live bar per arm."""
    return _claims.claim_progress(jobs, claim(name), setup)


def claims_table(results) -> pd.DataFrame:
    """The claims table, one row per claim (`ClaimResult.row`)."""
    return _claims.claims_frame(results)


def claim_curves(jobs: RunStore, name, setup: ClaimsSetup = ClaimsSetup()) -> pd.DataFrame:
    """The validation curves of the claim's runs: columns arm, seed, run_id, step, flops (training FLOPs spent by that
    step: step x the run's FLOPs per step), val_bits_per_byte."""
    rows = []
    record = claim(name)
    store = _claims.listed(jobs)
    for arm in record.arms:
        for run in _claims.arm_runs(store, setup, arm):
            if run.run_id is None:
                continue
            budget = _claims.read_json(jobs.run_dir(run.run_id) / "config.json").get("budget") or {}
            per_step = float(budget.get("flops_per_step") or 0.0)
            for row in jobs.metrics(run.run_id):
                if row.get("split") == "val" and row.get("bits_per_byte") is not None:
                    rows.append({"arm": arm.key, "seed": run.seed, "run_id": run.run_id, "step": int(row["step"]),
                                 "flops": int(row["step"]) * per_step,
                                 "val_bits_per_byte": float(row["bits_per_byte"])})
    return pd.DataFrame(rows, columns=["arm", "seed", "run_id", "step", "flops", "val_bits_per_byte"])
