"""The import/export framework (lab_models/interop/): the registry of converters, bad input (each a clear ValueError
and nothing half-written), pickled and sharded weights, the CLIs, and imported runs in the lab's other views
(run lists, Understand probes, fine-tuning, the leaderboard)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.interop.exporter import export_run
from lab_models.interop.importer import import_checkpoint, inspect_checkpoint
from lab_models.interop import registry  # noqa: E402
from tests.support.interop import (assert_close, backbone_logits, byte_bpe, causal, full, lab_run,  # noqa: E402
                                   perturb, read_json, save_hf, wordpiece, write_lab_run)

REPO = Path(__file__).resolve().parents[2]
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    tokenizer = byte_bpe([EOT])
    config = transformers.GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_embd=16, n_layer=2, n_head=2,
                                     n_positions=32)
    torch.manual_seed(0)
    model = perturb(transformers.GPT2LMHeadModel(config))
    folder = save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "gpt2", eos_token=EOT, bos_token=EOT)
    return model, tokenizer, folder


def copy_folder(source: Path, target: Path, skip=()) -> Path:
    target.mkdir(parents=True)
    for path in source.iterdir():
        if path.name not in skip:
            (target / path.name).write_bytes(path.read_bytes())
    return target


def nothing_written(parent: Path, name: str) -> bool:
    return not (parent / name).exists() and not [p for p in parent.iterdir() if p.name.startswith(f".{name}.")]


# ------------------------------------------------------------------------------------------------ the registry
ALL = ("gpt", "gpt2", "bert", "roberta", "albert", "electra", "xlnet", "mpnet", "t5")


def test_the_registry_knows_all_nine_architectures_and_every_converter_is_in_the_build():
    assert tuple(registry.ARCHITECTURES) == ALL
    for name in ALL:
        module = registry.architecture_module(name)
        assert module.FAMILY == registry.ARCHITECTURES[name][1] and module.HF_ARCHITECTURES
        assert registry.module_name_for_model_type(module.MODEL_TYPES[0]) == name
        assert registry.module_name_for_family(module.FAMILY) == name
    rows = {row["module"]: row for row in api.interop_architectures()}
    assert {name: row["available"] for name, row in rows.items()} == {name: True for name in ALL}
    assert (rows["t5"]["reference"], rows["mpnet"]["reference"], rows["xlnet"]["reference"]) == \
        ("T5ForConditionalGeneration", "MPNetForMaskedLM", "XLNetLMHeadModel")


def test_a_converter_missing_from_this_build_says_so(monkeypatch):
    monkeypatch.setitem(registry.ARCHITECTURES, "nosuch", (("nosuch-type",), "nosuch"))
    with pytest.raises(ValueError, match="nosuch-type checkpoints are not available in this build"):
        registry.architecture_module("nosuch")
    assert registry.available()["nosuch"] is False


@pytest.mark.parametrize("family", ["spanbert", "unilm", "mass", "glm", "elmo"])
def test_families_without_a_transformers_class_say_why(family):
    with pytest.raises(ValueError, match="the lab's own run folder"):
        registry.module_name_for_family(family)


def test_a_lab_run_of_such_a_family_is_refused_and_nothing_is_written(tmp_path):
    run_dir = write_lab_run(tmp_path / "glm", "glm", "unigram")
    with pytest.raises(ValueError, match="GLM"):
        export_run(run_dir, tmp_path / "out")
    assert nothing_written(tmp_path, "out")


# ------------------------------------------------------------------------------------------------ bad input
def test_a_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="no config.json"):
        import_checkpoint(tmp_path, tmp_path / "run")
    with pytest.raises(ValueError, match="does not exist"):
        import_checkpoint(tmp_path / "nowhere", tmp_path / "run")
    with pytest.raises(ValueError, match="cannot be read on this machine"):  # a name too long for the file system
        import_checkpoint(tmp_path / ("x" * 10_000), tmp_path / "run")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        import_checkpoint(tmp_path, tmp_path / "run")
    assert nothing_written(tmp_path, "run")


def test_an_unsupported_architecture(gpt2, tmp_path):
    folder = copy_folder(gpt2[2], tmp_path / "llama")
    config = read_json(folder / "config.json")
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(ValueError, match="cannot import model_type 'llama'"):
        import_checkpoint(folder, tmp_path / "run")


def test_a_shape_mismatch_names_the_tensor(gpt2, tmp_path):
    folder = copy_folder(gpt2[2], tmp_path / "wrong")
    config = read_json(folder / "config.json")
    (folder / "config.json").write_text(json.dumps({**config, "n_positions": 64}))
    with pytest.raises(ValueError, match=r"shape mismatch: the checkpoint's transformer.wpe.weight is \(32, 16\)"):
        import_checkpoint(folder, tmp_path / "run")
    assert nothing_written(tmp_path, "run")


def test_a_missing_tensor_and_an_unknown_one_are_named(gpt2, tmp_path):
    state = load_file(str(gpt2[2] / "model.safetensors"))
    folder = copy_folder(gpt2[2], tmp_path / "missing", skip=("model.safetensors",))
    save_file({k: v for k, v in state.items() if k != "transformer.ln_f.bias"}, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="no tensor transformer.ln_f.bias"):
        import_checkpoint(folder, tmp_path / "run")
    folder = copy_folder(gpt2[2], tmp_path / "extra", skip=("model.safetensors",))
    save_file({**state, "transformer.h.0.attn.rotary.weight": torch.zeros(2)}, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="no place for: transformer.h.0.attn.rotary.weight"):
        import_checkpoint(folder, tmp_path / "run")


def test_an_unknown_corpus_is_refused_before_anything_is_written(gpt2, tmp_path):
    with pytest.raises(ValueError, match="Unknown corpus 'no-such-corpus'"):
        api.import_hf(gpt2[2], tmp_path / "run", corpus="no-such-corpus", home=tmp_path / "home")
    assert nothing_written(tmp_path, "run")


def test_tensor_names_without_the_base_model_prefix_import_too(gpt2, tmp_path):
    model, tokenizer, source = gpt2
    state = load_file(str(source / "model.safetensors"))
    folder = copy_folder(source, tmp_path / "bare", skip=("model.safetensors",))
    save_file({name.removeprefix("transformer."): t for name, t in state.items()}, str(folder / "model.safetensors"))
    run = lab_run(import_checkpoint(folder, tmp_path / "run"))
    ids = torch.tensor([tokenizer.encode("the cat sat").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, causal(ids.shape[1])), model(ids).logits)


def test_a_base_model_without_its_head_is_refused(tmp_path):
    tokenizer = wordpiece()
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    folder = save_hf(transformers.BertModel(config), tokenizer, tmp_path / "base", unk_token="[UNK]",
                     mask_token="[MASK]")
    with pytest.raises(ValueError, match="a BertModel has no MLM head"):
        import_checkpoint(folder, tmp_path / "run")
    config = read_json(folder / "config.json")  # the same weights, but the config claims the MLM head is there
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["BertForMaskedLM"]}))
    with pytest.raises(ValueError, match=r"no tensor bert.cls.predictions.transform.dense.weight \(or cls"):
        import_checkpoint(folder, tmp_path / "run")


def test_a_missing_mask_token_is_added_in_a_padding_row_of_the_vocabulary(tmp_path):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    from tests.support.interop import TEXTS

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(TEXTS, trainers.WordPieceTrainer(vocab_size=80, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]"]))  # no [MASK]
    n = tokenizer.get_vocab_size()
    config = transformers.BertConfig(vocab_size=n + 8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)  # 8 padding rows
    torch.manual_seed(0)
    model = perturb(transformers.BertForMaskedLM(config))
    folder = save_hf(model, tokenizer, tmp_path / "hf", unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                     sep_token="[SEP]")
    run = lab_run(import_checkpoint(folder, tmp_path / "run"))
    assert run.vocab.mask_id == n and run.model_config.vocab_size == n + 8  # the padding row n, no new row
    table = run.model.backbone.embeddings.token.weight
    torch.testing.assert_close(table[n], model.bert.embeddings.word_embeddings.weight.mean(dim=0))
    ids = torch.tensor([tokenizer.encode("the cat sat").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, full(ids.shape[1]))[..., :n], model(ids).logits[..., :n])


def test_an_existing_out_folder_is_never_overwritten(gpt2, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="already exists"):
        import_checkpoint(gpt2[2], out)
    assert (out / "mine.txt").read_text() == "keep me" and sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_a_pickle_is_refused_unless_allowed_and_then_read_as_weights_only(gpt2, tmp_path):
    model, tokenizer, source = gpt2
    folder = copy_folder(source, tmp_path / "pickled", skip=("model.safetensors",))
    torch.save(load_file(str(source / "model.safetensors")), folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match="--allow-pickle"):
        import_checkpoint(folder, tmp_path / "run")
    assert nothing_written(tmp_path, "run")
    run = lab_run(import_checkpoint(folder, tmp_path / "run", allow_pickle=True))
    ids = torch.tensor([tokenizer.encode("the cat sat").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, causal(ids.shape[1])), model(ids).logits)
    assert read_json(tmp_path / "run" / "config.json")["imported_from"]["pickled"] is True


class Payload:
    """Not a tensor: torch.load(weights_only=True) must refuse to build it."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_a_pickle_with_code_in_it_is_refused_even_when_pickles_are_allowed(gpt2, tmp_path):
    folder = copy_folder(gpt2[2], tmp_path / "evil", skip=("model.safetensors",))
    torch.save({"transformer.wte.weight": Payload()}, folder / "pytorch_model.bin")
    with pytest.raises(ValueError, match="weights only"):
        import_checkpoint(folder, tmp_path / "run", allow_pickle=True)
    assert nothing_written(tmp_path, "run")


