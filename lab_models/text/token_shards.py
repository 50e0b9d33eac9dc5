"""Tokenize once, to disk: a corpus and a tokenizer become memory-mapped token shards in the lab home, written by
streaming through the corpus, and reused by every run that trains on the same corpus with the same tokenizer.

    tokenize_to_shards(source, tokenizer, eos_id, home=...)  -->  <home>/token_shards/<key>/
        train.bin        d1 [EOS] d2 [EOS] ...   the training split's token ids, uint16 (uint32 past 65,536 tokens)
        validation.bin   the validation split's, the same way
        index.json       written last: the dtype, the token and document counts, what reading skipped; its presence
                         is what makes the folder finished

The stream is text/streams.py's (RoBERTa's FULL-SENTENCES packing: every document's ids then [EOS]), so a small
corpus gives exactly the ids `encode_stream` gives, and training draws the same batches from the memory map as from the
tensor (tests/text/test_token_shards.py checks both bit for bit). This is nanoGPT's `prepare.py` (token ids in a uint16
memmap, `np.memmap` windows at training time), with what a lab needs on top:
* constant memory: documents are encoded `ENCODE_BATCH_CHARS` characters at a time with `tokenizers`' batch encoding
  (which runs on every core, `encode_batch_fast`: no offsets), and their ids appended to the files; nothing holds the
  whole corpus. A document longer than `ENCODE_PIECE_CHARS` is encoded in pieces cut before a space that starts a
  word, which every kind of pre-tokenizer splits at anyway, so the ids are the same as the whole document's;
  deviation: a piece with no such space in it (a megabyte of Chinese) is cut at its length, and a merge across that
  cut is lost;
* cached by key: the sha256 of the corpus's fingerprint, the prepared tokenizer's JSON and [EOS]'s id, so a second
  run on the same corpus and tokenizer maps the shards at once;
* resumable and kill-safe: the ids go to `train.bin.partial` / `validation.bin.partial`; every eighth of the corpus
  (at least 1 MB, at most 32 MB: `COMMIT_BYTES`) and when stopped, both are fsynced and `progress.json` records how
  many documents and tokens are complete. A run killed at any moment leaves at most an uncommitted tail, which the
  next run cuts off before it continues from the recorded document; nothing is named `train.bin` or carries an
  `index.json` before the last commit, so nothing half-written looks finished;
* one writer: a file lock (`.lock`, `fcntl.flock`) lets one process tokenize a key while the others wait for it (the
  Corpora tab and a run, two runs on one corpus, the ranks of a torchrun on one machine);
* a full disk: the uncommitted tail is cut off again (freeing its space), and `TokenizingDiskFull` says how much is
  kept; the next run continues from there. Other shard folders are never touched.
* progress: `progress(TokenizeProgress)` after every batch (bytes and tokens done, MB/s, ETA; the caller decides how
  often to show it), and `should_stop()` between batches: a stop commits what is done and raises `TokenizingStopped`
  (resumable).
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from lab_models.messages import LabError, Message
from lab_models.home import atomic_write_json, lab_home
from lab_models.text.corpus_streams import ReadReport

logger = logging.getLogger(__name__)

SHARDS_FOLDER = "token_shards"
FORMAT_VERSION = 1
SPLITS = ("train", "validation")
ENCODE_BATCH_CHARS = (2**18, 2 * 2**20)  # characters per encode_batch call: a sixteenth of the corpus, within these
ENCODE_PIECE_CHARS = 2**20  # a longer document is encoded in pieces of at most this many characters
COMMIT_BYTES = (2**20, 32 * 2**20)  # corpus bytes between two commits: an eighth of the corpus, within these (a kill
# loses at most one commit's work; a small corpus still commits several times, so its resume is tested too)
WAIT_POLL_S = 0.5  # how often a process waiting for another's tokenization looks again
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


READING_PHASES = ("fingerprinting", "sampling")  # passes that read the corpus without tokenizing it


class TokenizingStopped(Exception):
    """A stop was asked for during tokenization; what was done is committed and the next run continues it."""


class TokenizingDiskFull(OSError):
    """The disk filled while the shards were written; the committed part is kept, the uncommitted tail removed."""


@dataclass(frozen=True)
class TokenizeProgress:
    """Where a tokenization stands, for progress bars and the CLI's progress line."""

    phase: str  # "tokenizing", "waiting" (for another process tokenizing the same corpus), "done", or a reading pass
    # before tokenizing ("fingerprinting", "sampling": READING_PHASES)
    bytes_done: int
    bytes_total: int
    tokens: int
    documents: int
    seconds: float  # since this process started tokenizing (a resumed one counts from its resume)
    mb_per_s: float | None  # corpus megabytes (10^6 bytes) per second, in this process
    eta_s: float | None

    @property
    def fraction(self) -> float:
        return min(1.0, self.bytes_done / self.bytes_total) if self.bytes_total else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction": self.fraction}

    def line(self, name: str) -> Message:
        """One line for a terminal, a log or the page's progress bar.

        >>> TokenizeProgress("tokenizing", 150 * 10**6, 300 * 10**6, 41_000_000, 9000, 50.0, 3.0, 50.0).line("web")
        'tokenizing web: 150.0 / 300.0 MB (50%), 41.0M tokens, 3.0 MB/s, ETA 50 s'
        """
        if self.phase == "waiting":
            return Message("waiting for another process tokenizing {name} ({fraction:.0%} done)", name=name,
                           fraction=self.fraction)
        speed = f"{self.mb_per_s:.1f} MB/s" if self.mb_per_s is not None else "— MB/s"
        eta = Message("ETA {seconds:.0f} s", seconds=self.eta_s) if self.eta_s is not None else Message("ETA —")
        done = f"{self.bytes_done / 1e6:.1f} / {self.bytes_total / 1e6:.1f} MB ({self.fraction:.0%})"
        if self.phase == "fingerprinting":
            return Message("reading {name} to fingerprint it: {done}, {speed}, {eta}", name=name, done=done,
                           speed=speed, eta=eta)
        if self.phase == "sampling":
            return Message("reading {name} for its tokenizer's sample: {done}, {speed}, {eta}", name=name, done=done,
                           speed=speed, eta=eta)
        if self.phase == "done":
            return Message("tokenized {name}: {done}, {tokens:.1f}M tokens, {speed}, {eta}", name=name, done=done,
                           tokens=self.tokens / 1e6, speed=speed, eta=eta)
        return Message("tokenizing {name}: {done}, {tokens:.1f}M tokens, {speed}, {eta}", name=name, done=done,
                       tokens=self.tokens / 1e6, speed=speed, eta=eta)


