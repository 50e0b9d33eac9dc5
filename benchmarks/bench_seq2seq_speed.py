"""Benchmark: training speed of the lab's XLNet and T5 against Hugging Face transformers at the same size.

Run `python benchmarks/bench_seq2seq_speed.py [--rounds 3] [--preset small] [--threads 2] [--steps 10] [--warmup 3]`
(`pip install -r benchmarks/requirements-bench.txt` first: `transformers` is a benchmark-only dependency).

What is compared, at the preset's model size (lab_models/nn/config.py PRESETS; `small`, the default, is the lab's CPU
demo: d_model 256, 4 layers, 4 heads, d_ff 1024) and the preset's training defaults (lab_models/training/run.py
PRESET_DEFAULTS; `small`: batch 16 x 128 tokens, a 4000-token tokenizer plus the lab's 40 special tokens = 4040 ids,
AdamW lr 5e-4, betas (0.9, 0.98), eps 1e-8, weight decay 0.01 on matrices only, gradient clipping at 1.0, dropout 0.1,
train mode, random init on both sides, nothing downloaded):

    ours "xlnet" (two-stream PLM, objectives/xlnet.py)           vs  transformers XLNetLMHeadModel
    ours "t5"    (span corruption, objectives/t5.py)             vs  transformers T5ForConditionalGeneration

The same work for both. Each of our steps draws a batch with the lab's real batch builder (`make_batch` through
data.PackedBatches: random windows of a random token stream, a random factorization order per row / random noise
spans per row). The HF worker draws the very same batches (same stream, same seeds) and hands its model the
equivalent tensors, converted from the lab's batch:
- XLNet: input_ids (B, T); perm_mask (B, T, T) float = NOT the lab's query mask (1 = may not attend: rank(j) >= rank(i);
  HF's content stream adds the diagonal back, which is exactly the lab's content mask rank(j) <= rank(i), checked once
  per worker); target_mapping (B, P, T) one-hot at the lab's P = round(T / 6) target positions (21 at T = 128) and
  labels (B, P). Both predict the same P tokens per row from the query stream, through a tied LM head with a bias.
- T5: input_ids (B, E), attention_mask ones (B, E), decoder_input_ids (B, S) and labels (B, S) taken from the lab's
  batch (T = 128: E = 115 encoder tokens, 6 sentinels for 19 noise tokens, S = 26 decoder tokens; no padding, every
  row has the same lengths). HF projects all S decoder positions to the vocabulary, and so do we (all are targets).
Only the lab's side pays for building its batch inside the timed step (its `make_batch` is part of training); the HF
side pays only the conversion (its lab batch is drawn outside the timer), so the ratio is conservative for the lab.
Our worker also reports its batch-building time per step (`batch_ms`), so the cost of the model alone can be read.
Tokens are counted the same way for both: batch size x seq_len source tokens per step (2048 at `small`).

What differs between the implementations (part of why the speeds differ), each side as its library builds it:
- XLNet. Both do the same math with the same parameters (the same count; tests/interop/test_xlnet.py shows the
  logits agree to 1e-4 with the weights of one loaded into the other): Transformer-XL's relative attention (a
  sinusoidal relative table projected by each layer's r, the r_w / r_r / r_s biases and seg_embed in every score),
  q/k/v/o without biases, no embedding LayerNorm, no position table, no mems. HF's XLNetLMHeadModel computes it with
  separate q/k/v/o/r einsums, eager attention only (einsum scores, its relative shift, softmax, dropout 0.1 on the
  probabilities: its one `dropout` also serves attention) and its own two-stream loop: the query stream g is computed
  for the P target rows, but its attention scatters those rows to all T positions through target_mapping (two einsums
  per layer) and runs a T x T attention for them; with no token_type_ids it leaves the segment term out. Ours
  (nn/relative_attention.py) uses a fused qkv projection, the relative scores gathered from one matmul against the
  batch's distinct distances, the segment term always (one segment: a constant per row), and one SDPA call per layer
  for both streams ([h; g] stacked, P query rows only: (T + P) x T) with the relative scores as its float mask, and no
  attention dropout (docs/design.md, "Speed, on CPU and GPU").
- T5. Both are T5 v1.0 as the paper builds it (the lab's T5 family defaults, lab_models/models/family.py): RMS norm
  without bias or mean, no biases in any linear layer, ReLU, no absolute positions but a learned relative position bias
  per head (32 buckets; one per stack, computed once per forward pass and added to every layer's scores, so SDPA gets a
  float bias mask on both sides), no 1/sqrt(d) in the attention, and a d_model^-0.5 rescale of the decoder output
  before the tied head without bias; use_cache=False (no KV cache in training). HF applies dropout 0.1 to the
  attention probabilities (inside SDPA, its default attention implementation; `--hf-attention-dropout 0` turns it
  off) and inside the feed-forward; ours has no attention dropout. HF builds the bias in the first layer and adds the
  padding mask to it per batch; ours folds the bias and the boolean mask into one additive mask per stack and batch
  (cross-attention: no mask at all, the mask is full). Ours fuses q, k, v into one projection.

Every model runs in its own subprocess (one model per process), so the peak RSS (`ru_maxrss` of the child) belongs
to that model alone; it includes the interpreter, torch, the lab's modules (both sides import them for the batches)
and, for the HF rows, transformers. Each step, for both sides: build the inputs, forward + loss, backward, clip the
global grad norm to 1.0, AdamW step, zero the gradients (set_to_none). A round starts a fresh process for ours and one
for HF and trains them in lockstep, one step of each in turn (ours, HF, ours, HF, ...; the other order in every
second round): `--warmup` untimed steps each, then `--steps` timed ones. So the two sides of a round see the same
load, step by step, even on a shared machine where other jobs come and go (a whole-process interleave on the loaded
2-core machine this was written on gave per-round ratios from 0.26 to 2.6). A model's tokens/s in a round is the
step's tokens / its median step time (the JSON also holds the mean and every step time); the table shows the median
tokens/s over the rounds, every round's ratio ours/HF and their median.

Target: ours / HF >= 1.25 for both families on this CPU.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.25
N_SPECIALS = 40  # lab_models/text/vocab.py: 8 special tokens + 32 sentinels
# the engine's defaults (lab_models/training/run.py): AdamW and clipping; the sizes come from the preset
OPTIMIZER = dict(betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01, grad_clip=1.0)
DROPOUT = 0.1

FAMILIES = ("xlnet", "t5")
WORKERS = tuple(f"{side}-{family}" for family in FAMILIES for side in ("ours", "hf"))
LABELS = {"xlnet": "XLNet (two-stream PLM)", "t5": "T5 (span corruption)"}
HF_CLASSES = {"xlnet": "XLNetLMHeadModel", "t5": "T5ForConditionalGeneration"}


def require_transformers():
    try:
        import transformers
    except ImportError:
        print("bench_seq2seq_speed needs Hugging Face transformers: pip install -r benchmarks/requirements-bench.txt",
              file=sys.stderr)
        sys.exit(2)
    return transformers


def training_setup(preset: str, batch_size: int | None = None, seq_len: int | None = None) -> dict:
    """The preset's model sizes and training defaults (batch, seq_len, tokenizer vocabulary, lr)."""
    from lab_models.nn.config import PRESETS
    from lab_models.training.config import PRESET_DEFAULTS

    defaults = PRESET_DEFAULTS[preset]
    return dict(PRESETS[preset], batch_size=batch_size or defaults["batch_size"],
                seq_len=seq_len or defaults["seq_len"], tokenizer_vocab=defaults["vocab_size"], lr=defaults["lr"])


