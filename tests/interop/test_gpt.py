"""GPT-1 checkpoints in the lab and back: parity with transformers' OpenAIGPTLMHeadModel. GPT-1's vocabulary has no
end-of-text token, so the import appends "[EOS]" (the mean embedding row) as the lab's end token; the greedy
continuation through api.generate reads the prompt as GPT's own tokenizer frames it (nothing before it) and is
checked against the reference with the same row in its output matrix."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, causal, gpt_bpe, lab_run, perturb,  # noqa: E402
                                   read_json, save_hf, write_lab_run)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    tokenizer = gpt_bpe()
    config = transformers.OpenAIGPTConfig(vocab_size=tokenizer.get_vocab_size(), n_embd=32, n_layer=2, n_head=4,
                                          n_positions=48)
    torch.manual_seed(0)
    model = perturb(transformers.OpenAIGPTLMHeadModel(config))
    return model, tokenizer, save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "gpt", unk_token="<unk>")


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[2], tmp_path_factory.mktemp("runs") / "gpt-imported")


def test_logits_match_transformers(source, imported):
    model, tokenizer, _ = source
    V = tokenizer.get_vocab_size()
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat and the dog ran").ids])
    run = lab_run(imported)
    cfg = run.model_config
    assert (cfg.norm, cfg.has_embedding_norm, cfg.activation, cfg.lm_bias) == ("post", False, "gelu_tanh", False)
    with torch.no_grad():
        reference = model(ids).logits  # (1, T, V)
    assert_close(backbone_logits(run.model.backbone, ids, causal(ids.shape[1]))[..., :V], reference)


def test_the_added_end_of_text_token_is_recorded(source, imported):
    _, tokenizer, _ = source
    V = tokenizer.get_vocab_size()
    config = read_json(imported / "config.json")
    assert config["imported_from"]["added_tokens"] == {"[EOS]": V} and config["model"]["vocab_size"] == V + 1
    assert config["token_roles"]["[EOS]"] == "[EOS]" and config["token_roles"]["[BOS]"] == "[EOS]"
    assert "never saw" in (imported / "NOTE.md").read_text()
    run = lab_run(imported)
    table = run.model.backbone.embeddings.token.weight
    torch.testing.assert_close(table[V], table[:V].mean(dim=0))
    from lab_models.text.vocab import token_byte_lengths  # bits per byte: `</w>` stands for the space after a word

    ids = run.tokenizer.encode("the cat sat", add_special_tokens=False).ids
    assert int(token_byte_lengths(run.tokenizer)[ids].sum()) == len("the cat sat ")
    assert token_byte_lengths(run.tokenizer)[V] == 0  # the added [EOS] stands for no text


def test_greedy_continuation_matches_transformers(source, imported):
    model, tokenizer, _ = source
    V = tokenizer.get_vocab_size()
    generation = api.generate(imported, "the cat sat", max_new_tokens=5, strategy="greedy")
    wte = model.transformer.tokens_embed.weight  # (V, H)
    table = torch.cat([wte, wte.mean(dim=0, keepdim=True)])  # (V + 1, H): the lab's [EOS] row is the mean
    ids = tokenizer.encode("the cat sat").ids  # as GPT's own tokenizer frames the prompt: nothing before it
    unk = tokenizer.token_to_id("<unk>")
    produced = []
    with torch.no_grad():
        for _ in range(5):
            hidden = model.transformer(inputs_embeds=table[ids + produced].unsqueeze(0)).last_hidden_state[0, -1]
            logits = table @ hidden  # tied output matrix, no bias
            logits[unk] = float("-inf")  # the lab never generates special tokens other than the end token
            produced.append(int(logits.argmax()))
            if produced[-1] == V:
                break
    expected = [t for t in produced if t != V]
    assert generation.new_text.strip() == tokenizer.decode(expected)
    assert len(generation.tokens) == len(expected)


def test_export_round_trip_keeps_the_added_row(source, imported, tmp_path):
    model, tokenizer, _ = source
    V = tokenizer.get_vocab_size()
    again = transformers.AutoModelForCausalLM.from_pretrained(export_run(imported, tmp_path / "out")).eval()
    assert again.config.vocab_size == V + 1
    ids = torch.tensor([tokenizer.encode("hello world , the end").ids])
    with torch.no_grad():
        assert_close(again(ids).logits[..., :V], model(ids).logits)


def test_a_lab_run_exports_to_openai_gpt(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-gpt", "gpt", "bpe", d_ff=256)  # OpenAIGPT's feed-forward is 4 x d_model
    run = lab_run(run_dir)
    hf = transformers.AutoModelForCausalLM.from_pretrained(export_run(run_dir, tmp_path / "out")).eval()
    assert type(hf).__name__ == "OpenAIGPTLMHeadModel"
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    with torch.no_grad():
        assert_close(hf(ids).logits, backbone_logits(run.model.backbone, ids, causal(ids.shape[1])))


def test_a_gpt_run_with_the_exact_gelu_is_refused(tmp_path):
    run_dir = write_lab_run(tmp_path / "old-gpt", "gpt", "bpe", d_ff=256, activation="gelu")
    with pytest.raises(ValueError, match="tanh form"):
        export_run(run_dir, tmp_path / "out")


def test_slow_vocab_and_merges_convert_to_gpt1_bpe(source, tmp_path):
    _, tokenizer, fast = source
    slow = tmp_path / "slow"
    slow.mkdir()
    for name in ("config.json", "model.safetensors"):
        (slow / name).write_bytes((fast / name).read_bytes())
    tokenizer.model.save(str(slow))  # vocab.json + merges.txt with the </w> marks, as OpenAIGPTTokenizer keeps them
    run = lab_run(import_checkpoint(slow, tmp_path / "run"))
    text = "The Cat sat on the mat, hello world!"
    assert run.tokenizer.encode(text, add_special_tokens=False).ids == tokenizer.encode(text).ids
    assert run.tokenizer.decode(tokenizer.encode("the cat sat").ids) == "the cat sat"
