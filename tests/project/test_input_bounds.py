"""Every number a request takes has bounds (docs/reliability.md "Bad input": steps, seeds, vocabularies, sweeps), the
same wherever the request comes in (the page, `lab_models.api`, the CLIs): beyond them it is refused with a message
that gives the range, in the reader's language, and nothing is queued (not even 999,999,999,999 steps)."""
from __future__ import annotations

import pandas as pd
import pytest

from lab_models import api
from lab_models.experiments.zoo import ZooConfig
from lab_models.inference.finetuning.config import FinetuneConfig
from lab_models.inference.generation.context import check_decoding

from app.i18n.language import reading_language
from app.i18n.messages import translate
from app.tokenizer_lab.tab import TokenizerLab
from app.train.tab import SETTINGS_HEADERS, TrainView


def test_the_bounds_are_the_readmes():
    assert (api.MAX_STEPS, api.MAX_SEED, api.MAX_VOCAB_SIZE) == (10_000_000, 2**32 - 1, 262_144)
    assert (api.MAX_SWEEP_D_MODEL, api.MAX_SWEEP_LAYERS) == (16_384, 256)


@pytest.fixture
def jobs(tmp_path):
    manager = api.create_job_manager(tmp_path / "home")
    yield manager
    manager.close()


def test_a_training_request_beyond_the_bounds_is_refused_and_nothing_is_queued(jobs):
    with pytest.raises(ValueError, match="from 1 to 10,000,000, got 999999999999"):
        api.start_training(jobs, "gpt", steps=999_999_999_999)
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to 4,294,967,295"):
        api.training_command(jobs, "gpt", seed=2**40)
    assert api.list_runs(jobs) == []
    assert "--steps 10000000" in api.training_command(jobs, "gpt", steps=api.MAX_STEPS)  # the bound itself is fine
    with pytest.raises(ValueError, match="from 1 to 10,000,000"):
        ZooConfig(steps=api.MAX_STEPS + 1)
    with pytest.raises(ValueError, match="from 1 to 10,000,000"):
        api.sweep_command(jobs, family="gpt", sizes="32x1", steps=10**12)


def test_the_train_tab_says_the_range_in_the_readers_language(jobs):
    view = TrainView(jobs.home, jobs)
    settings = pd.DataFrame([], columns=SETTINGS_HEADERS)
    with pytest.raises(ValueError, match="Steps must be a whole number from 1 to 10,000,000, or 0 for the preset's; "
                                         "got 999,999,999,999"):
        view.start("gpt", "tiny", "", "", 999_999_999_999, 0, "cpu", settings, True, 1.0)
    assert api.list_runs(jobs) == []
    try:
        view.request("gpt", "tiny", "", "", 999_999_999_999, 0, "cpu", settings, True, 1.0)
    except ValueError as error:
        with reading_language("zh"):
            assert translate(error).startswith("步数必须是 1 到 10,000,000 之间的整数")


def test_vocabulary_sizes_and_sweep_sizes_have_bounds(tmp_path):
    with pytest.raises(ValueError, match="at most 262,144"):
        api.train_tokenizer("bpe", ["the cat sat"], 10**7)
    with pytest.raises(ValueError, match="from 1 to 262,144, such as 2000; got 1,000,000,000"):
        TokenizerLab(tmp_path).train("synthetic", 10**9, ["bpe"], "the cat")
    with pytest.raises(ValueError) as refused:  # every kind fails for one reason: the reason is said once
        TokenizerLab(tmp_path).train("synthetic", 10**9, ["bpe", "byte_bpe", "wordpiece", "unigram"], "the cat")
    assert str(refused.value) == ("BPE (GPT), Byte-level BPE (GPT-2), WordPiece (BERT), Unigram (ALBERT / XLNet / T5): "
                                  "The vocabulary size must be a whole number from 1 to 262,144, such as 2000; got "
                                  "1,000,000,000.")
    with pytest.raises(ValueError, match="d_model must be at most 16,384 and the number of layers at most 256"):
        api.parse_sweep_sizes("32x1,100000x2")
    with pytest.raises(ValueError, match="at most 16,384"):
        api.parse_sweep_sizes("64x1000")
    assert [size["d_model"] for size in api.parse_sweep_sizes("16384x1,64x256")] == [16384, 64]


def test_generation_finetuning_and_leaderboard_seeds_have_bounds():
    options = dict(mode=None, max_new_tokens=5, strategy="greedy", temperature=1.0, top_k=0, top_p=1.0,
                   beam_size=1, iterations=10, blank_length=None)
    check_decoding(seed=api.MAX_SEED, **options)
    with pytest.raises(ValueError, match="seed must be a whole number from 0 to 4,294,967,295"):
        check_decoding(seed=10**30, **options)  # torch would fail with "Overflow when unpacking long long"
    with pytest.raises(ValueError, match="from 1 to 10,000,000"):
        FinetuneConfig(run_dir="r", task="topic", steps=10**9)
    with pytest.raises(ValueError, match="batch-size must be at most 4,096"):
        FinetuneConfig(run_dir="r", task="topic", batch_size=10**6)
    with pytest.raises(ValueError, match="seed must be a whole number from 0"):
        api.leaderboard(seed=2**40)
