"""GPT-2 checkpoints in the lab and back: parity with transformers' GPT2LMHeadModel (logits, greedy continuation
through the lab's own api.generate), export round trips, and the slow vocab.json + merges.txt tokenizer."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, byte_bpe, causal, lab_run, perturb,  # noqa: E402
                                   read_json, save_hf, write_lab_run)

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A random GPT-2 (perturbed) and its byte-level tokenizer, saved as transformers saves them."""
    tokenizer = byte_bpe([EOT])
    config = transformers.GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_embd=32, n_layer=2, n_head=4,
                                     n_positions=48, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = perturb(transformers.GPT2LMHeadModel(config))
    folder = save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "gpt2", bos_token=EOT, eos_token=EOT,
                     unk_token=EOT)
    return model, tokenizer, folder


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[2], tmp_path_factory.mktemp("runs") / "gpt2-imported")


def test_imported_logits_match_transformers(source, imported):
    model, tokenizer, _ = source
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat and the dog ran").ids])  # (1, T)
    run = lab_run(imported)
    with torch.no_grad():
        reference = model(ids).logits  # (1, T, V)
    assert_close(backbone_logits(run.model.backbone, ids, causal(ids.shape[1])), reference)


def test_the_run_folder_is_an_ordinary_run(source, imported):
    config = read_json(imported / "config.json")
    assert (config["family"], config["preset"], config["steps"]) == ("gpt2", "imported", 0)
    assert config["model"]["activation"] == "gelu_tanh" and config["model"]["lm_bias"] is False
    assert config["imported_from"]["architecture"] == "GPT2LMHeadModel"
    assert config["imported_from"]["path"] == str(source[2])
    assert config["token_roles"]["[EOS]"] == EOT and config["token_roles"]["[PAD]"] == EOT
    assert read_json(imported / "status.json")["state"] == "finished"
    from lab_models.text.vocab import token_byte_lengths  # bits per byte: byte-level tokens count their bytes exactly

    run = lab_run(imported)
    text = "the dog ran, hello!"
    ids = run.tokenizer.encode(text, add_special_tokens=False).ids
    assert int(token_byte_lengths(run.tokenizer)[ids].sum()) == len(text.encode())
    assert "GPT2LMHeadModel" in (imported / "NOTE.md").read_text()
    assert not [p for p in imported.parent.iterdir() if p.name.startswith(".")]  # no staging folder left behind


def test_greedy_continuation_matches_transformers(source, imported):
    model, tokenizer, _ = source
    generation = api.generate(imported, "the cat sat", max_new_tokens=6, strategy="greedy")
    eot = tokenizer.token_to_id(EOT)
    ids = tokenizer.encode("the cat sat").ids  # as GPT-2's own tokenizer frames the prompt: no start token
    produced, probs = [], []
    with torch.no_grad():
        for _ in range(6):
            logits = model(torch.tensor([ids + produced])).logits[0, -1]
            p = torch.softmax(logits, -1)
            best = int(p.argmax())
            produced.append(best)
            probs.append(float(p[best]))
            if best == eot:
                break
    expected = [t for t in produced if t != eot]
    assert generation.new_text == tokenizer.decode(expected)
    assert len(generation.tokens) == len(expected)
    assert generation.probs == pytest.approx(probs[:len(expected)], abs=1e-4)


def test_export_of_the_import_loads_in_transformers_with_the_same_logits(source, imported, tmp_path):
    model, tokenizer, _ = source
    folder = export_run(imported, tmp_path / "out")
    again = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.tensor([tokenizer.encode("hello world , the end").ids])
    with torch.no_grad():
        assert_close(again(ids).logits, model(ids).logits)
    loaded = transformers.AutoTokenizer.from_pretrained(folder)
    assert loaded("the cat sat").input_ids == tokenizer.encode("the cat sat").ids
    assert loaded.eos_token == EOT


def test_a_lab_run_exports_to_gpt2(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-gpt2", "gpt2", "byte_bpe")
    folder = export_run(run_dir, tmp_path / "out")
    run = lab_run(run_dir)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert type(hf).__name__ == "GPT2LMHeadModel"
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    with torch.no_grad():
        assert_close(hf(ids).logits, backbone_logits(run.model.backbone, ids, causal(ids.shape[1])))
    assert transformers.AutoTokenizer.from_pretrained(folder)("the girl").input_ids == \
        run.tokenizer.encode("the girl").ids


def test_a_run_with_an_output_bias_is_refused_saying_which_option(tmp_path):
    run_dir = write_lab_run(tmp_path / "old-gpt2", "gpt2", "byte_bpe", lm_bias=True)
    with pytest.raises(ValueError, match="lm_bias"):
        export_run(run_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_slow_vocab_and_merges_convert_to_the_same_tokens(source, tmp_path):
    model, tokenizer, fast = source
    slow = tmp_path / "slow"
    slow.mkdir()
    for name in ("config.json", "model.safetensors"):
        (slow / name).write_bytes((fast / name).read_bytes())
    tokenizer.model.save(str(slow))  # vocab.json + merges.txt, as the slow GPT2Tokenizer keeps them
    assert sorted(p.name for p in slow.iterdir()) == ["config.json", "merges.txt", "model.safetensors", "vocab.json"]
    run = lab_run(import_checkpoint(slow, tmp_path / "run"))
    text = "the dog ran to the park, hello!"
    assert run.tokenizer.encode(text, add_special_tokens=False).ids == tokenizer.encode(text).ids
    assert run.vocab.eos_id == tokenizer.token_to_id(EOT)
    assert run.tokenizer.decode(tokenizer.encode(text).ids) == text
