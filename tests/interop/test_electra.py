"""ELECTRA checkpoints in the lab and back: the discriminator (ElectraForPreTraining) and the generator
(ElectraForMaskedLM) import as one lab run that shares their embeddings; parity of both heads and of fill-mask
(through the generator), a discriminator alone (fill-mask refuses, saying why), refused pairs, and the export of
the discriminator with the generator in generator/."""
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


def electra_config(vocab_size: int, hidden: int, heads: int, ff: int):
    return transformers.ElectraConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=hidden,
                                      num_hidden_layers=2, num_attention_heads=heads, intermediate_size=ff,
                                      max_position_embeddings=40)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A discriminator (H = 32) and a generator a quarter as wide that shares its embeddings, as released pairs do."""
    tokenizer = wordpiece()
    V = tokenizer.get_vocab_size()
    torch.manual_seed(0)
    discriminator = perturb(transformers.ElectraForPreTraining(electra_config(V, 32, 4, 64)))
    generator = perturb(transformers.ElectraForMaskedLM(electra_config(V, 8, 1, 16)), seed=1)
    generator.electra.embeddings.load_state_dict(discriminator.electra.embeddings.state_dict())
    root = tmp_path_factory.mktemp("hf")
    return (discriminator, generator, tokenizer, save_hf(discriminator, tokenizer, root / "disc", **SPECIALS),
            save_hf(generator, tokenizer, root / "gen", **SPECIALS))


@pytest.fixture(scope="module")
def imported(source, tmp_path_factory):
    return import_checkpoint(source[3], tmp_path_factory.mktemp("runs") / "electra", generator=source[4])


def test_discriminator_and_generator_logits_match_transformers(source, imported):
    discriminator, generator, tokenizer, _, _ = source
    ids = torch.tensor([tokenizer.encode("the cat sat on the [MASK] and the dog ran").ids])
    run = lab_run(imported)
    assert run.model.settings.generator_size_fraction == 0.25 and run.model.objective_weights["mlm"] == 1.0
    T = ids.shape[1]
    with torch.no_grad():
        hidden = run.model.backbone(ids, full(T), torch.arange(T).unsqueeze(0), torch.zeros_like(ids))
        replaced = run.model.heads["rtd"](hidden)  # (1, T)
        assert_close(replaced, discriminator(ids).logits)
        assert_close(backbone_logits(run.model.generator, ids, full(T)), generator(ids).logits)


def test_fill_mask_uses_the_generator_and_matches_transformers(source, imported):
    _, generator, tokenizer, _, _ = source
    text = "the girl [MASK] a red apple ."
    lab = api.fill_mask(imported, text, top_k=5)[0]
    ids, slots = masked_ids(tokenizer, text, tokenizer.token_to_id("[MASK]"))
    with torch.no_grad():
        logits = generator(torch.tensor([ids])).logits[0, slots[0]]
    top_ids, top_probs = reference_top_k(logits, special_ids(tokenizer))
    assert [piece for piece, _ in lab] == [display(tokenizer, ids[:slots[0]], i) for i in top_ids]
    assert [p for _, p in lab] == pytest.approx(top_probs, abs=1e-4)


def test_a_discriminator_alone_imports_and_fill_mask_says_why_it_cannot(source, tmp_path):
    discriminator, _, tokenizer, disc, _ = source
    run_dir = import_checkpoint(disc, tmp_path / "disc-only")
    run = lab_run(run_dir)
    assert run.model.objective_weights["mlm"] == 0.0
    assert "no ELECTRA generator" in (run_dir / "NOTE.md").read_text()
    ids = torch.tensor([tokenizer.encode("a dog ran in the park").ids])
    T = ids.shape[1]
    with torch.no_grad():
        hidden = run.model.backbone(ids, full(T), torch.arange(T).unsqueeze(0), torch.zeros_like(ids))
        assert_close(run.model.heads["rtd"](hidden), discriminator(ids).logits)
    with pytest.raises(ValueError, match="generator was never trained"):
        api.fill_mask(run_dir, "the girl [MASK] a red apple .")
    generation = api.generate(run_dir, "the girl [MASK] a red apple .", mode="mask_predict")
    assert not generation.supported and "generator" in generation.explanation


def test_a_generator_given_as_the_model_is_refused_with_the_right_command(source, tmp_path):
    with pytest.raises(ValueError, match="--generator"):
        import_checkpoint(source[4], tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_generator_from_another_run_is_refused(source, tmp_path):
    _, generator, tokenizer, disc, _ = source
    other = perturb(transformers.ElectraForMaskedLM(generator.config), seed=7)  # its own embeddings
    folder = save_hf(other, tokenizer, tmp_path / "other-gen", **SPECIALS)
    with pytest.raises(ValueError, match="embeddings differ"):
        import_checkpoint(disc, tmp_path / "run", generator=folder)
    assert not (tmp_path / "run").exists()


def test_export_writes_the_discriminator_and_the_generator_beside_it(source, imported, tmp_path):
    discriminator, generator, tokenizer, _, _ = source
    folder = export_run(imported, tmp_path / "out")
    assert read_json(folder / "config.json")["architectures"] == ["ElectraForPreTraining"]
    disc_again = transformers.AutoModelForPreTraining.from_pretrained(folder).eval()
    gen_again = transformers.AutoModelForMaskedLM.from_pretrained(folder / "generator").eval()
    ids = torch.tensor([tokenizer.encode("she walks to the park").ids])
    with torch.no_grad():
        assert_close(disc_again(ids).logits, discriminator(ids).logits)
        assert_close(gen_again(ids).logits, generator(ids).logits)


def test_a_lab_run_exports_to_electra(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-electra", "electra", "wordpiece")
    run = lab_run(run_dir)
    folder = export_run(run_dir, tmp_path / "out")
    disc = transformers.AutoModelForPreTraining.from_pretrained(folder).eval()
    gen = transformers.AutoModelForMaskedLM.from_pretrained(folder / "generator").eval()
    ids = torch.tensor([run.tokenizer.encode("the girl eats a red apple").ids])
    T = ids.shape[1]
    with torch.no_grad():
        hidden = run.model.backbone(ids, full(T), torch.arange(T).unsqueeze(0), torch.zeros_like(ids))
        assert_close(run.model.heads["rtd"](hidden), disc(ids, token_type_ids=torch.zeros_like(ids)).logits)
        assert_close(backbone_logits(run.model.generator, ids, full(T)), gen(ids).logits)
