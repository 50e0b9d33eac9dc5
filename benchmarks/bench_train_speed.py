"""Benchmark: the lab's training speed on the CPU against Hugging Face transformers, per precision, at the `small`
and `tiny` presets, with MFU, the quality bf16 keeps, and peak memory.

    python benchmarks/bench_train_speed.py [--presets small tiny] [--families gpt bert t5 xlnet] [--rounds 5]
        [--steps 4] [--warmup 3] [--threads N] [--compile] [--quality-steps 300] [--no-quality] [--no-memory]
        [--json FILE]
    python benchmarks/bench_train_speed.py --quick        # a smoke run of every part (a minute or two)

(`pip install -r benchmarks/requirements-bench.txt` first: `transformers` is a benchmark-only dependency.)

What is compared, per preset (its model size, lab_models/nn/config.py PRESETS, and its training defaults,
lab_models/training/config.py: `small` is batch 16 x 128 tokens and a 4000-token vocabulary plus the lab's 40 special
ids; `tiny` batch 16 x 64 and 512 + 40) and family, everything in one process, interleaved:

    lab default   the lab as a user runs it: lab_models.training.engine.Trainer with PerformanceConfig() (precision=auto:
                  bf16 autocast on a CPU with native bf16, fp32 elsewhere; fused AdamW; ...), one step per
                  `next()` of its event generator (log_every=1: the loss is read back every step, as the engine does)
    lab fp32      the same Trainer with precision=fp32
    lab bf16      the same Trainer with precision=bf16 (measured apart only where the default is not bf16 already)
    lab compile   (--compile) the default plus compile=true (inductor's C++ backend); compile time reported apart
    HF fp32       transformers' default: its model class built from a config (nothing downloaded), fp32, the AdamW
                  that transformers' Trainer uses by default with torch >= 2.8 (`adamw_torch_fused`), grad clip 1.0
    HF bf16       the same under `torch.autocast("cpu", torch.bfloat16)` (what `TrainingArguments(bf16=True)` does)

The peers: GPT - OpenAIGPTLMHeadModel (post-LN GPT-1, as the lab's GPT); BERT - BertForPreTraining (MLM + NSP, as the
lab's BERT; its default attention, SDPA); T5 - T5ForConditionalGeneration (T5 v1.0, the lab's T5 defaults); XLNet -
XLNetLMHeadModel (two streams, relative attention). Both sides train on the same batches: the lab's batch builder draws
each batch (masking, spans, permutations; its cost is part of the lab's step) and the HF side gets the equivalent
tensors (benchmarks/bench_seq2seq_speed.py says how for T5 and XLNet; for BERT the same 15% / 80-10-10 masking and NSP
pairs, vectorised). Token ids are random: speed does not depend on the text. Dropout 0.1 on both sides, train mode.

Interleaving. A round runs `--steps` steps of every variant in turn, the order reversed every second round, so
neighbouring measurements share the machine's load; a variant's speed in a round is tokens per step over its median
step, a ratio is taken within each round, and the table shows the median over the rounds (this tolerates a shared,
busy machine far better than separate runs). The load average is printed with every table.

MFU: the lab's FLOPs per token (counted by the Trainer: torch's FlopCounterMode on a real batch) x tokens/s, over the
bf16 peak of a 1024 x 1024 matmul probe measured at the start (lab_models/training/matmul_probe.py), for GPT at
`small`. Quality: `python -m lab_models train` at `--quality-preset` (tiny: the synthetic corpus; small: the stdlib
docs), fp32 and bf16 forced, from the same seed for `--quality-steps` steps; the last validation losses compared.
Memory: the lab default at `small` trained in a fresh process; its peak RSS (ru_maxrss: the interpreter, torch and the
lab's modules included).

Targets (on a CPU with native bf16; `small` and `tiny`, GPT, BERT, T5, XLNet): lab default / HF fp32 >= 2.0,
lab bf16 / HF bf16 >= 1.25, MFU of GPT at `small` >= 50% of the bf16 probe, bf16's validation loss within 2% of fp32's
after 300 steps; peak RSS of training at `small` < 2 GiB. The tiny zoo's time is benchmarks/bench_zoo.py's.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

FAMILIES = ("gpt", "bert", "t5", "xlnet")
PRESETS = ("small", "tiny")
TARGET_DEFAULT_VS_HF_FP32 = 2.0
TARGET_BF16_VS_HF_BF16 = 1.25
TARGET_MFU_GPT_SMALL = 0.50
TARGET_QUALITY_REL = 0.02
TARGET_RSS_BYTES = 2 * 1024**3
N_SPECIALS = 40  # lab_models/text/vocab.py: 8 special tokens + 32 sentinels
MASK_RATE = 0.15
DROPOUT = 0.1
OPTIMIZER = dict(betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01, grad_clip=1.0)
HF_CLASSES = {"gpt": "OpenAIGPTLMHeadModel", "bert": "BertForPreTraining", "t5": "T5ForConditionalGeneration",
              "xlnet": "XLNetLMHeadModel"}


def require_transformers():
    try:
        import transformers
    except ImportError:
        print("bench_train_speed needs Hugging Face transformers: pip install -r benchmarks/requirements-bench.txt",
              file=sys.stderr)
        sys.exit(2)
    return transformers


def load_average() -> str:
    try:
        return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


# ------------------------------------------------------------------------------------------------ the sides


def setup_for(preset: str) -> dict:
    from bench_seq2seq_speed import training_setup

    return training_setup(preset)


def batch_source(family: str, preset: str):
    from bench_seq2seq_speed import packed_batches, vocab_info

    setup = setup_for(preset)
    vocab = vocab_info(setup)
    return vocab, packed_batches(family, vocab, setup)


class LabSide:
    """The lab's Trainer, stepped one `next()` of its event generator at a time."""

    def __init__(self, family: str, preset: str, performance: dict, home: Path):
        import torch

        from lab_models.models.family import build_model, family_model_config
        from lab_models.training.engine import EngineConfig, Trainer
        from lab_models.training.performance import PerformanceConfig

        setup = setup_for(preset)
        vocab, batches = batch_source(family, preset)
        config = family_model_config(family, preset, vocab.size, dropout=DROPOUT)
        model = build_model(family, config, None, vocab, seed=0)
        self.tokens_per_step = setup["batch_size"] * setup["seq_len"]
        self.trainer = Trainer(model, batches, EngineConfig(
            steps=10**6, lr=setup["lr"], warmup_steps=0, weight_decay=OPTIMIZER["weight_decay"],
            betas=OPTIMIZER["betas"], eps=OPTIMIZER["eps"], grad_clip=OPTIMIZER["grad_clip"], log_every=1),
            performance=PerformanceConfig(**performance), home=home)
        self.trainer.measure_model()  # FLOPs per token, and the precision precision=auto resolves to with them
        self.events = self.trainer.run()
        self.precision = self.trainer.precision.precision
        self.parameters = sum(p.numel() for p in model.parameters())
        self.first_step_s: float | None = None
        self.loss = float("nan")
        torch.manual_seed(0)

    def step(self) -> float:
        started = time.perf_counter()
        event = next(self.events)
        seconds = time.perf_counter() - started
        if self.first_step_s is None:
            self.first_step_s = seconds  # FLOP count (+ compilation) before the first step
        self.loss = event.loss
        return seconds

    @property
    def flops_per_token(self) -> float | None:
        return self.trainer.flops_per_token

    @property
    def compile_s(self) -> float | None:
        return self.trainer.compile_s


