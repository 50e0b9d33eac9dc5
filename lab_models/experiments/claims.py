"""The survey's claims, tested: each claim a record (two arms that differ in the toggle it is about, one FLOP budget,
a metric), its runs trained like the zoo's, and a verdict computed from them with its 95% interval.

    python -m lab_models claims [--claims all|1,7,span-masking] [--preset tiny|small] [--seeds N]
                                [--budget-flops F] [--device auto|cpu|cuda|mps] [--workers N] [--home DIR] [--list]

Papers: the claims come from the survey of pretraining this lab follows (Qiu et al. 2020, "Pre-trained Models for
Natural Language Processing: A Survey") and from the paper of each family; each record names the paper's table and
the figure it reports (`Claim.paper_figure`).

What a claim is
---------------
A `Claim` is data, not code: its statement (English and Chinese), the paper and its figure, two `Arm`s (the
*baseline* and the *challenger*, which the claim says is better), the metric that decides it (`METRICS`) and the
seeds. An arm is a family plus the trainer arguments that make it differ from the zoo's recipe for that family
(lab_models/experiments/zoo.py `ZooConfig.recipe_args`); an arm without arguments *is* the zoo's run of the family,
so a claim reuses the zoo's runs, and two claims that name the same arm share its runs. Every arm trains at the
preset's zoo budget (`ZOO_BUDGET_FLOPS`: tiny 1e12 FLOPs), so the arms of a claim get the same training FLOPs (each
run trains the whole steps its FLOPs per step fit in; `flops_spent` in config.json). The arm's runs are tagged with
its zoo name (`tiny-stories-1e12flops-bert-no-nsp`), so the Leaderboard and Compare see them as any run.

Metrics (`METRICS`), each scored once per run and kept in the run's `claim_scores.json`:

    scope, story_order   accuracy after fine-tuning on the built-in task (200 steps, `python -m lab_models finetune`)
    reference_blanks     top-1 fills of held-out "the NOUN" nouns that only the story decides (context_scores)
    span_blanks          "the NOUN" hidden as two [MASK]s, both words right
    sentences            the first sentence a run writes after a held-out story's opening parses under the grammar
    bits_per_byte        validation bits per byte (only between arms of one objective)
    parameters           trainable parameters (exact: no noise)

The verdict (`compare_arms`)
----------------------------
The difference is challenger minus baseline, signed so that a positive number is the claimed direction (a lower
bits per byte or fewer parameters counts as better). Its 95% interval: over seeds, Welch's t interval of the
difference of the arms' means (Satterthwaite's degrees of freedom); over examples, a paired bootstrap (2,000
resamples of the held-out items, the same items for both arms) where the metric keeps each item's hit, else the
binomial normal interval of the difference of two hit rates; with two seeds or more the interval is the wider of
the two ("seeds and examples" when the examples' is wider), with one seed the examples' alone. Then one of three
words: **holds here** (the interval lies above zero), **reversed here** (below zero), **not resolved at this
budget** (it covers zero). Beside it: the smallest effect this design could have detected (80% power at the 5% level,
(t + 0.84) x the standard error) and how many seeds per arm the observed difference would need to be resolved
(the standard error falling as one over the root of the seeds), with what they would cost on this machine.

Nothing in a verdict is written by hand or tuned: the claims' settings are fixed in this module before their first
run, and every run of an arm records its arguments (job.json, config.json).

Deviations: the papers test their claims on GLUE, SQuAD and web-scale corpora with models of 10^8 parameters and
more; the lab tests them on its "stories" language (lab_models/text/stories.py) with 64-wide models at 1e12 FLOPs,
and the metrics are the stories' context tasks, not GLUE. What each claim's setting changes is in `Claim.why_differs`.
The lab's ALBERT has no next-sentence switch, so claim 2 compares sentence-order prediction with no sentence objective
(claim 3 compares next-sentence prediction with none, on BERT).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from lab_models.experiments.zoo import (DEMO_ZOO_PRESET, MAX_SEEDS, ZOO_PRESETS, ZooConfig, start_zoo, stop_zoo,
                                        zoo_progress)
from lab_models.home import atomic_write_json, lab_home
from lab_models.inference.seed_intervals import Z_95, t_quantile
from lab_models.messages import LabError
from lab_models.training.config import check_budget_flops
from lab_models.training.console import OneLineParser, say, say_error
from lab_models.training.jobs.files import PACKAGE_ROOT, read_json
from lab_models.training.jobs.manager import JobManager
from lab_models.training.jobs.store import RunStore
from lab_models.training.runs import MODEL_FILE, write_status

logger = logging.getLogger(__name__)

HOLDS, REVERSED, NOT_RESOLVED = "holds", "reversed", "not resolved"
# how a verdict reads in a sentence: what this experiment shows, at this budget, not what is true at every scale
VERDICT_TEXT = {HOLDS: "holds here", REVERSED: "reversed here", NOT_RESOLVED: "not resolved at this budget"}
Z_80 = 0.8416212335729143  # the normal quantile of 80% power
BOOTSTRAP_RESAMPLES = 2000
MAX_SEEDS_ESTIMATE = 1000  # "seeds needed" beyond this is reported as more than the lab would ever run
SCORES_FILE = "claim_scores.json"
CLAIMS_DIR = "claims"  # under the lab home: results/<setup>/ (tables), finetunes/, and the app's scoring jobs
SCORES_VERSION = 1  # raise when a scorer changes: older cached scores are then computed again
FINETUNE_STEPS = 200  # the finetune command's default, as the zoo benchmark's
DEFAULT_SEEDS = 3
EXIT_FAILED, EXIT_BAD_ARGUMENT, EXIT_INTERRUPTED = 1, 2, 130


@dataclass(frozen=True)
class Metric:
    """What decides a claim: `higher_is_better` gives the sign of "better"; `hit_rate` says the value is a fraction of
    held-out items (so it has an interval over examples); `finetune_task` names the built-in task it fine-tunes on."""

    key: str
    label_en: str
    label_zh: str
    higher_is_better: bool = True
    hit_rate: bool = True
    finetune_task: str | None = None
    noise_free: bool = False  # exact (a parameter count): no interval


METRICS: dict[str, Metric] = {m.key: m for m in (
    Metric("scope", "accuracy fine-tuned on scope (entailment decided by negation and quantifier scope)",
           "在 scope 任务上微调后的准确率（由否定与量词辖域决定的蕴含）", finetune_task="scope"),
    Metric("story_order", "accuracy fine-tuned on story_order (are two sentences in the story's order?)",
           "在 story_order 任务上微调后的准确率（两句是否按故事顺序）", finetune_task="story_order"),
    Metric("reference_blanks", "top-1 fills of held-out nouns that only the story decides",
           "只有故事上下文能决定的名词填空（留出集，top-1）"),
    Metric("span_blanks", "held-out 'the NOUN' spans hidden as two blanks, both words right",
           "留出集中 “the 名词” 两词同时遮盖，两词都填对"),
    Metric("sentences", "sentences written after a held-out story's opening that parse under the grammar",
           "在留出故事开头之后写出的句子中合乎语法的比例"),
    Metric("bits_per_byte", "validation bits per byte (lower is better)", "验证集每字节比特数（越低越好）",
           higher_is_better=False, hit_rate=False),
    Metric("parameters", "trainable parameters (fewer is better)", "可训练参数量（越少越好）",
           higher_is_better=False, hit_rate=False, noise_free=True),
)}


@dataclass(frozen=True)
class Arm:
    """One configuration a claim trains: a family and the trainer arguments that set it apart from the zoo's recipe
    for that family. `key` names its runs (the zoo variant); an arm with no arguments is the zoo's own run."""

    key: str
    family: str
    label_en: str
    label_zh: str
    args: tuple[str, ...] = ()

    def zoo_config(self, preset: str, seeds: int, *, budget_flops: float | None = None, device: str = "auto",
                   workers: int | None = None, seed: int = 0) -> ZooConfig:
        """The arm as a one-family zoo: the zoo itself when it has no arguments, else its variant."""
        variant = None if not self.args else self.key
        return ZooConfig(preset=preset, families=(self.family,), seed=seed, seeds=seeds, device=device,
                         budget_flops=budget_flops, workers=workers, variant=variant, variant_args=self.args)


