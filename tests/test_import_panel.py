"""The Train tab's "Import a checkpoint" section, driven through `gradio_client`: Look describes a folder, Import
makes a run that the runs list and Compare then show, and bad folders come back as messages, not crashes."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.interop_support import byte_bpe, perturb, save_hf  # noqa: E402

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
