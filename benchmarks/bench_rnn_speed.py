"""Benchmark: training speed (tokens per second) of the RNN-era families, ELMo, CoVe, ULMFiT and CVT.

Run `python benchmarks/bench_rnn_speed.py [--preset small] [--steps 20] [--warmup 3] [--device auto] [--threads N]
[--families elmo,cove,ulmfit,cvt] [--batch-size B] [--seq-len T]`.

What is measured: the lab's own training step (lab_models/training/engine.py Trainer: the family's batch source,
forward, backward, gradient clipping, AdamW; bf16 autocast on CUDA), at the preset's RNN sizes
(lab_models/models/rnn/config.py: `small` = embedding 256, LSTM 512, 2 layers, ULMFiT 3) and the preset's training
defaults (lab_models/training/run.py PRESET_DEFAULTS: `small` = batch 16 x 128 tokens on the stdlib-docs corpus, a
4000-token tokenizer). Every LSTM is one nn.LSTM call over the whole sequence (cuDNN on a GPU, oneDNN or PyTorch's own
kernel on a CPU), never a Python loop over time steps. The first `--warmup` steps are not timed. Tokens are the batch's
input tokens (CoVe: encoder plus decoder tokens; ULMFiT's stage 3 and CVT's labelled steps: the padded sentences), as
the Train tab counts them.

ULMFiT is timed over its whole plan (the steps are split into its three stages) and CVT over alternating labelled
and unlabelled steps, so each family's number is what a real run of that many steps would do.

Output: one row per family with tokens/s, ms per step and the parameter count, and the device. No peer library is
compared (the released ELMo/ULMFiT/CoVe/CVT code is TensorFlow, fastai v1 and Lua/old PyTorch); compare ratios
between families or devices, not absolute numbers across machines.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, as the other benchmarks

from lab_models.text.corpora import load_corpus  # noqa: E402
from lab_models.training.batches import PackedBatches
from lab_models.text.vocab_fit import build_tokenizer
from lab_models.text.streams import encode_stream
from lab_models.training.device import select_device
from lab_models.training.engine import EngineConfig, Trainer
from lab_models.families import family_record
from lab_models.models.family import build_model, family_model_config
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.families import RNN_FAMILIES
from lab_models.models.rnn.common import DataContext
from lab_models.training.config import PRESET_DEFAULTS
from lab_models.text.vocab import prepare_tokenizer


def batches_for(family, tokenizer, info, settings, corpus, seq_len, batch_size, steps, max_positions):
    module = objective_module(family)
    train = encode_stream(tokenizer, corpus.train, info.eos_id)
    validation = encode_stream(tokenizer, corpus.validation, info.eos_id)
    if hasattr(module, "batch_source"):
        return module.batch_source(DataContext(tokenizer, info, settings, train, validation, seq_len, batch_size, 1,
                                               steps, max_positions))
    return PackedBatches(train, validation, seq_len=seq_len, batch_size=batch_size, objective=module,
                         batch_config=BatchConfig(settings, info), eval_batches=1)


def measure(family, args, corpus, device) -> dict:
    defaults = PRESET_DEFAULTS[args.preset]
    kind = family_record(family).tokenizer
    tokenizer, info = prepare_tokenizer(build_tokenizer(corpus, kind, defaults["vocab_size"]).tokenizer)
    settings = objective_module(family).Settings()
    config = family_model_config(family, args.preset, info.size)
    total = args.warmup + args.steps
    batch_size = args.batch_size or defaults["batch_size"]
    seq_len = args.seq_len or defaults["seq_len"]
    batches = batches_for(family, tokenizer, info, settings, corpus, seq_len, batch_size, total, config.max_positions)
    model = build_model(family, config, settings, info, None, seed=0)
    trainer = Trainer(model, batches, EngineConfig(steps=total, lr=defaults["lr"], log_every=1), device=device)
    times, tokens = [], []
    for event in trainer.run():
        if hasattr(event, "tokens_per_s") and event.step > args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter())
            tokens.append(event.tokens_seen)
    elapsed = times[-1] - times[0]
    return {"family": family, "tokens_per_s": (tokens[-1] - tokens[0]) / elapsed if elapsed > 0 else float("nan"),
            "ms_per_step": 1000 * elapsed / max(1, len(times) - 1), "parameters": model.num_parameters()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", choices=list(PRESET_DEFAULTS))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    parser.add_argument("--families", default=",".join(RNN_FAMILIES))
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--seq-len", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    corpus = load_corpus(PRESET_DEFAULTS[args.preset]["corpus"])
    label = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"preset {args.preset}, device {label}, torch {torch.__version__}, {args.steps} timed steps")
    print(f"{'family':<8} {'tokens/s':>12} {'ms/step':>10} {'parameters':>12}")
    for family in args.families.split(","):
        row = measure(family.strip(), args, corpus, device)
        print(f"{row['family']:<8} {row['tokens_per_s']:>12,.0f} {row['ms_per_step']:>10.1f} {row['parameters']:>12,}")


if __name__ == "__main__":
    main()