def hf_model(family: str, preset: str, vocab_size: int):
    transformers = require_transformers()
    import torch

    from bench_seq2seq_speed import hf_model as seq2seq_model

    setup = setup_for(preset)
    torch.manual_seed(0)
    d, layers, heads, ff = setup["d_model"], setup["n_layers"], setup["n_heads"], setup["d_ff"]
    positions = setup["max_positions"]
    if family == "gpt":
        return transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(
            vocab_size=vocab_size, n_positions=positions, n_embd=d, n_layer=layers, n_head=heads, afn="gelu",
            resid_pdrop=DROPOUT, embd_pdrop=DROPOUT, attn_pdrop=DROPOUT, layer_norm_epsilon=1e-5))
    if family == "bert":
        return transformers.BertForPreTraining(transformers.BertConfig(
            vocab_size=vocab_size, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=ff, max_position_embeddings=positions, type_vocab_size=2, hidden_act="gelu",
            hidden_dropout_prob=DROPOUT, attention_probs_dropout_prob=DROPOUT, layer_norm_eps=1e-12,
            pad_token_id=0))
    return seq2seq_model(family, vocab_size, setup, DROPOUT)


def hf_bert_inputs(rows, vocab, generator) -> dict:
    """BERT's MLM + NSP tensors for (B, T) rows: 15% of positions per row, 80/10/10, NSP pairs split in the middle
    half with a NotNext second segment for half the rows (as the lab's builder does)."""
    import torch

    B, T = rows.shape
    n_mask = max(1, round(T * MASK_RATE))
    picked = torch.rand(B, T, generator=generator).argsort(dim=1)[:, :n_mask]  # (B, n)
    is_picked = torch.zeros(B, T, dtype=torch.bool).scatter_(1, picked, True)
    labels = torch.where(is_picked, rows, torch.full_like(rows, -100))
    fate = torch.rand(B, T, generator=generator)
    inputs = rows.clone()
    inputs[is_picked & (fate < 0.8)] = vocab.mask_id
    randomised = is_picked & (fate >= 0.8) & (fate < 0.9)
    inputs[randomised] = torch.randint(N_SPECIALS, vocab.size, (int(randomised.sum()),), generator=generator)
    split = torch.randint(T // 4, 3 * T // 4 + 1, (B,), generator=generator)
    token_type_ids = (torch.arange(T)[None, :] >= split[:, None]).long()  # (B, T)
    not_next = torch.rand(B, generator=generator) < 0.5
    inputs = torch.where(not_next[:, None] & token_type_ids.bool(), rows.roll(1, dims=0), inputs)
    return {"input_ids": inputs, "token_type_ids": token_type_ids, "attention_mask": torch.ones_like(rows),
            "labels": labels, "next_sentence_label": not_next.long()}


class HFSide:
    """The transformers peer in a bare training loop: inputs, forward (+ autocast), backward, clip, fused AdamW."""

    def __init__(self, family: str, preset: str, precision: str):
        import torch

        from lab_models.training.engine import parameter_groups

        self.family = family
        self.vocab, self.batches = batch_source(family, preset)
        setup = setup_for(preset)
        self.tokens_per_step = setup["batch_size"] * setup["seq_len"]
        self.model = hf_model(family, preset, self.vocab.size)
        self.model.train()
        self.precision = precision
        self.generator = torch.Generator().manual_seed(3)
        self.optimizer = torch.optim.AdamW(parameter_groups(self.model, OPTIMIZER["weight_decay"]), lr=setup["lr"],
                                           betas=OPTIMIZER["betas"], eps=OPTIMIZER["eps"], fused=True)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.parameters = sum(p.numel() for p in self.model.parameters())
        self.attention = getattr(self.model.config, "_attn_implementation", None) or "eager"
        self.loss = float("nan")

    def inputs(self) -> dict:
        from bench_seq2seq_speed import hf_inputs

        if self.family == "gpt":
            rows = self.batches.train_rows(self.generator)
            return {"input_ids": rows, "labels": rows}  # the model shifts the labels itself
        if self.family == "bert":
            return hf_bert_inputs(self.batches.train_rows(self.generator), self.vocab, self.generator)
        return hf_inputs(self.family, self.batches.train_batch(self.generator))

    def step(self) -> float:
        import contextlib

        import torch

        started = time.perf_counter()
        inputs = self.inputs()
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if self.precision == "bf16"
                    else contextlib.nullcontext())
        with autocast:
            loss = self.model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, OPTIMIZER["grad_clip"])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = float(loss.detach())
        return time.perf_counter() - started