@dataclass(frozen=True)
class Claim:
    """A claim of the survey as data (module docstring): the challenger is claimed better than the baseline on
    `metric`."""

    number: int
    key: str
    statement_en: str
    statement_zh: str
    paper: str
    paper_figure: str
    baseline: Arm
    challenger: Arm
    metric: str
    why_differs: str
    seeds: int = DEFAULT_SEEDS
    also_reports: tuple[str, ...] = ()  # further metrics shown beside the deciding one (each with its own interval)

    @property
    def arms(self) -> tuple[Arm, Arm]:
        return self.baseline, self.challenger

    @property
    def label(self) -> str:
        return f"{self.number}. {self.key}"


# ---------------------------------------------------------------------------------------------- the arms
GPT = Arm("gpt", "gpt", "GPT (left to right)", "GPT（自左向右）")
BERT = Arm("bert", "bert", "BERT (masked LM + NSP, static masks)", "BERT（掩码语言模型 + NSP，静态掩码）")
BERT_NO_NSP = Arm("bert-no-nsp", "bert", "BERT without NSP", "去掉 NSP 的 BERT", ("--set", "nsp=false"))
BERT_DYNAMIC = Arm("bert-dynamic", "bert", "BERT with dynamic masks", "动态掩码的 BERT", ("--set", "static_masking=false"))
ALBERT = Arm("albert", "albert", "ALBERT (shared layers, factorized embeddings, SOP)", "ALBERT（共享层、分解嵌入、SOP）")
ALBERT_NO_SOP = Arm("albert-no-sop", "albert", "ALBERT without SOP", "去掉 SOP 的 ALBERT", ("--set", "sop=false"))
ALBERT_UNSHARED = Arm("albert-unshared", "albert", "ALBERT, layers not shared, embeddings not factorized",
                      "ALBERT（不共享层、不分解嵌入）", ("--model", "share_layers=false", "--model", "embedding_size=none"))
ELECTRA = Arm("electra", "electra", "ELECTRA (replaced-token detection)", "ELECTRA（替换词检测）")
SPANBERT = Arm("spanbert", "spanbert", "SpanBERT (span masks + SBO)", "SpanBERT（片段掩码 + SBO）")
T5_15 = Arm("t5-15", "t5", "T5, 15% corruption", "T5，15% 破坏率", ("--objective", "translation=0"))
T5_50 = Arm("t5-50", "t5", "T5, 50% corruption", "T5，50% 破坏率",
            ("--objective", "translation=0", "--set", "noise_density=0.5"))
XLNET = Arm("xlnet", "xlnet", "XLNet (two streams)", "XLNet（双流）")
XLNET_ONE_STREAM = Arm("xlnet-one-stream", "xlnet", "XLNet without the query stream", "去掉查询流的 XLNet",
                       ("--set", "two_stream=false"))
GPT_SWITCH = Arm("gpt-switch", "gpt", "GPT with Switch layers", "带 Switch 层的 GPT", ("--model", "ffn=switch"))
ELMO = Arm("elmo", "elmo", "ELMo (two one-way LSTMs)", "ELMo（两个单向 LSTM）")
MPNET = Arm("mpnet", "mpnet", "MPNet (permuted, sees every position)", "MPNet（置换，看到所有位置）")

