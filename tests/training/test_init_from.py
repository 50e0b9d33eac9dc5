"""Training a real checkpoint further: `python -m lab_models train --init-from RUN`.

A random-init BERT saved by `save_pretrained` (a WordPiece tokenizer trained on the synthetic corpus, with BERT's
normaliser and its [CLS] ... [SEP] post-processor) is imported, then trained further with UniLM's objective (its loss
falls; the run records where it started, resumes like any run, and reads text with BERT's framing), turned into a
SpanBERT (its new span boundary head initialised as the released code does, the rest BERT's) and into an ELECTRA
discriminator; families whose architecture differs are refused in one line naming the option. The argument checks
run `main()` in-process, as tests/training/test_train_cli.py does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

transformers = pytest.importorskip("transformers")

from lab_models import api  # noqa: E402
from lab_models.models.family import build_model  # noqa: E402
from lab_models.objectives import objective_module  # noqa: E402
from lab_models.text.vocab import prepare_tokenizer  # noqa: E402
from lab_models.text.tokenization import load_tokenizer_file  # noqa: E402
from lab_models.training import run as train  # noqa: E402
from lab_models.training.init_from import (check_start, load_starting_weights, read_starting_point,  # noqa: E402
                                           resolve_run)
from tests.support.interop import perturb  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def synthetic_bert_tokenizer(texts):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=400, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("init-from-home")


@pytest.fixture(scope="module")
def bert_run(home, tmp_path_factory):
    """A BERT saved by save_pretrained, imported into the lab home: the run id."""
    texts = api.load_corpus("synthetic").train[:400]
    tokenizer = synthetic_bert_tokenizer(texts)
    config = transformers.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = perturb(transformers.BertForPreTraining(config), scale=0.02)
    folder = tmp_path_factory.mktemp("hf") / "bert"
    model.save_pretrained(folder)
    transformers.BertTokenizerFast(tokenizer_object=tokenizer).save_pretrained(folder)
    return api.import_hf(folder, corpus="synthetic", home=home).name


def train_main(home: Path, *argv) -> int:
    return train.main([*argv, "--home", str(home), "--device", "cpu"])


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_an_imported_bert_continues_with_unilms_objective_its_loss_falls_and_it_resumes(home, bert_run):
    out = home / "runs" / "unilm-from-bert"
    code = train_main(home, "--family", "unilm", "--init-from", bert_run, "--out", str(out), "--steps", "40",
                      "--seq-len", "32", "--batch-size", "16", "--lr", "2e-3", "--warmup-steps", "2",
                      "--eval-every", "20", "--checkpoint-every", "20")
    assert code == 0
    losses = [row["loss"] for row in metrics(out) if row.get("split") == "train"]
    assert len(losses) == 40 and sum(losses[-8:]) / 8 < sum(losses[:8]) / 8 - 0.2, losses  # from ~6.6 to ~6.3

    config = json.loads((out / "config.json").read_text())
    start = json.loads((home / "runs" / bert_run / "config.json").read_text())
    assert config["family"] == "unilm" and config["train"]["init_from"] == str(home / "runs" / bert_run)
    assert config["model"] == start["model"] and config["token_roles"] == start["token_roles"]
    assert config["framing"]["single"] == [["[CLS]", 0], ["$A", 0], ["[SEP]", 0]]  # BERT's, for inference
    facts = config["initialized_from"]
    assert (facts["run_id"], facts["family"], facts["new"], facts["dropped"]) == (bert_run, "bert", [], [])
    assert facts["loaded"] == len(load_file(home / "runs" / bert_run / "model.safetensors"))  # BERT's NSP head too
    note = (out / "NOTE.md").read_text()
    assert f"# Started from {bert_run}" in note and "BertForPreTraining imported from" in note
    assert (out / "tokenizer.json").read_text() == (home / "runs" / bert_run / "tokenizer.json").read_text()

    # resumes like any run: the checkpoint at step 40, ten more steps, no step repeated
    assert train_main(home, "--family", "unilm", "--out", str(out), "--resume", "--steps", "50") == 0
    steps = [row["step"] for row in metrics(out) if row.get("split") == "train"]
    assert steps == list(range(1, 51))
    assert json.loads((out / "config.json").read_text())["initialized_from"] == facts
    fill = api.fill_mask(out, "the small cat [MASK] a red ball .")
    assert len(fill[0]) == 5  # read as BERT's tokenizer frames it: [CLS] ... [SEP]


def built(start, family: str, seed: int = 0):
    """The new family's model on the starting run's model and tokenizer, as the trainer builds it, then loaded."""
    settings = objective_module(family).Settings()
    config = check_start(start, family, settings, {})
    tokenizer, vocab = prepare_tokenizer(load_tokenizer_file(start.run_dir / "tokenizer.json"), start.token_roles)
    model = build_model(family, config, settings, vocab, None, seed=seed)
    return model, load_starting_weights(model, start)


def test_spanbert_from_bert_gets_a_new_boundary_head_initialised_as_the_released_code(home, bert_run):
    start = read_starting_point(bert_run, home)
    bert = load_file(start.weights)
    model, done = built(start, "spanbert")
    state = model.state_dict()
    assert all(torch.equal(state[name], bert[name]) for name in done.loaded) and len(done.loaded) > 30
    assert {name.split(".")[1] for name in done.new} == {"sbo"} and {n.split(".")[1] for n in done.dropped} == {"nsp"}
    head = model.heads["sbo"]
    for layer in (head.boundary.dense1, head.boundary.dense2):  # BERT's init: N(0, 0.02), zero bias
        assert abs(float(layer.weight.std()) - 0.02) < 0.004 and float(layer.bias.abs().max()) == 0.0
    for norm in (head.boundary.ln1, head.boundary.ln2):
        assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and float(norm.bias.abs().max()) == 0.0
    assert float(head.bias.abs().max()) == 0.0  # the SBO output bias starts at zero
    assert torch.equal(model.backbone.output_weight, bert["backbone.embeddings.token.weight"])  # tied, BERT's rows


@pytest.mark.slow  # trains through the CLI
def test_an_electra_discriminator_from_bert(home, bert_run):
    start = read_starting_point(bert_run, home)
    bert = load_file(start.weights)
    model, done = built(start, "electra")
    groups = {name.split(".")[0] if not name.startswith("heads") else ".".join(name.split(".")[:2])
              for name in done.new}
    assert groups == {"generator", "heads.rtd"}  # BERT's encoder is the discriminator; generator and head are new
    assert all(torch.equal(model.state_dict()[name], bert[name]) for name in bert if name.startswith("backbone."))
    # the generator reads the discriminator's (BERT's) embeddings, shared
    assert model.generator.embeddings.token.weight is model.backbone.embeddings.token.weight
    out = home / "runs" / "electra-from-bert"
    assert train_main(home, "--family", "electra", "--init-from", bert_run, "--out", str(out), "--steps", "2",
                      "--seq-len", "32", "--batch-size", "4") == 0
    assert json.loads((out / "config.json").read_text())["initialized_from"]["new"] == ["generator.*", "heads.rtd.*"]


@pytest.mark.parametrize("argv, message", [
    (["--family", "xlnet"], "xlnet needs query_stream='learned', but the starting run's model has query_stream=None"),
    (["--family", "t5"], "t5 needs an encoder-decoder (decoder_layers > 0)"),
    (["--family", "glm"], "glm needs n_position_rows=2"),
    (["--family", "elmo"], "elmo is an LSTM family of the RNN era"),
    (["--family", "unilm", "--set", "lm_segment_ids=true"], "writes segment ids 0..5, but the starting run's model has "
                                                            "n_segments=2"),
    (["--family", "bert", "--model", "d_model=64"], "--model d_model=... would change the architecture"),
    (["--family", "bert", "--tokenizer", "wordpiece"], "brings its own tokenizer: drop --tokenizer"),
    (["--family", "bert", "--seq-len", "100"], "longer than the starting run's 64 positions"),
])
def test_a_family_or_option_that_does_not_match_exits_2_with_one_line(home, bert_run, tmp_path, capsys, argv,
                                                                       message):
    code = train_main(home, *argv, "--init-from", bert_run, "--out", str(tmp_path / "run"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "run").exists()


def test_runs_named_by_id_or_folder_and_what_is_not_a_run(home, bert_run, tmp_path):
    assert resolve_run(bert_run, home) == resolve_run(home / "runs" / bert_run, home)
    for value, message in (("", "needs a run"), ("../etc", "no such run folder"), ("nope", "no such run folder")):
        with pytest.raises(ValueError, match=message):
            resolve_run(value, home)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a run folder"):
        read_starting_point(tmp_path / "empty", home)


def test_the_api_and_the_command_it_shows(home, bert_run):
    jobs = api.create_job_manager(home)
    try:
        command = api.training_command(jobs, "spanbert", init_from=bert_run)
        assert command.startswith("python -m lab_models train --family spanbert") and \
            command.endswith(f"--init-from {bert_run}")
        with pytest.raises(ValueError, match="query_stream"):
            api.training_command(jobs, "mpnet", init_from=bert_run)
        with pytest.raises(ValueError, match="uses that run's tokenizer"):
            api.training_command(jobs, "bert", init_from=bert_run, tokenizer="wordpiece")
    finally:
        jobs.close()