def test_sharded_safetensors_import_with_parity(gpt2, tmp_path):
    model, tokenizer, source = gpt2
    folder = tmp_path / "sharded"
    model.save_pretrained(folder, max_shard_size="20KB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((source / name).read_bytes())
    assert (folder / "model.safetensors.index.json").is_file() and not (folder / "model.safetensors").exists()
    run = lab_run(import_checkpoint(folder, tmp_path / "run"))
    ids = torch.tensor([tokenizer.encode("hello world").ids])
    with torch.no_grad():
        assert_close(backbone_logits(run.model.backbone, ids, causal(ids.shape[1])), model(ids).logits)


def test_a_shard_index_that_points_outside_the_folder_is_refused(gpt2, tmp_path):
    folder = copy_folder(gpt2[2], tmp_path / "escape", skip=("model.safetensors",))
    (tmp_path / "secret.safetensors").write_bytes((gpt2[2] / "model.safetensors").read_bytes())
    index = {"weight_map": {"transformer.wte.weight": "../secret.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="outside the checkpoint folder"):
        import_checkpoint(folder, tmp_path / "run")


def test_other_frameworks_and_sentencepiece_only_folders_say_what_to_do(gpt2, tmp_path):
    folder = copy_folder(gpt2[2], tmp_path / "tf", skip=("model.safetensors",))
    (folder / "tf_model.h5").write_bytes(b"\x89HDF")
    with pytest.raises(ValueError, match="TensorFlow or Flax"):
        import_checkpoint(folder, tmp_path / "run")
    folder = copy_folder(gpt2[2], tmp_path / "spm", skip=("tokenizer.json", "tokenizer_config.json"))
    (folder / "spiece.model").write_bytes(b"\x0a\x00")
    with pytest.raises(ValueError, match="save_pretrained"):
        import_checkpoint(folder, tmp_path / "run")


# ------------------------------------------------------------------------------------------------ look, CLIs
def test_inspect_lists_what_it_found_without_writing(gpt2, tmp_path):
    summary = inspect_checkpoint(gpt2[2])
    assert (summary["architecture"], summary["family"], summary["d_model"], summary["n_layers"]) == \
        ("GPT2LMHeadModel", "gpt2", 16, 2)
    assert summary["parameters"] == sum(p.numel() for p in gpt2[0].parameters())
    assert summary["tokenizer"]["kind"] == "byte_bpe" and summary["tokenizer"]["roles"]["[EOS]"] == EOT
    assert "model.safetensors" in [name for name, _ in summary["files"]]


@pytest.mark.slow
def test_the_import_cli_runs_as_a_module(gpt2, tmp_path):
    run_dir = tmp_path / "runs" / "gpt2-cli"
    env = {**os.environ, "PRETRAINING_LAB_HOME": str(tmp_path), "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lab_models", "import-hf", "--from", str(gpt2[2]), "--out",
                           str(run_dir)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert str(run_dir) in done.stderr and (run_dir / "model.safetensors").is_file()


def test_the_clis_exit_2_with_one_error_line(gpt2, tmp_path, capsys):
    from lab_models.interop.cli import export_main, import_main

    run_dir = tmp_path / "run"
    assert import_main(["--from", str(gpt2[2]), "--out", str(run_dir)]) == 0
    capsys.readouterr()
    assert import_main(["--from", str(gpt2[2]), "--out", str(run_dir)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: ") and "already exists" in error[-1]
    assert import_main(["--from", str(gpt2[2]), "--look"]) == 0
    assert json.loads(capsys.readouterr().out)["architecture"] == "GPT2LMHeadModel"
    assert export_main(["--run", str(run_dir), "--out", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "config.json").is_file()
    capsys.readouterr()
    assert export_main(["--run", "no-such-run", "--out", str(tmp_path / "x"), "--home", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("error: ") == 1


# ------------------------------------------------------------------------------------------------ the other views
@pytest.fixture(scope="module")
def imported_in_home(lab_home_dir, tmp_path_factory):
    """An imported BERT in the session's lab home (so the runs list, probes and the leaderboard find it)."""
    tokenizer = wordpiece()
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=40)
    torch.manual_seed(0)
    model = perturb(transformers.BertForPreTraining(config))
    folder = save_hf(model, tokenizer, tmp_path_factory.mktemp("hf") / "bert", unk_token="[UNK]", pad_token="[PAD]",
                     cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    return api.import_hf(folder, corpus="synthetic", home=lab_home_dir)


def test_an_imported_run_is_listed_with_its_weights(imported_in_home, lab_home_dir):
    assert imported_in_home.parent == Path(lab_home_dir) / "runs"
    assert imported_in_home.name.startswith("bert-imported-")
    rows = {row["run_id"]: row for row in api.runs_with_weights(home=lab_home_dir)}
    row = rows[imported_in_home.name]
    assert (row["family"], row["preset"], row["corpus"], row["state"], row["weights_step"]) == \
        ("bert", "imported", "synthetic", "finished", 0)


def test_an_imported_run_in_the_understand_probes(imported_in_home):
    maps = api.attention_maps(imported_in_home, "the cat sat on the mat .")
    assert maps is not None
    frame = api.contextual_similarity([imported_in_home], "the cat sat .", "a cat ran .", "cat")
    assert set(frame["family"]) == {"bert"} and frame["cosine"].between(-1.0001, 1.0001).all()


def test_an_imported_run_fine_tunes(imported_in_home, tmp_path):
    from lab_models.inference.finetuning import run as finetune

    rows = ["text,label"] + [f"the cat is {'good' if i % 2 else 'bad'} number {i},{i % 2}" for i in range(24)]
    (tmp_path / "task.csv").write_text("\n".join(rows) + "\n")
    done = finetune.main(["--run", str(imported_in_home), "--task", "csv", "--csv", str(tmp_path / "task.csv"),
                          "--text-column", "text", "--label-column", "label", "--steps", "3", "--batch-size", "4",
                          "--out", str(tmp_path / "ft"), "--device", "cpu"])
    assert done == 0
    result = read_json(tmp_path / "ft" / "result.json")
    assert result["family"] == "bert" and 0.0 <= result["accuracy"] <= 1.0


@pytest.mark.slow
def test_an_imported_run_on_the_leaderboard(imported_in_home, lab_home_dir):
    frame = api.leaderboard(home=lab_home_dir, corpus="synthetic", max_examples=3)
    row = frame[frame["run_id"] == imported_in_home.name].iloc[0]
    assert (row["family"], row["preset"], row["steps"]) == ("bert", "imported", 0)
    assert 1 <= row["fill_mask_examples"] <= 3 and 0.0 <= row["fill_mask_accuracy"] <= 1.0
    assert row["parameters"] == read_json(imported_in_home / "config.json")["num_parameters"]
    # nothing was trained in the lab: its validation bits per byte are measured on the corpus it is filed under
    assert imported_in_home.name in frame.attrs["measured"] and 0.5 < row["val_bits_per_byte"] < 20
    from lab_models.inference.leaderboard import measured_bits_per_byte
    from lab_models.text.corpora import load_corpus

    run = lab_run(imported_in_home)
    again = measured_bits_per_byte(run, load_corpus("synthetic", home=lab_home_dir).validation)
    assert again == pytest.approx(row["val_bits_per_byte"], abs=1e-9)  # the same rows and seeds every time


def test_cached_checkpoints_follow_hf_home_and_say_why_one_cannot_be_imported(gpt2, tmp_path, monkeypatch):
    from tests.support.interop import place_in_hf_cache

    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    folder = gpt2[2]
    snapshot = place_in_hf_cache(folder, tmp_path / "hf-home" / "hub", "openai-community/gpt2-tiny")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (pickled / name).write_bytes((folder / name).read_bytes())
    (pickled / "pytorch_model.bin").write_bytes(b"not read")
    place_in_hf_cache(pickled, tmp_path / "hf-home" / "hub", "someone/old-gpt2")
    rows = api.cached_checkpoints()
    assert [row["repo_id"] for row in rows] == ["openai-community/gpt2-tiny", "someone/old-gpt2"]
    good, old = rows
    assert (good["supported"], good["path"], good["family"], good["reason"]) == (True, str(snapshot), "gpt2", "")
    assert good["parameters"] > 0 and good["size"] > 0 and good["revision"] == "0123456789ab"
    assert old["supported"] is False and "pickle" in old["reason"] and old["architecture"] == "GPT2LMHeadModel"
    assert api.cached_checkpoints(tmp_path / "no-cache-here") == []


@pytest.fixture(scope="module")
def imported_seq2seq_and_two_stream(lab_home_dir, tmp_path_factory):
    """An imported T5, MPNet and XLNet in the session's lab home, filed under the synthetic corpus."""
    from tests.support.interop import save_tiny_checkpoint

    root = tmp_path_factory.mktemp("hf")
    return {family: api.import_hf(save_tiny_checkpoint(family, root / family), corpus="synthetic", home=lab_home_dir)
            for family in ("t5", "mpnet", "xlnet")}


@pytest.mark.slow
def test_imported_t5_mpnet_and_xlnet_in_the_understand_probes_and_on_the_leaderboard(imported_seq2seq_and_two_stream,
                                                                                    lab_home_dir):
    runs = imported_seq2seq_and_two_stream
    streams = {"t5": {"encoder", "decoder", "cross"}, "mpnet": {"content", "query"}, "xlnet": {"content", "query"}}
    for family, run_dir in runs.items():
        maps = api.attention_maps(run_dir, "the cat sat on the mat .")
        assert set(maps.streams) == streams[family] and maps.check_error < 1e-4
        assert len(api.fill_mask(run_dir, "the cat [MASK] on the mat .")[0]) == 5
    frame = api.contextual_similarity(list(runs.values()), "the cat sat .", "a cat ran .", "cat")
    assert set(frame["family"]) == set(runs)
    board = api.leaderboard(home=lab_home_dir, corpus="synthetic", max_examples=3)
    rows = board[board["run_id"].isin([run.name for run in runs.values()])].set_index("family")
    assert set(rows.index) == set(runs) and (rows["preset"] == "imported").all()
    assert (rows["fill_mask_examples"] >= 1).all() and rows.loc["t5", "infill_examples"] >= 1
