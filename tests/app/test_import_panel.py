"""The Train tab's "Import a checkpoint" section, driven through `gradio_client`: Look describes a folder, Import
makes a run that the runs list and Compare then show, and bad folders come back as messages, not crashes; the
Hugging Face cache is listed and a listed checkpoint imports by its id; the Export button writes a folder and a zip
that transformers loads."""
from __future__ import annotations

import json
import zipfile

import pytest
import torch

transformers = pytest.importorskip("transformers")

from app.i18n.language import reading_language  # noqa: E402
from app.train.export_panel import ExportView  # noqa: E402
from tests.support.interop import byte_bpe, perturb, save_hf  # noqa: E402

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tokenizer = byte_bpe([EOT])
    config = transformers.GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_embd=16, n_layer=2, n_head=2,
                                     n_positions=32)
    torch.manual_seed(0)
    return save_hf(perturb(transformers.GPT2LMHeadModel(config)), tokenizer, tmp_path_factory.mktemp("hf") / "gpt2",
                   eos_token=EOT, bos_token=EOT)


def test_look_lists_what_the_folder_holds(client, checkpoint):
    summary, files = client.predict(str(checkpoint), "", False, api_name="/import_checkpoint_look")
    assert "GPT2LMHeadModel" in summary and "gpt2" in summary and "byte_bpe" in summary
    assert "model.safetensors" in [row[0] for row in files["data"]]


def test_import_makes_a_run_that_the_other_tabs_list(client, checkpoint, lab_home_dir):
    result = client.predict(str(checkpoint), "", False, "synthetic", api_name="/import_checkpoint")
    run_id = result.split("**")[1]
    assert run_id.startswith("gpt2-imported-") and (lab_home_dir / "runs" / run_id / "model.safetensors").is_file()
    table = client.predict([], "loss", api_name="/list_runs")[0]
    assert run_id in [row[0] for row in table["data"]]
    html, raw = client.predict([run_id], "the cat sat", "auto", "greedy", 1.0, 0, 1.0, 4, 5, 0, 10, 0,
                               api_name="/compare_generate")
    assert raw[0]["supported"] and raw[0]["run_id"] == run_id and len(raw[0]["tokens"]) >= 1  # Compare finds it


@pytest.mark.parametrize("folder, message", [("", "Type the path"), ("/no/such/folder", "does not exist")])
def test_bad_folders_are_messages(client, folder, message):
    with pytest.raises(Exception, match=message):
        client.predict(folder, "", False, api_name="/import_checkpoint_look")


# ---- the Hugging Face cache, one-click import, export -------------------------------------------------------------

@pytest.fixture
def hf_cache(checkpoint, tmp_path, monkeypatch):
    """A Hugging Face cache holding the tiny GPT-2 as `lab-tests/tiny-gpt2` and a checkpoint the lab cannot import,
    named through HF_HUB_CACHE as a user's environment names it."""
    from tests.support.interop import place_in_hf_cache

    cache = tmp_path / "hf-cache"
    place_in_hf_cache(checkpoint, cache, "lab-tests/tiny-gpt2")
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text('{"model_type": "llama", "architectures": ["LlamaForCausalLM"]}')
    (llama / "model.safetensors").write_bytes((checkpoint / "model.safetensors").read_bytes())
    place_in_hf_cache(llama, cache, "someone/llama-tiny")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_the_cache_is_listed_and_a_listed_checkpoint_imports_by_its_id(client, hf_cache, lab_home_dir):
    table, note = client.predict(api_name="/cached_checkpoints")  # (the rows behind it stay in the page's state)
    listed = {row[0]: row for row in table["data"]}
    assert set(listed) == {"lab-tests/tiny-gpt2", "someone/llama-tiny"} and str(hf_cache) in note
    assert listed["lab-tests/tiny-gpt2"][1:3] == ["GPT2LMHeadModel", "gpt2"] and "Import" in listed[
        "lab-tests/tiny-gpt2"][5]
    assert "not importable" in listed["someone/llama-tiny"][5] and "llama" in listed["someone/llama-tiny"][5]
    result = client.predict("lab-tests/tiny-gpt2", "synthetic", api_name="/import_cached_checkpoint")
    run_id = result.split("**")[1]
    config = json.loads((lab_home_dir / "runs" / run_id / "config.json").read_text())
    assert config["imported_from"]["path"].startswith(str(hf_cache)) and config["framing"]["single"] == [["$A", 0]]
    with pytest.raises(Exception, match="cannot be imported"):
        client.predict("someone/llama-tiny", "synthetic", api_name="/import_cached_checkpoint")
    with pytest.raises(Exception, match="holds no model"):
        client.predict("nobody/nothing", "", api_name="/import_cached_checkpoint")


def test_an_empty_cache_says_where_it_looked(client, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "nothing-here"))
    table, note = client.predict(api_name="/cached_checkpoints")
    assert table["data"] in ([], [[""] * 6]) and "No model checkpoint" in note and "nothing-here" in note


def test_the_export_button_writes_a_folder_and_a_zip_that_transformers_loads(client, checkpoint, lab_home_dir,
                                                                             tmp_path):
    result = client.predict(str(checkpoint), "", False, "synthetic", api_name="/import_checkpoint")
    run_id = result.split("**")[1]
    assert client.predict(run_id, api_name="/export_visibility") == ""  # the button's row shows, with no note
    with reading_language("en"):
        assert ExportView(lab_home_dir, None).visibility(run_id)[0]["visible"] is True
    archive, note = client.predict(run_id, api_name="/export_run")
    folder = next((lab_home_dir / "exports").glob(f"{run_id}-transformers-*"))
    assert str(folder) in note and zipfile.is_zipfile(archive)
    names = zipfile.ZipFile(archive).namelist()
    assert {f"{folder.name}/config.json", f"{folder.name}/model.safetensors", f"{folder.name}/tokenizer.json"} <= \
        set(names)
    zipfile.ZipFile(archive).extractall(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / folder.name).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        original = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()(ids).logits
        assert (model(ids).logits - original).abs().max() < 1e-4


def test_a_run_without_a_transformers_class_shows_no_export_button_and_says_why(client, lab_home_dir):
    from tests.support.interop import write_lab_run

    run_dir = write_lab_run(lab_home_dir / "runs" / "spanbert-no-export", "spanbert", "wordpiece")
    assert "SpanBERT" in client.predict(run_dir.name, api_name="/export_visibility")
    with reading_language("en"):
        assert ExportView(lab_home_dir, None).visibility(run_dir.name)[0]["visible"] is False
    with pytest.raises(Exception, match="SpanBERT"):
        client.predict(run_dir.name, api_name="/export_run")
