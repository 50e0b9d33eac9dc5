"""A real-size corpus from the command to the first training step: time, tokenization speed and peak memory, against
nanoGPT's approach (tokenize everything, then write one uint16 memmap) measured on the same corpus in the same run.

    python benchmarks/bench_corpus.py [--sizes 300,1000] [--quick] [--workdir DIR] [--family gpt] [--preset tiny]

For each size (MB) it writes a seeded plain-text corpus of English-like words and Chinese characters (a Zipf
vocabulary of 20,000 words and 3,000 characters; paragraphs separated by blank lines), then runs, each in its own
process so that its peak resident memory is its own (`os.wait4`):
1. the lab, first run: `python -m lab_models train --family gpt --preset tiny --steps 5 --corpus FILE` on a fresh lab
   home: fingerprint, tokenizer on a 16 MB sample, tokenization to memory-mapped shards, then training. Time to the
   first step is measured from the launch to the first train row of metrics.jsonl;
2. the lab, second run on the same corpus and home: the fingerprint, tokenizer and shards are reused;
3. the peer, nanoGPT's `data/openwebtext/prepare.py` written here with the lab's own tokenizer (nanoGPT's is
   tiktoken's GPT-2, which would need a download): every document encoded in batches of 1000 (as `datasets.map`
   with `batched=True` does) and kept as a uint16 array per document (as `datasets` keeps its column), then the total
   length summed and one `np.memmap(..., dtype=np.uint16, mode="w+")` filled in 1024 slices. No fingerprint, no
   split, no resume; its speed is the bound the lab's streamed writer should stay near, its memory what the lab's
   constant-memory writer saves.

Targets, on a 2-core machine: 300 MB to the first step in under 4 minutes with peak RSS under 2 GB; 1 GB
with the same peak RSS (constant memory); a second run on the same corpus starts training in under 30 s. Times
depend on the machine's load; peak RSS does not. `--quick` checks the script in a minute with a 5 MB corpus (read in
memory by the lab: corpora up to 64 MB are; the bigger ones stream).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_FIRST_STEP_S = 240.0
TARGET_RSS_MB = 2048.0
TARGET_SECOND_RUN_S = 30.0


# ------------------------------------------------------------------------------------------------ the corpus
def write_corpus(path: Path, megabytes: float, seed: int = 0) -> Path:
    """A seeded corpus of `megabytes` MB: 70% English-like paragraphs, 30% Chinese ones, blank lines between."""
    target = int(megabytes * 1e6)
    if path.exists() and abs(path.stat().st_size - target) < 2_000_000:
        return path
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = np.array(["".join(rng.choice(letters, size=rng.integers(2, 10))) for _ in range(20_000)])
    han = np.array([chr(code) for code in range(0x4E00, 0x4E00 + 3000)])
    tmp = path.with_suffix(".partial")
    size = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        while size < target:
            paragraphs = []
            for length in rng.integers(20, 200, size=2000):
                if rng.random() < 0.3:
                    picks = np.minimum(rng.zipf(1.3, size=2 * length), 3000) - 1
                    paragraphs.append("".join(han[picks]) + "。")
                else:
                    picks = np.minimum(rng.zipf(1.2, size=length), 20_000) - 1
                    paragraphs.append(" ".join(words[picks]) + ".")
            block = "\n\n".join(paragraphs) + "\n\n"
            handle.write(block)
            size += len(block.encode("utf-8"))
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------------------ measuring
def measured(command: list[str], watch: Path | None = None) -> dict:
    """Run `command`; its wall time, peak RSS (MB, of that process alone) and, when `watch` (a metrics.jsonl) is given,
    the seconds from the launch to its first train row."""
    started = time.monotonic()
    first_step: list[float] = []
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr_lines: list[str] = []
    reader = threading.Thread(target=lambda: stderr_lines.extend(process.stderr), daemon=True)
    reader.start()

    def watcher():
        while process.poll() is None and not first_step:
            try:
                if watch is not None and any(json.loads(line).get("split", "train") == "train"
                                             for line in watch.read_text().splitlines() if line.strip()):
                    first_step.append(time.monotonic() - started)
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    thread.join(1)
    reader.join(5)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed ({process.returncode}):\n{''.join(stderr_lines[-20:])}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
            "first_step_s": first_step[0] if first_step else None}


def peer(corpus: str, tokenizer_path: str, out: str) -> None:
    """nanoGPT's prepare.py, with the lab's tokenizer (run in its own process by the benchmark)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_path)
    eos = tokenizer.token_to_id("[EOS]")
    started = time.monotonic()
    text = Path(corpus).read_text(encoding="utf-8")
    documents = [document.strip() for document in text.split("\n\n") if document.strip()]
    del text
    ids: list[np.ndarray] = []
    for start in range(0, len(documents), 1000):  # datasets.map(process, batched=True): batches of 1000
        for encoding in tokenizer.encode_batch_fast(documents[start:start + 1000], add_special_tokens=False):
            ids.append(np.array(encoding.ids + [eos], dtype=np.uint16))
    total = sum(len(part) for part in ids)
    array = np.memmap(out, dtype=np.uint16, mode="w+", shape=(total,))
    at = 0
    for batch in np.array_split(np.arange(len(ids)), 1024):  # nanoGPT writes in 1024 shards
        if len(batch):
            chunk = np.concatenate([ids[i] for i in batch])
            array[at:at + len(chunk)] = chunk
            at += len(chunk)
    array.flush()
    print(json.dumps({"tokens": int(total), "seconds": time.monotonic() - started}))


