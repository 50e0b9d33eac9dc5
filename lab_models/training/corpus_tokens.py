"""A run's data before its first step: the tokenizer for its corpus and the corpus's token shards, with the progress
shown; and `python -m lab_models tokenize`, which does just that ahead of time (the Corpora tab runs it).

    python -m lab_models tokenize --corpus NAME_OR_PATH [--text-column C] [--family gpt] [--preset tiny]
                                  [--tokenizer KIND] [--vocab-size N] [--home DIR] [--status FILE]

What a run does before it trains (lab_models/training/run.py calls both halves):
1. `run_tokenizer`: the corpus's fingerprint (a streamed corpus is read once to hash it, then never again while its
   files are unchanged), then the tokenizer the run's family, kind and vocabulary size call for, trained on all of a
   small corpus's training split or on a seeded 16 MB sample of a bigger one (lab_models/text/corpus_sources.py),
   its alphabet fitted once, and found again through its fit record on the next run (lab_models/text/vocab_fit.py);
2. `tokenize_to_shards` (lab_models/text/token_shards.py): the corpus, tokenized to memory-mapped shards in the lab
   home, or the finished shards of an earlier run or of the Corpora tab.

`tokenize` resolves the tokenizer exactly as `train` does for the same --family, --preset, --tokenizer and
--vocab-size (not counting translation or add-on objectives), so a run started afterwards finds both the tokenizer
and the shards ready. It prints a progress line to stderr every few seconds; `--status FILE` also keeps a JSON file
up to date (state, message, progress), which the Corpora tab reads. SIGTERM or Ctrl-C stops it cleanly: what is
done is kept, and the same command continues it. Exit statuses: 0 done (or stopped), 1 failed (a full disk), 2 a bad
argument or corpus.
"""
from __future__ import annotations

import logging
import signal
import sys
import time
from collections.abc import Callable

from lab_models.messages import LabError, Message, message_of
from lab_models.families import family_record
from lab_models.home import atomic_write_json, lab_home
from lab_models.objectives import objective_module
from lab_models.objectives.settings import settings_from_dict, settings_to_dict, settings_with_overrides
from lab_models.objectives.translation import tokenizer_corpus as with_pairs
from lab_models.text.corpora import Corpus
from lab_models.text.corpus_sources import TOKENIZER_SAMPLE_BYTES, open_corpus
from lab_models.text.token_shards import (TokenizeProgress, TokenizingDiskFull, TokenizingStopped,
                                          tokenize_to_shards)
from lab_models.text.tokenizer_kinds import TOKENIZER_KINDS
from lab_models.text.vocab import prepare_tokenizer
from lab_models.text.vocab_fit import TokenizerChoice, build_tokenizer
from lab_models.training.config import EXIT_BAD_ARGUMENT, EXIT_FAILED, PRESET_DEFAULTS, STATUS_INTERVAL_S
from lab_models.training.console import OneLineParser, say, say_error
from lab_models.training.faults import TOKENIZE_POINT, fault_point

logger = logging.getLogger(__name__)

SAMPLE_NOTE = (f"trained on a seeded sample of {TOKENIZER_SAMPLE_BYTES // 2**20} MB of the corpus's training "
               "documents, not all of them (as SentencePiece's input_sentence_size)")