# ------------------------------------------------------------------------------------------------ the workers


def vocab_info(setup: dict):
    """A VocabInfo shaped like a prepared tokenizer of the preset's size: 40 special ids first (8 specials, then the
    32 sentinels T5 uses), ~70% of ordinary ids start a word."""
    import torch

    from lab_models.text.vocab import VocabInfo

    size = setup["tokenizer_vocab"] + N_SPECIALS
    g = torch.Generator().manual_seed(1)
    word_start = (torch.rand(size, generator=g) < 0.7).tolist()
    word_start[:N_SPECIALS] = [True] * N_SPECIALS
    return VocabInfo(size=size, pad_id=0, mask_id=1, cls_id=2, sep_id=3, bos_id=4, eos_id=5, start_id=6, end_id=7,
                     sentinel_ids=tuple(range(8, N_SPECIALS)), random_ids=tuple(range(N_SPECIALS, size)),
                     word_start=tuple(bool(x) for x in word_start))


def packed_batches(family: str, vocab, setup: dict):
    """The lab's batch source over a random token stream (speed does not depend on the text)."""
    import torch

    from lab_models.training.batches import PackedBatches
    from lab_models.objectives import objective_module
    from lab_models.objectives.common import BatchConfig

    module = objective_module(family)
    stream = torch.randint(N_SPECIALS, vocab.size, (200_000,), generator=torch.Generator().manual_seed(2))
    return PackedBatches(stream, stream[:4096], seq_len=setup["seq_len"], batch_size=setup["batch_size"],
                         objective=module, batch_config=BatchConfig(settings=module.Settings(), vocab=vocab),
                         eval_batches=1)