# ---------------------------------------------------------------------------------------------- the claims
CLAIMS: tuple[Claim, ...] = (
    Claim(1, "understanding-bert-over-gpt",
          "An autoencoding model (BERT) understands better than an autoregressive one (GPT) at equal compute.",
          "在相同算力下，自编码模型（BERT）比自回归模型（GPT）更善于理解。",
          "Devlin et al. 2019, BERT", "Table 1: GLUE average 79.6 (BERT-Base) against 75.1 (OpenAI GPT)",
          GPT, BERT, "scope",
          "GLUE against the stories' scope task; 64-wide models at 1e12 FLOPs instead of 110M parameters."),
    Claim(2, "generation-gpt-over-bert",
          "An autoregressive model (GPT) generates better than an autoencoding one (BERT).",
          "自回归模型（GPT）比自编码模型（BERT）更善于生成。",
          "Wang & Cho 2019, BERT has a Mouth, and It Must Speak",
          "§5 (Table 2): BERT's samples are less fluent than GPT's (a higher perplexity under GPT)",
          BERT, GPT, "sentences",
          "Fluency is judged by the stories' grammar, not by a larger LM's perplexity; BERT writes by mask-predict "
          "into a blank of 8 tokens, GPT left to right."),
    Claim(3, "sop-transfers",
          "Sentence-order prediction teaches what story order needs (ALBERT).",
          "句序预测能学到故事顺序所需的知识（ALBERT）。",
          "Lan et al. 2020, ALBERT",
          "Table 5: trained with SOP, 86.5 on SOP and 78.9 on NSP; trained with NSP, 52.0 on SOP (chance)",
          ALBERT_NO_SOP, ALBERT, "story_order",
          "The lab's ALBERT has no NSP switch: SOP is compared with no sentence objective (claim 4 compares NSP "
          "with none, on BERT); the story_order task plays the SOP column's part."),
    Claim(4, "no-nsp-no-harm",
          "Removing next-sentence prediction does not hurt (RoBERTa).",
          "去掉下一句预测不会变差（RoBERTa）。",
          "Liu et al. 2019, RoBERTa",
          "Table 2: MNLI-m 84.0 with NSP (segment pairs) against 84.7 without (doc-sentences)",
          BERT, BERT_NO_NSP, "scope",
          "One sentence task (scope) instead of MNLI, SQuAD, SST-2 and RACE; 'does not hurt' holds here only "
          "if removing NSP helps measurably, and an interval over zero is what 'no harm' looks like."),
    Claim(5, "dynamic-masking",
          "Dynamic masking is at least as good as static masking (RoBERTa).",
          "动态掩码至少不比静态掩码差（RoBERTa）。",
          "Liu et al. 2019, RoBERTa",
          "Table 1: static 78.3 / 84.3 / 92.5 against dynamic 78.7 / 84.0 / 92.9 (SQuAD 2.0 F1, MNLI-m, SST-2)",
          BERT, BERT_DYNAMIC, "reference_blanks",
          "The lab's static masking repeats 10 masks per row (dupe_factor 10) over a 1e12-FLOP run that sees each "
          "row a few times only, so the two arms see nearly the same masks."),
    Claim(6, "albert-sharing",
          "Sharing all layers and factorizing the embeddings cut the parameters many times over, at a small cost "
          "in quality (ALBERT).",
          "共享所有层并分解嵌入可使参数量成倍减少，而质量只略有损失（ALBERT）。",
          "Lan et al. 2020, ALBERT",
          "Table 4 (E = 128): all-shared 12M parameters, average 80.1, against not-shared 89M, average 82.3",
          ALBERT_UNSHARED, ALBERT, "parameters",
          "At 64 wide and 2 layers the embedding table is most of the model, so factorizing it cuts more and "
          "sharing 2 layers less than at 12.", also_reports=("bits_per_byte", "scope")),
    Claim(7, "electra-per-flop",
          "Replaced-token detection learns more per FLOP than masked language modelling (ELECTRA).",
          "替换词检测每单位算力学到的比掩码语言模型多（ELECTRA）。",
          "Clark et al. 2020, ELECTRA",
          "Table 1: GLUE 79.9 (ELECTRA-Small) against 75.1 (BERT-Small) at equal pretraining compute",
          BERT, ELECTRA, "scope",
          "The discriminator is fine-tuned on scope instead of GLUE; at 1e12 FLOPs both runs are 10^4 times "
          "smaller than the paper's small models."),
    Claim(8, "span-masking",
          "Span masking with the span-boundary objective beats token masking at filling spans (SpanBERT).",
          "带片段边界目标的片段掩码在填补片段上胜过逐词掩码（SpanBERT）。",
          "Joshi et al. 2020, SpanBERT",
          "Tables 6 and 7: random spans beat subword-token masking, and SBO adds to them, on SQuAD 2.0 and "
          "coreference",
          BERT_NO_NSP, SPANBERT, "span_blanks",
          "Spans are scored as two-word blanks of the stories ('the NOUN'), not as extractive QA."),
    Claim(9, "t5-corruption-rate",
          "Span corruption at a rate near 15% is near the best rate; 50% is worse (T5).",
          "片段破坏率在 15% 左右接近最佳，50% 更差（T5）。",
          "Raffel et al. 2020, T5",
          "Table 6: GLUE average 83.28 at 15% corruption against 81.27 at 50%",
          T5_50, T5_15, "scope",
          "The zoo's T5 also learns translation; both arms here train span corruption alone."),
    Claim(10, "xlnet-needs-two-streams",
          "Without its query stream, permutation LM sees the token it predicts and learns to copy it (XLNet).",
          "没有查询流的置换语言模型会看到要预测的词并学会照抄（XLNet）。",
          "Yang et al. 2019, XLNet",
          "§2.3: without target-aware representations every target position gets the same distribution (an "
          "argument, no table)",
          XLNET_ONE_STREAM, XLNET, "reference_blanks",
          "The paper argues it; the lab measures it on held-out blanks. The one-stream run cannot be asked to fill a "
          "blank without seeing it (what it learned is to copy), so it fills none; its validation bits per byte, "
          "far below the two-stream run's, is the copying itself.", also_reports=("bits_per_byte",)),
    Claim(11, "switch-beats-dense",
          "At equal FLOPs a Switch Transformer beats its dense twin (Switch Transformer).",
          "在相同算力下，Switch Transformer 胜过同等规模的稠密模型。",
          "Fedus, Zoph & Shazeer 2022, Switch Transformers",
          "Table 1: negative log perplexity -1.561 (Switch-Base, 128 experts) against -1.731 (T5-Base) at 100k "
          "steps",
          GPT, GPT_SWITCH, "bits_per_byte",
          "8 experts in one of 2 layers of a 64-wide GPT; the paper's gains grow with experts and scale."),
    Claim(12, "bert-over-elmo",
          "One deeply bidirectional encoder (BERT) transfers better than two one-directional LMs side by side "
          "(ELMo).",
          "一个深度双向编码器（BERT）比两个并列的单向语言模型（ELMo）迁移得更好。",
          "Devlin et al. 2019, BERT", "Table 1: GLUE average 79.6 (BERT-Base) against 71.0 (BiLSTM+ELMo+Attn)",
          ELMO, BERT, "scope",
          "ELMo's LSTMs at the tiny preset against a 2-layer Transformer at the same FLOPs; both fine-tuned whole."),
    Claim(13, "mpnet-over-xlnet",
          "Permutation LM that sees every position (MPNet) beats XLNet's.",
          "能看到所有位置的置换语言模型（MPNet）胜过 XLNet 的。",
          "Song et al. 2020, MPNet",
          "Table 3 (base, GLUE dev): MPNet above XLNet on every task; ablation: without position compensation "
          "(XLNet's PLM) it falls",
          XLNET, MPNET, "reference_blanks",
          "Held-out blanks of the stories instead of GLUE and SQuAD."),
)
CLAIMS_BY_KEY: dict[str, Claim] = {claim.key: claim for claim in CLAIMS}


