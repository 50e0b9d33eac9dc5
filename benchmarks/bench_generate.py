"""Benchmark: generating 50 tokens greedily on the CPU with the lab's KV cache, against recomputing every step.

Run `python benchmarks/bench_generate.py [--run DIR ...] [--families gpt gpt2] [--preset small] [--steps 20]
[--tokens 50] [--rounds 5] [--threads 1] [--home DIR]`.

Without --run it trains (or reuses) a `small`-preset run per family with the CLI for a few steps
(`python -m lab_models train --family F --preset small --steps 20 --out HOME/runs/bench-generate-F-small`); the
weights' quality does not change the speed. The `small` preset is the CPU demo size: d_model 256, 4 layers, 4 heads,
d_ff 1024, 256 positions, a ~4000-token vocabulary.

What is timed: `lab_models.inference.generation.generate`'s continue mode, greedy, exactly `--tokens` new tokens after
the prompt (the [EOS] stop is switched off for the measurement, so an early [EOS] cannot shorten a round), from encoding
the prompt to the last token: with the KV cache (one new token through the model per step) and without it (the whole
sequence recomputed per step, `use_cache=False`). One warm-up round, then `--rounds` rounds alternating cached and
uncached; the table shows the median seconds per `--tokens` tokens, ms per token, and the median of the per-round ratios
uncached / cached. A last line times the public `api.generate(run, prompt, max_new_tokens=tokens)` once (it stops at
[EOS] if the model writes one).

Threads: decoding one sequence is a chain of small matrix products (one token x 256 wide), where extra intra-op
threads only add synchronisation; `--threads 1` (the default) is the fastest setting for these sizes and the least
sensitive to a busy machine. Target (the project's): under 1 s for 50 tokens at the `small` preset, with the cache.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT = "the girl eats a red apple in the kitchen ."
TARGET_SECONDS = 1.0


def train_run(family: str, preset: str, steps: int, home: Path) -> Path:
    run_dir = home / "runs" / f"bench-generate-{family}-{preset}"
    if (run_dir / "model.safetensors").is_file():
        return run_dir
    command = [sys.executable, "-m", "lab_models", "train", "--family", family, "--preset", preset, "--steps",
               str(steps), "--device", "cpu", "--out", str(run_dir), "--home", str(home)]
    print("training:", " ".join(command), flush=True)
    env = {**os.environ, "PRETRAINING_LAB_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"training {family} failed:\n{done.stderr[-2000:]}")
    return run_dir


def time_once(run_dir: Path, tokens: int, use_cache: bool) -> float:
    """Seconds to write exactly `tokens` tokens greedily after PROMPT."""
    import torch

    from lab_models.inference.generation.context import DecodingContext
    from lab_models.inference.generation.plans import plan_continue
    from lab_models.inference.generation.search import search_tokens
    from lab_models.inference.loading import load_run

    ctx = DecodingContext(load_run(run_dir))
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        started = time.perf_counter()
        plan, _ = plan_continue(ctx, PROMPT, tokens, use_cache)
        plan.decoder.end_ids = ()  # no [EOS] stop: exactly `tokens` tokens (EOS is then masked like any special)
        result = search_tokens(ctx, plan.decoder, plan.limit, "greedy", 1.0, 0, 1.0, 1, generator)
        seconds = time.perf_counter() - started
    if len(result.tokens) != tokens:
        sys.exit(f"expected {tokens} tokens, got {len(result.tokens)} (the prompt leaves too few positions)")
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, nargs="+", help="run folders to time (default: train small GPT and GPT-2)")
    p.add_argument("--families", nargs="+", default=["gpt", "gpt2"], help="families to train when no --run is given")
    p.add_argument("--preset", default="small", help="preset of the trained runs (default small)")
    p.add_argument("--steps", type=int, default=20, help="training steps of the trained runs (default 20)")
    p.add_argument("--tokens", type=int, default=50, help="new tokens per round (default 50)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per setting; medians are shown (default 5)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1, see the docstring)")
    p.add_argument("--home", type=Path, help="lab home for the trained runs (default: the lab's home)")
    args = p.parse_args(argv)

    import torch

    from lab_models import api
    from lab_models.home import lab_home
    from lab_models.inference.loading import load_run

    torch.set_num_threads(args.threads)
    home = Path(args.home) if args.home else lab_home()
    run_dirs = args.run or [train_run(family, args.preset, args.steps, home) for family in args.families]
    print(f"command: python benchmarks/bench_generate.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPU cores; prompt {PROMPT!r}; "
          f"{args.tokens} new tokens, greedy; median of {args.rounds} rounds")
    header = f"{'run':34} {'family':7} {'cached s':>9} {'ms/tok':>7} {'uncached s':>11} {'ms/tok':>7} {'ratio':>6}"
    print(header)
    print("-" * len(header))
    ok = True
    for run_dir in run_dirs:
        run = load_run(run_dir)
        time_once(run_dir, args.tokens, True)  # warm-up: load, allocate
        time_once(run_dir, args.tokens, False)
        cached, uncached, ratios = [], [], []
        for _ in range(args.rounds):
            c = time_once(run_dir, args.tokens, True)
            u = time_once(run_dir, args.tokens, False)
            cached.append(c)
            uncached.append(u)
            ratios.append(u / c)
        c, u = statistics.median(cached), statistics.median(uncached)
        print(f"{run.run_id[:34]:34} {run.family:7} {c:9.3f} {1000 * c / args.tokens:7.1f} {u:11.3f} "
              f"{1000 * u / args.tokens:7.1f} {statistics.median(ratios):5.2f}x")
        ok = ok and c < TARGET_SECONDS
        g = api.generate(run_dir, PROMPT, max_new_tokens=args.tokens)
        print(f"    api.generate: {len(g.tokens)} tokens in {g.seconds:.3f} s ({g.ms_per_token:.1f} ms/token); "
              f"{g.explanation}")
    print(f"target: < {TARGET_SECONDS:g} s per {args.tokens} tokens with the cache: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