def our_model(family: str, vocab, preset: str):
    from lab_models.models.family import build_model, family_model_config

    config = family_model_config(family, preset, vocab.size, dropout=DROPOUT)
    return build_model(family, config, None, vocab, seed=0)


def adamw(model, lr: float):
    import torch

    from lab_models.training.engine import parameter_groups

    return torch.optim.AdamW(parameter_groups(model, OPTIMIZER["weight_decay"]), lr=lr, betas=OPTIMIZER["betas"],
                             eps=OPTIMIZER["eps"])


def hf_model(family: str, vocab_size: int, setup: dict, attention_dropout: float):
    transformers = require_transformers()
    import torch

    torch.manual_seed(0)
    d, layers, heads, ff = setup["d_model"], setup["n_layers"], setup["n_heads"], setup["d_ff"]
    if family == "xlnet":
        config = transformers.XLNetConfig(
            vocab_size=vocab_size, d_model=d, n_layer=layers, n_head=heads, d_inner=ff, ff_activation="gelu",
            dropout=DROPOUT, layer_norm_eps=1e-12, mem_len=None, use_mems_train=False, bi_data=False,
            attn_type="bi", pad_token_id=0)
        return transformers.XLNetLMHeadModel(config)
    config = transformers.T5Config(
        vocab_size=vocab_size, d_model=d, d_kv=d // heads, d_ff=ff, num_layers=layers, num_decoder_layers=layers,
        num_heads=heads, dropout_rate=DROPOUT, layer_norm_epsilon=1e-6, feed_forward_proj="relu",
        use_cache=False, pad_token_id=0, decoder_start_token_id=0)
    model = transformers.T5ForConditionalGeneration(config)
    for module in model.modules():  # T5Attention reads its probability dropout from this attribute
        if type(module).__name__ == "T5Attention":
            module.dropout = attention_dropout
    return model


