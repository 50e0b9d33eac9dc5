"""Where a CPU training step spends its time: the lab's step and transformers' side by side, under torch.profiler.

    python benchmarks/profile_train_step.py [--family gpt] [--preset small] [--precision bf16] [--steps 5] [--top 12]

Both sides are `benchmarks/bench_train_speed.py`'s (same model sizes, batches, optimizer and autocast); after two
warm-up steps each side runs `--steps` steps under `torch.profiler.profile` (CPU activities). It prints each side's
wall time per step, its CPU time split into kinds of work (matrix products, attention, the softmax and loss over the
vocabulary, layer norms, the optimizer step, dtype casts, the rest elementwise and bookkeeping), and the top operators by self CPU
time. It is the profile behind the issue-27 targets that `bench_train_speed.py` reports as missed: what the step
spends outside the matrix products is what keeps MFU from the bf16 probe's peak.

Deviation from a full profiler run: operators are grouped by name (aten::mm, aten::bmm, aten::addmm, aten::linear and
their backward kernels are "matmul"), so a fused kernel that does a product and more counts as a product.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

KINDS = (  # (kind, substrings of an operator's name), first match wins
    ("matmul", ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear", "mkldnn", "onednn")),
    ("attention", ("scaled_dot_product", "_flash_attention", "_efficient_attention", "attention")),
    ("softmax / loss", ("softmax", "cross_entropy", "nll_loss", "log_softmax")),
    ("layer norm", ("layer_norm",)),
    ("optimizer", ("adam", "_foreach", "clip_grad", "linalg_vector_norm")),
    ("dtype casts", ("aten::to", "aten::_to_copy", "aten::copy_")),
)


def kind_of(name: str) -> str:
    lowered = name.lower()
    for kind, parts in KINDS:
        if any(part in lowered for part in parts):
            return kind
    return "other (elementwise, layout, bookkeeping)"


def profile(side, steps: int, top: int, label: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for _ in range(2):  # warm-up: oneDNN's first products choose their kernels
        side.step()
    started = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            side.step()
    wall = (time.perf_counter() - started) / steps
    events = [event for event in prof.key_averages() if event.self_cpu_time_total > 0]
    total = sum(event.self_cpu_time_total for event in events)
    by_kind: dict[str, float] = {}
    for event in events:
        by_kind[kind_of(event.key)] = by_kind.get(kind_of(event.key), 0.0) + event.self_cpu_time_total
    print(f"\n== {label}: {wall * 1000:.0f} ms per step under the profiler, {total / 1e6 / steps:.3f} s of operator "
          f"CPU time per step (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    for kind, micros in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"  {kind:42s} {micros / total:6.1%}")
    print(f"  top {top} operators by self CPU time:")
    for event in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
        print(f"    {event.key[:60]:60s} {event.self_cpu_time_total / total:6.1%}  calls/step {event.count / steps:6.0f}")


def main(argv=None) -> int:
    from bench_train_speed import HFSide, LabSide

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="gpt", choices=("gpt", "bert", "t5", "xlnet"))
    parser.add_argument("--preset", default="small", choices=("tiny", "small"))
    parser.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        lab = LabSide(args.family, args.preset, {"precision": args.precision}, Path(home))
        profile(lab, args.steps, args.top, f"lab {args.family} {args.preset} {args.precision}")
    hf = HFSide(args.family, args.preset, args.precision)
    profile(hf, args.steps, args.top, f"transformers {args.family} {args.preset} {args.precision}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