# ------------------------------------------------------------------------------------------------ interleaved rounds


@dataclass
class Variant:
    name: str
    side: object
    rounds: list[float] = field(default_factory=list)  # tokens/s per round

    @property
    def tokens_per_s(self) -> float:
        return statistics.median(self.rounds)


def build_variants(family: str, preset: str, args, home: Path) -> dict[str, Variant]:
    from lab_models.training.performance import PerformanceConfig

    variants = {"lab default": Variant("lab default", LabSide(family, preset, {}, home))}
    default_precision = variants["lab default"].side.precision
    for precision in ("fp32", "bf16"):
        if precision != default_precision or PerformanceConfig().precision != "auto":
            variants[f"lab {precision}"] = Variant(f"lab {precision}",
                                                   LabSide(family, preset, {"precision": precision}, home))
        else:
            variants[f"lab {precision}"] = variants["lab default"]  # the same configuration: measured once
    if args.compile:
        variants["lab compile"] = Variant("lab compile", LabSide(family, preset, {"compile": True}, home))
    for precision in ("fp32", "bf16"):
        variants[f"HF {precision}"] = Variant(f"HF {precision}", HFSide(family, preset, precision))
    return variants


def measure(family: str, preset: str, args, home: Path) -> dict:
    variants = build_variants(family, preset, args, home)
    distinct = list({id(v): v for v in variants.values()}.values())
    for variant in distinct:  # warm-up: FLOP count, compilation, first-touch allocations
        for _ in range(args.warmup):
            variant.side.step()
    ratios: dict[str, list[float]] = {"default/HF fp32": [], "bf16/HF bf16": [], "fp32/HF fp32": [],
                                      "bf16/fp32 (lab)": []}
    if args.compile:
        ratios["compile/default"] = []
    for r in range(args.rounds):
        order = distinct if r % 2 == 0 else list(reversed(distinct))
        for variant in order:
            seconds = [variant.side.step() for _ in range(args.steps)]
            variant.rounds.append(variant.side.tokens_per_step / statistics.median(seconds))
        speed = {name: v.rounds[-1] for name, v in variants.items()}
        ratios["default/HF fp32"].append(speed["lab default"] / speed["HF fp32"])
        ratios["bf16/HF bf16"].append(speed["lab bf16"] / speed["HF bf16"])
        ratios["fp32/HF fp32"].append(speed["lab fp32"] / speed["HF fp32"])
        ratios["bf16/fp32 (lab)"].append(speed["lab bf16"] / speed["lab fp32"])
        if args.compile:
            ratios["compile/default"].append(speed["lab compile"] / speed["lab default"])
    lab = variants["lab default"].side
    return {"family": family, "preset": preset, "load": load_average(),
            "tokens_per_s": {name: v.tokens_per_s for name, v in variants.items()},
            "rounds": {name: v.rounds for name, v in variants.items()},
            "ratios": {name: statistics.median(values) for name, values in ratios.items()},
            "ratio_rounds": ratios, "default_precision": lab.precision,
            "flops_per_token": {name: v.side.flops_per_token for name, v in variants.items()
                                if isinstance(v.side, LabSide)},
            "compile_s": variants["lab compile"].side.compile_s if args.compile else None,
            "parameters": {"lab": lab.parameters, "HF": variants["HF fp32"].side.parameters},
            "hf_attention": variants["HF fp32"].side.attention}


