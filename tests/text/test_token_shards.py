"""Tokenize once, to disk (lab_models/text/token_shards.py): the shards hold exactly the ids of the in-memory stream,
training draws the same batches from the memory map as from the tensor (bit for bit, several families), and a
tokenization that is stopped, killed or runs out of disk leaves nothing that looks finished and continues to the same
shards. Also: uint32 for a vocabulary past 65,536, one writer at a time, the alphabet fitted once, the fit record,
and a whole run on a corpus streamed from disk (the CLI, its progress line, the second run's reuse)."""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.settings import settings_from_dict
from lab_models.text import corpus_sources, token_shards, vocab_fit
from lab_models.text.corpora import Corpus, load_corpus
from lab_models.text.corpus_sources import MemorySource
from lab_models.text.streams import encode_stream
from lab_models.text.token_shards import (TokenizingDiskFull, TokenizingStopped, encoding_pieces, open_shards,
                                          shard_dtype, tokenize_to_shards)
from lab_models.text.vocab import prepare_tokenizer
from lab_models.text.vocab_fit import build_tokenizer
from lab_models.training.batches import PackedBatches
from lab_models.training.engine import generator_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def synthetic(lab_home_dir):
    corpus = load_corpus("synthetic", home=lab_home_dir)
    tokenizer, info = prepare_tokenizer(build_tokenizer(corpus, "bpe", 512, home=lab_home_dir).tokenizer)
    return corpus, tokenizer, info


def shards_of(corpus, tokenizer, info, home, **kwargs):
    return tokenize_to_shards(MemorySource(corpus, corpus.name), tokenizer, info.eos_id, home=home, **kwargs)


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.suffix == ".bin"}


# ------------------------------------------------------------------------------------------------ the same stream
def test_the_shards_hold_exactly_the_in_memory_stream(synthetic, tmp_path):
    corpus, tokenizer, info = synthetic
    shards = shards_of(corpus, tokenizer, info, tmp_path / "home")
    assert shards.dtype == "uint16" and sorted(os.listdir(shards.folder)) == [".lock", "index.json", "train.bin",
                                                                               "validation.bin"]
    for stream, texts in ((shards.train(), corpus.train), (shards.validation(), corpus.validation)):
        assert isinstance(stream, np.memmap)
        assert torch.equal(torch.from_numpy(stream.astype(np.int64)), encode_stream(tokenizer, texts, info.eos_id))
    index = json.loads((shards.folder / "index.json").read_text())
    assert index["documents"] == len(corpus.texts) and index["tokens"]["train"] == shards.train_tokens
    again = shards_of(corpus, tokenizer, info, tmp_path / "home", should_stop=lambda: True)  # finished: reused
    assert again.folder == shards.folder and again.index["created"] == index["created"]


@pytest.mark.parametrize("family", ["gpt", "bert", "t5", "xlnet", "glm"])
def test_the_memory_map_gives_the_same_batches_as_the_tensor(synthetic, tmp_path, family):
    corpus, tokenizer, info = synthetic
    shards = shards_of(corpus, tokenizer, info, tmp_path / "home")
    module = objective_module(family)
    config = BatchConfig(settings_from_dict(family, {}), info)

    def batches(train, validation):
        return PackedBatches(train, validation, seq_len=32, batch_size=4, objective=module, batch_config=config,
                             eval_batches=2)

    in_memory = batches(encode_stream(tokenizer, corpus.train, info.eos_id),
                        encode_stream(tokenizer, corpus.validation, info.eos_id))
    mapped = batches(shards.train(), shards.validation())
    for step in range(1, 6):
        a, b = in_memory.train_batch(generator_for(0, step)), mapped.train_batch(generator_for(0, step))
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.targets, b.targets)
        assert a.input_ids.dtype == torch.long == b.input_ids.dtype
        assert all(torch.equal(a.attention[k], b.attention[k]) for k in a.attention)
    seeded = lambda i: torch.Generator().manual_seed(i)  # noqa: E731
    for a, b in zip(in_memory.validation_batches(seeded), mapped.validation_batches(seeded), strict=True):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.targets, b.targets)


@pytest.mark.slow
def test_a_long_document_is_encoded_in_pieces_to_the_same_ids(synthetic, lab_home_dir):
    corpus, _, _ = synthetic
    text = "  ".join(corpus.train[:400])  # English and Chinese, double spaces between documents
    for kind in ("bpe", "byte_bpe", "wordpiece", "unigram"):
        tokenizer, _ = prepare_tokenizer(build_tokenizer(corpus, kind, 1000, home=lab_home_dir).tokenizer)
        whole = tokenizer.encode(text, add_special_tokens=False).ids
        pieces = encoding_pieces(text, 997)
        assert len(pieces) > 20 and "".join(pieces) == text
        joined = [i for piece in pieces for i in tokenizer.encode(piece, add_special_tokens=False).ids]
        assert joined == whole, kind