class TokenizingStatus:
    """What a process says while it prepares a corpus: `write(message, progress)` at most every STATUS_INTERVAL_S
    (a run's status.json, the tokenize command's --status file: "tokenizing" with bytes and tokens done, MB/s and
    ETA for the page's bar) and a progress line on stderr at most every PROGRESS_LINE_S (none at all for a corpus
    prepared within QUIET_S: the small ones)."""

    PROGRESS_LINE_S = 5.0
    QUIET_S = 2.0
    def __init__(self, name: str, write: Callable[[Message, dict], None] | None,
                 should_stop: Callable[[], bool] | None = None):
        self.name, self.write, self.should_stop = name, write, should_stop
        self.last_status = self.last_line = 0.0
        self.current = ""
        self.started = time.monotonic()
        self.printed = False  # whether a progress line went to stderr (then the last one is printed too)
        self.batches = 0  # tokenized batches reported so far

    @property
    def enabled(self) -> bool:
        return self.write is not None

    def _say(self, line: Message, final: bool = False) -> None:
        if self.printed or (not final and time.monotonic() - self.started >= self.QUIET_S):
            say(line, stream=sys.stderr)
            self.printed = True
            self.last_line = time.monotonic()

    def phase(self, phase: str) -> None:
        """A new part of the preparation begins: fingerprinting, sampling, tokenizer, tokenizing."""
        if not self.enabled or phase == self.current:
            return
        self.current = phase
        message = self.phase_message(phase)
        self.write(message, {"phase": phase})
        self._say(message)
        self.last_status = time.monotonic()

    def phase_message(self, phase: str) -> Message:
        """What the status says when `phase` begins."""
        if phase == "fingerprinting":
            return Message("tokenizing: reading {name} to fingerprint it", name=self.name)
        if phase == "sampling":
            return Message("tokenizing: reading a sample of {name} for its tokenizer", name=self.name)
        if phase == "tokenizer":
            return Message("tokenizing: training the tokenizer")
        if phase == "waiting":
            return Message("tokenizing: waiting for another process tokenizing {name}", name=self.name)
        return Message("tokenizing {name}", name=self.name)

    def reading(self, phase: str) -> Callable[[int, int], None]:
        """A (bytes_done, total) callback for a pass that reads the corpus without tokenizing it; it raises
        TokenizingStopped when a stop was asked for (such a pass keeps nothing: the next start reads again)."""
        started = time.monotonic()

        def callback(done: int, total: int) -> None:
            if self.should_stop is not None and self.should_stop():
                raise TokenizingStopped(Message("stopped while reading {name} ({done:.1f} of {total:.1f} MB)",
                                                name=self.name, done=done / 1e6, total=total / 1e6))
            seconds = time.monotonic() - started
            speed = done / 1e6 / seconds if seconds > 0.5 and done else None
            eta = (total - done) / (speed * 1e6) if speed else None
            self(TokenizeProgress(phase, done, total, 0, 0, seconds, speed, eta))
        return callback

    def __call__(self, progress: TokenizeProgress) -> None:
        if not self.enabled:
            return
        if progress.phase == "tokenizing":
            self.batches += 1
            fault_point(TOKENIZE_POINT, step=self.batches)  # the reliability suite's kills and full disks
        now = time.monotonic()
        final = progress.phase == "done"
        if final or now - self.last_status >= STATUS_INTERVAL_S:
            self.write(progress.line(self.name), progress.to_dict())
            self.last_status = now
        if final or now - self.last_line >= self.PROGRESS_LINE_S:
            self._say(progress.line(self.name), final)


def run_tokenizer(source, *, family: str, kind: str, vocab_size: int, settings: dict, translation: bool, home,
                  status: TokenizingStatus) -> tuple[TokenizerChoice, dict]:
    """The tokenizer a run of `family` trains on `source` with: (the choice, its facts for config.json). Trained on
    `source.tokenizer_corpus()` (all of a small corpus's training split, a seeded sample of a bigger one) plus what
    the family adds (CoVe: the pairs' Chinese side; translation: the pairs, T5's prefix), or found through the fit
    record of an earlier run without reading the corpus."""
    status.phase("fingerprinting")
    fingerprint = source.fingerprint(progress=status.reading("fingerprinting"))
    family_module = objective_module(family)
    variant = []
    if hasattr(family_module, "tokenizer_corpus"):  # an RNN family's own additions (CoVe: the pairs' Chinese side)
        variant.append(f"family:{family}")
    if translation:  # the tokenizer must know the Chinese side (objectives/translation.py)
        variant.append(f"translation:{family}")

    def tokenizer_corpus() -> Corpus:
        status.phase("sampling")
        corpus = source.tokenizer_corpus(TOKENIZER_SAMPLE_BYTES, progress=status.reading("sampling"))
        if hasattr(family_module, "tokenizer_corpus"):
            corpus = family_module.tokenizer_corpus(corpus, settings_from_dict(family, settings))
        if translation:
            corpus = with_pairs(corpus, family)
        status.phase("tokenizer")
        return corpus

    sampled = source.samples_tokenizer_text(TOKENIZER_SAMPLE_BYTES)
    identity = fingerprint + (f"|sample{TOKENIZER_SAMPLE_BYTES}" if sampled else "") + "".join(f"|{v}" for v in variant)
    choice = build_tokenizer(tokenizer_corpus, kind, vocab_size, home=lab_home(home), fingerprint=identity)
    if sampled:
        logger.info("tokenizer %s", SAMPLE_NOTE)
    _, info = prepare_tokenizer(choice.tokenizer)
    return choice, {"kind": choice.kind, "requested_vocab_size": choice.requested_vocab_size,
                    "trained_vocab_size": choice.vocab_size, "vocab_size": info.size, "note": choice.note,
                    "sample": SAMPLE_NOTE if sampled else "", "cache_key": choice.cache_key}


