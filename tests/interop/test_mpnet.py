"""lab_models/interop/mpnet.py against Hugging Face's `MPNetForMaskedLM` (random weights, no network).

Import: a small random MPNet becomes a lab MPNet whose MLM logits equal the reference's on a padded batch (the
reference numbers positions itself, from the pad id 1), on the SDPA and the eager path, through the lab's one-stream
and two-stream forward. The lab's fill_mask on a run folder of the imported model gives the reference's top-5 with the
same probabilities. Export: a lab-built MPNet (the family defaults) loads in `from_pretrained` with the same logits.
Bad configs are ValueErrors that name the field.

Through the framework: an MPNet saved with mpnet-base's token layout and MPNetTokenizerFast goes through api.import_hf
(roles, logits, fill-mask top-5 and mask-predict against transformers) and api.export_hf; a lab word-piece MPNet run
exports with [PAD] renumbered to transformers' padding id 1, so a text with [UNK] gets the lab's logits there too.
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
from lab_models.inference.generation.context import DecodingContext, display_pieces  # noqa: E402
from lab_models.inference.loading import load_run  # noqa: E402
from lab_models.interop import mpnet as interop  # noqa: E402
from lab_models.models.family import build_model, family_model_config  # noqa: E402
from lab_models.objectives import mpnet  # noqa: E402
from lab_models.text.vocab import VocabInfo  # noqa: E402
from lab_models.objectives.settings import settings_to_dict  # noqa: E402
from lab_models.text.vocab import prepare_tokenizer  # noqa: E402
from tests.support.interop import (assert_close, display, lab_run, masked_ids, mpnet_wordpiece, perturb,  # noqa: E402
                                   read_json, reference_top_k, write_lab_run)

V = 64
VOCAB = VocabInfo(size=V, pad_id=1, mask_id=4, cls_id=0, sep_id=2, bos_id=0, eos_id=2, start_id=5, end_id=6,
                  sentinel_ids=(), random_ids=tuple(range(8, V)))  # mpnet-base's <s> 0, <pad> 1, </s> 2


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def reference(vocab_size: int = V, seed: int = 0, pad: int = 1):
    config = transformers.MPNetConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=128, max_position_embeddings=40,
                                      layer_norm_eps=1e-5, pad_token_id=pad)
    torch.manual_seed(seed)
    hf = transformers.MPNetForMaskedLM(config).eval()
    with torch.no_grad():  # random, not zero: the bias and the relative bias table must reach the logits
        hf.lm_head.bias.normal_()
        hf.mpnet.encoder.relative_attention_bias.weight.normal_()
    return hf


def imported(hf, vocab: VocabInfo = VOCAB, impl: str = "sdpa"):
    config = hf.config.to_dict()
    model_config, settings, weights = interop.import_config(config)
    model_config = model_config.__class__(**{**model_config.to_dict(), "attention_impl": impl})
    model = build_model("mpnet", model_config, mpnet.Settings(**settings), vocab, weights).eval()
    model.load_state_dict(interop.import_state(config, hf.state_dict(), model), strict=True)
    return model


def batch():
    """Row 1 has 7 real tokens and two pads (id 1); no real token is 1, which the reference would take for padding."""
    ids = torch.randint(8, V, (2, 9), generator=torch.Generator().manual_seed(1))
    ids[1, 7:] = 1
    ids[0, 3] = VOCAB.mask_id
    return ids, (ids != 1).long()


def lab_logits(model, ids, attention) -> torch.Tensor:
    B, T = ids.shape
    mask = attention.bool()[:, None, :].expand(B, T, T)
    return model.backbone.lm_logits(model.backbone(ids, mask, torch.arange(T).expand(B, T)))


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_imported_checkpoint_gives_the_reference_mlm_logits(impl):
    hf = reference()
    model = imported(hf, impl=impl)
    ids, attention = batch()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=attention).logits
        got = lab_logits(model, ids, attention)
        # the query stream at the [MASK] slot (how the lab's MPNet fills a mask) reads what the one stream reads
        T = ids.shape[1]
        _, g = model.backbone.forward_two_stream(ids[:1], torch.ones(1, T, T, dtype=torch.bool),
                                                 torch.ones(1, 1, T, dtype=torch.bool), torch.arange(T)[None],
                                                 torch.tensor([[3]]))
    real = attention.bool()
    assert expected.abs().max() > 1.0
    assert (got - expected)[real].abs().max() <= 1e-4
    assert (model.backbone.lm_logits(g[0, 0]) - expected[0, 3]).abs().max() <= 1e-4
    assert model.model_config.max_positions == 38  # 40 rows minus the padding offset


def test_names_with_and_without_the_mpnet_prefix_read_alike():
    hf = reference()
    model = imported(hf)
    bare = {name.removeprefix("mpnet."): tensor for name, tensor in hf.state_dict().items()}
    for name, tensor in interop.import_state(hf.config.to_dict(), bare, model).items():
        assert torch.equal(tensor, model.state_dict()[name]), name


def test_fill_mask_through_the_lab_gives_the_reference_top5(tmp_path):
    texts = ["the cat sees a ball .", "a small dog eats a red apple .", "the girl reads a book in the park ."] * 20
    tokenizer, vocab = prepare_tokenizer(api.train_tokenizer("wordpiece", texts, 60))
    hf = reference(vocab_size=vocab.size, seed=2, pad=vocab.pad_id)
    model = imported(hf, vocab)
    run_dir = tmp_path / "mpnet-imported"
    run_dir.mkdir()
    tokenizer.save(str(run_dir / runs.TOKENIZER_FILE))
    runs.write_config(run_dir, {"family": "mpnet", "model": model.model_config.to_dict(),
                                "settings": settings_to_dict(model.settings), "objectives": model.objective_weights})
    runs.save_weights(model, run_dir / runs.MODEL_FILE)

    text = "the girl [MASK] a red [MASK] ."
    lab = api.fill_mask(run_dir, text, top_k=5)
    ctx = DecodingContext(load_run(run_dir))
    ids = tokenizer.encode("the girl", add_special_tokens=False).ids + [vocab.mask_id] + \
        tokenizer.encode(" a red", add_special_tokens=False).ids + [vocab.mask_id] + \
        tokenizer.encode(" .", add_special_tokens=False).ids
    assert 1 not in ids  # the reference would number positions around an id-1 token as padding
    slots = [i for i, t in enumerate(ids) if t == vocab.mask_id]
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0, slots]
    probs = torch.softmax(logits, dim=-1)  # the model's own probabilities; the lab ranks ordinary tokens only
    top = torch.topk(probs.masked_fill(ctx.banned, -1.0), 5, dim=-1)
    for row, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        assert [p for _, p in lab[row]] == pytest.approx(values, abs=1e-5)
        assert [piece for piece, _ in lab[row]] == [display_pieces(ctx, ids[:slots[row]], [t])[0][0] for t in indices]


def test_exported_lab_model_loads_in_transformers_with_the_same_logits(tmp_path):
    config = family_model_config("mpnet", "tiny", V)
    model = build_model("mpnet", config, mpnet.Settings(), VOCAB, None, seed=3).eval()
    with torch.no_grad():
        model.backbone.lm_bias.normal_()
        model.backbone.relative_bias.table.weight.normal_()
    state = interop.export_state(model)
    save_file(state, str(tmp_path / "model.safetensors"))  # refuses tensors that share storage
    (tmp_path / "config.json").write_text(json.dumps(interop.export_config(model)))
    hf = transformers.MPNetForMaskedLM.from_pretrained(tmp_path).eval()
    ids, attention = batch()
    with torch.no_grad():
        expected = lab_logits(model, ids, attention)
        got = hf(input_ids=ids, attention_mask=attention).logits
    assert (got - expected)[attention.bool()].abs().max() <= 1e-4
    again = imported(hf)
    for name, tensor in model.state_dict().items():
        assert torch.equal(again.state_dict()[name], tensor), name


def test_bad_configs_and_unexportable_runs_are_value_errors():
    base = reference().config.to_dict()
    with pytest.raises(ValueError, match="hidden_act"):
        interop.import_config({**base, "hidden_act": "relu"})
    with pytest.raises(ValueError, match="relative_attention_num_buckets"):
        interop.import_config({**base, "relative_attention_num_buckets": 64})
    settings = mpnet.Settings(input_mode="xlnet")
    lab = build_model("mpnet", family_model_config("mpnet", "tiny", V, settings=settings), settings, VOCAB, None)
    with pytest.raises(ValueError, match="query_stream"):
        interop.export_config(lab)


def test_an_unknown_tensor_is_reported_not_silently_dropped(caplog):
    hf = reference()
    model = imported(hf)
    state = {**hf.state_dict(), "mpnet.encoder.layer.0.attention.attn.extra.weight": torch.zeros(2)}
    with caplog.at_level("WARNING", logger="lab_models.interop.state_mapping"):
        interop.import_state(hf.config.to_dict(), state, model)
    assert "encoder.layer.0.attention.attn.extra.weight" in caplog.text
    assert "pooler" not in caplog.text and "position_embeddings" not in caplog.text


# ---- through the framework: a saved folder with MPNet's word-piece tokenizer, api.import_hf, api.export_hf --------
TEXT = "the girl [MASK] a red [MASK] at the market ."


@pytest.fixture(scope="module")
def folder_and_run(tmp_path_factory, lab_home_dir):
    """A random MPNet (perturbed) with mpnet-base's token layout (<s> 0, <pad> 1, </s> 2, <mask> last), saved by
    save_pretrained with its MPNetTokenizerFast, imported through api.import_hf."""
    tokenizer = mpnet_wordpiece()
    config = transformers.MPNetConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=40,
                                      layer_norm_eps=1e-5, pad_token_id=1)
    torch.manual_seed(0)
    hf = perturb(transformers.MPNetForMaskedLM(config), scale=0.3)
    folder = tmp_path_factory.mktemp("hf") / "mpnet"
    hf.save_pretrained(folder)
    transformers.MPNetTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(folder)
    run_dir = api.import_hf(folder, tmp_path_factory.mktemp("runs") / "mpnet", corpus="synthetic", home=lab_home_dir)
    return hf, tokenizer, folder, run_dir


def test_a_saved_mpnet_folder_imports_with_its_own_special_tokens_and_parity(folder_and_run):
    hf, tokenizer, _, run_dir = folder_and_run
    run = lab_run(run_dir)
    v = run.vocab
    V = tokenizer.get_vocab_size()
    assert (v.cls_id, v.pad_id, v.sep_id, v.mask_id, v.size, run.model_config.vocab_size) == (0, 1, 2, V - 1, V, V)
    config = read_json(run_dir / "config.json")
    assert config["imported_from"]["added_tokens"] == {} and config["token_roles"]["[MASK]"] == "<mask>"
    assert run.tokenizer.get_added_tokens_decoder()[V - 1].lstrip  # MPNet's <mask> keeps the space before it
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat , hello !").ids] * 2)  # (2, T)
    ids[1, 7:] = 1
    attention = (ids != 1).long()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=attention).logits
        assert_close(lab_logits(run.model, ids, attention)[attention.bool()], expected[attention.bool()])


def test_fill_mask_and_mask_predict_through_the_lab_match_transformers(folder_and_run):
    hf, tokenizer, _, run_dir = folder_and_run
    run = lab_run(run_dir)
    ctx = DecodingContext(run)
    mask = run.vocab.mask_id
    ids, slots = masked_ids(tokenizer, TEXT, mask)
    # MPNet's own tokenizer frames a text <s> ... </s>, and so does the lab for the imported run
    assert read_json(run_dir / "config.json")["framing"]["single"] == [["<s>", 0], ["$A", 0], ["</s>", 0]]
    ids, slots = [run.vocab.cls_id, *ids, run.vocab.sep_id], [slot + 1 for slot in slots]
    lab = api.fill_mask(run_dir, TEXT, top_k=5)
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0]  # (T, V)
    for row, slot in enumerate(slots):
        top_ids, top_probs = reference_top_k(logits[slot], {i for i in range(run.vocab.size) if ctx.banned[i]})
        assert [piece for piece, _ in lab[row]] == [display(tokenizer, ids[:slot], i) for i in top_ids]
        assert [p for _, p in lab[row]] == pytest.approx(top_probs, abs=1e-4)

    # mask-predict (Ghazvininejad et al. 2019), written here on transformers' logits: predict every slot, then
    # re-mask the N (T - t) / T least confident and predict them again
    iterations = 4
    _, lab_tokens = gen._generate(run_dir, TEXT, mode="mask_predict", max_new_tokens=8, strategy="greedy",
                                  temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=iterations,
                                  blank_length=None, use_cache=True)
    current, tokens, probs = list(ids), [0] * len(slots), [0.0] * len(slots)
    masked = list(range(len(slots)))
    for t in range(iterations):
        if t:
            n = len(slots) * (iterations - t) // iterations
            if n == 0:
                break
            masked = sorted(sorted(range(len(slots)), key=lambda i: probs[i])[:n])
            for i in masked:
                current[slots[i]] = mask
        with torch.no_grad():
            logits = hf(input_ids=torch.tensor([current])).logits[0]
        for i in masked:
            p = torch.softmax(logits[slots[i]], -1)  # confidence: the model's own probability of the chosen token
            tokens[i] = int(p.masked_fill(ctx.banned, -1.0).argmax())  # never a special token
            probs[i] = float(p[tokens[i]])
            current[slots[i]] = tokens[i]
    assert lab_tokens == tokens


def test_the_export_of_an_imported_mpnet_loads_in_transformers_as_the_source(folder_and_run, tmp_path):
    hf, tokenizer, folder, run_dir = folder_and_run
    out = api.export_hf(run_dir, tmp_path / "export")
    again = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
    assert type(again).__name__ == "MPNetForMaskedLM" and again.config.pad_token_id == 1
    ids = torch.tensor([tokenizer.encode("she walks to the park every morning .").ids])
    with torch.no_grad():
        assert_close(again(ids).logits, hf(ids).logits)
    source, loaded = transformers.AutoTokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(out)
    text = "The girl eats a red apple!"
    assert loaded(text).input_ids == source(text).input_ids  # the checkpoint's own framing: <s> ... </s>
    assert loaded(text, add_special_tokens=False).input_ids == \
        lab_run(run_dir).tokenizer.encode(text, add_special_tokens=False).ids  # what the lab reads
    assert (loaded.mask_token, loaded.pad_token, loaded.cls_token, loaded.sep_token) == ("<mask>", "<pad>", "<s>",
                                                                                         "</s>")


def test_a_lab_mpnet_run_exports_with_its_pad_token_at_transformers_padding_id(tmp_path):
    """A lab word-piece vocabulary has [UNK] at id 1, which transformers' MPNet takes for padding when it numbers
    positions: the export trades the ids of [PAD] and [UNK], in the tokenizer and in the weights, so a text with an
    unknown character gets the lab's logits in transformers too."""
    run_dir = write_lab_run(tmp_path / "lab-mpnet", "mpnet", "wordpiece")
    run = lab_run(run_dir)
    v = run.vocab
    assert (v.pad_id, run.tokenizer.token_to_id("[UNK]")) == (0, 1)
    out = api.export_hf(run_dir, tmp_path / "export")
    hf = transformers.AutoModelForMaskedLM.from_pretrained(out).eval()
    loaded = transformers.AutoTokenizer.from_pretrained(out)
    assert hf.config.pad_token_id == 1 and loaded.pad_token_id == 1 and loaded.unk_token_id == 0
    text = "the girl eats a red qz apple ."  # q and z are not in the lab vocabulary: [UNK]
    lab_ids = run.tokenizer.encode(text).ids
    assert 1 in lab_ids
    swap = {0: 1, 1: 0}
    assert loaded(text).input_ids == [swap.get(i, i) for i in lab_ids]  # no framing, as the lab trained
    order = torch.arange(v.size)
    order[[0, 1]] = torch.tensor([1, 0])  # the lab's token i is transformers' token order[i]
    x = torch.tensor([lab_ids])
    with torch.no_grad():
        expected = lab_logits(run.model, x, torch.ones_like(x))
        got = hf(torch.tensor([loaded(text).input_ids])).logits
    assert_close(got[..., order], expected)
