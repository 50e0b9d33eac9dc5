"""lab_models/interop/mpnet.py against Hugging Face's `MPNetForMaskedLM` (random weights, no network).

Import: a small random MPNet becomes a lab MPNet whose MLM logits equal the reference's on a padded batch (the
reference numbers positions itself, from the pad id 1), on the SDPA and the eager path, through the lab's one-stream
and two-stream forward. The lab's fill_mask on a run folder of the imported model gives the reference's top-5 with the
same probabilities. Export: a lab-built MPNet (the family defaults) loads in `from_pretrained` with the same logits.
Bad configs are ValueErrors that name the field.
"""
from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
from safetensors.torch import save_file  # noqa: E402

from lab_models import api, runs  # noqa: E402
from lab_models import generate as gen  # noqa: E402
from lab_models.interop import mpnet as interop  # noqa: E402
from lab_models.models import build_model, family_model_config  # noqa: E402
from lab_models.objectives import mpnet  # noqa: E402
from lab_models.objectives.common import VocabInfo  # noqa: E402
from lab_models.train import settings_to_dict  # noqa: E402
from lab_models.vocab import prepare_tokenizer  # noqa: E402

V = 64
VOCAB = VocabInfo(size=V, pad_id=1, mask_id=4, cls_id=0, sep_id=2, bos_id=0, eos_id=2, start_id=5, end_id=6,
                  sentinel_ids=(), random_ids=tuple(range(8, V)))  # mpnet-base's <s> 0, <pad> 1, </s> 2


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
    ctx = gen._Context(gen.load_run(run_dir))
    ids = tokenizer.encode("the girl", add_special_tokens=False).ids + [vocab.mask_id] + \
        tokenizer.encode(" a red", add_special_tokens=False).ids + [vocab.mask_id] + \
        tokenizer.encode(" .", add_special_tokens=False).ids
    assert 1 not in ids  # the reference would number positions around an id-1 token as padding
    slots = [i for i, t in enumerate(ids) if t == vocab.mask_id]
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0, slots]
    probs = torch.softmax(logits.masked_fill(ctx.banned, float("-inf")), dim=-1)  # the lab's: ordinary tokens only
    top = torch.topk(probs, 5, dim=-1)
    for row, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        assert [p for _, p in lab[row]] == pytest.approx(values, abs=1e-5)
        assert [piece for piece, _ in lab[row]] == [gen._pieces(ctx, ids[:slots[row]], [t])[0][0] for t in indices]


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
