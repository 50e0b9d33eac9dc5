"""Where a GPU training step spends its time: GPT-2 124M and BERT-base under torch.profiler, summarised by kind of work.

    python benchmarks/profile_gpu_step.py [--only gpt2,bert] [--steps 5] [--perf compile=true ...] [--json F]
    python benchmarks/profile_gpu_step.py --smoke      # tiny sizes on any device: checks the script, not the speed

The step profiled is the lab's own (`engine.Trainer.train_step`: bf16 autocast, the family's loss, backward, gradient
clipping, fused AdamW), on `benchmarks/bench_gpu.py`'s rows and batches (GPT-2 124M at seq 1024, batch 16; BERT-base
MLM + NSP at seq 512, batch 32). After `--warmup` steps (and compilation, timed apart, with `--perf compile=...`),
`--steps` steps run under `torch.profiler.profile` with CPU and CUDA activities and input shapes recorded. Each row
prints:

- the step's wall time, and the share of it the device was busy (the union of kernel intervals); the rest is host-side
  gaps: Python, dispatch, kernel launches and waits on the host;
- the device time split into kinds of work: matrix products, attention, the vocabulary projection and its loss (any
  product with the vocabulary size among its input shapes, and the softmax, log-softmax and cross-entropy kernels),
  normalisations, the optimizer (AdamW, the gradient norm and clipping), and the rest (elementwise, copies, casts);
- on CUDA, the host's waits for the device per step, by the call that waits (`cudaStreamSynchronize` and the like,
  and `aten::_local_scalar_dense`, i.e. `.item()`): while the host waits, nothing is queued, so the device idles
  while the host then prepares what follows;
- the top operators by device time;
- the points where `torch.compile` would break the step's graph (`torch._dynamo.explain` of the family's loss on
  one of the engine's batches, with the settings of `compile_scope=model`), each with its reason and line: data-dependent reads (`.tolist()`, `bool(tensor)`) and shapes known only
  from the data (a boolean index). On a GPU each of them is also a host read-back.

On a CPU (no CUDA) the table is made from operator CPU time, and the graph breaks are listed as on a GPU: they are the
same code. That is what `--smoke` exercises.

Deviation from a trace viewer: kernels are attributed to the operator that launched them, by name and input shapes,
so a fused kernel that does a product and more counts as a product, and a compiled graph's fused kernels
("triton_...") count as elementwise unless their name says otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROWS = ("gpt2", "bert")
KINDS = ("matrix products", "attention", "vocabulary projection and loss", "normalisations", "optimizer",
         "elementwise and other")
PRODUCT_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear", "aten::baddbmm",
               "aten::_scaled_mm")
LOSS_OPS = ("cross_entropy", "nll_loss", "log_softmax", "_softmax")
ATTENTION_OPS = ("scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention", "flex_attention")
NORM_OPS = ("layer_norm", "rms_norm")
OPTIMIZER_OPS = ("adam", "_foreach", "clip_grad", "linalg_vector_norm")
READBACK_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "cudaStreamSynchronize", "cudaDeviceSynchronize",
                "cudaEventSynchronize", "cudaMemcpy")  # exact names: cudaMemcpy (not ...Async) waits for the device


def kind_of(name: str, shapes, vocab_size: int) -> str:
    """The kind of work of one operator, from its name and input shapes.

    >>> kind_of("aten::mm", [[16384, 768], [768, 50257]], 50257), kind_of("aten::mm", [[8, 768], [768, 3072]], 50257)
    ('vocabulary projection and loss', 'matrix products')
    >>> kind_of("aten::_fused_adamw_", [], 50257), kind_of("aten::native_layer_norm", [], 50257)
    ('optimizer', 'normalisations')
    """
    lowered = name.lower()
    if any(op in lowered for op in LOSS_OPS) and "attention" not in lowered:
        return "vocabulary projection and loss"
    if any(lowered.startswith(op) for op in PRODUCT_OPS) or "gemm" in lowered:
        flat = [dim for shape in (shapes or []) if isinstance(shape, (list, tuple)) for dim in shape]
        return "vocabulary projection and loss" if vocab_size in flat else "matrix products"
    if any(op in lowered for op in ATTENTION_OPS):
        return "attention"
    if any(op in lowered for op in NORM_OPS):
        return "normalisations"
    if any(op in lowered for op in OPTIMIZER_OPS):
        return "optimizer"
    return "elementwise and other"


def union_length(intervals: list[tuple[float, float]]) -> float:
    """The total length covered by (start, end) intervals.

    >>> union_length([(0, 2), (1, 3), (5, 6)])
    4
    """
    covered, end_so_far = 0, None
    for start, end in sorted(intervals):
        if end_so_far is None or start > end_so_far:
            covered += end - start
            end_so_far = end
        elif end > end_so_far:
            covered += end - end_so_far
            end_so_far = end
    return covered


def summarise(prof, steps: int, wall_s: float, vocab_size: int, on_cuda: bool, top: int) -> dict:
    """The profile of `steps` steps as a dict of plain numbers (per step, in milliseconds and shares)."""
    from torch.autograd import DeviceType

    events = list(prof.events())
    by_kind = dict.fromkeys(KINDS, 0.0)
    by_op: dict[str, float] = {}
    readbacks: dict[str, int] = {}
    host_in_ops = 0.0
    for event in events:
        if event.device_type == DeviceType.CUDA:
            continue  # a kernel: counted through the operator that launched it (self_device_time_total)
        name = event.name
        if on_cuda and name in READBACK_OPS:  # a CPU tensor's read-back waits for nothing
            readbacks[name] = readbacks.get(name, 0) + 1
        if event.cpu_parent is None and not name.startswith("cuda"):
            host_in_ops += event.cpu_time_total
        micros = event.self_device_time_total if on_cuda else event.self_cpu_time_total
        if micros <= 0:
            continue
        by_kind[kind_of(name, getattr(event, "input_shapes", None), vocab_size)] += micros
        by_op[name] = by_op.get(name, 0.0) + micros
    busy_ms = None
    if on_cuda:
        kernels = [(e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CUDA]
        busy_ms = union_length(kernels) / 1000 / steps
    total = sum(by_kind.values()) or 1.0
    step_ms = 1000 * wall_s / steps
    return {
        "step_ms": step_ms,
        "device_busy_ms": busy_ms,  # None on a CPU
        "host_outside_operators_ms": None if on_cuda else max(0.0, step_ms - host_in_ops / 1000 / steps),
        "kinds": {kind: {"ms": micros / 1000 / steps, "share": micros / total} for kind, micros in by_kind.items()},
        "readbacks_per_step": {name: count / steps for name, count in sorted(readbacks.items())} if on_cuda else None,
        "top": [(name, micros / 1000 / steps, micros / total)
                for name, micros in sorted(by_op.items(), key=lambda item: -item[1])[:top]],
    }


def graph_breaks(model, batch, autocast) -> dict:
    """Where `torch.compile` of `model.loss(batch)` breaks the graph: the count, the number of graphs, and each
    distinct reason with the lab's line that causes it and how often it occurs in one forward pass."""
    import torch

    from lab_models.training.performance import WHOLE_MODEL_DYNAMO

    torch._dynamo.reset()
    with autocast, torch._dynamo.config.patch(**WHOLE_MODEL_DYNAMO):
        explained = torch._dynamo.explain(model.loss)(batch)
    torch._dynamo.reset()
    reasons: dict[tuple[str, str], int] = {}
    for item in explained.break_reasons:
        frames = [frame for frame in item.user_stack if "lab_models" in frame.filename]
        where = " < ".join(f"{frame.name} ({frame.filename.split('lab_models/')[-1]}:{frame.lineno})"
                           for frame in reversed(frames[-2:])) or "outside the lab's code"
        key = (item.reason.splitlines()[0].strip(), where)
        reasons[key] = reasons.get(key, 0) + 1
    return {"count": explained.graph_break_count, "graphs": explained.graph_count,
            "reasons": [{"reason": reason, "where": where, "count": count}
                        for (reason, where), count in sorted(reasons.items(), key=lambda item: -item[1])]}