# ------------------------------------------------------------------------------------------------ the command
def build_parser() -> OneLineParser:
    p = OneLineParser(prog="python -m lab_models tokenize",
                      description="Tokenize a corpus into token shards ahead of a run (the same tokenizer and shards a "
                                  "run of this family and preset would make).")
    p.add_argument("--corpus", required=True, help="a built-in, imported or linked corpus name, or a path")
    p.add_argument("--text-column", help="the text column of a path's .jsonl/.csv/.parquet/datasets files")
    p.add_argument("--family", default="gpt", help="the family whose tokenizer to use (default gpt)")
    p.add_argument("--preset", default="tiny", help="tiny | small | medium | base: its vocabulary size (default tiny)")
    p.add_argument("--tokenizer", help="bpe | byte_bpe | wordpiece | unigram (default: the family's)")
    p.add_argument("--vocab-size", type=int, help="the tokenizer's size (default: the preset's)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    p.add_argument("--status", help="a JSON file kept up to date with the state and progress")
    return p


class _Stop:
    """SIGTERM / SIGINT: stop between two batches (what is done is kept)."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        self.requested = True

    def __call__(self) -> bool:
        return self.requested


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        record = family_record(args.family)
        if args.preset not in PRESET_DEFAULTS:
            raise LabError("unknown preset {preset!r}: choose one of {preset_defaults}",
                           preset=args.preset, preset_defaults=', '.join(PRESET_DEFAULTS))
        kind = args.tokenizer or record.tokenizer
        if kind not in TOKENIZER_KINDS:
            raise LabError("unknown tokenizer {kind!r}: choose one of {tokenizer_kinds}",
                           kind=kind, tokenizer_kinds=', '.join(TOKENIZER_KINDS))
        vocab_size = args.vocab_size if args.vocab_size is not None else PRESET_DEFAULTS[args.preset]["vocab_size"]
        if vocab_size < 1:
            raise LabError("--vocab-size must be at least 1, got {vocab_size}", vocab_size=vocab_size)
        home = lab_home(args.home)
        source = open_corpus(args.corpus, text_column=args.text_column, home=home)
    except ValueError as error:
        say_error(error)
        return EXIT_BAD_ARGUMENT
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    stop = _Stop()
    started = time.time()

    def write(state: str, message: Message | str, progress: dict | None = None, **extra) -> None:
        if args.status:
            atomic_write_json(args.status, {"state": state, "message": message, "progress": progress or {},
                                            "corpus": source.name, "started": started, "updated": time.time(),
                                            **extra})

    status = TokenizingStatus(source.name, lambda message, progress: write("running", message, progress), stop)
    try:
        settings = settings_to_dict(settings_with_overrides(args.family, []))
        choice, facts = run_tokenizer(source, family=args.family, kind=kind, vocab_size=vocab_size,
                                      settings=settings, translation=False, home=home, status=status)
        prepared, info = prepare_tokenizer(choice.tokenizer)
        status.phase("tokenizing")
        shards = tokenize_to_shards(source, prepared, info.eos_id, home=home, progress=status, should_stop=stop)
    except TokenizingStopped as error:
        write("stopped", Message("{reason}; resumable", reason=message_of(error)))
        say(f"stopped: {error}", stream=sys.stderr)
        return 0
    except TokenizingDiskFull as error:
        write("failed", error.strerror or str(error))
        say_error(error.strerror or error)
        return EXIT_FAILED
    except ValueError as error:
        write("failed", message_of(error))
        say_error(error)
        return EXIT_BAD_ARGUMENT
    summary = Message("tokenized {name}: {train_tokens:,} training and {validation_tokens:,} validation tokens "
                      "({dtype}) in {folder}", name=source.name, train_tokens=shards.train_tokens,
                      validation_tokens=shards.validation_tokens, dtype=shards.dtype, folder=shards.folder)
    write("finished", summary, {"phase": "done", "bytes_done": source.total_bytes, "bytes_total": source.total_bytes,
                                "tokens": shards.train_tokens + shards.validation_tokens, "fraction": 1.0},
          tokenizer=facts, shards={"folder": str(shards.folder), "train_tokens": shards.train_tokens,
                                   "validation_tokens": shards.validation_tokens, "notes": shards.notes})
    say(summary)
    return 0
