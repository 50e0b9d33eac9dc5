"""Benchmark: training speed of the lab's GPT and BERT against Hugging Face transformers at the same size.

Run `python benchmarks/bench_train_speed.py [--rounds 3] [--steps 12] [--warmup 3] [--threads 2]`
(`pip install -r benchmarks/requirements-bench.txt` first: `transformers` is a benchmark-only dependency).

What is compared, at the lab's `small` preset (d_model 256, 4 layers, 4 heads, d_ff 1024, 256 positions) and the
`small` training defaults of lab_models/training/run.py (batch 16 x 128 tokens, a 4000-token tokenizer plus the lab's 40
special tokens = 4040 ids, AdamW lr 5e-4, betas (0.9, 0.98), eps 1e-8, weight decay 0.01 on matrices only, gradient
clipping at 1.0, dropout 0.1, train mode):

    ours "gpt"   (post-LN GPT-1, tied LM head, causal mask, SDPA)     vs  transformers OpenAIGPTLMHeadModel
    ours "bert"  (post-LN, MLM transform + tied decoder, MLM + NSP)   vs  transformers BertForPreTraining (MLM + NSP)

The peers are built from configs (no download) with the library's defaults, as a user would run them: HF BERT's
attention implementation is its default ("sdpa" in transformers 5.x) with attention-probability dropout 0.1 inside it;
OpenAIGPT has only its eager attention (attn_pdrop 0.1), and its "gelu" is the tanh approximation (gelu_new) where
ours is the exact erf GeLU. Ours keeps its documented design (DESIGN.md, "Speed"): attention dropout 0 and dropout
0.1 on the embeddings and after each residual branch (`--hf-attention-dropout 0` gives the peers the same, for a
closer look). HF projects every position to the vocabulary; ours projects only the positions with a target (BERT:
the ~15% picked; GPT: all but each row's last).

Each step, for both sides: build the batch, forward + loss, backward, clip the global grad norm to 1.0, AdamW step,
zero the gradients (set_to_none). Ours builds its batches with the real batch builder
(`objective_module(family).make_batch` through data.PackedBatches, so masking and NSP pairing are counted); HF gets the
equivalent tensors built with vectorised torch ops (15% labels, -100 elsewhere, 80/10/10 corruption, token types, a
NotNext label for half the rows). Token ids are random (speed does not depend on the text).

Every measurement runs in a fresh subprocess (one model per process), so the peak RSS (`ru_maxrss` of the child)
belongs to that model alone; it includes the interpreter, torch (and, for the HF rows, transformers) as loaded.
A worker's tokens/s is batch tokens / its median step time (robust to a neighbour's burst on a shared machine; the
JSON also holds the mean). Measurements are interleaved: each round runs every model once, ours and HF alternating
in order; the table shows the median tokens/s over the rounds and the median of the per-round ratios ours/HF.
`--engine` adds a row per family that trains ours through `lab_models.training.engine.Trainer` (log_every=1), to show
the engine's per-step overhead against the bare loop.

Targets (issue 4, section 8): ours / HF >= 1.25 for both families; peak RSS of training ours at `small` < 2 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.25
TARGET_RSS_BYTES = 2 * 1024**3

# the `small` preset's training defaults (lab_models/training/run.py PRESET_DEFAULTS["small"]) and the lab's special
# tokens
SMALL = dict(batch_size=16, seq_len=128, tokenizer_vocab=4000, lr=5e-4, betas=(0.9, 0.98), eps=1e-8,
             weight_decay=0.01, grad_clip=1.0, dropout=0.1)
N_SPECIALS = 40  # lab_models/text/vocab.py: 8 special tokens + 32 sentinels
MASK_RATE = 0.15

WORKERS = ("ours-gpt", "hf-gpt", "ours-bert", "hf-bert", "engine-gpt", "engine-bert")
LABELS = {"gpt": "GPT (post-LN, CLM)", "bert": "BERT (MLM + NSP)"}
HF_CLASSES = {"gpt": "OpenAIGPTLMHeadModel", "bert": "BertForPreTraining"}


def require_transformers():
    try:
        import transformers
    except ImportError:
        print("bench_train_speed needs Hugging Face transformers: pip install -r benchmarks/requirements-bench.txt",
              file=sys.stderr)
        sys.exit(2)
    return transformers


# ------------------------------------------------------------------------------------------------ the workers


def vocab_info():
    """A VocabInfo shaped like a prepared 4000-token tokenizer: 40 special ids first, ~70% of ordinary ids start a
    word (SpanBERT-style helpers read it; BERT's NSP split looks for word starts)."""
    import torch

    from lab_models.text.vocab import VocabInfo

    size = SMALL["tokenizer_vocab"] + N_SPECIALS
    g = torch.Generator().manual_seed(1)
    word_start = (torch.rand(size, generator=g) < 0.7).tolist()
    word_start[:N_SPECIALS] = [True] * N_SPECIALS
    return VocabInfo(size=size, pad_id=0, mask_id=1, cls_id=2, sep_id=3, bos_id=4, eos_id=5, start_id=6, end_id=7,
                     sentinel_ids=tuple(range(8, N_SPECIALS)), random_ids=tuple(range(N_SPECIALS, size)),
                     word_start=tuple(bool(x) for x in word_start))


def random_stream(vocab, n_tokens: int = 200_000):
    import torch

    g = torch.Generator().manual_seed(2)
    return torch.randint(N_SPECIALS, vocab.size, (n_tokens,), generator=g)


def packed_batches(family: str, vocab):
    from lab_models.training.batches import PackedBatches
    from lab_models.objectives import objective_module
    from lab_models.objectives.common import BatchConfig

    module = objective_module(family)
    stream = random_stream(vocab)
    return PackedBatches(stream, stream[:4096], seq_len=SMALL["seq_len"], batch_size=SMALL["batch_size"],
                         objective=module, batch_config=BatchConfig(settings=module.Settings(), vocab=vocab),
                         eval_batches=1)


def our_model(family: str, vocab):
    from lab_models.models.family import build_model, family_model_config

    config = family_model_config(family, "small", vocab.size, dropout=SMALL["dropout"])
    return build_model(family, config, None, vocab, seed=0)


def adamw(model):
    import torch

    from lab_models.training.engine import parameter_groups

    return torch.optim.AdamW(parameter_groups(model, SMALL["weight_decay"]), lr=SMALL["lr"], betas=SMALL["betas"],
                             eps=SMALL["eps"])


def hf_model(family: str, vocab_size: int, attention_dropout: float):
    transformers = require_transformers()
    import torch

    torch.manual_seed(0)
    if family == "gpt":
        config = transformers.OpenAIGPTConfig(
            vocab_size=vocab_size, n_positions=256, n_embd=256, n_layer=4, n_head=4, afn="gelu",
            resid_pdrop=SMALL["dropout"], embd_pdrop=SMALL["dropout"], attn_pdrop=attention_dropout,
            layer_norm_epsilon=1e-5)  # GPT-1's MLP is 4 x n_embd = 1024 = our d_ff
        return transformers.OpenAIGPTLMHeadModel(config)
    config = transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
        max_position_embeddings=256, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=SMALL["dropout"],
        attention_probs_dropout_prob=attention_dropout, layer_norm_eps=1e-12, pad_token_id=0)
    return transformers.BertForPreTraining(config)