def claims_records_frame():
    """The claims as a table (pandas), one row per claim: id, number, statement, statement_zh, paper, paper_figure,
    metric, arms ("baseline -> challenger"), baseline, challenger, seeds, why_differs."""
    import pandas as pd

    return pd.DataFrame([{"id": claim.key, "number": claim.number, "statement": claim.statement_en,
                          "statement_zh": claim.statement_zh, "paper": claim.paper, "paper_figure": claim.paper_figure,
                          "metric": claim.metric, "arms": f"{claim.baseline.label_en} -> {claim.challenger.label_en}",
                          "baseline": claim.baseline.key, "challenger": claim.challenger.key, "seeds": claim.seeds,
                          "why_differs": claim.why_differs} for claim in CLAIMS])


def claim_by_name(name) -> Claim:
    """A claim by its key ('electra-per-flop') or number ('7'). LabError naming the choices otherwise."""
    text = str(name).strip().lower()
    for claim in CLAIMS:
        if text in (claim.key, str(claim.number)):
            return claim
    raise LabError("unknown claim {name!r}: choose a number from 1 to {count} or one of {keys}", name=name,
                   count=len(CLAIMS), keys=", ".join(CLAIMS_BY_KEY))


def parse_claims(text: str | None) -> tuple[Claim, ...]:
    """'all' (or nothing) -> every claim; '7, span-masking' -> those two, in the claims' order.

    >>> [claim.number for claim in parse_claims("span-masking,7")], len(parse_claims("all"))
    ([7, 8], 13)
    """
    if text is None or str(text).strip().lower() in ("", "all"):
        return CLAIMS
    chosen = {claim_by_name(part).key for part in str(text).split(",") if part.strip()}
    if not chosen:
        raise LabError("--claims names no claim: give all, or numbers or keys separated by commas")
    return tuple(claim for claim in CLAIMS if claim.key in chosen)


def claim_arms(claims) -> tuple[Arm, ...]:
    """The distinct arms of `claims`, each once, in the order they first appear."""
    arms: dict[str, Arm] = {}
    for claim in claims:
        for arm in claim.arms:
            if arms.setdefault(arm.key, arm) != arm:
                raise LabError("two different arms share the key {key!r}", key=arm.key)
    return tuple(arms.values())


# ---------------------------------------------------------------------------------------------- the verdict
@dataclass(frozen=True)
class Verdict:
    """A claim's difference (challenger minus baseline, positive = the claimed direction) and what it says."""

    difference: float
    low: float
    high: float
    interval_over: str  # "seeds", "examples", "seeds and examples", "exact"
    word: str  # HOLDS, REVERSED or NOT_RESOLVED
    smallest_detectable: float  # the effect this design detects 80% of the time at the 5% level
    seeds_needed: int | None  # seeds per arm that would resolve the observed difference (None: not estimable)


def _welch(first: list[float], second: list[float]) -> tuple[float, int] | None:
    """(standard error of mean(second) - mean(first), Satterthwaite's degrees of freedom); None under two values."""
    if len(first) < 2 or len(second) < 2:
        return None
    def variance(values):
        mean = sum(values) / len(values)
        return sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    a, b = variance(first) / len(first), variance(second) / len(second)
    se = math.sqrt(a + b)
    if se == 0:
        return 0.0, len(first) + len(second) - 2
    df = (a + b) ** 2 / ((a ** 2 / (len(first) - 1) if a else 0.0) + (b ** 2 / (len(second) - 1) if b else 0.0))
    return se, max(1, int(df))


