"""Benchmark: the lab's GPU path at real size, against Hugging Face transformers in the same run, with MFU.

Run on a CUDA machine: `pip install -r benchmarks/requirements-bench.txt && python benchmarks/bench_gpu.py`
(`--compile` compiles both sides: the lab's blocks, or its whole step with `--perf compile_scope=model`; `--perf
KEY=VALUE` passes any other setting to the lab's side; `--only gpt2,bert` picks rows; `--smoke` runs tiny sizes on any
device, to check that the script works, and says its numbers mean nothing).

Rows (ours through the lab's own `engine.Trainer`, so its bf16 autocast, fused AdamW, prefetching and MFU accounting
are what is timed; HF through a plain loop with the same autocast, fused AdamW, gradient clipping and batches):

    gpt2      GPT-2 124M (`base` GPT-2: 768 x 12, vocab 50257), seq 1024        vs GPT2LMHeadModel (sdpa)
    bert      BERT-base MLM + NSP (768 x 12, vocab 30522), seq 512               vs BertForPreTraining (sdpa)
    xlnet     XLNet-base two-stream PLM, seq 512                                vs XLNetLMHeadModel
    t5        T5-base span corruption, seq 512                                  vs T5ForConditionalGeneration
    glm, unilm, mpnet, gpt-512   the structured masks at base, seq 512, ours only: step time against GPT's (gpt-512:
              GPT-2 at base with the same vocabulary 32000 and seq 512)

Each row runs in a fresh subprocess (so torch.cuda.max_memory_allocated belongs to that model alone), with
`--warmup` untimed steps then `--steps` timed ones; tokens/s = batch tokens / median step time. MFU = FLOPs per token
(lab_models/training/flops.py, counted on a real batch of each side: HF's models project every row to the vocabulary, so
their FLOPs per token are higher) x tokens/s / the device's bf16 peak (lab_models/training/flops.py's table).

Targets: GPT-2 124M MFU >= 45% on an H100 and >= 1.3x HF's tokens/s; BERT-base >= 1.3x HF; UniLM, GLM,
XLNet and MPNet within 1.5x of GPT's step time at the same size.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

N_SPECIALS = 40  # the lab's 8 special tokens + 32 sentinels
ROWS = {  # name -> (family, vocab, seq_len, batch_size, HF class or None)
    "gpt2": ("gpt2", 50257, 1024, 16, "GPT2LMHeadModel"),
    "bert": ("bert", 30522, 512, 32, "BertForPreTraining"),
    "xlnet": ("xlnet", 32000, 512, 16, "XLNetLMHeadModel"),
    "t5": ("t5", 32128, 512, 32, "T5ForConditionalGeneration"),
    "gpt-512": ("gpt2", 32000, 512, 32, None),
    "unilm": ("unilm", 32000, 512, 32, None),
    "glm": ("glm", 32000, 512, 32, None),
    "mpnet": ("mpnet", 32000, 512, 32, None),
}
SMOKE = dict(d_model=64, n_layers=2, n_heads=2, d_ff=256)
TARGETS = {"gpt2_mfu": 0.45, "gpt2_ratio": 1.3, "bert_ratio": 1.3, "structured_vs_gpt": 1.5}


def vocab_info(size: int):
    from lab_models.text.vocab import VocabInfo

    return VocabInfo(size=size, pad_id=0, mask_id=1, cls_id=2, sep_id=3, bos_id=4, eos_id=5, start_id=6, end_id=7,
                     sentinel_ids=tuple(range(8, N_SPECIALS)), random_ids=tuple(range(N_SPECIALS, size)))


def packed_batches(family: str, vocab, seq_len: int, batch_size: int):
    import torch

    from lab_models.training.batches import PackedBatches
    from lab_models.objectives import objective_module
    from lab_models.objectives.common import BatchConfig

    module = objective_module(family)
    stream = torch.randint(N_SPECIALS, vocab.size, (seq_len * batch_size * 8,), generator=torch.Generator().manual_seed(2))
    return PackedBatches(stream, stream[: seq_len * 4], seq_len=seq_len, batch_size=batch_size, objective=module,
                         batch_config=BatchConfig(settings=module.Settings(), vocab=vocab), eval_batches=1)


def our_model(family: str, vocab, seq_len: int, smoke: bool):
    from lab_models.models.family import build_model, family_model_config
    from lab_models.objectives import objective_module
    from lab_models.training.cli import fit_row_length

    settings = objective_module(family).Settings()
    sizes = dict(SMOKE) if smoke else {}
    # no max_positions override given, so fit_row_length raises it where GLM and MPNet lengthen their rows
    overrides = fit_row_length(family, settings, seq_len, max(seq_len, 512), {})
    overrides.setdefault("max_positions", max(seq_len, 512))
    config = family_model_config(family, "base", vocab.size, **sizes, **overrides)
    return build_model(family, config, settings, vocab, seed=0)


def hf_model(name: str, vocab_size: int, seq_len: int, smoke: bool):
    import transformers

    s = SMOKE if smoke else dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072)
    d, L, h, ff = s["d_model"], s["n_layers"], s["n_heads"], s["d_ff"]
    if name == "gpt2":
        config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=seq_len, n_embd=d, n_layer=L, n_head=h,
                                         n_inner=ff, attn_implementation="sdpa")
        return transformers.GPT2LMHeadModel(config)
    if name == "bert":
        config = transformers.BertConfig(vocab_size=vocab_size, hidden_size=d, num_hidden_layers=L,
                                         num_attention_heads=h, intermediate_size=ff, max_position_embeddings=512,
                                         attn_implementation="sdpa")
        return transformers.BertForPreTraining(config)
    if name == "xlnet":
        config = transformers.XLNetConfig(vocab_size=vocab_size, d_model=d, n_layer=L, n_head=h, d_inner=ff,
                                          ff_activation="gelu", mem_len=None, use_mems_train=False, bi_data=False,
                                          attn_type="bi")
        return transformers.XLNetLMHeadModel(config)
    config = transformers.T5Config(vocab_size=vocab_size, d_model=d, d_kv=d // h, d_ff=ff, num_layers=L,
                                   num_decoder_layers=L, num_heads=h, feed_forward_proj="relu", use_cache=False,
                                   decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(config)


def hf_inputs(name: str, batch, vocab) -> dict:
    """The HF model's inputs for one lab Batch of the same family: the same tokens and targets."""
    import torch

    from lab_models.batch import IGNORE_INDEX

    if name == "gpt2":
        return {"input_ids": batch.input_ids, "labels": batch.input_ids}
    if name == "bert":
        labels = batch.targets
        nsp = batch.extras.get("nsp_label")
        inputs = {"input_ids": batch.input_ids, "token_type_ids": batch.segment_ids, "labels": labels}
        if nsp is not None:
            inputs["next_sentence_label"] = nsp
        return inputs
    if name == "xlnet":
        B, T = batch.input_ids.shape
        is_target = batch.targets != IGNORE_INDEX
        P = int(is_target[0].sum())
        picked = is_target.nonzero()[:, 1].view(B, P)
        mapping = torch.zeros(B, P, T, device=batch.input_ids.device).scatter_(2, picked.unsqueeze(-1), 1.0)
        return {"input_ids": batch.input_ids, "perm_mask": (~batch.attention["query"]).float(),
                "target_mapping": mapping, "labels": batch.targets.gather(1, picked)}
    return {"input_ids": batch.input_ids, "decoder_input_ids": batch.decoder_input_ids, "labels": batch.targets}