def bench_size(megabytes: float, workdir: Path, family: str, preset: str) -> dict:
    corpus = write_corpus(workdir / f"corpus-{megabytes:g}MB.txt", megabytes)
    size_mb = corpus.stat().st_size / 1e6
    home = workdir / f"home-{megabytes:g}"
    for folder in (home, workdir / f"run1-{megabytes:g}", workdir / f"run2-{megabytes:g}"):
        subprocess.run(["rm", "-rf", str(folder)], check=True)
    common = [sys.executable, "-m", "lab_models", "train", "--family", family, "--preset", preset, "--steps", "5",
              "--corpus", str(corpus), "--home", str(home)]
    first = measured(common + ["--out", str(workdir / f"run1-{megabytes:g}")],
                     workdir / f"run1-{megabytes:g}" / "metrics.jsonl")
    config = json.loads((workdir / f"run1-{megabytes:g}" / "config.json").read_text())
    index = json.loads((Path(config["token_shards"]["folder"]) / "index.json").read_text())
    second = measured(common + ["--out", str(workdir / f"run2-{megabytes:g}")],
                      workdir / f"run2-{megabytes:g}" / "metrics.jsonl")
    peer_out = workdir / f"peer-{megabytes:g}.bin"
    peer_run = measured([sys.executable, str(Path(__file__).resolve()), "--peer", str(corpus),
                         str(workdir / f"run1-{megabytes:g}" / "tokenizer.json"), str(peer_out)])
    peer_tokens = peer_out.stat().st_size // 2
    peer_out.unlink()
    lab_tokens = index["tokens"]["train"] + index["tokens"]["validation"]
    return {"megabytes": size_mb, "lab_first": first, "lab_second": second, "peer": peer_run,
            "lab_tokenize_s": index["seconds"], "lab_mb_per_s": size_mb / index["seconds"],
            "peer_mb_per_s": size_mb / peer_run["wall_s"], "lab_tokens": lab_tokens, "peer_tokens": peer_tokens,
            "tokenizer": config["tokenizer"]}


def report(result: dict, quick: bool) -> None:
    first, second, peer_run = result["lab_first"], result["lab_second"], result["peer"]
    print(f"\n== {result['megabytes']:.0f} MB corpus ==")
    print(f"lab, first run : first step after {first['first_step_s']:.1f} s (tokenizing {result['lab_tokenize_s']:.1f} s"
          f", {result['lab_mb_per_s']:.2f} MB/s), peak RSS {first['peak_rss_mb']:.0f} MB, {first['cpu_s']:.0f} CPU s "
          f"in all, {result['lab_tokens']:,} tokens (vocabulary {result['tokenizer']['vocab_size']:,})")
    print(f"lab, second run: first step after {second['first_step_s']:.1f} s, peak RSS {second['peak_rss_mb']:.0f} MB, "
          f"{second['cpu_s']:.0f} CPU s")
    print(f"peer (nanoGPT) : tokenized in {peer_run['wall_s']:.1f} s ({result['peer_mb_per_s']:.2f} MB/s), peak RSS "
          f"{peer_run['peak_rss_mb']:.0f} MB, {peer_run['cpu_s']:.0f} CPU s, {result['peer_tokens']:,} tokens")
    print(f"ratios lab/peer: speed {result['lab_mb_per_s'] / result['peer_mb_per_s']:.2f}x, peak RSS "
          f"{first['peak_rss_mb'] / peer_run['peak_rss_mb']:.2f}x")
    if not quick:
        checks = [("first step", first["first_step_s"], TARGET_FIRST_STEP_S, "s"),
                  ("peak RSS", first["peak_rss_mb"], TARGET_RSS_MB, "MB"),
                  ("second run's first step", second["first_step_s"], TARGET_SECOND_RUN_S, "s")]
        for name, value, target, unit in checks:
            print(f"  {name}: {value:.1f} {unit} (target < {target:.0f} {unit}): "
                  f"{'met' if value < target else 'MISSED'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,1000", help="corpus sizes in MB, comma-separated (default 300,1000)")
    parser.add_argument("--quick", action="store_true", help="a 5 MB corpus: checks the script, not the targets")
    parser.add_argument("--workdir", help="where corpora, homes and runs go (default: a temporary folder)")
    parser.add_argument("--family", default="gpt")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--peer", nargs=3, metavar=("CORPUS", "TOKENIZER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer:
        peer(*args.peer)
        return 0
    sizes = [5.0] if args.quick else [float(size) for size in args.sizes.split(",")]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-corpus-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"workdir {workdir}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = []
    for megabytes in sizes:
        result = bench_size(megabytes, workdir, args.family, args.preset)
        report(result, args.quick)
        results.append(result)
    if len(results) > 1:
        small, large = results[0], results[-1]
        print(f"\nconstant memory: peak RSS {large['lab_first']['peak_rss_mb']:.0f} MB at {large['megabytes']:.0f} MB "
              f"against {small['lab_first']['peak_rss_mb']:.0f} MB at {small['megabytes']:.0f} MB "
              f"({large['lab_first']['peak_rss_mb'] / small['lab_first']['peak_rss_mb']:.2f}x for "
              f"{large['megabytes'] / small['megabytes']:.1f}x the corpus)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