# ------------------------------------------------------------------------------------------------ quality and memory


def quality(family: str, steps: int, home: Path, threads: int, preset: str = "tiny") -> dict:
    """The last validation loss of `python -m lab_models train` at `preset` (its own corpus), fp32 and bf16, the
    same seed."""
    losses = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    for precision in ("fp32", "bf16"):
        out = home / "runs" / f"quality-{preset}-{family}-{precision}"
        command = [sys.executable, "-m", "lab_models", "train", "--family", family, "--out", str(out), "--home",
                   str(home), "--preset", preset, "--steps", str(steps), "--eval-every", str(steps),
                   "--checkpoint-every", "0", "--perf", f"precision={precision}"]
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"training {family} in {precision} failed:\n{done.stderr[-2000:]}")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        losses[precision] = [r for r in rows if r.get("split") == "val"][-1]["loss"]
    return {"family": family, "preset": preset, "steps": steps, **losses,
            "relative": losses["bf16"] / losses["fp32"] - 1}


def memory_worker(family: str, threads: int, home: Path) -> int:
    """Train the lab default at `small` for a few steps in this fresh process; print its peak RSS."""
    import torch

    torch.set_num_threads(threads)
    side = LabSide(family, "small", {}, home)
    for _ in range(4):
        side.step()
    print(json.dumps({"family": family, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
    return 0


def memory(family: str, threads: int, home: Path) -> int:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--memory-worker", family, "--threads",
                           str(threads), "--home", str(home)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"memory worker {family} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_bytes"]


# ------------------------------------------------------------------------------------------------ the report


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the tables show medians (default 5)")
    p.add_argument("--steps", type=int, default=4, help="timed steps per variant and round (default 4)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per variant first (default 3)")
    p.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 8),
                   help="torch.set_num_threads (default: the cores, at most 8)")
    p.add_argument("--compile", action="store_true", help="also time the default with compile=true")
    p.add_argument("--quality-steps", type=int, default=300, help="steps of the bf16-vs-fp32 quality runs (300)")
    p.add_argument("--quality-preset", default="tiny", choices=list(PRESETS),
                   help="the preset of the quality runs (default tiny: 300 steps take seconds; small: minutes each)")
    p.add_argument("--no-quality", action="store_true", help="skip the quality runs")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny only, 2 rounds of 2 steps, GPT and BERT, "
                                                         "30 quality steps, no memory runs")
    p.add_argument("--home", type=Path, help="the lab home for the probe and the quality runs (default: a temporary "
                                             "folder, so the probe is measured fresh)")
    p.add_argument("--json", type=Path, help="also write every measurement to this file")
    p.add_argument("--memory-worker", choices=FAMILIES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.presets, args.families, args.rounds, args.steps, args.warmup = ["tiny"], ["gpt", "bert"], 2, 2, 1
        args.quality_steps, args.no_memory = 30, True

    import torch

    torch.set_num_threads(args.threads)
    if args.memory_worker:
        return memory_worker(args.memory_worker, args.threads, args.home)
    transformers = require_transformers()
    from lab_models.home import lab_home
    from lab_models.training.matmul_probe import cached_matmul_peaks, native_bf16_features

    with tempfile.TemporaryDirectory(prefix="bench-train-speed-") as scratch:
        home = args.home or Path(scratch)
        lab_home(home)
        print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
              f"{args.rounds} rounds x {args.steps} steps per variant ({args.warmup} warm-up), {load_average()}")
        peaks = cached_matmul_peaks(torch.device("cpu"), home, refresh=args.home is None)
        print(f"CPU: {peaks.device_name}; native bf16: {', '.join(native_bf16_features()) or 'none'}; matmul probe "
              f"(1024 x 1024, best of its repeats): fp32 {peaks.fp32 / 1e9:.0f} GFLOP/s, bf16 "
              f"{peaks.bf16 / 1e9:.0f} GFLOP/s ({peaks.bf16_speedup:.2f}x)\n")
        results = []
        for preset in args.presets:
            for family in args.families:
                started = time.perf_counter()
                result = measure(family, preset, args, home)
                results.append(result)
                speeds = ", ".join(f"{name} {value:,.0f}" for name, value in result["tokens_per_s"].items())
                print(f"{preset:5s} {family:5s} tokens/s: {speeds} ({time.perf_counter() - started:.0f} s, "
                      f"{result['load']})", flush=True)
        quality_rows = [] if args.no_quality else [quality(f, args.quality_steps, home, args.threads,
                                                           args.quality_preset) for f in args.families]
        memory_rows = {} if args.no_memory else {f: memory(f, args.threads, home) for f in args.families
                                                 if f in ("gpt", "bert")}

    print(f"\nSpeed ratios (median of the per-round ratios; default = precision=auto, which ran "
          f"{results[0]['default_precision'] if results else '?'} here; {load_average()} at the end)\n")
    header = ("| preset | family | HF peer | lab default / HF fp32 (target >= 2.0) | lab bf16 / HF bf16 (target >= "
              "1.25) | lab fp32 / HF fp32 | lab bf16 / lab fp32 |" + (" compile / default |" if args.compile else ""))
    print(header)
    print("|" + "|".join("---" for _ in header.split("|")[1:-1]) + "|")
    ok_default = ok_bf16 = True
    for r in results:
        x = r["ratios"]
        ok_default &= x["default/HF fp32"] >= TARGET_DEFAULT_VS_HF_FP32
        ok_bf16 &= x["bf16/HF bf16"] >= TARGET_BF16_VS_HF_BF16
        row = (f"| {r['preset']} | {r['family']} | {HF_CLASSES[r['family']]} ({r['hf_attention']}) | "
               f"{x['default/HF fp32']:.2f} | {x['bf16/HF bf16']:.2f} | {x['fp32/HF fp32']:.2f} | "
               f"{x['bf16/fp32 (lab)']:.2f} |")
        if args.compile:
            row += f" {x['compile/default']:.2f} (compiled in {r['compile_s']:.0f} s) |"
        print(row)
    print(f"\ntargets: lab default / HF fp32 >= {TARGET_DEFAULT_VS_HF_FP32} -> {verdict(ok_default)}; lab bf16 / HF "
          f"bf16 >= {TARGET_BF16_VS_HF_BF16} -> {verdict(ok_bf16)}")

    for r in results:
        if r["preset"] == "small" and r["family"] == "gpt":
            flops = r["flops_per_token"]["lab bf16"]
            achieved = flops * r["tokens_per_s"]["lab bf16"]
            value = achieved / peaks.bf16
            print(f"MFU of GPT at small, bf16: {flops / 1e6:.1f} MFLOP/token x {r['tokens_per_s']['lab bf16']:,.0f} "
                  f"tokens/s = {achieved / 1e9:.0f} GFLOP/s = {value:.1%} of the bf16 probe's "
                  f"{peaks.bf16 / 1e9:.0f} GFLOP/s (target >= {TARGET_MFU_GPT_SMALL:.0%}) -> "
                  f"{verdict(value >= TARGET_MFU_GPT_SMALL)}; {achieved / peaks.fp32:.1%} of the fp32 probe's")
    for q in quality_rows:
        print(f"quality, {q['family']} {q['preset']}, {q['steps']} steps: validation loss fp32 {q['fp32']:.4f}, bf16 "
              f"{q['bf16']:.4f} ({q['relative']:+.2%}; target within {TARGET_QUALITY_REL:.0%}) -> "
              f"{verdict(abs(q['relative']) <= TARGET_QUALITY_REL)}")
    for family, rss in memory_rows.items():
        print(f"peak RSS, training the lab default {family} at small: {rss / 2**20:.0f} MiB (target < 2 GiB) -> "
              f"{verdict(rss < TARGET_RSS_BYTES)}")
    print("\n(tokens/s: batch x seq_len tokens over the median step of a round; the tiny zoo's time: "
          "python benchmarks/bench_zoo.py)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "peaks": peaks.to_dict(),
                                         "results": results, "quality": quality_rows, "memory": memory_rows},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
