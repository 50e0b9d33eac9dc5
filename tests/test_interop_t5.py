"""lab_models/interop/t5.py against Hugging Face's `T5ForConditionalGeneration` (random weights, no network).

Import: a small random T5 (v1.0 relu and tied; v1.1 gated-gelu and untied; d_kv * heads != d_model with a deeper
decoder) becomes a lab T5 whose encoder-decoder logits equal the reference's on a padded batch (attention mask
included), on the SDPA and on the eager path. Greedy decoding through the lab's own decoding code (a run folder,
`generate` with its KV cache) writes the tokens `generate(do_sample=False)` writes. Export: a lab-built T5 (the family
defaults, and a v1.1-style one) saved with export_config / export_state loads in `from_pretrained` with the same
logits. Bad configs and checkpoints are ValueErrors that name the field or tensor.
"""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import save_file  # noqa: E402

from lab_models import api, runs  # noqa: E402
from lab_models import generate as gen  # noqa: E402
from lab_models.interop import t5 as interop  # noqa: E402
from lab_models.models import build_model, family_model_config  # noqa: E402
from lab_models.nn.relative_position import relative_position_bucket  # noqa: E402
from lab_models.objectives import t5, translation  # noqa: E402
from lab_models.objectives.common import VocabInfo  # noqa: E402
from lab_models.train import settings_to_dict  # noqa: E402
from lab_models.vocab import prepare_tokenizer  # noqa: E402

V = 64
VOCAB = VocabInfo(size=V, pad_id=0, mask_id=2, cls_id=3, sep_id=4, bos_id=5, eos_id=1, start_id=6, end_id=7,
                  sentinel_ids=tuple(range(63, 55, -1)), random_ids=tuple(range(8, 56)))  # T5's pad 0, eos 1
CASES = {  # name -> T5Config arguments
    "v1.0": dict(feed_forward_proj="relu", d_kv=16),
    "v1.1": dict(feed_forward_proj="gated-gelu", d_kv=16, tie_word_embeddings=False),
    "d_kv": dict(feed_forward_proj="relu", d_kv=8, num_decoder_layers=3),  # 4 heads x 8 = 32 != d_model 64
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def reference(vocab_size: int = V, pad: int = 0, eos: int = 1, seed: int = 0, **options):
    config = transformers.T5Config(vocab_size=vocab_size, d_model=64, num_heads=4, d_ff=128, num_layers=2,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=20,
                                   pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad, **options)
    torch.manual_seed(seed)
    return transformers.T5ForConditionalGeneration(config).eval()


def imported(hf, vocab: VocabInfo = VOCAB, **config_changes):
    config = {**hf.config.to_dict(), **config_changes}
    model_config, settings, weights = interop.import_config(config)
    model = build_model("t5", model_config, t5.Settings(**settings), vocab, weights).eval()
    model.load_state_dict(interop.import_state(config, hf.state_dict(), model), strict=True)
    return model


def batch():
    """A padded batch: row 1 has 6 real encoder tokens and 4 real decoder tokens."""
    g = torch.Generator().manual_seed(1)
    ids, dec = torch.randint(8, 56, (2, 9), generator=g), torch.randint(8, 56, (2, 5), generator=g)
    enc_mask = torch.ones(2, 9, dtype=torch.long)
    enc_mask[1, 6:] = 0
    ids[1, 6:] = 0
    dec[:, 0] = 0  # the decoder start (the pad token)
    return ids, enc_mask, dec


def lab_logits(model, ids, enc_mask, dec) -> torch.Tensor:
    """The lab backbone's encoder-decoder logits (B, S, V) under the same masks as the reference's."""
    b = model.backbone
    B, T = ids.shape
    S = dec.shape[1]
    keys = enc_mask.bool()[:, None, :]  # (B, 1, T)
    memory = b.encode(ids, keys.expand(B, T, T), torch.arange(T).expand(B, T))
    hidden = b.decode(dec, torch.ones(S, S, dtype=torch.bool).tril().expand(B, S, S), keys.expand(B, S, T),
                      torch.arange(S).expand(B, S), memory)
    return b.lm_logits(hidden)


@pytest.mark.parametrize("case", list(CASES))
def test_imported_checkpoint_gives_the_reference_logits(case):
    hf = reference(**CASES[case])
    model = imported(hf)
    ids, enc_mask, dec = batch()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=enc_mask, decoder_input_ids=dec).logits
        got = lab_logits(model, ids, enc_mask, dec)
        eager = imported(hf)
        for module in eager.modules():
            if hasattr(module, "impl"):
                module.impl = "eager"  # the path return_weights takes (the Understand tab's attention heads)
        got_eager = lab_logits(eager, ids, enc_mask, dec)
    assert expected.abs().max() > 1.0  # logits worth comparing
    assert (got - expected).abs().max() <= 1e-4
    assert (got_eager - expected).abs().max() <= 1e-4
    c = model.model_config
    assert c.ffn_gated == (case == "v1.1") and c.tie_embeddings == (case != "v1.1")
    assert (c.d_head, c.decoder_layers) == ((8, 3) if case == "d_kv" else (None, 2))


def test_buckets_equal_the_references():
    relative = torch.arange(-300, 300)
    bucket = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket
    for bidirectional in (True, False):
        for buckets, distance in ((32, 128), (8, 20)):
            assert torch.equal(relative_position_bucket(relative, bidirectional, buckets, distance),
                               bucket(relative, bidirectional, buckets, distance))