@dataclass(frozen=True)
class TokenShards:
    """A finished shard folder: the two splits as read-only memory maps."""

    folder: Path
    dtype: str  # "uint16" or "uint32"
    train_tokens: int
    validation_tokens: int
    index: dict

    def _map(self, split: str, count: int) -> np.ndarray:
        if count == 0:  # numpy cannot map an empty file
            return np.zeros(0, dtype=self.dtype)
        return np.memmap(self.folder / f"{split}.bin", dtype=self.dtype, mode="r", shape=(count,))

    def train(self) -> np.ndarray:
        """(N,) the training split's ids, memory-mapped."""
        return self._map("train", self.train_tokens)

    def validation(self) -> np.ndarray:
        """(M,) the validation split's ids, memory-mapped (empty when the corpus has no validation document)."""
        return self._map("validation", self.validation_tokens)

    @property
    def notes(self) -> list[str]:
        return list(self.index.get("read", {}).get("notes", []))


def shard_key(corpus_fingerprint: str, tokenizer: Tokenizer, eos_id: int) -> str:
    """The shard folder's name: a hash of the format, the corpus, the tokenizer's full JSON and [EOS]'s id."""
    digest = hashlib.sha256(f"shards-v{FORMAT_VERSION}|{corpus_fingerprint}|{int(eos_id)}|".encode())
    digest.update(tokenizer.to_str().encode("utf-8"))
    return digest.hexdigest()[:32]


def shards_folder(home, key: str) -> Path:
    return lab_home(home) / SHARDS_FOLDER / key