def _bootstrap_half_width(baseline_hits, challenger_hits, generator: torch.Generator) -> float | None:
    """Half the width of the paired bootstrap's 95% interval of the difference of hit rates over the held-out items:
    each item's hit is averaged over an arm's seeds, the items are resampled (the same for both arms)."""
    if not baseline_hits or not challenger_hits:
        return None
    base = torch.tensor(baseline_hits, dtype=torch.float64).mean(0)  # (items,)
    chal = torch.tensor(challenger_hits, dtype=torch.float64).mean(0)  # (items,)
    if base.numel() != chal.numel() or base.numel() == 0:
        return None
    picks = torch.randint(0, base.numel(), (BOOTSTRAP_RESAMPLES, base.numel()), generator=generator)  # (R, items)
    differences = (chal[picks] - base[picks]).mean(1)  # (R,)
    low, high = torch.quantile(differences, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return (high - low) / 2


def compare_arms(baseline: list[float], challenger: list[float], *, higher_is_better: bool = True,
                 noise_free: bool = False, baseline_hits=None, challenger_hits=None, examples: int | None = None,
                 generator: torch.Generator | None = None) -> Verdict:
    """The verdict of one claim from each arm's values over seeds (module docstring). `*_hits`: per seed, each
    held-out item's hit (for the bootstrap over examples); `examples`: the items a hit rate is over, where the hits
    are not kept (the binomial interval).

    >>> compare_arms([0.5, 0.52, 0.51], [0.5, 0.52, 0.51]).word  # two arms that are the same
    'not resolved'
    >>> verdict = compare_arms([0.30, 0.31, 0.29], [0.60, 0.62, 0.61])
    >>> verdict.word, round(verdict.difference, 3)
    ('holds', 0.31)
    >>> compare_arms([2.0, 2.1, 2.05], [2.5, 2.6, 2.55], higher_is_better=False).word  # higher bits per byte: worse
    'reversed'
    """
    base = [float(value) for value in baseline if value is not None and not math.isnan(float(value))]
    chal = [float(value) for value in challenger if value is not None and not math.isnan(float(value))]
    if not base or not chal:
        raise LabError("a verdict needs a value of each arm: the baseline has {baseline}, the challenger "
                       "{challenger}", baseline=len(base), challenger=len(chal))
    sign = 1.0 if higher_is_better else -1.0
    difference = sign * (sum(chal) / len(chal) - sum(base) / len(base))
    half, over, se, critical = 0.0, "exact", 0.0, Z_95
    if not noise_free:
        welch = _welch(base, chal)
        if welch is not None:
            se, df = welch
            critical = t_quantile(df)
            half, over = critical * se, "seeds"
        examples_half = None
        if baseline_hits and challenger_hits:
            examples_half = _bootstrap_half_width(baseline_hits, challenger_hits,
                                                  generator or torch.Generator().manual_seed(0))
        elif examples:
            rate_b, rate_c = sum(base) / len(base), sum(chal) / len(chal)
            examples_half = Z_95 * math.sqrt(max(rate_b * (1 - rate_b), 0.0) / (examples * len(base))
                                             + max(rate_c * (1 - rate_c), 0.0) / (examples * len(chal)))
        if examples_half is not None and (welch is None or examples_half > half):
            over = "examples" if welch is None else "seeds and examples"
            half, se, critical = examples_half, examples_half / Z_95, Z_95
        if welch is None and examples_half is None:
            over = "none"
    low, high = difference - half, difference + half
    if over == "none":
        word = NOT_RESOLVED
    elif low > 0:
        word = HOLDS
    elif high < 0:
        word = REVERSED
    else:
        word = NOT_RESOLVED
    smallest = (critical + Z_80) * se if se else 0.0
    seeds_needed = None
    if word == NOT_RESOLVED and se and difference and over in ("seeds", "seeds and examples"):
        seeds_needed = seeds_to_resolve(difference, se, min(len(base), len(chal)))
    return Verdict(difference, low, high, over, word, smallest, seeds_needed)


def seeds_to_resolve(difference: float, standard_error: float, seeds_now: int) -> int | None:
    """The fewest seeds per arm at which an effect of `difference` would be resolved 80% of the time: the standard
    error shrinks as one over the root of the seeds, and with n seeds per arm the interval takes t(2n - 2). None
    beyond MAX_SEEDS_ESTIMATE.

    >>> seeds_to_resolve(0.1, 0.05, 3)  # (t(4) + 0.84) x 0.05 = 0.18 > 0.1; at 7 seeds (2.18 + 0.84) x 0.033 = 0.099
    7
    """
    for seeds in range(seeds_now + 1, MAX_SEEDS_ESTIMATE + 1):
        if (t_quantile(2 * seeds - 2) + Z_80) * standard_error * math.sqrt(seeds_now / seeds) <= abs(difference):
            return seeds
    return None


# ---------------------------------------------------------------------------------------------- scoring runs
def _run_dir(store: RunStore, run_id: str) -> Path:
    return store.run_dir(run_id)


def _read_scores(run_dir: Path) -> dict:
    scores = read_json(run_dir / SCORES_FILE)
    return scores if scores.get("version") == SCORES_VERSION else {"version": SCORES_VERSION}


def _write_score(run_dir: Path, metric: str, score: dict) -> None:
    scores = _read_scores(run_dir)
    scores[metric] = score
    atomic_write_json(run_dir / SCORES_FILE, scores)


def cached_score(run_dir: Path, metric: str) -> dict | None:
    """A run's score on `metric` ({"value", "hits"?, "examples"?}) if it was computed, else None."""
    return _read_scores(Path(run_dir)).get(metric)


def score_run(store: RunStore, run_id: str, metric: str) -> dict:
    """Score a finished run on one metric that needs no fine-tuning, keep it in claim_scores.json, return it."""
    from lab_models.inference import context_scores
    from lab_models.inference.generation.plans import UnsupportedMode
    from lab_models.text.story_tasks import context_tasks

    run_dir = _run_dir(store, run_id)
    known = cached_score(run_dir, metric)
    if known is not None:
        return known
    if metric == "bits_per_byte":
        value = store.summary(run_id).get("val_bits_per_byte")
        score = {"value": float("nan") if value is None else float(value)}
    elif metric == "parameters":
        score = {"value": float(read_json(run_dir / "config.json").get("num_parameters") or float("nan"))}
    elif metric in ("reference_blanks", "span_blanks"):
        try:
            result = (context_scores.blank_scores(run_dir, "reference") if metric == "reference_blanks"
                      else context_scores.span_blank_scores(run_dir))
            score = {"value": result.accuracy, "hits": list(result.hits), "examples": result.items}
        except ValueError as error:
            if not isinstance(error.__cause__, UnsupportedMode):
                raise
            # a run that cannot fill a blank it does not see (XLNet without its query stream) fills none
            refusal = error
            items = len(context_tasks()["reference"].validation[:context_scores.BLANK_LIMIT])
            score = {"value": 0.0, "hits": [0] * items, "examples": items, "refused": str(refusal)}
    elif metric == "sentences":
        result = context_scores.next_sentence_scores(run_dir)
        score = {"value": result.accuracy, "hits": list(result.hits), "examples": result.items,
                 "example": result.example}
    else:
        raise LabError("{metric} is scored by fine-tuning: use finetune_runs", metric=metric)
    _write_score(run_dir, metric, score)
    return score


def finetune_runs(home: Path, store: RunStore, pairs, *, workers: int = 1, device: str = "auto",
                  on_done=None) -> None:
    """Fine-tune each (run_id, metric) of `pairs` whose score is not kept yet (`python -m lab_models finetune`, its
    defaults: 200 steps, seed 0), `workers` at once with one thread each; keep each accuracy as the run's score.
    A fine-tuning that fails leaves that score missing (its log says why)."""
    pending = [(run_id, metric) for run_id, metric in pairs if cached_score(_run_dir(store, run_id), metric) is None]
    running: list[tuple[subprocess.Popen, str, str, Path]] = []
    while pending or running:
        while pending and len(running) < max(1, workers):
            run_id, metric = pending.pop(0)
            out = home / CLAIMS_DIR / "finetunes" / f"{run_id}--{METRICS[metric].finetune_task}"
            if read_json(out / "result.json").get("state") == "finished":
                running.append((None, run_id, metric, out))
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "lab_models", "finetune", "--run", str(_run_dir(store, run_id)),
                       "--task", METRICS[metric].finetune_task, "--out", str(out), "--home", str(home),
                       "--device", device, "--steps", str(FINETUNE_STEPS)]
            env = {**os.environ, "OMP_NUM_THREADS": "1" if workers > 1 else os.environ.get("OMP_NUM_THREADS", "")}
            env = {key: value for key, value in env.items() if value != ""}
            # in this process's group: a stop of the claims (SIGTERM from the job manager, Ctrl-C) reaches them too
            process = subprocess.Popen(command, cwd=PACKAGE_ROOT, env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            running.append((process, run_id, metric, out))
        still = []
        for process, run_id, metric, out in running:
            if process is not None and process.poll() is None:
                still.append((process, run_id, metric, out))
                continue
            result = read_json(out / "result.json")
            if "accuracy" in result and result.get("state") == "finished":  # a stopped one scored part of its steps
                _write_score(_run_dir(store, run_id), metric,
                             {"value": float(result["accuracy"]),
                              "examples": int(result.get("validation_examples") or 0),
                              "majority_baseline": result.get("majority_baseline")})
            else:
                logger.warning("fine-tuning %s on %s left no result: see %s", run_id, metric, out / "finetune.log")
            if on_done is not None:
                on_done(run_id, metric)
        running = still
        if running:
            time.sleep(0.2)


# ---------------------------------------------------------------------------------------------- a claim's state
@dataclass(frozen=True)
class ArmResult:
    arm: Arm
    run_ids: tuple[str, ...]
    seeds: tuple[int, ...]
    values: tuple[float, ...]
    flops_spent: tuple[float, ...]
    states: tuple[str, ...]
    seconds: tuple[float, ...] = ()  # each finished run's training time (trainer start to its last status)

    @property
    def mean(self) -> float:
        clean = [value for value in self.values if not math.isnan(value)]
        return sum(clean) / len(clean) if clean else float("nan")


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    preset: str
    budget_flops: float
    arms: tuple[ArmResult, ArmResult]
    verdict: Verdict | None
    also: dict = field(default_factory=dict)  # metric -> Verdict of `also_reports`
    note: str = ""

    @property
    def flops_ratio(self) -> float:
        """The largest arm's spent FLOPs over the smallest's (1.0 = equal compute)."""
        spent = [value for arm in self.arms for value in arm.flops_spent if value]
        return max(spent) / min(spent) if spent else float("nan")

    @property
    def more_run_minutes(self) -> float | None:
        """What resolving the observed difference would cost on this machine: the runs beyond today's seeds that
        `Verdict.seeds_needed` asks for, both arms, at the arms' mean training time (one run at a time)."""
        if self.verdict is None or not self.verdict.seeds_needed:
            return None
        seconds = [value for arm in self.arms for value in arm.seconds]
        seeds_now = min(len(arm.values) for arm in self.arms)
        if not seconds or self.verdict.seeds_needed <= seeds_now:
            return None
        return 2 * (self.verdict.seeds_needed - seeds_now) * (sum(seconds) / len(seconds)) / 60

    def row(self) -> dict:
        """One row of the claims table (CSV, Markdown, the page)."""
        verdict = self.verdict
        metric = METRICS[self.claim.metric]
        baseline, challenger = self.arms
        return {
            "id": self.claim.key, "claim": self.claim.number, "statement": self.claim.statement_en,
            "baseline": baseline.arm.label_en, "challenger": challenger.arm.label_en, "metric": metric.key,
            "baseline_mean": baseline.mean, "challenger_mean": challenger.mean,
            "seeds": min(sum(not math.isnan(value) for value in arm.values) for arm in self.arms),
            "effect": verdict.difference if verdict else float("nan"),
            "low": verdict.low if verdict else float("nan"), "high": verdict.high if verdict else float("nan"),
            "interval_over": verdict.interval_over if verdict else "",
            "verdict": verdict.word if verdict else "not run",
            "verdict_text": VERDICT_TEXT[verdict.word] if verdict else "not run",
            "smallest_detectable": verdict.smallest_detectable if verdict else float("nan"),
            "seeds_needed": verdict.seeds_needed if verdict else None,
            "more_run_minutes": self.more_run_minutes,
            "flops_ratio": self.flops_ratio, "budget_flops": self.budget_flops, "paper": self.claim.paper,
            "paper_figure": self.claim.paper_figure, "why_differs": self.claim.why_differs,
        }


def claims_budget(preset: str, budget_flops: float | None = None) -> float:
    """The FLOPs every arm of every claim trains at `preset`: the given budget, else the zoo's."""
    if preset not in ZOO_PRESETS:
        raise LabError("Unknown preset {preset!r} for the claims: choose one of {presets}", preset=preset,
                       presets=", ".join(ZOO_PRESETS))
    if budget_flops is not None:
        check_budget_flops(budget_flops, "budget_flops")
        return float(budget_flops)
    return float(ZooConfig(preset=preset).flops)


@dataclass(frozen=True)
class ClaimsSetup:
    """Where and how the claims train: preset, seeds, budget (None: the zoo's), device, workers."""

    preset: str = DEMO_ZOO_PRESET
    seeds: int = DEFAULT_SEEDS
    budget_flops: float | None = None
    device: str = "auto"
    workers: int | None = None

    def __post_init__(self):
        claims_budget(self.preset, self.budget_flops)
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int) or not 1 <= self.seeds <= MAX_SEEDS:
            raise LabError("seeds must be a whole number from 1 to {max_seeds}, got {seeds!r}.", max_seeds=MAX_SEEDS,
                           seeds=self.seeds)

    @property
    def budget(self) -> float:
        return claims_budget(self.preset, self.budget_flops)

    def arm_zoo(self, arm: Arm) -> ZooConfig:
        budget = None if self.budget_flops is None else float(self.budget_flops)
        return arm.zoo_config(self.preset, self.seeds, budget_flops=budget, device=self.device, workers=self.workers)

    @property
    def folder_name(self) -> str:
        return f"{self.preset}-{self.budget:.3g}flops-{self.seeds}seeds".replace("e+", "e")


