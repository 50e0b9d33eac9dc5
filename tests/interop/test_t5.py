"""lab_models/interop/t5.py against Hugging Face's `T5ForConditionalGeneration` (random weights, no network).

Import: a small random T5 (v1.0 relu and tied; v1.1 gated-gelu and untied; d_kv * heads != d_model with a deeper
decoder) becomes a lab T5 whose encoder-decoder logits equal the reference's on a padded batch (attention mask
included), on the SDPA and on the eager path. Greedy decoding through the lab's own decoding code (a run folder,
`generate` with its KV cache) writes the tokens `generate(do_sample=False)` writes. Export: a lab-built T5 (the family
defaults, and a v1.1-style one) saved with export_config / export_state loads in `from_pretrained` with the same
logits. Bad configs and checkpoints are ValueErrors that name the field or tensor.

Through the framework: a T5 saved by save_pretrained with T5's tokenizer layout (<pad> 0, </s> 1, <unk> 2, sentinels
counted down at the end; v1.0, transformers 5's tied unscaled v1.1, and a released untied v1.1) goes through
api.import_hf; the run's roles, logits, greedy infill and translation and fill-mask match transformers, and
api.export_hf of it and of a lab T5 run loads in AutoModelForSeq2SeqLM and AutoTokenizer with the same logits and ids.
"""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import save_file  # noqa: E402

from lab_models import api
from lab_models.training import runs  # noqa: E402
from lab_models.inference.generation import generate as gen  # noqa: E402
from lab_models.inference.generation.context import DecodingContext  # noqa: E402
from lab_models.inference.loading import load_run  # noqa: E402
from lab_models.interop import t5 as interop  # noqa: E402
from lab_models.models.family import build_model, family_model_config  # noqa: E402
from lab_models.nn.relative_position import relative_position_bucket  # noqa: E402
from lab_models.objectives import t5, translation  # noqa: E402
from lab_models.text.vocab import VocabInfo  # noqa: E402
from lab_models.objectives.settings import settings_to_dict  # noqa: E402
from lab_models.text.vocab import prepare_tokenizer  # noqa: E402
from tests.support.interop import (assert_close, display, lab_run, perturb, read_json, reference_top_k,  # noqa: E402
                                   t5_sentencepiece, write_lab_run)

V = 64
VOCAB = VocabInfo(size=V, pad_id=0, mask_id=2, cls_id=3, sep_id=4, bos_id=5, eos_id=1, start_id=6, end_id=7,
                  sentinel_ids=tuple(range(63, 55, -1)), random_ids=tuple(range(8, 56)))  # T5's pad 0, eos 1
CASES = {  # name -> T5Config arguments
    "v1.0": dict(feed_forward_proj="relu", d_kv=16),
    "v1.1": dict(feed_forward_proj="gated-gelu", d_kv=16, tie_word_embeddings=False),
    "d_kv": dict(feed_forward_proj="relu", d_kv=8, num_decoder_layers=3),  # 4 heads x 8 = 32 != d_model 64
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


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
    ctx = DecodingContext(load_run(run_dir))
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


# ---- through the framework: a saved folder with its SentencePiece-style tokenizer, api.import_hf, api.export_hf ----
N_SENTINELS = 8
# name -> (T5Config options, the lab's (tie_embeddings, output_scale))
FOLDER_CASES = {"v1.0": (dict(feed_forward_proj="relu"), (True, True)),
                # a v1.1 built from a config and saved by transformers 5: tied in memory, unscaled
                "v1.1": (dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False), (True, False)),
                # a released v1.1 (transformers 4's config): an lm_head of its own, tie_word_embeddings false
                "v1.1-released": (dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False), (False, False))}
PROMPT = "the girl eats a red apple at the market ."