def open_shards(folder: Path) -> TokenShards | None:
    """The finished shards in `folder`, or None when they are not finished (or damaged: sizes that do not match)."""
    try:
        index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
        dtype = index["dtype"]
        counts = {split: int(index["tokens"][split]) for split in SPLITS}
        itemsize = np.dtype(dtype).itemsize
        for split in SPLITS:
            if (folder / f"{split}.bin").stat().st_size != counts[split] * itemsize:
                raise LabError("{split}.bin does not hold {count} tokens", split=split, count=counts[split])
    except (OSError, ValueError, KeyError, TypeError) as error:
        if (folder / "index.json").exists():
            logger.warning("ignoring damaged token shards in %s: %s", folder, error)
        return None
    return TokenShards(folder, dtype, counts["train"], counts["validation"], index)


def shard_dtype(tokenizer: Tokenizer) -> str:
    return "uint16" if tokenizer.get_vocab_size(with_added_tokens=True) <= 2**16 else "uint32"


def encoding_pieces(text: str, limit: int = ENCODE_PIECE_CHARS) -> list[str]:
    """`text` cut into pieces of at most `limit` characters, each cut made before a space that starts a word (where
    every pre-tokenizer of the lab splits: the ids of the pieces are those of the whole), else at the limit.

    >>> encoding_pieces("the cat sat", 6)
    ['the', ' cat', ' sat']
    """
    pieces = []
    while len(text) > limit:
        cut = text.rfind(" ", 1, limit + 1)  # the last space the piece may end before
        while cut > 0 and (cut + 1 >= len(text) or text[cut + 1].isspace()):
            cut = text.rfind(" ", 1, cut)
        if cut <= 0:  # no such space in the window: cut at the limit (the module docstring's deviation)
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces


def write_ids(handle, ids: np.ndarray) -> None:
    """Append ids to an open shard file (a seam for tests that fill the disk)."""
    handle.write(ids.tobytes())


class _ShardWriter:
    """The two .partial files and their committed sizes (progress.json)."""

    def __init__(self, folder: Path, dtype: str, key: str):
        self.folder, self.dtype, self.key = folder, np.dtype(dtype), key
        self.paths = {split: folder / f"{split}.bin.partial" for split in SPLITS}
        self.progress_path = folder / "progress.json"
        self.committed = {"documents": 0, "bytes_done": 0, "tokens": {split: 0 for split in SPLITS},
                          "read": {}, "started": time.time()}
        self.written = {split: 0 for split in SPLITS}
        self.handles = {}

    def open(self) -> int:
        """Open the partial files, continuing a committed tokenization when there is one. Returns the number of
        documents already done."""
        try:
            saved = json.loads(self.progress_path.read_text(encoding="utf-8"))
            valid = (saved.get("version") == FORMAT_VERSION and saved.get("key") == self.key
                     and saved.get("dtype") == self.dtype.name
                     and all(self.paths[split].stat().st_size >= int(saved["tokens"][split]) * self.dtype.itemsize
                             for split in SPLITS))
        except (OSError, ValueError, KeyError, TypeError):
            valid = False
        if valid:
            self.committed = {key: saved[key] for key in ("documents", "bytes_done", "tokens", "read", "started")}
        else:
            self.progress_path.unlink(missing_ok=True)
        for split in SPLITS:
            done = int(self.committed["tokens"][split]) * self.dtype.itemsize
            handle = open(self.paths[split], "r+b" if valid else "wb")
            handle.truncate(done)  # a kill's uncommitted tail goes
            handle.seek(done)
            self.handles[split] = handle
            self.written[split] = int(self.committed["tokens"][split])
        if valid and self.committed["documents"]:
            logger.info("continuing a tokenization in %s after %d documents", self.folder,
                        self.committed["documents"])
        return int(self.committed["documents"])

    def append(self, split: str, ids: np.ndarray) -> None:
        write_ids(self.handles[split], ids.astype(self.dtype, copy=False))
        self.written[split] += len(ids)

    def commit(self, documents: int, bytes_done: int, report: ReadReport) -> None:
        for handle in self.handles.values():
            handle.flush()
            os.fsync(handle.fileno())
        state = {"documents": documents, "bytes_done": bytes_done, "tokens": dict(self.written),
                 "read": report.to_dict(), "started": self.committed["started"]}
        atomic_write_json(self.progress_path, {"version": FORMAT_VERSION, "key": self.key,
                                               "dtype": self.dtype.name, **state})
        self.committed = state

    def roll_back(self) -> None:
        """Cut both files back to the last commit (after a full disk: frees the uncommitted tail)."""
        for split, handle in self.handles.items():
            try:
                handle.truncate(int(self.committed["tokens"][split]) * self.dtype.itemsize)
            except OSError:
                pass

    def close(self) -> None:
        for handle in self.handles.values():
            try:
                handle.close()
            except OSError:
                pass
        self.handles = {}

    def finish(self, index: dict) -> None:
        for split in SPLITS:
            os.replace(self.paths[split], self.folder / f"{split}.bin")
        atomic_write_json(self.folder / "index.json", index)  # last: now the folder is finished
        self.progress_path.unlink(missing_ok=True)


