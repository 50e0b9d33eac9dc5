"""The claims (lab_models/experiments/claims.py): the records, the verdict's statistics, and real runs through the job
manager: a planted effect gives "holds", two arms that are one configuration give "not resolved", the arms of a claim
spend the same FLOPs, an arm without arguments is the zoo's own run; the CLI and the app's scoring job.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab_models.experiments import claims
from lab_models.experiments.zoo import ZooConfig, start_zoo, zoo_rows
from lab_models.text.tasks import TASKS as FINETUNE_TASKS
from lab_models.training.jobs.manager import JobManager
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
PLANTED_BUDGET = 3e10  # about 55 steps of a tiny GPT on 32-token rows: seconds a run


# ---------------------------------------------------------------------------------------------- the records
def test_there_are_at_least_twelve_claims_numbered_in_order_with_unique_keys():
    assert len(claims.CLAIMS) >= 12
    assert [claim.number for claim in claims.CLAIMS] == list(range(1, len(claims.CLAIMS) + 1))
    assert len({claim.key for claim in claims.CLAIMS}) == len(claims.CLAIMS)


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda claim: claim.key)
def test_every_claim_names_a_paper_figure_a_metric_the_lab_computes_and_both_languages(claim):
    assert re.search(r"\b(Tables?|Figures?)\s+\d+|§\d", claim.paper_figure), claim.paper_figure
    assert re.search(r"(19|20)\d\d", claim.paper), claim.paper  # the paper and its year
    assert claim.metric in claims.METRICS and all(metric in claims.METRICS for metric in claim.also_reports)
    task = claims.METRICS[claim.metric].finetune_task
    assert task is None or task in FINETUNE_TASKS
    assert re.search(r"[\u4e00-\u9fff]", claim.statement_zh) and claim.statement_en.endswith(".")
    assert claim.why_differs and claim.seeds >= 3


@pytest.mark.parametrize("claim", claims.CLAIMS, ids=lambda claim: claim.key)
def test_the_arms_of_a_claim_differ_and_train_on_one_flop_budget(claim):
    baseline, challenger = claim.arms
    assert (baseline.family, baseline.args) != (challenger.family, challenger.args)
    setup = claims.ClaimsSetup()
    configs = [setup.arm_zoo(arm) for arm in claim.arms]
    assert configs[0].flops == configs[1].flops == 1e12
    budgets = [config.trainer_args(arm.family) for config, arm in zip(configs, claim.arms)]
    for args in budgets:
        assert args[:2] == ["--budget-flops", repr(1e12)] and "--steps" not in args
    for config, arm in zip(configs, claim.arms):
        # an arm without arguments is the zoo's own run of its family; one with arguments is its own variant
        assert (config.name == ZooConfig().name) == (not arm.args)
        if arm.args:  # after the recipe's, so that its --set, --objective or --model wins
            assert config.trainer_args(arm.family)[-len(arm.args):] == list(arm.args)


def test_claims_are_found_by_number_or_key_and_an_unknown_one_is_refused():
    assert claims.claim_by_name("7").key == "electra-per-flop" == claims.claim_by_name(" ELECTRA-per-flop ").key
    assert [claim.number for claim in claims.parse_claims("8, 7")] == [7, 8]
    with pytest.raises(ValueError, match="unknown claim 'bart'"):
        claims.parse_claims("bart")
    with pytest.raises(ValueError, match="seeds"):
        claims.ClaimsSetup(seeds=0)
    with pytest.raises(ValueError, match="preset"):
        claims.ClaimsSetup(preset="huge")


# ---------------------------------------------------------------------------------------------- the verdict
def test_two_arms_with_the_same_values_are_not_resolved_and_a_clear_difference_holds_or_reverses():
    same = claims.compare_arms([0.50, 0.55, 0.52], [0.50, 0.55, 0.52])
    assert same.word == claims.NOT_RESOLVED and same.low < 0 < same.high and same.difference == 0
    better = claims.compare_arms([0.30, 0.32, 0.31], [0.60, 0.61, 0.62])
    assert better.word == claims.HOLDS and better.low > 0 and better.interval_over == "seeds"
    worse = claims.compare_arms([0.60, 0.61, 0.62], [0.30, 0.32, 0.31])
    assert worse.word == claims.REVERSED and worse.high < 0
    # lower is better (bits per byte): a lower challenger holds
    assert claims.compare_arms([2.0, 2.1, 2.05], [1.5, 1.52, 1.49], higher_is_better=False).word == claims.HOLDS


def test_the_interval_is_welchs_over_seeds_and_the_detectable_effect_and_seeds_needed_follow_from_it():
    verdict = claims.compare_arms([0.2, 0.3, 0.4], [0.3, 0.4, 0.5])
    # difference 0.1; each arm's variance 0.01 over 3 seeds: se = sqrt(2 * 0.01 / 3), df = 4, t = 2.776
    se = (2 * 0.01 / 3) ** 0.5
    assert verdict.difference == pytest.approx(0.1)
    assert verdict.high - verdict.difference == pytest.approx(2.776 * se, rel=1e-3)
    assert verdict.word == claims.NOT_RESOLVED
    assert verdict.smallest_detectable == pytest.approx((2.776 + claims.Z_80) * se, rel=1e-3)
    # the fewest seeds n at which (t(2n - 2) + 0.84) x se x sqrt(3 / n) falls to 0.1
    needed = verdict.seeds_needed
    assert (claims.t_quantile(2 * needed - 2) + claims.Z_80) * se * (3 / needed) ** 0.5 <= 0.1
    assert (claims.t_quantile(2 * needed - 4) + claims.Z_80) * se * (3 / (needed - 1)) ** 0.5 > 0.1
    assert better_resolved_needs_nothing()


def better_resolved_needs_nothing() -> bool:
    """A claim already resolved asks for no more seeds."""
    return claims.compare_arms([0.30, 0.32, 0.31], [0.60, 0.61, 0.62]).seeds_needed is None


def test_with_one_seed_the_interval_is_a_bootstrap_over_the_held_out_items():
    baseline_hits = [[1, 0, 0, 0] * 30]  # 0.25 over 120 items
    challenger_hits = [[1, 1, 0, 0] * 30]  # 0.50, right wherever the baseline is and more
    verdict = claims.compare_arms([0.25], [0.5], baseline_hits=baseline_hits, challenger_hits=challenger_hits,
                                  generator=torch.Generator().manual_seed(0))
    assert verdict.interval_over == "examples" and verdict.word == claims.HOLDS
    assert 0.15 < verdict.low < 0.25 < verdict.high < 0.35
    nothing = claims.compare_arms([0.25], [0.25], baseline_hits=baseline_hits, challenger_hits=baseline_hits)
    assert nothing.word == claims.NOT_RESOLVED  # identical hits: the interval is [0, 0] and covers zero
    # no hits kept: the binomial interval of two hit rates over the examples
    binomial = claims.compare_arms([0.5], [0.6], examples=3000)
    assert binomial.interval_over == "examples" and binomial.word == claims.HOLDS
    assert claims.compare_arms([0.5], [0.6]).word == claims.NOT_RESOLVED  # one seed, nothing else: no interval


def test_an_exact_metric_has_no_interval_and_a_missing_arm_is_refused():
    verdict = claims.compare_arms([180_000.0], [76_000.0], higher_is_better=False, noise_free=True)
    assert verdict.word == claims.HOLDS and verdict.low == verdict.high == 104_000.0
    with pytest.raises(ValueError, match="a value of each arm"):
        claims.compare_arms([], [0.5])


# ---------------------------------------------------------------------------------------------- real runs
def _wait_for_runs(jobs, setup, arms):
    def settled():
        runs = [run for arm in arms for run in claims.arm_runs(jobs, setup, arm)]
        return all(run.state in ("finished", "failed", "stopped") for run in runs) and runs
    wait_for(settled, timeout=600, what="the claim's runs to end", every=0.5)
    jobs.wait_until_idle()


@pytest.mark.slow
def test_a_planted_effect_holds_the_same_configuration_twice_is_not_resolved_and_the_flops_are_equal(tmp_path):
    """Two seeds of GPT at its recipe against two with the learning rate at (effectively) zero: trained, the first
    has the lower validation bits per byte, so the claim that it is better holds. The same arm on both sides reads the
    same runs: a difference of exactly 0, not resolved. Every run spends the budget within 2%, and the arm without
    arguments is the zoo's own run, trained once for both."""
    home = tmp_path / "home"
    frozen = claims.Arm("gpt-frozen", "gpt", "GPT, learning rate 1e-12", "GPT，学习率 1e-12", ("--lr", "1e-12"))
    planted = claims.Claim(99, "planted", "Training helps.", "训练有用。", "Test 2026", "Table 0", frozen, claims.GPT,
                           "bits_per_byte", "a test", seeds=2)
    same = claims.Claim(98, "same", "Same.", "相同。", "Test 2026", "Table 0", claims.GPT, claims.GPT,
                        "bits_per_byte", "a test", seeds=2)
    setup = claims.ClaimsSetup(seeds=2, budget_flops=PLANTED_BUDGET, device="cpu")
    jobs = JobManager(home, stop_timeout_s=10, poll_interval_s=0.05)
    try:
        start_zoo(jobs, ZooConfig(families=("gpt",), seeds=2, budget_flops=PLANTED_BUDGET, device="cpu"))
        zoo_runs = {row["run_id"] for row in zoo_rows(jobs, ZooConfig(budget_flops=PLANTED_BUDGET).name).values()}
        claims.start_claim_runs(jobs, [planted, same], setup)
        _wait_for_runs(jobs, setup, planted.arms)
        results = claims.score_claims(home, jobs, [planted, same], setup)
    finally:
        jobs.close(timeout=10)
    result, identical = results
    assert set(result.arms[1].run_ids) == zoo_runs and len(list((home / "runs").iterdir())) == 4
    frozen_values, trained_values = (list(arm.values) for arm in result.arms)
    assert min(frozen_values) > max(trained_values) + 0.2, (frozen_values, trained_values)
    assert result.verdict.word == claims.HOLDS and result.verdict.low > 0
    assert identical.verdict.word == claims.NOT_RESOLVED and identical.verdict.difference == 0
    spent = [value for arm in result.arms for value in arm.flops_spent]
    assert len(spent) == 4 and max(spent) <= PLANTED_BUDGET and min(spent) >= 0.98 * PLANTED_BUDGET
    assert result.flops_ratio <= 1.02
    for run_id in result.arms[0].run_ids:  # the arm's arguments are recorded with its runs
        config = json.loads((home / "runs" / run_id / "config.json").read_text())
        assert config["train"]["lr"] == 1e-12 and config["zoo"].endswith("-gpt-frozen")