def profile_row(row: str, steps: int, warmup: int, perf: dict, smoke: bool, top: int, trace: Path | None) -> dict:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from bench_gpu import ROWS as GPU_ROWS, our_model, packed_batches, vocab_info
    from lab_models.training.device import select_device
    from lab_models.training.engine import EngineConfig, Trainer
    from lab_models.training.performance import PerformanceConfig

    family, vocab_size, seq_len, batch_size, _ = GPU_ROWS[row]
    if smoke:
        seq_len, batch_size, vocab_size = 64, 4, 512
    device = select_device("auto")
    on_cuda = device.type == "cuda"
    vocab = vocab_info(vocab_size)
    batches = packed_batches(family, vocab, seq_len, batch_size)
    model = our_model(family, vocab, seq_len, smoke)
    trainer = Trainer(model, batches, EngineConfig(steps=warmup + steps + 1, lr=1e-4, log_every=10**9,
                                                   eval_every=10**9), device=device,
                      performance=PerformanceConfig.from_dict(perf))
    trainer._prepare()  # measure the model, apply the settings, compile (timed apart)

    def synchronize():
        if on_cuda:
            torch.cuda.synchronize(device)

    # the batches are built and moved before the profile: on a GPU the prefetcher builds them on the host in a
    # background thread (its host work is not the device's), and the host-side read-backs of building a batch on the
    # CPU are not waits for the device
    ready = {(step, 0): trainer._build_batch((step, 0)).to(device) for step in range(1, warmup + steps + 1)}
    trainer._batch = lambda step, micro: ready[(step, micro)]
    for step in range(1, warmup + 1):
        trainer.train_step(step)
    synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with torch_profile(activities=activities, record_shapes=True) as prof:
        started = time.perf_counter()
        for step in range(warmup + 1, warmup + steps + 1):
            trainer.train_step(step)
        synchronize()
        wall_s = time.perf_counter() - started
    if trace is not None:
        trace.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace / f"{row}.json"))
    summary = summarise(prof, steps, wall_s, vocab_size, on_cuda, top)
    summary["graph_breaks"] = graph_breaks(model, ready[(1, 0)], trainer._autocast_context())
    summary.update(row=row, family=family, seq_len=seq_len, batch_size=batch_size, perf=perf,
                   device=torch.cuda.get_device_name(device) if on_cuda else "cpu",
                   precision=trainer.precision.precision, compile_s=trainer.compile_s, steps=steps,
                   torch=torch.__version__)
    return summary