class ListedStore:
    """A `RunStore` whose run list is read once: the claims ask for every arm's runs, and each arm's `zoo_progress`
    would otherwise read every run folder of the lab home again (a page's tick over 13 claims took a second)."""

    def __init__(self, store: RunStore):
        self._store = store
        self._rows = store.list_runs()

    def list_runs(self) -> list[dict]:
        return self._rows

    def __getattr__(self, name):
        return getattr(self._store, name)


def listed(store):
    """`store` with its run list read once (`ListedStore`), unless it already is."""
    return store if isinstance(store, ListedStore) else ListedStore(store)


def arm_runs(store: RunStore, setup: ClaimsSetup, arm: Arm):
    """The arm's runs as the zoo sees them: one `ZooRun` per seed."""
    return zoo_progress(store, setup.arm_zoo(arm)).runs


def _finished_run(store: RunStore, run) -> bool:
    return run.state == "finished" and run.run_id is not None and (store.run_dir(run.run_id) / MODEL_FILE).is_file()


def claim_result(store: RunStore, claim: Claim, setup: ClaimsSetup = ClaimsSetup()) -> ClaimResult:
    """The claim as its runs and kept scores stand now (nothing is trained or scored here): each arm's values over
    its finished, scored seeds, and the verdict once both arms have one."""
    store = listed(store)
    arm_results = []
    hits: list[list] = []
    examples = None
    for arm in claim.arms:
        runs = arm_runs(store, setup, arm)
        values, ids, seeds, spent, arm_hits, run_seconds = [], [], [], [], [], []
        for run in runs:
            score = None
            if _finished_run(store, run):
                score = cached_score(store.run_dir(run.run_id), claim.metric)
            config = read_json(store.run_dir(run.run_id) / "config.json") if run.run_id else {}
            budget = config.get("budget") or {}
            if score is not None and config.get("created"):
                status_time = read_json(store.run_dir(run.run_id) / "status.json").get("updated")
                if status_time:
                    run_seconds.append(max(0.0, float(status_time) - float(config["created"])))
            ids.append(run.run_id or "")
            seeds.append(run.seed)
            spent.append(float(budget.get("flops_spent") or 0.0))
            values.append(float("nan") if score is None else float(score["value"]))
            if score is not None and score.get("hits"):
                arm_hits.append(list(score["hits"]))
            if score is not None and score.get("examples"):
                examples = int(score["examples"])
        hits.append(arm_hits)
        arm_results.append(ArmResult(arm, tuple(ids), tuple(seeds), tuple(values), tuple(spent),
                                     tuple(run.state for run in runs), tuple(run_seconds)))
    verdict = _verdict(claim.metric, arm_results, hits, examples)
    also = {}
    for metric in claim.also_reports:
        also_values = []
        for arm in claim.arms:
            values = []
            for run in arm_runs(store, setup, arm):
                score = cached_score(store.run_dir(run.run_id), metric) if _finished_run(store, run) else None
                values.append(float("nan") if score is None else float(score["value"]))
            also_values.append(values)
        try:
            spec = METRICS[metric]
            also[metric] = compare_arms(also_values[0], also_values[1], higher_is_better=spec.higher_is_better,
                                        noise_free=spec.noise_free)
        except LabError:
            continue
    return ClaimResult(claim, setup.preset, setup.budget, tuple(arm_results), verdict, also)


