"""ALBERT checkpoints in the lab and back: parity with transformers' AlbertForPreTraining (MLM and SOP logits,
fill-mask top-5 through api.fill_mask) for the shared block of the released models and for one group per layer,
and export round trips."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, display, full, lab_run, masked_ids,  # noqa: E402
                                   perturb, read_json, reference_top_k, save_hf, special_ids, unigram, write_lab_run)

SPECIALS = dict(pad_token="<pad>", unk_token="<unk>", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                bos_token="[CLS]", eos_token="[SEP]")


def albert(vocab_size: int, groups: int = 1, architecture=transformers.AlbertForPreTraining):
    config = transformers.AlbertConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                                       num_hidden_groups=groups, num_attention_heads=4, intermediate_size=64,
                                       max_position_embeddings=40, hidden_act="gelu_new", pad_token_id=0)
    torch.manual_seed(groups)
    return perturb(architecture(config), seed=groups)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    tokenizer = unigram()
    model = albert(tokenizer.get_vocab_size())
    return model, tokenizer, save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "albert", **SPECIALS)


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[2], tmp_path_factory.mktemp("runs") / "albert-imported")


def test_mlm_and_sop_logits_match_transformers(source, imported):
    model, tokenizer, _ = source
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat and the dog ran").ids])
    run = lab_run(imported)
    cfg = run.model_config
    assert (cfg.embedding_size, cfg.share_layers, cfg.activation) == (16, True, "gelu_tanh")
    with torch.no_grad():
        reference = model(ids)
        hidden = run.model.backbone(ids, full(ids.shape[1]), torch.arange(ids.shape[1]).unsqueeze(0),
                                    torch.zeros_like(ids))
        sop = run.model.heads["sop"](hidden)
    assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), reference.prediction_logits)
    assert_close(sop, reference.sop_logits)
    from lab_models.text.vocab import token_byte_lengths  # bits per byte: "▁" is the space before a word

    ids = run.tokenizer.encode("the cat sat", add_special_tokens=False).ids
    assert int(token_byte_lengths(run.tokenizer)[ids].sum()) == len(" the cat sat")


def test_fill_mask_top5_matches_transformers(source, imported):
    model, tokenizer, _ = source
    text = "the girl eats a [MASK] apple ."
    lab = api.fill_mask(imported, text, top_k=5)[0]
    ids, slots = masked_ids(tokenizer, text, tokenizer.token_to_id("[MASK]"))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).prediction_logits[0, slots[0]]
    top_ids, top_probs = reference_top_k(logits, special_ids(tokenizer))
    assert [piece for piece, _ in lab] == [display(tokenizer, ids[:slots[0]], i) for i in top_ids]
    assert [p for _, p in lab] == pytest.approx(top_probs, abs=1e-4)


def test_one_group_per_layer_is_albert_without_sharing(source, tmp_path):
    _, tokenizer, _ = source
    model = albert(tokenizer.get_vocab_size(), groups=3, architecture=transformers.AlbertForMaskedLM)
    run = lab_run(import_checkpoint(save_hf(model, tokenizer, tmp_path / "hf", **SPECIALS), tmp_path / "run"))
    assert not run.model_config.share_layers and len(run.model.backbone.blocks) == 3 and "sop" not in run.model.heads
    ids = torch.tensor([tokenizer.encode("hello world , the end").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), model(ids).logits)


def test_export_round_trip(source, imported, tmp_path):
    model, tokenizer, _ = source
    folder = export_run(imported, tmp_path / "out")
    again = transformers.AutoModelForPreTraining.from_pretrained(folder).eval()
    ids = torch.tensor([tokenizer.encode("she walks to the park").ids])
    with torch.no_grad():
        a, b = again(ids), model(ids)
    assert_close(a.prediction_logits, b.prediction_logits)
    assert_close(a.sop_logits, b.sop_logits)
    assert read_json(folder / "config.json")["hidden_act"] == "gelu_new"


def test_a_lab_run_exports_to_albert(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-albert", "albert", "unigram")
    run = lab_run(run_dir)
    hf = transformers.AutoModelForPreTraining.from_pretrained(export_run(run_dir, tmp_path / "out")).eval()
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    with torch.no_grad():
        reference = hf(ids, token_type_ids=torch.zeros_like(ids)).prediction_logits
    assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), reference)
