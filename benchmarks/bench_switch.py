"""Benchmark: a dense model against the same model with Switch Transformer layers, at the same FLOPs per token.

Paper: Fedus, Zoph, Shazeer (2022), Switch Transformers. Their claim (§2.2, Figure 1 and 4): with the FLOPs per token
held fixed, adding experts (parameters) reaches a lower loss after the same number of steps, and a given loss sooner.

Run `python benchmarks/bench_switch.py [--family gpt] [--preset tiny] [--steps 400] [--n-experts 8]
[--capacity-factor 1.25] [--expert-every 2] [--rounds 5] [--round-steps 5] [--threads N] [--device auto]
[--out DIR] [--corpus NAME] [--model KEY=VALUE ...]`.

What is measured, for the dense model and the Switch model (the preset's sizes; every `expert_every`-th feed-forward
becomes `n_experts` experts of the same d_ff, so a token's FFN costs the same):
- parameters: total, non-embedding (Kaplan et al.'s N) and active non-embedding (one expert per Switch layer);
- forward FLOPs per token, two ways: Kaplan's count (lab_models/models/switch.py `forward_flops_per_token`: 2 per active
  parameter, attention over the context, the vocabulary projection), and `torch.utils.flop_counter.FlopCounterMode` on
  one real forward pass of the family's loss (matrix products only; it includes the empty slots of each expert's
  capacity buffer, capacity factor x the tokens, and the model's sparse LM head, so it differs from Kaplan's count);
- one feed-forward layer's forward + backward time: dense, the lab's batched Switch dispatch, and a Switch layer
  written as a Python loop over the experts (the usual simple implementation), interleaved, median of the rounds;
- training tokens/s: the lab's own training step (lab_models/training/engine.py Trainer.train_step: forward, backward,
  clipping, AdamW), the two models interleaved round by round in the same process (`--rounds` x `--round-steps`
  steps each, after one warm-up round), so that a busy machine slows both alike; the ratio is what to read;
- validation bits per byte after `--steps` steps of `python -m lab_models train` (same corpus, tokenizer, seed,
  batches and schedule; the runs are written under `--out`), and the curve at every evaluation.

The Switch run's metrics also carry its load-balancing loss and per-expert routing (its metrics.jsonl). Deviations
from the paper's setup: tiny CPU models and few steps (the paper trains T5-Base-sized models for 100k+ steps on C4),
and capacity 1.25 at evaluation too (the lab drops nothing at evaluation).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, as the other benchmarks

from lab_models.training import run as train_cli  # noqa: E402
from lab_models.training.config import parse_model_overrides  # noqa: E402
from lab_models.text.corpora import load_corpus  # noqa: E402
from lab_models.training.batches import PackedBatches
from lab_models.text.vocab_fit import build_tokenizer
from lab_models.text.streams import encode_stream  # noqa: E402
from lab_models.training.device import select_device  # noqa: E402
from lab_models.training.engine import EngineConfig, Trainer  # noqa: E402
from lab_models.families import family_record  # noqa: E402
from lab_models.models.family import build_model, family_model_config  # noqa: E402
from lab_models.objectives import objective_module  # noqa: E402
from lab_models.objectives.common import BatchConfig  # noqa: E402
from lab_models.models.switch import forward_flops_per_token, parameter_counts  # noqa: E402
from lab_models.training.config import PRESET_DEFAULTS  # noqa: E402
from lab_models.text.vocab import prepare_tokenizer  # noqa: E402


def variants(args) -> dict[str, dict]:
    switch = {"ffn": "switch", "n_experts": args.n_experts, "capacity_factor": args.capacity_factor,
              "expert_every": args.expert_every}
    extra = parse_model_overrides(args.model, args.family)
    return {"dense": dict(extra), "switch": {**extra, **switch}}


def measured_flops(model, batch) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model.loss(batch)
    model.train()
    return counter.get_total_flops()


def speed_and_size(args, device) -> dict[str, dict]:
    """Parameters, FLOPs per token and interleaved training tokens/s of both variants."""
    defaults = PRESET_DEFAULTS[args.preset]
    corpus = load_corpus(args.corpus or defaults["corpus"])
    tokenizer, info = prepare_tokenizer(build_tokenizer(corpus, family_record(args.family).tokenizer,
                                                        defaults["vocab_size"]).tokenizer)
    module = objective_module(args.family)
    settings = module.Settings()
    train = encode_stream(tokenizer, corpus.train, info.eos_id)
    validation = encode_stream(tokenizer, corpus.validation, info.eos_id)
    batches = PackedBatches(train, validation, seq_len=defaults["seq_len"], batch_size=defaults["batch_size"],
                            objective=module, batch_config=BatchConfig(settings, info), eval_batches=1)
    steps = (args.rounds + 1) * args.round_steps
    results, trainers = {}, {}
    for name, overrides in variants(args).items():
        config = family_model_config(args.family, args.preset, info.size, settings=settings, **overrides)
        model = build_model(args.family, config, settings, info, None, seed=0)
        counts = parameter_counts(model)
        probe = batches.train_batch(torch.Generator().manual_seed(0))
        tokens = probe.input_ids.numel() + (0 if probe.decoder_input_ids is None else probe.decoder_input_ids.numel())
        results[name] = {**counts, "kaplan_flops_per_token": forward_flops_per_token(
            config, defaults["seq_len"], counts["active_non_embedding"]),
            "measured_flops_per_token": measured_flops(model, probe) / tokens, "seconds": 0.0, "tokens": 0}
        trainers[name] = Trainer(model, batches, EngineConfig(steps=steps, lr=defaults["lr"]), device=device)
    step = 0
    for round_index in range(args.rounds + 1):  # round 0 warms up (allocations, oneDNN kernels) and is not timed
        first = step
        for name, trainer in trainers.items():
            started = time.perf_counter()
            for offset in range(1, args.round_steps + 1):
                out, _, tokens, _ = trainer.train_step(first + offset)
                results[name]["tokens"] += tokens if round_index else 0
            float(out.total.detach())  # wait for the device
            if round_index:
                results[name]["seconds"] += time.perf_counter() - started
        step = first + args.round_steps
    for result in results.values():
        result["tokens_per_s"] = result["tokens"] / max(result["seconds"], 1e-9)
    return results


def loop_switch(layer, x: torch.Tensor) -> torch.Tensor:
    """The peer of the batched dispatch: the same layer computed with a Python loop over the experts (a
    `nonzero` per expert picks its tokens, as many simple MoE implementations do)."""
    import torch.nn.functional as F

    tokens = x.reshape(-1, x.shape[-1])  # (N, H)
    probs = F.linear(tokens.float(), layer.router.float()).softmax(-1)  # (N, E)
    gate, expert = probs.max(-1)
    capacity = layer.capacity(tokens.shape[0])
    ups, projs = layer.up.unbind(0), layer.proj.unbind(0)  # one view per expert (one stack in backward)
    outputs, picked = [], []
    for e in range(layer.n_experts):
        rows = (expert == e).nonzero().squeeze(1)[:capacity]  # tokens in order; the rest are dropped
        outputs.append((F.gelu(tokens[rows] @ ups[e]) @ projs[e]) * gate[rows].unsqueeze(1))  # (n_e, H)
        picked.append(rows)
    out = torch.zeros_like(tokens).index_add(0, torch.cat(picked), torch.cat(outputs))
    return out.reshape(x.shape)


def layer_speed(args) -> dict[str, float]:
    """Forward + backward milliseconds of one feed-forward layer on (batch x seq_len) tokens of the preset's width:
    dense, Switch (batched dispatch, the lab's), Switch with a loop over experts; interleaved rounds, median."""
    from statistics import median

    from lab_models.nn.feed_forward import FeedForward
    from lab_models.nn.config import preset_config
    from lab_models.nn.moe import SwitchFeedForward

    defaults = PRESET_DEFAULTS[args.preset]
    config = preset_config(args.preset, 100, ffn="switch", n_experts=args.n_experts,
                           capacity_factor=args.capacity_factor, expert_every=1)
    dense, switch = FeedForward(config).train(), SwitchFeedForward(config).train()
    x = torch.randn(defaults["batch_size"], defaults["seq_len"], config.d_model, requires_grad=True)
    candidates = {"dense FFN": lambda: dense(x), "switch (batched)": lambda: switch(x),
                  "switch (loop over experts)": lambda: loop_switch(switch, x)}
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for round_index in range(args.rounds + 1):
        for name, forward in candidates.items():
            started = time.perf_counter()
            for _ in range(args.round_steps):
                forward().square().mean().backward()
            if round_index:  # round 0 warms up
                times[name].append(1000 * (time.perf_counter() - started) / args.round_steps)
    return {name: median(values) for name, values in times.items()}


def quality(args, out: Path) -> dict[str, dict]:
    """Validation bits per byte of both variants after the same training run."""
    results = {}
    for name, overrides in variants(args).items():
        run_dir = out / f"{args.family}-{args.preset}-{name}"
        argv = ["--family", args.family, "--out", str(run_dir), "--preset", args.preset, "--steps", str(args.steps),
                "--seed", "0", "--device", args.device, "--eval-every", str(max(1, args.steps // 4)),
                "--checkpoint-every", "0"]
        if args.corpus:
            argv += ["--corpus", args.corpus]
        for key, value in overrides.items():
            argv += ["--model", f"{key}={value}"]
        started = time.perf_counter()
        code = train_cli.main(argv)
        if code != 0:
            raise SystemExit(f"error: the {name} run failed (exit {code}); see {run_dir}/train.log")
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        val = [row for row in rows if row.get("split") == "val"]
        last_train = [row for row in rows if row.get("split") == "train"][-1]
        results[name] = {"bits_per_byte": val[-1]["bits_per_byte"], "val_loss": val[-1]["losses"],
                         "curve": [(row["step"], round(row["bits_per_byte"], 4)) for row in val],
                         "run_seconds": time.perf_counter() - started, "run_dir": str(run_dir),
                         "switch": last_train.get("switch")}
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="gpt")
    parser.add_argument("--preset", default="tiny", choices=list(PRESET_DEFAULTS))
    parser.add_argument("--corpus", help="default: the preset's")
    parser.add_argument("--steps", type=int, default=400, help="training steps of each run (default 400)")
    parser.add_argument("--n-experts", type=int, default=8)
    parser.add_argument("--capacity-factor", type=float, default=1.25)
    parser.add_argument("--expert-every", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="timed speed rounds (after one warm-up round)")
    parser.add_argument("--round-steps", type=int, default=5, help="training steps per model per round")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", help="where the two runs go (default: a new temporary folder)")
    parser.add_argument("--model", action="append", default=[], metavar="KEY=VALUE",
                        help="model overrides for both variants, e.g. d_model=128")
    parser.add_argument("--skip-quality", action="store_true", help="only parameters, FLOPs and speed")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-switch-"))
    print(f"device {device}, torch threads {torch.get_num_threads()}, family {args.family}, preset {args.preset}, "
          f"Switch: {args.n_experts} experts, capacity factor {args.capacity_factor}, every {args.expert_every}")
    size = speed_and_size(args, device)
    header = f"{'':8} {'params':>10} {'non-emb':>10} {'active':>10} {'FLOPs/tok':>11} {'measured':>11} {'tokens/s':>9}"
    print(header)
    for name, r in size.items():
        print(f"{name:8} {r['total']:>10,} {r['non_embedding']:>10,} {r['active_non_embedding']:>10,} "
              f"{r['kaplan_flops_per_token']:>11,.0f} {r['measured_flops_per_token']:>11,.0f} "
              f"{r['tokens_per_s']:>9,.0f}")
    dense, switch = size["dense"], size["switch"]
    print(f"switch / dense: parameters x{switch['total'] / dense['total']:.2f}, non-embedding "
          f"x{switch['non_embedding'] / dense['non_embedding']:.2f}, FLOPs/token (Kaplan) "
          f"x{switch['kaplan_flops_per_token'] / dense['kaplan_flops_per_token']:.3f}, measured "
          f"x{switch['measured_flops_per_token'] / dense['measured_flops_per_token']:.3f}, tokens/s "
          f"x{switch['tokens_per_s'] / dense['tokens_per_s']:.2f}")
    layer = layer_speed(args)
    base = layer["dense FFN"]
    print("one feed-forward layer, forward + backward: " + ", ".join(
        f"{name} {ms:.2f} ms ({ms / base:.2f}x dense)" for name, ms in layer.items()))
    if args.skip_quality:
        return 0
    result = quality(args, out)
    for name, r in result.items():
        print(f"{name:8} val bits/byte {r['bits_per_byte']:.4f} after {args.steps} steps ({r['run_seconds']:.0f} s); "
              f"curve {r['curve']}")
    delta = result["switch"]["bits_per_byte"] - result["dense"]["bits_per_byte"]
    verdict = "lower (the paper's direction)" if delta < 0 else "not lower"
    print(f"switch - dense: {delta:+.4f} bits per byte: Switch is {verdict} at this size and step count")
    routing = result["switch"].get("switch") or {}
    if routing:
        print(f"switch routing at the last logged step: routed {routing['routed']}, dropped {routing['dropped']}")
    print(f"runs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