def hf_inputs(family: str, batch) -> dict:
    """The HF model's inputs for one lab Batch: the same tokens, the same attention, the same targets."""
    import torch

    from lab_models.batch import IGNORE_INDEX

    if family == "xlnet":
        B, T = batch.input_ids.shape
        is_target = batch.targets != IGNORE_INDEX  # (B, T): the last P positions of each row's order
        P = int(is_target[0].sum())  # the same for every row (default_num_predict of the row length)
        picked = is_target.nonzero()[:, 1].view(B, P)  # (B, P): target positions, in position order
        target_mapping = torch.zeros(B, P, T).scatter_(2, picked.unsqueeze(-1), 1.0)  # (B, P, T) one-hot
        return {"input_ids": batch.input_ids,
                "perm_mask": (~batch.attention["query"]).float(),  # (B, T, T): 1 = i may not attend j
                "target_mapping": target_mapping, "labels": batch.targets.gather(1, picked)}
    return {"input_ids": batch.input_ids, "attention_mask": torch.ones_like(batch.input_ids),
            "decoder_input_ids": batch.decoder_input_ids, "labels": batch.targets}


def check_equivalent(family: str, batch, inputs: dict) -> None:
    """Once per worker: the converted inputs describe the lab's batch exactly (no padding, same masks)."""
    import torch

    from lab_models.batch import IGNORE_INDEX

    if family == "xlnet":
        T = batch.input_ids.shape[1]
        assert torch.equal(batch.query_slots, torch.arange(T).expand_as(batch.query_slots))
        hf_content = (inputs["perm_mask"] == 0) | torch.eye(T, dtype=torch.bool)  # HF's non_tgt_mask
        assert torch.equal(hf_content, batch.attention["content"]), "XLNet content masks differ"
        assert int((batch.targets != IGNORE_INDEX).sum()) == inputs["labels"].numel()
    else:
        for stream in ("encoder", "cross"):
            assert bool(batch.attention[stream].all()), f"T5 {stream} mask has padding"
        S = batch.decoder_input_ids.shape[1]
        assert torch.equal(batch.attention["decoder"], torch.ones(S, S, dtype=torch.bool).tril().expand_as(
            batch.attention["decoder"])), "T5 decoder mask is not causal"
        assert bool((batch.targets != IGNORE_INDEX).all()), "T5 targets have padding"


class Worker:
    """One model in this process, ready to train one step at a time (the driver runs two of these in lockstep)."""

    def __init__(self, kind: str, preset: str, threads: int, attention_dropout: float, batch_size: int | None,
                 seq_len: int | None):
        import torch

        torch.set_num_threads(threads)
        self.kind = kind
        self.side, self.family = kind.split("-")
        setup = training_setup(preset, batch_size, seq_len)
        vocab = vocab_info(setup)
        self.tokens_per_step = setup["batch_size"] * setup["seq_len"]
        self.batches = packed_batches(self.family, vocab, setup)
        self.generator = torch.Generator().manual_seed(3)
        if self.side == "ours":
            self.model = our_model(self.family, vocab, preset)
        else:
            self.model = hf_model(self.family, vocab.size, setup, attention_dropout)
            first = self.batches.train_batch(torch.Generator().manual_seed(3))
            check_equivalent(self.family, first, hf_inputs(self.family, first))
        torch.manual_seed(0)
        self.model.train()
        self.optimizer = adamw(self.model, setup["lr"])
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.loss = None

    def step(self) -> tuple[float, float]:
        """One training step: (its seconds, the seconds of building its inputs). Ours builds its batch with the
        lab's builder inside the timed step; HF's lab batch is drawn before the timer and converted inside it."""
        import torch

        if self.side == "ours":
            started = time.perf_counter()
            batch = self.batches.train_batch(self.generator)
            built = time.perf_counter()
            loss = self.model.loss(batch).total
        else:
            batch = self.batches.train_batch(self.generator)
            started = time.perf_counter()
            inputs = hf_inputs(self.family, batch)
            built = time.perf_counter()
            loss = self.model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, OPTIMIZER["grad_clip"])
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.loss = float(loss.detach())
        return time.perf_counter() - started, built - started

    def summary(self) -> dict:
        """This process's peak RSS and the model's facts."""
        import math

        if self.loss is None or not math.isfinite(self.loss):
            raise RuntimeError(f"{self.kind}: the loss is not finite ({self.loss})")
        extra = {}
        if self.side == "hf":
            extra["attn_implementation"] = getattr(self.model.config, "_attn_implementation", None) or "eager"
        return {"kind": self.kind, "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "parameters": sum(p.numel() for p in self.model.parameters()), "loss": self.loss,
                "tokens_per_step": self.tokens_per_step, **extra}