def hf_batch(family: str, rows, vocab, generator) -> dict:
    """The HF model's inputs for (B, T) token rows: the causal LM's labels, or BERT's MLM + NSP tensors."""
    import torch

    B, T = rows.shape
    if family == "gpt":
        return {"input_ids": rows, "labels": rows}  # the model shifts the labels itself
    # MLM: 15% of positions per row (exactly round(T * 0.15), as our builder), 80/10/10
    n_mask = max(1, round(T * MASK_RATE))
    picked = torch.rand(B, T, generator=generator).argsort(dim=1)[:, :n_mask]  # (B, n)
    is_picked = torch.zeros(B, T, dtype=torch.bool).scatter_(1, picked, True)
    labels = torch.where(is_picked, rows, torch.full_like(rows, -100))
    fate = torch.rand(B, T, generator=generator)
    inputs = rows.clone()
    inputs[is_picked & (fate < 0.8)] = vocab.mask_id
    randomised = is_picked & (fate >= 0.8) & (fate < 0.9)
    inputs[randomised] = torch.randint(N_SPECIALS, vocab.size, (int(randomised.sum()),), generator=generator)
    # NSP: split in the middle half, B replaced by another row's tokens for half the rows (label 1 = NotNext)
    split = torch.randint(T // 4, 3 * T // 4 + 1, (B,), generator=generator)
    positions = torch.arange(T)
    token_type_ids = (positions[None, :] >= split[:, None]).long()  # (B, T)
    not_next = torch.rand(B, generator=generator) < 0.5
    donor = rows.roll(1, dims=0)
    inputs = torch.where(not_next[:, None] & token_type_ids.bool(), donor, inputs)
    return {"input_ids": inputs, "token_type_ids": token_type_ids, "attention_mask": torch.ones_like(rows),
            "labels": labels, "next_sentence_label": not_next.long()}


def run_worker(kind: str, steps: int, warmup: int, threads: int, attention_dropout: float) -> dict:
    """Train one model for warmup + steps steps in this process; the timing and this process's peak RSS."""
    import torch

    torch.set_num_threads(threads)
    side, family = kind.split("-")
    vocab = vocab_info()
    tokens_per_step = SMALL["batch_size"] * SMALL["seq_len"]

    if side == "engine":
        from lab_models.training.engine import EngineConfig, Trainer

        model = our_model(family, vocab)
        trainer = Trainer(model, packed_batches(family, vocab), EngineConfig(
            steps=warmup + steps + 1, lr=SMALL["lr"], warmup_steps=0, weight_decay=SMALL["weight_decay"],
            betas=SMALL["betas"], eps=SMALL["eps"], grad_clip=SMALL["grad_clip"], eval_every=10**9, log_every=1))
        stamps = []
        run = trainer.run()
        for event in run:
            if type(event).__name__ == "StepEvent":
                stamps.append(time.perf_counter())
                if event.step == max(warmup, 1) + steps:
                    break  # before the last step (and its evaluation)
        step_seconds = [b - a for a, b in zip(stamps[max(warmup, 1) - 1:], stamps[max(warmup, 1):])]
        return _result(kind, tokens_per_step, step_seconds, model)

    if side == "ours":
        model = our_model(family, vocab)
        batches = packed_batches(family, vocab)
        generator = torch.Generator().manual_seed(3)

        def step():
            batch = batches.train_batch(generator)
            return model.loss(batch).total
    else:
        model = hf_model(family, vocab.size, attention_dropout)
        batches = packed_batches(family, vocab)  # only for its random windows of the token stream
        generator = torch.Generator().manual_seed(3)

        def step():
            inputs = hf_batch(family, batches.train_rows(generator), vocab, generator)
            return model(**inputs).loss

    torch.manual_seed(0)
    model.train()
    optimizer = adamw(model)
    params = [p for p in model.parameters() if p.requires_grad]
    step_seconds = []
    for i in range(warmup + steps):
        started = time.perf_counter()
        loss = step()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, SMALL["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i >= warmup:
            step_seconds.append(time.perf_counter() - started)
    if not torch.isfinite(loss):
        raise RuntimeError(f"{kind}: the loss is not finite")
    return _result(kind, tokens_per_step, step_seconds, model)


def _result(kind: str, tokens_per_step: int, step_seconds: list[float], model) -> dict:
    """tokens/s from the median step (robust to a neighbour's burst on a shared machine) and from the mean."""
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    extra = {}
    if kind.startswith("hf"):
        extra["attn_implementation"] = getattr(model.config, "_attn_implementation", None) or "eager"
    return {"kind": kind, "tokens_per_s": tokens_per_step / statistics.median(step_seconds),
            "tokens_per_s_mean": tokens_per_step * len(step_seconds) / sum(step_seconds),
            "peak_rss_bytes": peak_kib * 1024, "parameters": sum(p.numel() for p in model.parameters()), **extra}


# ------------------------------------------------------------------------------------------------ the driver


def measure(kind: str, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--threads", str(args.threads),
               "--hf-attention-dropout", str(args.hf_attention_dropout)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"worker {kind} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians (default 3)")
    p.add_argument("--steps", type=int, default=12, help="timed training steps per measurement (default 12)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before them (default 3)")
    p.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 8),
                   help="torch.set_num_threads for every model (default: the cores, at most 8)")
    p.add_argument("--families", nargs="+", default=["gpt", "bert"], choices=["gpt", "bert"])
    p.add_argument("--hf-attention-dropout", type=float, default=0.1,
                   help="the HF models' attention-probability dropout (default 0.1, their default)")
    p.add_argument("--engine", action="store_true", help="also time ours through lab_models.training.engine.Trainer")
    p.add_argument("--json", type=Path, help="also write every measurement to this file")
    p.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        print(json.dumps(run_worker(args.worker, args.steps, args.warmup, args.threads, args.hf_attention_dropout)))
        return 0
    transformers = require_transformers()
    import torch

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"batch {SMALL['batch_size']} x {SMALL['seq_len']}, vocab {SMALL['tokenizer_vocab'] + N_SPECIALS}, "
          f"{args.warmup} warmup + {args.steps} timed steps, {args.rounds} interleaved rounds")
    results: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        for family in args.families:
            pair = [f"ours-{family}", f"hf-{family}"]
            if r % 2:
                pair.reverse()  # alternate who goes first
            if args.engine:
                pair.append(f"engine-{family}")
            for kind in pair:
                result = measure(kind, args)
                results.setdefault(kind, []).append(result)
                print(f"  round {r + 1}: {kind:12s} {result['tokens_per_s']:9.0f} tokens/s  "
                      f"peak RSS {result['peak_rss_bytes'] / 2**20:6.0f} MiB", flush=True)

    def median(kind, key="tokens_per_s"):
        return statistics.median(x[key] for x in results[kind])

    def peak(kind):
        return max(x["peak_rss_bytes"] for x in results[kind]) / 2**20

    print()
    header = (f"| {'model':22s} | {'HF peer':32s} | {'tokens/s ours':>13s} | {'tokens/s HF':>11s} | "
              f"{'ours/HF':>7s} | {'peak RSS ours':>13s} | {'peak RSS HF':>11s} |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    ok = True
    for family in args.families:
        ours, hf = median(f"ours-{family}"), median(f"hf-{family}")
        impl = results[f"hf-{family}"][0].get("attn_implementation")
        # the median of the per-round ratios: a round's two runs are neighbours in time, so they share the machine's
        # load, and their ratio is steadier than the ratio of two medians
        ratio = statistics.median(o["tokens_per_s"] / h["tokens_per_s"]
                                  for o, h in zip(results[f"ours-{family}"], results[f"hf-{family}"]))
        ok &= ratio >= TARGET_RATIO and peak(f"ours-{family}") * 2**20 < TARGET_RSS_BYTES
        print(f"| {LABELS[family]:22s} | {HF_CLASSES[family] + f' ({impl})':32s} | {ours:13.0f} | {hf:11.0f} | "
              f"{ratio:7.2f} | {peak(f'ours-{family}'):9.0f} MiB | {peak(f'hf-{family}'):7.0f} MiB |")
    if args.engine:
        print()
        for family in args.families:
            engine, ours = median(f"engine-{family}"), median(f"ours-{family}")
            print(f"ours {family} through engine.Trainer: {engine:.0f} tokens/s ({engine / ours:.2f} x the bare loop)")
    print(f"\ntargets: ours/HF >= {TARGET_RATIO} and peak RSS of ours < 2 GiB -> {'met' if ok else 'NOT met'}")
    print("(tokens/s: median over rounds of batch tokens / median step time; ours/HF: median of the per-round ratios; "
          "peak RSS: the largest ru_maxrss of the worker processes)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
