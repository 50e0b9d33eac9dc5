"""Benchmark: importing a real-size GPT-2 (124M parameters) into the lab, against transformers loading the same folder.

Run `pip install -r benchmarks/requirements-bench.txt && python benchmarks/bench_import.py [--rounds 3]
[--threads 2] [--keep DIR]`.

The folder is made here, with nothing downloaded: `GPT2LMHeadModel(GPT2Config())` (the released gpt2's shapes: 12
layers, 768 wide, 12 heads, 1024 positions, a 50257-token vocabulary) with its random init, saved by
`save_pretrained`, and a byte-level BPE tokenizer of the released size (256 byte symbols and 50000 merges of byte pairs,
plus <|endoftext|>), saved as tokenizer.json. The weights' values do not change the work.

What is measured, each in a fresh Python process so that the peak resident memory (ru_maxrss) belongs to that one
job, alternating the two for `--rounds` rounds:

- lab: `lab_models.interop.importer.import_checkpoint(folder, out)`: read the folder and its tokenizer, convert every
  tensor, check one forward pass, write the run folder (config.json, model.safetensors, tokenizer.json) to disk;
- transformers: `GPT2LMHeadModel.from_pretrained(folder)` and `AutoTokenizer.from_pretrained(folder)`: it reads the
  same files and writes nothing.

Printed: the median seconds of each (after the process has imported its libraries: the libraries' own import time
is shown apart), its CPU seconds (user + system: the work itself, which a busy machine does not inflate as it does
wall time), the ratio lab / transformers, and each process's peak RSS and its growth after the imports. The lab's
peak is the converted model plus safetensors' serialisation, which copies every tensor into one bytes buffer
before writing; transformers maps the file and writes nothing. Target: the lab's import under 5 s on the
2-core CI machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_SECONDS = 5.0
MERGES = 50_000  # gpt2 has 50000 merges over 256 byte symbols, plus <|endoftext|>: 50257 tokens

CHILD = r"""
import json, resource, sys, time
started = time.perf_counter()
which, folder, out, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import torch
torch.set_num_threads(threads)
if which == "lab":
    from lab_models.interop.importer import import_checkpoint
else:
    from transformers import AutoTokenizer, GPT2LMHeadModel
imported = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
rss_after_imports, cpu_before = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
if which == "lab":
    import_checkpoint(folder, out)
else:
    model = GPT2LMHeadModel.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
done = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": done - imported, "import_seconds": imported - started,
                  "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu_before,
                  "peak_rss_mb": usage.ru_maxrss / 1024, "rss_after_imports_mb": rss_after_imports / 1024}))
"""


def byte_level_tokenizer(merges: int):
    """A byte-level BPE of the released gpt2's size: the 256 byte symbols, `merges` merges of two byte symbols (each
    makes their concatenation a new token, in a fixed order), then <|endoftext|>."""
    import itertools

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    pairs = list(itertools.islice(itertools.product(alphabet, repeat=2), merges))
    for left, right in pairs:
        vocab[left + right] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab, pairs))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def make_folder(folder: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())  # gpt2's own shapes
    model.save_pretrained(folder)
    tokenizer = byte_level_tokenizer(MERGES)
    assert tokenizer.get_vocab_size() == model.config.vocab_size, tokenizer.get_vocab_size()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                            unk_token="<|endoftext|>").save_pretrained(folder)
    n = sum(p.numel() for p in model.parameters())
    print(f"made {folder}: GPT2LMHeadModel, {n / 1e6:.1f}M parameters, "
          f"{(folder / 'model.safetensors').stat().st_size / 1e6:.0f} MB of safetensors, "
          f"{tokenizer.get_vocab_size()} tokens", flush=True)


def run_child(which: str, folder: Path, out: Path, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD, which, str(folder), str(out), str(threads)], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{which} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="make the checkpoint folder here and keep it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    folder = args.keep or work / "gpt2"
    try:
        if not (folder / "model.safetensors").is_file():
            make_folder(folder)
        results: dict[str, list[dict]] = {"lab": [], "transformers": []}
        for round_index in range(args.rounds):
            for which in ("lab", "transformers"):
                out = work / f"run-{round_index}"
                results[which].append(run_child("lab" if which == "lab" else "hf", folder, out, args.threads))
                shutil.rmtree(out, ignore_errors=True)
        print(f"\n{'':14}{'median s':>10}{'rounds (s)':>26}{'CPU s':>8}{'library import s':>18}"
              f"{'peak RSS MB':>13}{'growth MB':>11}")
        medians = {}
        for which, rows in results.items():
            seconds = [row["seconds"] for row in rows]
            medians[which] = statistics.median(seconds)
            peak = statistics.median(row["peak_rss_mb"] for row in rows)
            growth = statistics.median(row["peak_rss_mb"] - row["rss_after_imports_mb"] for row in rows)
            imports = statistics.median(row["import_seconds"] for row in rows)
            cpu = statistics.median(row["cpu_seconds"] for row in rows)
            print(f"{which:14}{medians[which]:>10.2f}{', '.join(f'{s:.2f}' for s in seconds):>26}{cpu:>8.2f}"
                  f"{imports:>18.2f}{peak:>13.0f}{growth:>11.0f}")
        ratio = medians["lab"] / medians["transformers"]
        verdict = "meets" if medians["lab"] < TARGET_SECONDS else "MISSES"
        print(f"\nlab import / transformers from_pretrained: {ratio:.2f}x the time; the lab's import {verdict} the "
              f"target of {TARGET_SECONDS:.0f} s ({medians['lab']:.2f} s, {args.threads} threads)")
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            print(f"note: the machine's load average is {load:.1f} on {os.cpu_count()} cores, so wall times are "
                  "inflated; CPU s is the work itself (user + system seconds of the process)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