def serve(args) -> int:
    """The worker process: build the model, say "ready", then answer each "step" line with the step's timing and
    "done" with the summary (peak RSS of this process: ru_maxrss is in KiB on Linux)."""
    worker = Worker(args.worker, args.preset, args.threads, args.hf_attention_dropout, args.batch_size, args.seq_len)
    print(json.dumps({"ready": args.worker}), flush=True)
    for line in sys.stdin:
        if line.strip() == "step":
            seconds, input_seconds = worker.step()
            print(json.dumps({"seconds": seconds, "input_seconds": input_seconds}), flush=True)
        elif line.strip() == "done":
            print(json.dumps(worker.summary()), flush=True)
            return 0
    return 1


# ------------------------------------------------------------------------------------------------ the driver


class Process:
    """A worker subprocess talked to over pipes, one JSON line per answer."""

    def __init__(self, kind: str, args):
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--preset", args.preset,
                   "--threads", str(args.threads), "--hf-attention-dropout", str(args.hf_attention_dropout)]
        if args.batch_size:
            command += ["--batch-size", str(args.batch_size)]
        if args.seq_len:
            command += ["--seq-len", str(args.seq_len)]
        self.kind = kind
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1, cwd=ROOT)

    def ask(self, line: str | None) -> dict:
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            self.proc.wait()
            self.stderr.seek(0)
            raise SystemExit(f"worker {self.kind} failed (exit {self.proc.returncode}):\n{self.stderr.read()[-3000:]}")
        return json.loads(answer)

    def close(self) -> dict:
        summary = self.ask("done")
        self.proc.stdin.close()
        self.proc.wait()
        self.stderr.close()
        return summary


