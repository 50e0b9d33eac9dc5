"""BERT checkpoints in the lab and back: parity with transformers' BertForPreTraining (MLM and NSP logits, fill-mask
top-5 through the lab's own api.fill_mask), BertForMaskedLM checkpoints that still carry the NSP weights, export
round trips, and the slow vocab.txt tokenizer."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, display, full, lab_run, masked_ids,  # noqa: E402
                                   perturb, read_json, reference_top_k, save_hf, special_ids, wordpiece,
                                   write_lab_run)

SPECIALS = dict(unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


def bert_config(vocab_size: int, **extra):
    return transformers.BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=40, **extra)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    tokenizer = wordpiece()
    torch.manual_seed(0)
    model = perturb(transformers.BertForPreTraining(bert_config(tokenizer.get_vocab_size())))
    return model, tokenizer, save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "bert", **SPECIALS)


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[2], tmp_path_factory.mktemp("runs") / "bert-imported")


def test_mlm_and_nsp_logits_match_transformers(source, imported):
    model, tokenizer, _ = source
    ids = torch.tensor([tokenizer.encode("[CLS] the cat sat on the [MASK] . [SEP]").ids])
    run = lab_run(imported)
    with torch.no_grad():
        reference = model(ids)
        hidden = run.model.backbone(ids, full(ids.shape[1]), torch.arange(ids.shape[1]).unsqueeze(0),
                                    torch.zeros_like(ids))
        nsp = run.model.heads["nsp"](hidden)
    assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), reference.prediction_logits)
    assert_close(nsp, reference.seq_relationship_logits)
    config = read_json(imported / "config.json")
    assert config["objectives"] == {"mlm": 1.0, "nsp": 1.0} and config["token_roles"]["[MASK]"] == "[MASK]"


def test_fill_mask_top5_matches_transformers(source, imported):
    model, tokenizer, _ = source
    text = "the girl [MASK] a red apple ."
    lab = api.fill_mask(imported, text, top_k=5)[0]
    ids, slots = masked_ids(tokenizer, text, tokenizer.token_to_id("[MASK]"))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).prediction_logits[0, slots[0]]
    top_ids, top_probs = reference_top_k(logits, special_ids(tokenizer))
    assert [piece for piece, _ in lab] == [display(tokenizer, ids[:slots[0]], i) for i in top_ids]
    assert [p for _, p in lab] == pytest.approx(top_probs, abs=1e-4)


def test_a_masked_lm_checkpoint_drops_the_nsp_weights_it_still_carries(source, tmp_path):
    model, tokenizer, folder = source
    config = read_json(folder / "config.json")
    masked = tmp_path / "masked-lm"
    masked.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (masked / name).write_bytes((folder / name).read_bytes())
    (masked / "config.json").write_text(transformers.BertConfig(**{**config, "architectures": ["BertForMaskedLM"]})
                                        .to_json_string())
    run = lab_run(import_checkpoint(masked, tmp_path / "run"))
    assert "nsp" not in run.model.heads and run.model.objective_weights["nsp"] == 0.0
    ids = torch.tensor([tokenizer.encode("a dog ran in the park").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), model(ids).prediction_logits)


def test_export_round_trip_keeps_both_heads(source, imported, tmp_path):
    model, tokenizer, _ = source
    folder = export_run(imported, tmp_path / "out")
    again = transformers.AutoModelForPreTraining.from_pretrained(folder).eval()
    assert type(again).__name__ == "BertForPreTraining"
    ids = torch.tensor([tokenizer.encode("she walks to the park").ids])
    with torch.no_grad():
        a, b = again(ids), model(ids)
    assert_close(a.prediction_logits, b.prediction_logits)
    assert_close(a.seq_relationship_logits, b.seq_relationship_logits)
    assert transformers.AutoTokenizer.from_pretrained(folder).mask_token == "[MASK]"


def test_a_lab_run_exports_to_bert(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-bert", "bert", "wordpiece")
    run = lab_run(run_dir)
    hf = transformers.AutoModelForPreTraining.from_pretrained(export_run(run_dir, tmp_path / "out")).eval()
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    with torch.no_grad():
        reference = hf(ids, token_type_ids=torch.zeros_like(ids)).prediction_logits
    assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1])), reference)


def test_slow_vocab_txt_converts_to_the_same_tokens(source, tmp_path):
    model, tokenizer, fast = source
    slow = tmp_path / "slow"
    slow.mkdir()
    for name in ("config.json", "model.safetensors"):
        (slow / name).write_bytes((fast / name).read_bytes())
    tokenizer.model.save(str(slow))  # vocab.txt
    (slow / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    run = lab_run(import_checkpoint(slow, tmp_path / "run"))
    text = "The cat sat on the mat, hello WORLD!"
    assert run.tokenizer.encode(text, add_special_tokens=False).ids == tokenizer.encode(text).ids
    assert (run.vocab.mask_id, run.vocab.pad_id) == (tokenizer.token_to_id("[MASK]"), tokenizer.token_to_id("[PAD]"))
    # bits per byte: word pieces count their bytes (## continuations without the prefix)
    from lab_models.text.vocab import token_byte_lengths
    lengths = token_byte_lengths(run.tokenizer)
    assert lengths[tokenizer.token_to_id("[MASK]")] == 0 and lengths[tokenizer.token_to_id("the")] == 4