def _verdict(metric: str, arms, hits, examples) -> Verdict | None:
    spec = METRICS[metric]
    try:
        return compare_arms(list(arms[0].values), list(arms[1].values), higher_is_better=spec.higher_is_better,
                            noise_free=spec.noise_free,
                            baseline_hits=hits[0] if len(hits[0]) == len(arms[0].values) else None,
                            challenger_hits=hits[1] if len(hits[1]) == len(arms[1].values) else None,
                            examples=examples if spec.hit_rate else None)
    except LabError:
        return None


def claim_progress(store: RunStore, claim: Claim, setup: ClaimsSetup = ClaimsSetup()) -> dict[str, tuple]:
    """arm key -> its runs (`ZooRun`, one per seed), for the live bars."""
    store = listed(store)
    return {arm.key: arm_runs(store, setup, arm) for arm in claim.arms}


def start_claim_runs(jobs: JobManager, claims, setup: ClaimsSetup = ClaimsSetup()) -> list[str]:
    """Queue every arm run of `claims` that is not finished (a finished one is reused, a stopped one resumed),
    the arms in the claims' order; returns the arm keys queued."""
    queued = []
    for arm in claim_arms(claims):
        plan = start_zoo(jobs, setup.arm_zoo(arm))
        if plan.queued:
            queued.append(arm.key)
    return queued


def stop_claim_runs(jobs: JobManager, claims, setup: ClaimsSetup = ClaimsSetup()) -> list[str]:
    """Stop the queued and running arm runs of `claims` (each checkpoints; starting again continues)."""
    stopped = []
    for arm in claim_arms(claims):
        stopped += stop_zoo(jobs, setup.arm_zoo(arm).name)
    return stopped


def score_claims(home: Path, store: RunStore, claims, setup: ClaimsSetup = ClaimsSetup(), *, workers: int = 1,
                 progress=None) -> list[ClaimResult]:
    """Score every finished run of `claims` on each metric its claims need (kept scores are reused), the
    fine-tunings `workers` at once; then every claim's result. `progress(done, total)` is called as scores come in."""
    needed: dict[tuple[str, str], None] = {}
    listed_store = listed(store)
    for claim in claims:
        for metric in (claim.metric, *claim.also_reports):
            for arm in claim.arms:
                for run in arm_runs(listed_store, setup, arm):
                    if _finished_run(store, run):
                        needed[(run.run_id, metric)] = None
    pairs = list(needed)
    total = len(pairs)
    done = 0
    finetunes = [(run_id, metric) for run_id, metric in pairs if METRICS[metric].finetune_task]
    for run_id, metric in pairs:
        if METRICS[metric].finetune_task:
            continue
        try:
            score_run(store, run_id, metric)
        except ValueError as error:  # a family that cannot answer the metric: no value
            logger.warning("%s cannot be scored on %s: %s", run_id, metric, error)
        done += 1
        if progress is not None:
            progress(done, total)

    def finished_one(run_id, metric):
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    finetune_runs(home, store, finetunes, workers=workers, device=setup.device, on_done=finished_one)
    return [claim_result(store, claim, setup) for claim in claims]


# ---------------------------------------------------------------------------------------------- tables
def claims_frame(results):
    """The claims table (pandas), one row per claim (`ClaimResult.row`)."""
    import pandas as pd

    return pd.DataFrame([result.row() for result in results])


