"""RoBERTa checkpoints in the lab and back: parity with transformers' RobertaForMaskedLM (its positions start at
padding_idx + 1 and its one token type is folded into the positions), fill-mask top-5 through api.fill_mask, and
export round trips."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, byte_bpe, display, full, lab_run,  # noqa: E402
                                   masked_ids, perturb, read_json, reference_top_k, save_hf, special_ids,
                                   write_lab_run)

SPECIALS = dict(bos_token="<s>", pad_token="<pad>", eos_token="</s>", unk_token="<unk>", mask_token="<mask>",
                cls_token="<s>", sep_token="</s>")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    tokenizer = byte_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    config = transformers.RobertaConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=42,
                                        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                        layer_norm_eps=1e-5)
    torch.manual_seed(0)
    model = perturb(transformers.RobertaForMaskedLM(config))
    return model, tokenizer, save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "roberta", **SPECIALS)


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[2], tmp_path_factory.mktemp("runs") / "roberta-imported")


def test_logits_match_transformers(source, imported):
    model, tokenizer, _ = source
    ids = torch.tensor([tokenizer.encode("the cat sat on the mat and the dog ran in the park").ids])
    run = lab_run(imported)
    assert run.model_config.max_positions == 40 and run.model_config.n_segments == 0
    with torch.no_grad():
        reference = model(ids).logits
    assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), reference)
    roles = read_json(imported / "config.json")["token_roles"]
    assert (roles["[MASK]"], roles["[PAD]"], roles["[CLS]"], roles["[EOS]"]) == ("<mask>", "<pad>", "<s>", "</s>")


def test_fill_mask_top5_matches_transformers(source, imported):
    model, tokenizer, _ = source
    text = "the girl [MASK] a red apple at the market ."
    lab = api.fill_mask(imported, text, top_k=5)[0]
    ids, slots = masked_ids(tokenizer, text, tokenizer.token_to_id("<mask>"))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, slots[0]]
    top_ids, top_probs = reference_top_k(logits, special_ids(tokenizer))
    assert [piece for piece, _ in lab] == [display(tokenizer, ids[:slots[0]], i) for i in top_ids]
    assert [p for _, p in lab] == pytest.approx(top_probs, abs=1e-4)


def test_export_round_trip(source, imported, tmp_path):
    model, tokenizer, _ = source
    folder = export_run(imported, tmp_path / "out")
    config = read_json(folder / "config.json")
    assert (config["max_position_embeddings"], config["pad_token_id"], config["type_vocab_size"]) == (42, 1, 1)
    again = transformers.AutoModelForMaskedLM.from_pretrained(folder).eval()
    ids = torch.tensor([tokenizer.encode("she walks to the park every morning").ids])
    with torch.no_grad():
        assert_close(again(ids).logits, model(ids).logits)


def test_a_lab_run_exports_to_roberta(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-roberta", "roberta", "byte_bpe")
    run = lab_run(run_dir)
    hf = transformers.AutoModelForMaskedLM.from_pretrained(export_run(run_dir, tmp_path / "out")).eval()
    assert type(hf).__name__ == "RobertaForMaskedLM"
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    assert run.vocab.pad_id not in ids[0].tolist()
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), hf(ids).logits)