def print_summary(summary: dict) -> None:
    busy = summary["device_busy_ms"]
    step = summary["step_ms"]
    print(f"\n== {summary['row']} ({summary['family']}, seq {summary['seq_len']}, batch {summary['batch_size']}) on "
          f"{summary['device']}, {summary['precision']}, perf {summary['perf'] or 'default'}: "
          f"{step:.1f} ms per step under the profiler"
          + (f", compile {summary['compile_s']:.0f} s apart" if summary.get("compile_s") else ""))
    if busy is not None:
        print(f"   device busy {busy:.1f} ms ({busy / step:.0%}); host-side gaps {step - busy:.1f} ms "
              f"({1 - busy / step:.0%})")
    else:
        outside = summary["host_outside_operators_ms"]
        print(f"   (CPU: operator time stands in for kernel time; {outside:.1f} ms of the step is outside any "
              "operator: Python and dispatch)")
    time_word = "device" if busy is not None else "operator CPU"
    print(f"| kind of work | {time_word} ms per step | share |")
    print("| --- | --- | --- |")
    for kind, values in sorted(summary["kinds"].items(), key=lambda item: -item[1]["ms"]):
        print(f"| {kind} | {values['ms']:.2f} | {values['share']:.1%} |")
    readbacks = summary["readbacks_per_step"]
    if readbacks is not None:
        print("   host waits for the device per step: "
              + (", ".join(f"{name} {count:g}" for name, count in readbacks.items()) or "none"))
    print("   top operators by " + time_word + " time:")
    for name, ms, share in summary["top"]:
        print(f"     {name[:70]:70s} {ms:8.2f} ms {share:6.1%}")
    breaks = summary.get("graph_breaks")
    if breaks is not None:
        print(f"   graph breaks of the loss under torch.compile: {breaks['count']} "
              f"({breaks['graphs']} graphs)" + (":" if breaks["reasons"] else ""))
        for reason in breaks["reasons"]:
            print(f"     {reason['count']:3d} x {reason['reason'][:90]} at {reason['where']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(ROWS), help="rows to profile: gpt2, bert")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--perf", action="append", default=[], metavar="KEY=VALUE",
                        help="performance settings for the lab's step, as `train --perf` (e.g. compile=true)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on any device: checks the script")
    parser.add_argument("--json", type=Path, help="also write the summaries to this file")
    parser.add_argument("--trace", type=Path, help="also write each row's Chrome trace into this folder")
    args = parser.parse_args(argv)
    from lab_models.training.performance import parse_performance_overrides

    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}: choose from {', '.join(ROWS)}")
    perf = parse_performance_overrides(args.perf)
    if args.smoke:
        print("[SMOKE: tiny sizes, the numbers mean nothing]")
    summaries = []
    for row in rows:
        summary = profile_row(row, args.steps, args.warmup, perf, args.smoke, args.top, args.trace)
        print_summary(summary)
        summaries.append(summary)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summaries, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
