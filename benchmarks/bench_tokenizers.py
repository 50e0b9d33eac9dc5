"""Benchmark: train each tokenizer kind on ~1 MB of English and measure encode speed.

Run `python benchmarks/bench_tokenizers.py [--vocab-sizes 2000 8000] [--megabytes 1.0] [--repeats 3]`.

The text is the lab's `stdlib-docs` corpus (prose from the Python standard library's docstrings) when
`lab_models.text.corpora` can build it, else a seeded pseudo-English text, so every run sees the same bytes. The target
is "under 2 s to train on 1 MB" for every kind. Training time is the best of `--repeats` runs of
`lab_models.text.tokenization.train_tokenizer`; encode speed is the best of `--repeats` runs of `Tokenizer.encode_batch`
over the same text (all cores that `tokenizers` uses by default).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS
from lab_models.text.tokenization import train_tokenizer  # noqa: E402

TARGET_TRAIN_SECONDS = 2.0


def generated_english(target_bytes: int, seed: int = 0) -> list[str]:
    """Seeded pseudo-English: 20,000 syllable-built words drawn with Zipf frequencies, one sentence per line."""
    rng = random.Random(seed)
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"

    def word() -> str:
        return "".join(rng.choice(consonants) + rng.choice(vowels) + (rng.choice("nrst") if rng.random() < 0.3 else "")
                       for _ in range(rng.choice((1, 1, 2, 2, 3, 4))))

    lexicon = [word() for _ in range(20_000)]
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    lines, size = [], 0
    while size < target_bytes:
        words = rng.choices(lexicon, weights, k=rng.randint(6, 20))
        line = " ".join([words[0].capitalize(), *words[1:]]) + rng.choice(".......?!,")
        lines.append(line)
        size += len(line.encode("utf-8")) + 1
    return lines


def english_megabyte(target_bytes: int) -> tuple[list[str], str]:
    """About `target_bytes` of English text (whole paragraphs), and where it came from."""
    try:
        from lab_models.text.corpora import load_corpus

        with tempfile.TemporaryDirectory() as home:
            paragraphs = load_corpus("stdlib-docs", home=home).texts
        source = "stdlib-docs corpus"
    except Exception as error:  # the corpora module is optional here; fall back to generated text
        print(f"(lab_models.text.corpora unavailable: {error}; using generated text)")
        paragraphs, source = generated_english(target_bytes), "generated pseudo-English"
    chosen, size = [], 0
    for paragraph in paragraphs:
        if size >= target_bytes:
            break
        chosen.append(paragraph)
        size += len(paragraph.encode("utf-8")) + 1
    if size < target_bytes:
        print(f"(the corpus holds only {size / 1e6:.2f} MB)")
    return chosen, source


def best_of(repeats: int, run) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-sizes", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    texts, source = english_megabyte(int(args.megabytes * 1_000_000))
    megabytes = sum(len(text.encode("utf-8")) + 1 for text in texts) / 1e6
    print(f"text: {source}, {len(texts)} paragraphs, {megabytes:.2f} MB; {os.cpu_count()} CPU cores; "
          f"best of {args.repeats}")
    print(f"{'kind':<10} {'title':<31} {'vocab':>6} {'train s':>8} {'encode MB/s':>12} {'tokens/word':>12}  "
          f"target (<{TARGET_TRAIN_SECONDS:g} s)")
    all_met = True
    for vocab_size in args.vocab_sizes:
        all_met &= bench_one_size(texts, megabytes, vocab_size, args.repeats)
    print("all kinds meet the target" if all_met else "some kinds miss the target")
    return 0 if all_met else 1


def bench_one_size(texts: list[str], megabytes: float, vocab_size: int, repeats: int) -> bool:
    all_met = True
    for kind, title in TOKENIZER_KINDS.items():
        try:
            train_seconds, tokenizer = best_of(repeats, lambda: train_tokenizer(kind, texts, vocab_size))
        except ValueError as error:  # e.g. a vocabulary larger than this corpus supports
            print(f"{kind:<10} {title:<31} {vocab_size:>6} {'-':>8} {'-':>12} {'-':>12}  not run: {error}")
            all_met = False
            continue
        encode_seconds, encodings = best_of(repeats, lambda: tokenizer.encode_batch(texts))
        tokens = sum(len(encoding.ids) for encoding in encodings)
        words = sum(len(text.split()) for text in texts)
        met = train_seconds < TARGET_TRAIN_SECONDS * megabytes
        all_met &= met
        print(f"{kind:<10} {title:<31} {vocab_size:>6} {train_seconds:>8.2f} {megabytes / encode_seconds:>12.1f} "
              f"{tokens / words:>12.2f}  {'meets' if met else 'MISSES'}")
    return all_met


if __name__ == "__main__":
    raise SystemExit(main())