def _claims_cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab_models", "claims", *args, "--home", str(home)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_cli_lists_the_claims_and_refuses_a_bad_argument(tmp_path):
    listed = _claims_cli("--list", home=tmp_path)
    assert listed.returncode == 0 and listed.stdout.count("\n") >= 2 * len(claims.CLAIMS)
    assert "electra-per-flop" in listed.stdout and "79.9 (ELECTRA-Small)" in listed.stdout
    bad = _claims_cli("--claims", "bart", home=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown claim 'bart'")
    assert _claims_cli("--seeds", "0", home=tmp_path).returncode == 2


def test_scoring_with_no_runs_writes_the_tables_says_which_claims_have_no_verdict_and_its_job_status(tmp_path):
    job_dir = tmp_path / "home" / "claims" / "score-tiny-test"
    job_dir.mkdir(parents=True)
    done = _claims_cli("--score-only", "--claims", "6,7", "--job-dir", str(job_dir), home=tmp_path / "home")
    assert done.returncode == 1 and "no verdict for albert-sharing, electra-per-flop" in done.stderr
    folder = tmp_path / "home" / "claims" / "results" / "tiny-1e12flops-3seeds"
    table = (folder / "claims.md").read_text()
    assert table.count("not run") == len(claims.CLAIMS) and "79.9 (ELECTRA-Small)" in table
    record = json.loads((folder / "claims.json").read_text())
    assert [claim["key"] for claim in record["claims"]] == ["albert-sharing", "electra-per-flop"]
    assert record["budget_flops"] == 1e12
    assert json.loads((job_dir / "status.json").read_text())["state"] == "failed"


def test_the_api_gives_the_claims_and_their_results_as_tables_with_the_contracts_columns(tmp_path):
    from lab_models import api

    records = api.claims()
    assert {"id", "statement", "paper", "paper_figure", "metric", "arms"} <= set(records.columns)
    assert list(records["id"]) == [claim.key for claim in claims.CLAIMS]
    results = api.claim_results(tmp_path / "home")
    assert {"id", "effect", "low", "high", "verdict", "seeds", "budget_flops"} <= set(results.columns)
    assert set(results["verdict"]) == {"not run"} and set(results["seeds"]) == {0}
    assert set(results["budget_flops"]) == {1e12}
    assert set(api.CLAIM_VERDICTS) == {"holds", "reversed", "not resolved"}