def run_worker(row: str, side: str, steps: int, warmup: int, compile_: bool, smoke: bool,
               perf_overrides: dict | None = None) -> dict:
    import torch

    from lab_models.training.device import select_device
    from lab_models.training.engine import EngineConfig, StepEvent, Trainer, count_tokens
    from lab_models.training.flops import device_peak_flops, mfu, training_flops_per_token
    from lab_models.training.performance import PerformanceConfig

    family, vocab_size, seq_len, batch_size, _ = ROWS[row]
    if smoke:
        seq_len, batch_size, vocab_size = 64, 4, 512
    device = select_device("auto")
    vocab = vocab_info(vocab_size)
    batches = packed_batches(family, vocab, seq_len, batch_size)
    perf = PerformanceConfig(**{"compile": compile_, **(perf_overrides or {})})
    precision = perf.resolved_precision(device)
    peak = device_peak_flops(device, precision)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if side == "ours":
        model = our_model(family, vocab, seq_len, smoke)
        trainer = Trainer(model, batches, EngineConfig(steps=warmup + steps, lr=1e-4, log_every=1,
                                                       eval_every=10**9), device=device, performance=perf)
        stamps, tokens_per_step = [], None
        for event in trainer.run():
            if isinstance(event, StepEvent):
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                stamps.append(time.perf_counter())
                if event.step == warmup + steps - 1:
                    break  # before the last step's evaluation
        tokens_per_step = count_tokens(batches.train_batch(torch.Generator().manual_seed(0)))
        seconds = [b - a for a, b in zip(stamps[warmup - 1:], stamps[warmup:])] if warmup else [
            b - a for a, b in zip(stamps, stamps[1:])]
        flops = trainer.flops_per_token
        params = model.num_parameters()
        compile_s = trainer.compile_s
    else:
        name = row
        model = hf_model(name, vocab.size, seq_len, smoke).to(device)
        first = batches.train_batch(torch.Generator().manual_seed(0)).to(device)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            flops = training_flops_per_token(_HFLoss(model, name, vocab), first, count_tokens(first),
                                             perf.autocast(device))
        tokens_per_step = count_tokens(first)
        compile_s = None
        if compile_:
            started = time.perf_counter()
            model.compile()
            _hf_step(model, name, first, vocab, perf, device, None)
            compile_s = time.perf_counter() - started
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01,
                                      **({"fused": True} if perf.uses_fused_adamw(device) else {}))
        generator = torch.Generator().manual_seed(3)
        seconds = []
        for i in range(warmup + steps):
            batch = batches.train_batch(generator).to(device)
            started = time.perf_counter()
            _hf_step(model, name, batch, vocab, perf, device, optimizer)
            if i >= warmup:
                seconds.append(time.perf_counter() - started)
        params = sum(p.numel() for p in model.parameters())
    tokens_per_s = tokens_per_step / statistics.median(seconds)
    return {"row": row, "side": side, "device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else str(device), "precision": precision, "tokens_per_s": tokens_per_s,
            "step_ms": 1000 * statistics.median(seconds), "flops_per_token": flops,
            "mfu": None if flops is None else mfu(flops, tokens_per_s, peak), "parameters": params,
            "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "compile_s": compile_s, "seq_len": seq_len, "batch_size": batch_size}


class _HFLoss(torch.nn.Module):
    """An HF model seen through the lab's `loss(batch)` interface, so flops.py counts it the same way."""

    def __init__(self, model, name, vocab):
        super().__init__()
        self.model, self.name, self.vocab = model, name, vocab

    def loss(self, batch):
        from types import SimpleNamespace

        return SimpleNamespace(total=self.model(**hf_inputs(self.name, batch, self.vocab)).loss)


def _hf_step(model, name, batch, vocab, perf, device, optimizer) -> None:
    import torch

    model.train()
    with perf.autocast(device):
        loss = model(**hf_inputs(name, batch, vocab)).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    else:
        model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(row: str, side: str, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{row}:{side}", "--steps",
               str(args.steps), "--warmup", str(args.warmup)] + (["--compile"] if args.compile else []) + (
        ["--smoke"] if args.smoke else []) + [item for setting in args.perf for item in ("--perf", setting)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        return {"row": row, "side": side, "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _pct(value) -> str:
    return "unknown" if value is None else f"{value:.1%}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(ROWS), help=f"rows to run (default all: {','.join(ROWS)})")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="torch.compile both sides (compile time reported apart)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on any device: checks the script, not the speed")
    p.add_argument("--perf", action="append", default=[], metavar="KEY=VALUE",
                   help="a performance setting of the lab's side, as `train --perf` (e.g. compile_scope=model)")
    p.add_argument("--ours-only", action="store_true", help="skip transformers' side (a setting's own effect)")
    p.add_argument("--json", type=Path, help="also write every measurement to this file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        row, side = args.worker.split(":")
        from lab_models.training.performance import parse_performance_overrides

        print(json.dumps(run_worker(row, side, args.steps, args.warmup, args.compile, args.smoke,
                                    parse_performance_overrides(args.perf))))
        return 0
    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}: choose from {', '.join(ROWS)}")
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"device {torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu (no CUDA)'}, "
          f"compile {'on' if args.compile else 'off'}, lab settings {args.perf or 'default'}, "
          f"{args.warmup} warmup + {args.steps} timed steps"
          + ("  [SMOKE: tiny sizes, the numbers mean nothing]" if args.smoke else ""))
    results = {}
    for row in rows:
        sides = ["ours"] + (["hf"] if ROWS[row][4] and not args.ours_only else [])
        for side in sides:
            results[(row, side)] = result = measure(row, side, args)
            if "error" in result:
                print(f"  {row:8s} {side:4s} failed: {result['error']}", flush=True)
            else:
                memory = result["peak_memory_gib"]
                print(f"  {row:8s} {side:4s} {result['tokens_per_s']:10.0f} tokens/s  step {result['step_ms']:8.1f} ms"
                      f"  MFU {_pct(result['mfu']):>8s}  {result['flops_per_token'] / 1e6:8.1f} MFLOPs/token"
                      f"  peak {'-' if memory is None else f'{memory:.1f} GiB'}"
                      + (f"  compile {result['compile_s']:.0f} s" if result.get("compile_s") else ""), flush=True)
    print()
    print("| row | ours tokens/s | HF tokens/s | ours/HF | ours MFU | HF MFU | ours peak GiB | HF peak GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        ours, hf = results.get((row, "ours"), {}), results.get((row, "hf"), {})
        if "tokens_per_s" not in ours:
            continue
        ratio = ours["tokens_per_s"] / hf["tokens_per_s"] if "tokens_per_s" in hf else None
        print(f"| {row} | {ours['tokens_per_s']:.0f} | {hf.get('tokens_per_s', float('nan')):.0f} | "
              f"{'-' if ratio is None else f'{ratio:.2f}'} | {_pct(ours['mfu'])} | {_pct(hf.get('mfu'))} | "
              f"{ours['peak_memory_gib'] or '-'} | {hf.get('peak_memory_gib') or '-'} |")
    gpt = results.get(("gpt-512", "ours"), {})
    if "step_ms" in gpt:
        print("\nstructured masks against GPT at the same size (step time / GPT's; target <= "
              f"{TARGETS['structured_vs_gpt']}):")
        for row in ("unilm", "glm", "xlnet", "mpnet"):
            other = results.get((row, "ours"), {})
            if "step_ms" in other:  # the same batch of the same rows; GLM and MPNet add their slots to them
                print(f"  {row:6s} {other['step_ms'] / gpt['step_ms']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([v for v in results.values()], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