def _number(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def claims_markdown(results) -> str:
    """The claims table as Markdown: claim, arms, metric, each arm's mean, the difference with its interval, the
    verdict, the smallest detectable effect, the seeds that would resolve it, the FLOPs ratio, the paper's figure."""
    lines = ["| # | claim | baseline -> challenger | metric | baseline | challenger | difference [95% interval] | "
             "verdict | detectable | seeds needed | FLOPs ratio | paper's figure |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        row = result.row()
        interval = (f"{_number(row['effect'])} [{_number(row['low'])}, {_number(row['high'])}] "
                    f"({row['interval_over']})" if result.verdict else "-")
        lines.append(f"| {row['claim']} | {row['statement']} | {row['baseline']} -> {row['challenger']} | "
                     f"{row['metric']} | {_number(row['baseline_mean'])} | {_number(row['challenger_mean'])} | "
                     f"{interval} | **{row['verdict_text']}** | {_number(row['smallest_detectable'])} | "
                     f"{_seeds_needed(row)} | {_number(row['flops_ratio'], 4)} | "
                     f"{row['paper']}, {row['paper_figure']} |")
    return "\n".join(lines) + "\n"


def _seeds_needed(row) -> str:
    """'12 (+45 min)': the seeds per arm that would resolve the observed difference, and the training they add."""
    if not row["seeds_needed"]:
        return "-"
    minutes = row["more_run_minutes"]
    return f"{row['seeds_needed']}" + (f" (+{minutes:.0f} min)" if minutes else "")


def write_tables(results, folder: Path) -> tuple[Path, Path]:
    """claims.csv and claims.md in `folder` (created); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, markdown_path = folder / "claims.csv", folder / "claims.md"
    claims_frame(results).to_csv(csv_path, index=False)
    markdown_path.write_text(claims_markdown(results), encoding="utf-8")
    return csv_path, markdown_path


def record_claims(claims, setup: ClaimsSetup, folder: Path) -> Path:
    """Write the claims' records and the setup they run under (claims.json), before their first run."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "claims.json"
    atomic_write_json(path, {"setup": asdict(setup), "budget_flops": setup.budget,
                             "claims": [asdict(claim) for claim in claims]})
    return path


def claims_folder(home: Path, setup: ClaimsSetup) -> Path:
    """Where a setup's tables and records go: <home>/claims/results/<preset>-<budget>-<seeds>seeds/."""
    return Path(home) / CLAIMS_DIR / "results" / setup.folder_name


def new_score_job_dir(home: Path, preset: str) -> Path:
    """A fresh folder for a scoring job of the app (directly inside <home>/claims/, a job folder of the manager)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(home) / CLAIMS_DIR / f"score-{preset}-{stamp}-{os.urandom(2).hex()}"


# ---------------------------------------------------------------------------------------------- the CLI
def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models claims",
                      description="Test the survey's claims: train each claim's two arms at equal FLOPs, over seeds, "
                                  "and give each claim a verdict with its 95% interval.")
    p.add_argument("--claims", default="all", help="all, or claim numbers or keys separated by commas, e.g. 1,7")
    p.add_argument("--preset", default=DEMO_ZOO_PRESET, help="tiny | small | medium (default tiny)")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="runs per arm (default 3)")
    p.add_argument("--budget-flops", type=float, metavar="F",
                   help="the training FLOPs of every arm (default: the preset's zoo budget, tiny 1e12)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    p.add_argument("--workers", type=int, help="runs (and fine-tunings) at once (default: the zoo's rule)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    p.add_argument("--out", help="where claims.csv and claims.md go (default: <home>/claims/results/<setup>/)")
    p.add_argument("--list", action="store_true", help="list the claims and exit")
    p.add_argument("--score-only", action="store_true",
                   help="train nothing: score the arms' finished runs and write the tables (the app's scoring job)")
    p.add_argument("--job-dir", help=argparse.SUPPRESS)  # the app's job folder: status.json goes there
    return p


def _by_claim(results) -> list:
    """`results` placed at their claims' places in CLAIMS (None where a claim was not asked for)."""
    by_key = {result.claim.key: result for result in results}
    return [by_key.get(claim.key) for claim in CLAIMS]


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _claim_lines(results) -> list[str]:
    lines = []
    for result in results:
        row = result.row()
        if result.verdict is None:
            lines.append(f"{row['claim']:>2}. {row['id']:<28} not run (arms finished: "
                         f"{sum(s == 'finished' for arm in result.arms for s in arm.states)})")
            continue
        lines.append(f"{row['claim']:>2}. {row['id']:<28} {row['metric']:<16} {_number(row['baseline_mean'])} -> "
                     f"{_number(row['challenger_mean'])}  effect {_number(row['effect'])} "
                     f"[{_number(row['low'])}, {_number(row['high'])}]  {row['verdict_text']}")
    return lines


def main(argv: list[str] | None = None, *, trainer_command: list[str] | None = None) -> int:
    """The CLI: train every arm not finished yet, score the runs, print and write the claims table. Exit 0 when every
    claim has a verdict, 1 otherwise, 130 on Ctrl-C or SIGTERM (the runs checkpoint; the same command continues)."""
    try:
        args = build_parser().parse_args(argv)
        claims = parse_claims(args.claims)
        if args.list:
            for claim in claims:
                say(f"{claim.number:>2}. {claim.key:<28} {claim.statement_en}")
                say(f"    {claim.baseline.label_en} -> {claim.challenger.label_en}; metric {claim.metric}; "
                    f"{claim.paper}, {claim.paper_figure}")
            return 0
        home = lab_home(args.home)
        setup = ClaimsSetup(preset=args.preset, seeds=args.seeds, budget_flops=args.budget_flops,
                            device=args.device, workers=args.workers)
        for arm in claim_arms(claims):
            setup.arm_zoo(arm)  # every configuration checked before anything is queued
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    out = Path(args.out).expanduser() if args.out else claims_folder(home, setup)
    job_dir = Path(args.job_dir) if args.job_dir else None
    arms = claim_arms(claims)
    total_runs = len(arms) * setup.seeds

    def status(state, step, message, total=total_runs + 1):
        if job_dir is not None:
            write_status(job_dir, state, step=step, total_steps=max(1, total), message=message)

    signal.signal(signal.SIGTERM, _raise_interrupt)
    record_claims(claims, setup, out)
    jobs = JobManager(home, recover=False, trainer_command=trainer_command)
    began = time.monotonic()
    try:
        if not args.score_only:
            start_claim_runs(jobs, claims, setup)
        say(f"claims {', '.join(str(claim.number) for claim in claims)}: {len(arms)} arms x {setup.seeds} seeds at "
            f"{setup.budget:.3g} FLOPs each ({setup.preset} preset) in {home}")
        while True:
            runs = [run for arm in arms for run in arm_runs(jobs, setup, arm)]
            finished = sum(run.state == "finished" for run in runs)
            status("running", finished, f"{finished} of {total_runs} runs finished")
            if args.score_only or not any(run.state in ("queued", "running") for run in runs):
                break
            time.sleep(1.0)
        jobs.wait_until_idle()
        say(f"trained in {time.monotonic() - began:.0f} s; scoring ...")
        workers = setup.workers or setup.arm_zoo(arms[0]).workers_here
        results = score_claims(home, jobs, claims, setup, workers=workers,
                               progress=lambda done, total: status("running", done, f"scored {done} of {total}",
                                                                   total))
    except KeyboardInterrupt:
        stop_claim_runs(jobs, claims, setup)
        jobs.close()
        status("stopped", 0, "stopped: run the same claims again to continue")
        say("stopped: the runs checkpointed; run the same command again to continue", stream=sys.stderr)
        return EXIT_INTERRUPTED
    except ValueError as error:
        jobs.close()
        status("failed", 0, str(error))
        say_error(error)
        return EXIT_BAD_ARGUMENT
    jobs.close()
    everything = [result if result is not None else claim_result(jobs, claim, setup)
                  for claim, result in zip(CLAIMS, _by_claim(results))]
    csv_path, markdown_path = write_tables(everything, out)
    for line in _claim_lines(results):
        say(line)
    say(f"{len(results)} claims in {time.monotonic() - began:.0f} s; tables: {csv_path} and {markdown_path}")
    missing = [result.claim.key for result in results if result.verdict is None]
    status("finished" if not missing else "failed", 1,
           "every claim has a verdict" if not missing else f"no verdict for {', '.join(missing)}", 1)
    if missing:
        say_error(f"no verdict for {', '.join(missing)}: an arm's run failed or could not be scored (see its "
                  "train.log)")
        return EXIT_FAILED
    return 0