class _Lock:
    """An exclusive `flock` on `<folder>/.lock`, held while tokenizing; released when the process ends, however."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.handle = open(folder / ".lock", "a+b")

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def release(self) -> None:
        try:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
        finally:
            self.handle.close()


def tokenize_to_shards(source, tokenizer: Tokenizer, eos_id: int, *, home=None,
                       progress: Callable[[TokenizeProgress], None] | None = None,
                       should_stop: Callable[[], bool] | None = None,
                       fingerprint: str | None = None) -> TokenShards:
    """The corpus `source` (text/corpus_sources.py) tokenized into shards, finished ones reused (module docstring).

    `tokenizer` is the run's prepared tokenizer (text/vocab.py) and `eos_id` the separator after every document.
    Raises `TokenizingStopped` when `should_stop()` turns true, `TokenizingDiskFull` when the disk fills.
    """
    fingerprint = fingerprint if fingerprint is not None else source.fingerprint()
    key = shard_key(fingerprint, tokenizer, eos_id)
    folder = shards_folder(home, key)
    finished = open_shards(folder)
    if finished is not None:
        return finished
    lock = _Lock(folder)
    started = time.monotonic()
    try:
        while not lock.try_acquire():  # another process tokenizes this corpus: wait for it, then use its shards
            if should_stop is not None and should_stop():
                raise TokenizingStopped(Message("stopped while waiting for another process tokenizing {name}",
                                                name=source.name))
            if progress is not None:
                done = _committed_bytes(folder)
                progress(TokenizeProgress("waiting", done, source.total_bytes, 0, 0,
                                          time.monotonic() - started, None, None))
            time.sleep(WAIT_POLL_S)
        finished = open_shards(folder)
        if finished is not None:
            return finished
        return _tokenize(source, tokenizer, eos_id, folder, key, fingerprint, progress, should_stop)
    finally:
        lock.release()


def _committed_bytes(folder: Path) -> int:
    try:
        return int(json.loads((folder / "progress.json").read_text(encoding="utf-8"))["bytes_done"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _tokenize(source, tokenizer: Tokenizer, eos_id: int, folder: Path, key: str, fingerprint: str, progress,
              should_stop) -> TokenShards:
    dtype = shard_dtype(tokenizer)
    writer = _ShardWriter(folder, dtype, key)
    report = ReadReport()
    started = time.monotonic()
    batch_limit = min(max(source.total_bytes // 16, ENCODE_BATCH_CHARS[0]), ENCODE_BATCH_CHARS[1])
    commit_every = min(max(source.total_bytes // 8, COMMIT_BYTES[0]), COMMIT_BYTES[1])
    try:
        skip = writer.open()
        resumed_bytes = int(writer.committed["bytes_done"])
        documents = 0
        batch: list[str] = []  # texts (documents or pieces of one) for the next encode_batch call
        batch_meta: list[tuple[str, bool]] = []  # (split, ends a document) per text
        batch_chars = 0
        since_commit = report.bytes_done

        def flush():
            nonlocal batch, batch_meta, batch_chars
            if not batch:
                return
            encodings = tokenizer.encode_batch_fast(batch, add_special_tokens=False)
            for split in SPLITS:
                parts = []
                for (text_split, ends), encoding in zip(batch_meta, encodings):
                    if text_split == split:
                        parts.append(encoding.ids)
                        if ends:
                            parts.append((eos_id,))
                count = sum(map(len, parts))
                if count:
                    writer.append(split, np.fromiter(chain.from_iterable(parts), dtype=np.int64, count=count))
            batch, batch_meta, batch_chars = [], [], 0

        def tokens_done() -> int:
            return sum(writer.written.values())

        def tell(phase: str):
            if progress is None:
                return
            seconds = time.monotonic() - started
            done = min(source.total_bytes, report.bytes_done)
            new_bytes = max(0, done - resumed_bytes)
            speed = new_bytes / 1e6 / seconds if seconds > 0.5 and new_bytes else None
            eta = (source.total_bytes - done) / (speed * 1e6) if speed else None
            progress(TokenizeProgress(phase, done, source.total_bytes, tokens_done(), documents, seconds, speed,
                                      0.0 if phase == "done" else eta))

        for split, text in source.documents(report):
            documents += 1
            if documents <= skip:  # done by an earlier, interrupted tokenization
                continue
            pieces = encoding_pieces(text) if len(text) > ENCODE_PIECE_CHARS else [text]
            for position, piece in enumerate(pieces):
                batch.append(piece)
                batch_meta.append((split, position == len(pieces) - 1))
                batch_chars += len(piece)
            if batch_chars >= batch_limit:
                flush()
                if report.bytes_done - since_commit >= commit_every:
                    writer.commit(documents, report.bytes_done, report)
                    since_commit = report.bytes_done
                tell("tokenizing")
                if should_stop is not None and should_stop():
                    writer.commit(documents, report.bytes_done, report)
                    raise TokenizingStopped(Message("stopped while tokenizing {name} after {done:.1f} of {total:.1f} "
                                                    "MB; the next run continues from there", name=source.name,
                                                    done=report.bytes_done / 1e6, total=source.total_bytes / 1e6))
        flush()
        if documents < skip:
            raise LabError("the corpus {name} has fewer documents ({documents}) than an interrupted "
                           "tokenization had done ({skip}): its files changed; delete {folder} and start again",
                           name=source.name, documents=documents, skip=skip, folder=folder)
        writer.commit(documents, report.bytes_done, report)
        if writer.written["train"] == 0 and writer.written["validation"] == 0:
            raise LabError("the corpus {name} has no text to tokenize", name=source.name)
        index = {"version": FORMAT_VERSION, "key": key, "corpus": source.name, "corpus_fingerprint": fingerprint,
                 "dtype": dtype, "eos_id": int(eos_id), "vocab_size": tokenizer.get_vocab_size(with_added_tokens=True),
                 "tokens": dict(writer.written), "documents": documents, "bytes": source.total_bytes,
                 "read": report.to_dict(), "seconds": round(time.monotonic() - started, 3), "created": time.time()}
        writer.close()
        writer.finish(index)
        for note in report.notes():
            logger.warning("%s: %s", source.name, note)
        tell("done")
        logger.info("tokenized %s: %d documents, %d + %d tokens (%s) in %.1f s", source.name, documents,
                    writer.written["train"], writer.written["validation"], dtype, time.monotonic() - started)
    except OSError as error:
        if error.errno in _DISK_FULL:
            writer.roll_back()
            kept = int(writer.committed["bytes_done"])
            raise TokenizingDiskFull(
                error.errno, Message("disk full while tokenizing the corpus {name} into {folder}: {kept:.1f} of "
                                     "{total:.1f} MB are tokenized and kept (nothing half-written is left); the "
                                     "tokenized shards of other corpora are intact. Free some space, then start "
                                     "again: it continues from there", name=source.name, folder=folder,
                                     kept=kept / 1e6, total=source.total_bytes / 1e6)) from None
        raise
    finally:
        writer.close()
    return open_shards(folder)