@pytest.mark.parametrize("overrides", [{}, dict(ffn_gated=True, activation="gelu_tanh", tie_embeddings=False,
                                                output_scale=False, d_head=16)], ids=["family-default", "v1.1"])
def test_exported_lab_model_loads_in_transformers_with_the_same_logits(tmp_path, overrides):
    config = family_model_config("t5", "tiny", V, **overrides)
    model = build_model("t5", config, t5.Settings(), VOCAB, None, seed=3).eval()
    hf_config = interop.export_config(model)
    state = interop.export_state(model)
    save_file(state, str(tmp_path / "model.safetensors"))  # refuses tensors that share storage
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    hf = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    assert hf_config["decoder_start_token_id"] == VOCAB.pad_id
    ids, enc_mask, dec = batch()
    with torch.no_grad():
        expected = lab_logits(model, ids, enc_mask, dec)
        got = hf(input_ids=ids, attention_mask=enc_mask, decoder_input_ids=dec).logits
    assert (got - expected).abs().max() <= 1e-4
    again = imported(hf)  # and back: the round trip is the identity on every tensor
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


def write_run(run_dir, model, tokenizer) -> None:
    """A run folder as the trainer writes it, holding `model`."""
    run_dir.mkdir(exist_ok=True)
    tokenizer.save(str(run_dir / runs.TOKENIZER_FILE))
    runs.write_config(run_dir, {"family": "t5", "model": model.model_config.to_dict(),
                                "settings": settings_to_dict(model.settings), "objectives": model.objective_weights})
    runs.save_weights(model, run_dir / runs.MODEL_FILE)


def test_greedy_decoding_through_the_lab_matches_generate(tmp_path):
    """An imported checkpoint in a run folder: `generate` (translate, greedy, KV cache, the checkpoint's start token)
    writes the ids transformers' greedy `generate` writes, with the lab's never-generated tokens suppressed there."""
    texts = ["the cat sees a ball .", "a small dog eats a red apple .", "the girl reads a book in the park .",
             "translate English to Chinese: the boy sees the cat ."] * 20
    tokenizer, vocab = prepare_tokenizer(api.train_tokenizer("unigram", texts, 40))
    prompt = "the cat sees a red ball ."
    run_dir = tmp_path / "t5-imported"

    def checkpoint(seed: int):  # a wider init than T5's own, so that greedy does not repeat one token
        return reference(vocab_size=vocab.size, pad=vocab.pad_id, eos=vocab.eos_id, seed=seed,
                         initializer_factor=3.0, **CASES["v1.1"])

    write_run(run_dir, imported(checkpoint(1), vocab), tokenizer)
    ctx = gen._Context(gen.load_run(run_dir))
    encoder = translation.encoder_ids("t5", ctx.tokenizer, vocab, prompt)
    banned = [i for i in range(vocab.size) if ctx.banned[i] and i != vocab.eos_id]
    for seed in range(1, 9):  # the first random checkpoint whose continuation is worth comparing
        hf = checkpoint(seed)
        with torch.no_grad():
            out = hf.generate(input_ids=torch.tensor([encoder]), max_new_tokens=12, do_sample=False, num_beams=1,
                              decoder_start_token_id=vocab.pad_id, eos_token_id=vocab.eos_id,
                              pad_token_id=vocab.pad_id, suppress_tokens=banned)
        if len(set(out[0, 1:].tolist())) > 2:
            break
    assert len(set(out[0, 1:].tolist())) > 2, "no random checkpoint gave a varied continuation"
    write_run(run_dir, imported(hf, vocab), tokenizer)

    options = dict(mode="translate", max_new_tokens=12, strategy="greedy", temperature=1.0, top_k=0, top_p=1.0,
                   beam_size=1, seed=0, iterations=10, blank_length=None, use_cache=True)
    generation, lab_ids = gen._generate(run_dir, prompt, **options)
    assert out[0, 0].item() == vocab.pad_id  # the checkpoint's start token, which the lab's decoder also reads
    assert out[0, 1:].tolist() == lab_ids
    assert generation.supported and "[PAD]" in generation.explanation


def test_bad_configs_and_checkpoints_are_value_errors():
    base = reference(**CASES["v1.0"]).config.to_dict()
    with pytest.raises(ValueError, match="feed_forward_proj"):
        interop.import_config({**base, "feed_forward_proj": "gated-silu"})
    with pytest.raises(ValueError, match="decoder_start_token_id"):
        interop.import_config({**base, "decoder_start_token_id": 5})
    hf = reference(**CASES["v1.0"])
    model = imported(hf)
    state = dict(hf.state_dict())
    del state["decoder.final_layer_norm.weight"]
    with pytest.raises(ValueError, match="decoder.final_layer_norm.weight"):
        interop.import_state(base, state, model)
    state = dict(hf.state_dict())
    state["encoder.block.1.layer.1.DenseReluDense.wo.weight"] = torch.zeros(64, 100)
    with pytest.raises(ValueError, match="shape mismatch for backbone.blocks.1.ff.proj.weight"):
        interop.import_state(base, state, model)
    lab = build_model("t5", family_model_config("t5", "tiny", V, linear_bias=True), t5.Settings(), VOCAB, None)
    with pytest.raises(ValueError, match="linear_bias"):
        interop.export_config(lab)