def as_released_v11(folder) -> None:
    """Rewrite a saved v1.1 folder as the released v1.1 checkpoints are: config.json as transformers 4 wrote it
    (tie_word_embeddings false, no scale_decoder_outputs) and a separate lm_head.weight."""
    from safetensors.torch import load_file

    config = read_json(folder / "config.json")
    config.pop("scale_decoder_outputs")
    (folder / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": False}))
    state = load_file(str(folder / "model.safetensors"))
    state["lm_head.weight"] = torch.randn(state["shared.weight"].shape, generator=torch.Generator().manual_seed(9))
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.fixture(scope="module", params=list(FOLDER_CASES))
def folder_and_run(request, tmp_path_factory, lab_home_dir):
    """A random T5 (perturbed) and T5's tokenizer layout (<pad> 0, </s> 1, <unk> 2, sentinels counted down at the end),
    saved by save_pretrained into a folder, imported through api.import_hf; the reference is the folder loaded back
    by from_pretrained (transformers 5 reads a separate lm_head only there)."""
    tokenizer = t5_sentencepiece(N_SENTINELS)
    options, structure = FOLDER_CASES[request.param]
    config = transformers.T5Config(vocab_size=tokenizer.get_vocab_size(), d_model=32, d_kv=8, num_heads=4, d_ff=64,
                                   num_layers=2, relative_attention_num_buckets=8, relative_attention_max_distance=20,
                                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, **options)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("hf") / f"t5-{request.param}"
    perturb(transformers.T5ForConditionalGeneration(config), scale=0.3).save_pretrained(folder)
    transformers.T5TokenizerFast(tokenizer_object=tokenizer, extra_ids=N_SENTINELS).save_pretrained(folder)
    if request.param == "v1.1-released":
        as_released_v11(folder)
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
    run_dir = api.import_hf(folder, tmp_path_factory.mktemp("runs") / f"t5-{request.param}", corpus="synthetic",
                            home=lab_home_dir)
    return hf, tokenizer, folder, run_dir, structure


def test_a_saved_t5_folder_imports_with_its_own_special_tokens_and_parity(folder_and_run):
    hf, tokenizer, folder, run_dir, structure = folder_and_run
    run = lab_run(run_dir)
    assert (run.model_config.tie_embeddings, run.model_config.output_scale) == structure
    assert hf.config.scale_decoder_outputs == structure[1]
    assert (hf.lm_head.weight.data_ptr() == hf.shared.weight.data_ptr()) == structure[0]
    V = tokenizer.get_vocab_size()
    v = run.vocab
    assert (v.pad_id, v.eos_id, run.model_config.vocab_size, v.size) == (0, 1, V, V)  # nothing added
    assert v.sentinel_ids == tuple(V - 1 - k for k in range(N_SENTINELS))  # <extra_id_0> is the last id
    assert DecodingContext(run).decoder_start == 0  # the checkpoint's decoder_start_token_id, its pad
    config = read_json(run_dir / "config.json")
    assert config["imported_from"]["added_tokens"] == {} and config["token_roles"]["[MASK]"] == "</s>"
    assert "never saw" not in (run_dir / "NOTE.md").read_text()
    summary = api.inspect_hf(folder)  # what the Train tab's Look shows
    assert (summary["objectives"], summary["tokenizer"]["sentinels"], summary["tokenizer"]["added"]) == \
        ({"span_corruption": 1.0}, N_SENTINELS, [])
    from lab_models.text.vocab import token_byte_lengths  # bits per byte: "▁the" is a space and "the"
    text = "the cat sat, hello!"
    ids = run.tokenizer.encode(text, add_special_tokens=False).ids
    assert int(token_byte_lengths(run.tokenizer)[ids].sum()) == len(text.encode()) + 1  # + the ▁ before "the"
    ids, enc_mask, dec = batch()
    ids, dec = ids % 50 + 3, dec % 50 + 3  # ordinary pieces of this vocabulary
    ids[1, 6:], dec[:, 0] = 0, 0
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=enc_mask, decoder_input_ids=dec).logits
        assert_close(lab_logits(run.model, ids, enc_mask, dec), expected)


def _allowed_after(sentinels: list[int], eos: int, ordinary: list[int], forced: int):
    """transformers' prefix_allowed_tokens_fn for the lab's T5 infill rule: ordinary tokens, </s>, and the sentinel
    after the spans written so far, but only ordinary tokens right after a sentinel (a span is never empty; the
    decoder input's first `forced` ids are the start and <extra_id_0>)."""
    def allowed(_, decoder_ids):
        written = decoder_ids[forced - 1:].tolist()
        if written and written[-1] in sentinels:
            return ordinary
        done = sum(1 for t in written if t in sentinels)
        return ordinary + [eos] + ([sentinels[done]] if done < len(sentinels) else [])
    return allowed