def measure_round(family: str, ours_first: bool, args) -> dict[str, dict]:
    """One round: a fresh process for ours and one for HF, started together, then trained in lockstep, one step of
    each in turn (warm-up steps first, untimed), so that both see the same load on a shared machine."""
    kinds = [f"ours-{family}", f"hf-{family}"]
    if not ours_first:
        kinds.reverse()
    procs = [Process(kind, args) for kind in kinds]
    for proc in procs:
        proc.ask(None)  # "ready"
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    inputs: dict[str, list[float]] = {kind: [] for kind in kinds}
    for i in range(args.warmup + args.steps):
        for proc in procs:
            answer = proc.ask("step")
            if i >= args.warmup:
                seconds[proc.kind].append(answer["seconds"])
                inputs[proc.kind].append(answer["input_seconds"])
    results = {}
    for proc in procs:
        summary = proc.close()
        median = statistics.median(seconds[proc.kind])
        results[proc.kind] = {**summary, "tokens_per_s": summary["tokens_per_step"] / median,
                              "tokens_per_s_mean": summary["tokens_per_step"] * len(seconds[proc.kind])
                              / sum(seconds[proc.kind]),
                              "step_ms": 1000 * median, "input_ms": 1000 * statistics.median(inputs[proc.kind]),
                              "step_seconds": seconds[proc.kind]}
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds (fresh process pairs); the table shows medians "
                                                          "(default 3)")
    p.add_argument("--preset", default="small", choices=["tiny", "small", "medium", "base"],
                   help="model size and training defaults (default small, the lab's CPU demo size)")
    p.add_argument("--steps", type=int, default=10, help="timed training steps per model and round (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before them (default 3)")
    p.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 8),
                   help="torch.set_num_threads for every model (default: the cores, at most 8)")
    p.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    p.add_argument("--batch-size", type=int, help="override the preset's batch size")
    p.add_argument("--seq-len", type=int, help="override the preset's sequence length")
    p.add_argument("--hf-attention-dropout", type=float, default=DROPOUT,
                   help="HF T5's attention-probability dropout (default 0.1, its default; XLNet's one dropout "
                        "serves attention and outputs alike and is not separable)")
    p.add_argument("--json", type=Path, help="also write every measurement to this file")
    p.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        return serve(args)
    transformers = require_transformers()
    import torch

    setup = training_setup(args.preset, args.batch_size, args.seq_len)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {args.threads} threads, "
          f"preset {args.preset} (d_model {setup['d_model']}, {setup['n_layers']} layers, {setup['n_heads']} heads, "
          f"d_ff {setup['d_ff']}), batch {setup['batch_size']} x {setup['seq_len']}, "
          f"vocab {setup['tokenizer_vocab'] + N_SPECIALS}, {args.warmup} warmup + {args.steps} timed steps each, "
          f"{args.rounds} rounds")
    results: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        for family in args.families:
            measured = measure_round(family, ours_first=r % 2 == 0, args=args)  # alternate who goes first
            for kind in (f"ours-{family}", f"hf-{family}"):
                result = measured[kind]
                results.setdefault(kind, []).append(result)
                print(f"  round {r + 1}: {kind:10s} {result['tokens_per_s']:8.0f} tokens/s  "
                      f"step {result['step_ms']:6.1f} ms (inputs {result['input_ms']:5.1f} ms)  "
                      f"peak RSS {result['peak_rss_bytes'] / 2**20:5.0f} MiB", flush=True)

    def median(kind, key="tokens_per_s"):
        return statistics.median(x[key] for x in results[kind])

    def peak(kind):
        return max(x["peak_rss_bytes"] for x in results[kind]) / 2**20

    print()
    header = (f"| {'model':22s} | {'HF peer':34s} | {'tokens/s ours':>13s} | {'tokens/s HF':>11s} | "
              f"{'ours/HF':>7s} | {'per-round ours/HF':24s} | {'peak RSS ours':>13s} | {'peak RSS HF':>11s} |")
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    ok = True
    for family in args.families:
        ours, hf = median(f"ours-{family}"), median(f"hf-{family}")
        impl = results[f"hf-{family}"][0].get("attn_implementation")
        # the median of the per-round ratios: a round's two models train in lockstep, so they share the machine's
        # load, and their ratio is steadier than the ratio of two medians
        ratios = [o["tokens_per_s"] / h["tokens_per_s"]
                  for o, h in zip(results[f"ours-{family}"], results[f"hf-{family}"])]
        ratio = statistics.median(ratios)
        ok &= ratio >= TARGET_RATIO
        per_round = " ".join(f"{x:.2f}" for x in ratios)
        print(f"| {LABELS[family]:22s} | {HF_CLASSES[family] + f' ({impl})':34s} | {ours:13.0f} | {hf:11.0f} | "
              f"{ratio:7.2f} | {per_round:24s} | {peak(f'ours-{family}'):9.0f} MiB | {peak(f'hf-{family}'):7.0f} MiB |")
    print()
    for family in args.families:
        o, h = results[f"ours-{family}"][0], results[f"hf-{family}"][0]
        print(f"{family}: parameters ours {o['parameters']:,}, HF {h['parameters']:,}; median step ours "
              f"{median(f'ours-{family}', 'step_ms'):.1f} ms (its batch builder {median(f'ours-{family}', 'input_ms'):.1f}"
              f" ms), HF {median(f'hf-{family}', 'step_ms'):.1f} ms (input conversion "
              f"{median(f'hf-{family}', 'input_ms'):.1f} ms)")
    print(f"\ntarget: ours/HF >= {TARGET_RATIO} -> {'met' if ok else 'NOT met'}")
    print("(tokens/s: median over rounds of batch x seq_len tokens / median step time; ours/HF: median of the "
          "per-round ratios; peak RSS: the largest ru_maxrss of the worker processes)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