def test_a_vocabulary_past_65536_tokens_is_stored_as_uint32(tmp_path):
    vocab = {"[UNK]": 0, "[EOS]": 70_000, **{f"w{i}": i for i in range(1, 70_000)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    corpus = Corpus("wide", "path", ("w1 w65535 w69999", "w2"), ("w66000",), "f" * 64)
    assert shard_dtype(tokenizer) == "uint32"
    shards = tokenize_to_shards(MemorySource(corpus, "wide"), tokenizer, 70_000, home=tmp_path)
    assert shards.train().tolist() == [1, 65535, 69999, 70000, 2, 70000]
    assert shards.validation().tolist() == [66000, 70000]


# ------------------------------------------------------------------------------------------------ stop, kill, full disk
def big_corpus(n: int = 3000) -> Corpus:
    """About 1.3 MB: commits every 1 MB, batches of 256 K characters (token_shards: a sixteenth, an eighth)."""
    texts = tuple(f"story {i}: " + " ".join(f"the cat number {j} sees the dog {i * j % 97} ." for j in range(40))
                  for i in range(n))
    return Corpus("big", "path", texts[: n - 100], texts[n - 100:], f"big-{n}")


@pytest.mark.slow
def test_a_stopped_tokenization_keeps_its_work_and_continues_to_the_same_shards(synthetic, tmp_path):
    _, tokenizer, info = synthetic
    corpus = big_corpus()
    reference = shards_of(corpus, tokenizer, info, tmp_path / "reference")
    seen = []
    with pytest.raises(TokenizingStopped, match="the next run continues from there"):
        shards_of(corpus, tokenizer, info, tmp_path / "home", progress=seen.append, should_stop=lambda: len(seen) >= 3)
    folder = tmp_path / "home" / "token_shards" / reference.folder.name
    assert not (folder / "index.json").exists() and not (folder / "train.bin").exists()  # nothing looks finished
    progress = json.loads((folder / "progress.json").read_text())
    assert 0 < progress["documents"] < len(corpus.texts)
    assert (folder / "train.bin.partial").stat().st_size == 2 * progress["tokens"]["train"]
    assert [p.phase for p in seen] == ["tokenizing"] * 3 and seen[-1].bytes_done < seen[-1].bytes_total
    resumed = []
    shards = shards_of(corpus, tokenizer, info, tmp_path / "home", progress=resumed.append)
    assert files_of(shards.folder) == files_of(reference.folder)
    assert resumed[-1].phase == "done" and resumed[-1].fraction == 1.0 and resumed[-1].tokens == \
        reference.train_tokens + reference.validation_tokens


@pytest.mark.slow
def test_a_kill_leaves_an_uncommitted_tail_that_the_next_run_cuts_off(synthetic, tmp_path):
    _, tokenizer, info = synthetic
    corpus = big_corpus()
    reference = shards_of(corpus, tokenizer, info, tmp_path / "reference")
    calls = []

    def killed(progress):  # as SIGKILL: no handler runs, the files stay as they are
        calls.append(progress)
        if len(calls) == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        shards_of(corpus, tokenizer, info, tmp_path / "home", progress=killed)
    folder = tmp_path / "home" / "token_shards" / reference.folder.name
    committed = json.loads((folder / "progress.json").read_text())["tokens"]["train"]
    assert (folder / "train.bin.partial").stat().st_size > 2 * committed  # written, not committed
    shards = shards_of(corpus, tokenizer, info, tmp_path / "home")
    assert files_of(shards.folder) == files_of(reference.folder)


@pytest.mark.slow
def test_a_full_disk_fails_clearly_keeps_the_committed_part_and_other_shards(synthetic, tmp_path, monkeypatch):
    corpus_small, tokenizer, info = synthetic
    home = tmp_path / "home"
    earlier = shards_of(corpus_small, tokenizer, info, home)  # another corpus's finished shards
    before = files_of(earlier.folder)
    corpus = big_corpus()
    real_write, writes = token_shards.write_ids, []

    def filling(handle, ids):
        writes.append(len(ids))
        if len(writes) > 12:
            handle.write(ids[: len(ids) // 2].tobytes())  # half of it fits, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(handle, ids)

    monkeypatch.setattr(token_shards, "write_ids", filling)
    with pytest.raises(TokenizingDiskFull) as raised:
        shards_of(corpus, tokenizer, info, home)
    message = str(raised.value.strerror)
    assert message.startswith("disk full while tokenizing the corpus big into ")
    assert "are tokenized and kept (nothing half-written is left)" in message and "Free some space" in message
    folder = next(path for path in (home / "token_shards").iterdir() if path != earlier.folder)
    committed = json.loads((folder / "progress.json").read_text())["tokens"]
    for split in ("train", "validation"):  # the uncommitted tail is gone
        assert (folder / f"{split}.bin.partial").stat().st_size == 2 * committed[split]
    assert not (folder / "index.json").exists()
    assert files_of(earlier.folder) == before and open_shards(earlier.folder) is not None
    monkeypatch.setattr(token_shards, "write_ids", real_write)
    reference = shards_of(corpus, tokenizer, info, tmp_path / "reference")
    assert files_of(shards_of(corpus, tokenizer, info, home).folder) == files_of(reference.folder)


@pytest.mark.slow
def test_one_process_tokenizes_while_another_waits_and_maps_the_same_shards(synthetic, tmp_path):
    _, tokenizer, info = synthetic
    corpus = big_corpus(1500)
    home = tmp_path / "home"
    first_progress, second_progress, results = [], [], {}
    started = threading.Event()

    def slow(progress):
        first_progress.append(progress)
        started.set()
        time.sleep(0.3)

    first = threading.Thread(target=lambda: results.setdefault("first", shards_of(corpus, tokenizer, info, home,
                                                                                   progress=slow)))
    first.start()
    assert started.wait(60)
    second = shards_of(corpus, tokenizer, info, home, progress=second_progress.append)
    first.join(120)
    assert second.folder == results["first"].folder
    assert {p.phase for p in second_progress} == {"waiting"}
    assert first_progress[-1].phase == "done"


# ------------------------------------------------------------------------------------------------ tokenizers
def test_the_alphabet_is_fitted_once_and_the_fit_record_skips_the_corpus(tmp_path, monkeypatch):
    texts = tuple(f"{chr(0x4e00 + i)}{chr(0x4e00 + i * 7 % 900)}猫 and more words" for i in range(900))
    corpus = Corpus("hanzi", "path", texts, (), "h" * 64)
    trained = []
    real = vocab_fit.cached_tokenizer

    def counting(*args, **kwargs):
        trained.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(vocab_fit, "cached_tokenizer", counting)
    choice = build_tokenizer(corpus, "bpe", 512, home=tmp_path)
    assert trained == [512] and choice.vocab_size > 900 and "raised from 512" in choice.note  # one training

    def unreadable():
        raise AssertionError("the corpus was read although the fit record knows the tokenizer")

    again = build_tokenizer(unreadable, "bpe", 512, home=tmp_path, fingerprint=corpus.fingerprint)
    assert trained == [512] and again.vocab_size == choice.vocab_size and again.note == choice.note
    assert again.tokenizer.to_str() == choice.tokenizer.to_str()


# ------------------------------------------------------------------------------------------------ a whole run
def run_cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "lab_models", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def write_corpus(path: Path, n: int = 5000) -> Path:
    lines = [f"document {i}: " + " ".join(f"the {['cat', 'dog', 'bird'][j % 3]} sees {i * j % 89} balls ." for j in
                                           range(20)) for i in range(n)]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_run_streams_a_corpus_from_disk_says_tokenizing_and_reuses_the_shards(tmp_path, monkeypatch):
    """In-process with a 1 KB in-memory threshold, so that a 2 MB file is a streamed FileSource."""
    from lab_models.training import corpus_tokens
    from lab_models.training import run as train

    monkeypatch.setattr(corpus_sources, "IN_MEMORY_MAX_BYTES", 1000)
    # every progress report reaches status.json: a quiet machine tokenizes the 2 MB in under a second, within the
    # status file's usual one-second interval
    monkeypatch.setattr(corpus_tokens, "STATUS_INTERVAL_S", 0.0)
    corpus = write_corpus(tmp_path / "web.txt")
    home, statuses = tmp_path / "home", []
    real_status = train.runs.write_status

    def recording(out, state, **kwargs):
        statuses.append((state, kwargs.get("phase"), kwargs.get("message", "")))
        return real_status(out, state, **kwargs)

    monkeypatch.setattr(train.runs, "write_status", recording)
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        for out in ("first", "second"):
            code = train.main(["--family", "gpt", "--out", str(tmp_path / out), "--corpus", str(corpus), "--steps",
                               "3", "--home", str(home), "--vocab-size", "300"])
            assert code == 0
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    config = json.loads((tmp_path / "first" / "config.json").read_text())
    assert config["corpus"] == str(corpus.resolve()) and config["token_shards"]["dtype"] == "uint16"
    assert config["token_shards"]["train_tokens"] > 100_000
    assert config["tokenizer"]["sample"] == ""  # 2 MB: under the 16 MB sample bound, all of it
    tokenizing = [message for state, phase, message in statuses if phase == "tokenizing"]
    assert tokenizing[0] == "tokenizing: reading web to fingerprint it"
    assert any(message.startswith("tokenizing web: ") and "MB/s" in message for message in tokenizing)
    first_step = next(i for i, (_, phase, message) in enumerate(statuses) if message == "training")
    assert all(phase == "tokenizing" for _, phase, _ in statuses[:first_step])
    second = json.loads((tmp_path / "second" / "config.json").read_text())
    assert second["token_shards"]["folder"] == config["token_shards"]["folder"]
    log = (tmp_path / "second" / "train.log").read_text()
    assert "tokenizer fit record" in log and "tokenized web" not in log  # nothing read or tokenized again


@pytest.mark.slow
def test_a_run_killed_or_stopped_while_tokenizing_continues_to_the_same_weights(tmp_path):
    """A real `python -m lab_models train`, three times with a fault while it tokenizes (PRETRAINING_LAB_FAULT's
    tokenize:progress point): SIGKILLed, stopped by SIGTERM, and a full disk; each time the run is started again and
    at the end its weights equal those of a run that was never interrupted, bit for bit."""
    corpus = write_corpus(tmp_path / "notes.txt", 6000)  # ~4 MB: tokenized in about 16 batches
    common = ["train", "--family", "gpt", "--corpus", corpus, "--steps", "3", "--vocab-size", "300"]
    reference = run_cli(*common, "--out", tmp_path / "reference", "--home", tmp_path / "home0")
    assert reference.returncode == 0, reference.stderr
    expected = (tmp_path / "reference" / "model.safetensors").read_bytes()
    for index, fault in enumerate(["tokenize:progress:kill@6", "tokenize:progress:pause=120@7",
                                   "tokenize:progress:enospc@9"]):
        home, out = tmp_path / f"home{index + 1}", tmp_path / f"run{index + 1}"
        shutil.copytree(tmp_path / "home0" / "tokenizers", home / "tokenizers")  # the same tokenizer, no shards
        release = tmp_path / f"release{index}"
        process = subprocess.Popen([sys.executable, "-m", "lab_models", *map(str, common), "--out", str(out), "--home",
                                    str(home)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "PRETRAINING_LAB_FAULT": fault,
                                        "PRETRAINING_LAB_FAULT_RELEASE": str(release)})
        if "pause" in fault:  # paused inside its tokenization: stop it as the page's Stop does, then let it go on
            deadline = time.monotonic() + 300
            while "injected fault" not in (out / "train.log").read_text() if (out / "train.log").exists() else True:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.2)
            process.send_signal(signal.SIGTERM)
            release.touch()
        _, stderr = process.communicate(timeout=600)
        status = json.loads((out / "status.json").read_text())
        if "kill" in fault:
            assert process.returncode == -signal.SIGKILL and status["phase"] == "tokenizing"
        elif "pause" in fault:
            assert process.returncode == 0 and status["state"] == "stopped", status
            assert status["message"].startswith("stopped while tokenizing notes after ") and "resumable" in \
                status["message"]
        else:
            assert process.returncode == 1 and status["state"] == "failed"
            assert status["message"].startswith("disk full while tokenizing the corpus notes"), status["message"]
            assert stderr.strip().splitlines()[-1].startswith("error: disk full while tokenizing")
        folder = next((home / "token_shards").iterdir())
        assert not (folder / "index.json").exists() and json.loads((folder / "progress.json").read_text())["documents"]
        again = run_cli(*common, "--out", out, "--home", home)  # what Resume does for a run without a checkpoint
        assert again.returncode == 0, again.stderr
        assert (out / "model.safetensors").read_bytes() == expected, fault


def test_a_stop_during_the_reading_passes_is_a_clean_stop(tmp_path, monkeypatch):
    """Stop works before tokenization too: while a big corpus is read for its fingerprint or its tokenizer's sample."""
    from lab_models.training.corpus_tokens import TokenizingStatus, run_tokenizer

    monkeypatch.setattr(corpus_sources, "IN_MEMORY_MAX_BYTES", 1000)
    source = corpus_sources.open_corpus(str(write_corpus(tmp_path / "web.txt")), home=tmp_path / "home")
    written, asked = [], []
    status = TokenizingStatus("web", lambda message, progress: written.append(message),
                              should_stop=lambda: asked.append(1) or len(asked) > 1)
    with pytest.raises(TokenizingStopped, match=r"stopped while reading web \(\d+\.\d of 2\.\d MB\)"):
        run_tokenizer(source, family="gpt", kind="bpe", vocab_size=300, settings={}, translation=False,
                      home=tmp_path / "home", status=status)
    assert written[0] == "tokenizing: reading web to fingerprint it"