def test_infill_translate_and_fill_mask_through_the_lab_match_transformers(folder_and_run):
    hf, tokenizer, _, run_dir, _ = folder_and_run
    run = lab_run(run_dir)
    ctx = DecodingContext(run)
    v = run.vocab
    ordinary = [i for i in range(v.size) if not ctx.banned[i]]
    sentinels = list(v.sentinel_ids)
    # infill, two blanks: the encoder reads the text with <extra_id_0>, <extra_id_1>; the decoder starts with
    # <pad> <extra_id_0>
    prompt = "the girl ___ a red apple at ___ ."
    generation, lab_ids = gen._generate(run_dir, prompt, mode="infill", max_new_tokens=10, strategy="greedy",
                                        temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=10,
                                        blank_length=None, use_cache=True)
    encoder = tokenizer.encode("the girl").ids + [sentinels[0]] + tokenizer.encode(" a red apple at").ids + \
        [sentinels[1]] + tokenizer.encode(" .").ids + [v.eos_id]  # T5's own tokenizer appends </s>, so does the lab
    assert read_json(run_dir / "config.json")["framing"]["single"] == [["$A", 0], ["</s>", 0]]
    with torch.no_grad():
        out = hf.generate(input_ids=torch.tensor([encoder]), decoder_input_ids=torch.tensor([[0, sentinels[0]]]),
                          max_new_tokens=10, do_sample=False, num_beams=1, eos_token_id=[v.eos_id, sentinels[2]],
                          prefix_allowed_tokens_fn=_allowed_after(sentinels, v.eos_id, ordinary, 2))
    assert out[0, :2].tolist() == [0, sentinels[0]]
    assert out[0, 2:].tolist() == lab_ids and len(lab_ids) >= 3
    assert generation.supported and generation.text.startswith("the girl")

    # translate: the encoder reads the task prefix and the English; the decoder writes from <pad> until </s>
    from lab_models.objectives import translation
    generation, lab_ids = gen._generate(run_dir, PROMPT, mode="translate", max_new_tokens=8, strategy="greedy",
                                        temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=10,
                                        blank_length=None, use_cache=True)
    encoder = translation.encoder_ids("t5", run.tokenizer, v, PROMPT) + [v.eos_id]
    with torch.no_grad():
        out = hf.generate(input_ids=torch.tensor([encoder]), max_new_tokens=8, do_sample=False, num_beams=1,
                          suppress_tokens=[i for i in range(v.size) if ctx.banned[i] and i != v.eos_id])
    assert out[0, 0].item() == 0 and out[0, 1:].tolist() == lab_ids and len(lab_ids) >= 3

    # fill-mask: one slot is a one-token span, <extra_id_0> in the encoder; the decoder reads <pad> <extra_id_0>
    lab = api.fill_mask(run_dir, "the girl [MASK] a red apple .", top_k=5)[0]
    left = tokenizer.encode("the girl").ids
    encoder = left + [sentinels[0]] + tokenizer.encode(" a red apple .").ids + [v.eos_id]
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([encoder]), decoder_input_ids=torch.tensor([[0, sentinels[0]]])).logits
    top_ids, top_probs = reference_top_k(logits[0, -1], {i for i in range(v.size) if ctx.banned[i]})
    assert [piece for piece, _ in lab] == [display(tokenizer, left, i) for i in top_ids]
    assert [p for _, p in lab] == pytest.approx(top_probs, abs=1e-4)


def test_the_export_of_an_imported_t5_loads_in_transformers_as_the_source(folder_and_run, tmp_path):
    hf, tokenizer, folder, run_dir, _ = folder_and_run
    out = api.export_hf(run_dir, tmp_path / "export")
    again = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    assert type(again).__name__ == "T5ForConditionalGeneration"
    ids, enc_mask, dec = batch()
    ids, dec = ids % 50 + 3, dec % 50 + 3
    dec[:, 0] = 0
    with torch.no_grad():
        assert_close(again(input_ids=ids, attention_mask=enc_mask, decoder_input_ids=dec).logits,
                     hf(input_ids=ids, attention_mask=enc_mask, decoder_input_ids=dec).logits)
    assert again.config.decoder_start_token_id == 0 and again.config.pad_token_id == 0
    source, loaded = transformers.AutoTokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(out)
    assert loaded(PROMPT).input_ids == source(PROMPT).input_ids  # the checkpoint's own post-processor: text + </s>
    assert loaded(PROMPT, add_special_tokens=False).input_ids == \
        lab_run(run_dir).tokenizer.encode(PROMPT, add_special_tokens=False).ids  # what the lab reads
    assert (loaded.pad_token, loaded.eos_token, loaded.unk_token) == ("<pad>", "</s>", "<unk>")
    assert loaded.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"]) == [tokenizer.get_vocab_size() - 1,
                                                                                tokenizer.get_vocab_size() - 2]
    assert loaded.extra_special_tokens[:2] == ["<extra_id_0>", "<extra_id_1>"]  # transformers 5's name


def test_a_lab_t5_run_exports_with_its_tokenizer(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-t5", "t5", "unigram")
    run = lab_run(run_dir)
    out = api.export_hf(run_dir, tmp_path / "export")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    loaded = transformers.AutoTokenizer.from_pretrained(out)
    assert loaded(PROMPT).input_ids == run.tokenizer.encode(PROMPT).ids  # no framing, as the lab trained
    v = run.vocab
    assert loaded.convert_tokens_to_ids([f"<extra_id_{k}>" for k in range(3)]) == list(v.sentinel_ids[:3])
    assert (hf.config.decoder_start_token_id, hf.config.pad_token_id, hf.config.eos_token_id) == \
        (v.pad_id, v.pad_id, v.eos_id)
    ids = torch.tensor([run.tokenizer.encode(PROMPT).ids])
    dec = torch.tensor([[v.pad_id, v.sentinel_ids[0]] + ids[0, :4].tolist()])
    with torch.no_grad():
        expected = lab_logits(run.model, ids, torch.ones_like(ids), dec)
        assert_close(hf(input_ids=ids, decoder_input_ids=dec).logits, expected)
