"""The RNN-era families train from the CLI into normal run folders: config.json, metrics.jsonl, status.json, a
checkpoint, safetensors weights, bits per byte; the loss falls; ULMFiT's rows carry their stage and every layer
group's learning rate; CVT's rows carry its labelled and unlabelled losses, alternating. One tiny run per family,
shared by the tests (module-scoped)."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from lab_models.training import run as train
from lab_models.training.cli import build_parser, config_from_args
from lab_models.inference.loading import load_run
from lab_models.models.rnn.layers import discriminative_lrs, slanted_triangular_lr

STEPS = 40
COMMON = ["--preset", "tiny", "--steps", str(STEPS), "--batch-size", "8", "--seq-len", "32", "--lr", "3e-3",
          "--eval-every", "20", "--checkpoint-every", "20", "--device", "cpu", "--seed", "0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, lab_home_dir):
    root = tmp_path_factory.mktemp("rnn-runs")
    torch.set_num_threads(1)
    out = {}
    for family in ("elmo", "cove", "ulmfit", "cvt"):
        run_dir = root / family
        code = train.main(["--family", family, "--out", str(run_dir), *COMMON])
        assert code == 0, (run_dir / "train.log").read_text()[-3000:]
        out[family] = run_dir
    return out


def rows_of(run_dir, split="train"):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if row.get("split") == split]


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["elmo", "cove", "ulmfit", "cvt"])
def test_each_family_writes_a_normal_run_folder(runs, family):
    run_dir = runs[family]
    for name in ("config.json", "metrics.jsonl", "status.json", "model.safetensors", "tokenizer.json", "train.log"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "checkpoint").is_dir()
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == STEPS
    config = json.loads((run_dir / "config.json").read_text())
    assert config["family"] == family and config["model"]["kind"] == "rnn"
    assert config["d_model"] == 128 and config["n_heads"] == 0 and config["d_ff"] == 0
    assert config["n_layers"] == (3 if family == "ulmfit" else 2) and config["vocab_size"] > 0
    assert config["seq_len"] == 32 and config["batch_size"] == 8
    train_rows = rows_of(run_dir)
    assert [row["step"] for row in train_rows] == list(range(1, STEPS + 1))
    assert all(row["tokens_per_s"] > 0 and row["lr"] > 0 for row in train_rows)
    assert load_file(run_dir / "model.safetensors")  # weights, not a pickle
    run = load_run(run_dir)  # rebuilt from config.json and loaded strictly
    assert run.family == family and run.model.model_config.hidden_size == 128


@pytest.mark.slow
@pytest.mark.parametrize("family, objective", [("elmo", "forward_lm"), ("elmo", "backward_lm"), ("cove", "nmt"),
                                               ("ulmfit", "lm"), ("cvt", "labelled")])
def test_the_loss_falls(runs, family, objective):
    train_rows = rows_of(runs[family])
    values = [row["losses"].get(objective) for row in train_rows]
    values = [v for v in values if v is not None]
    assert all(math.isfinite(v) for v in values)
    assert mean(values[-4:]) < mean(values[:4]) - 0.1, values


@pytest.mark.slow
def test_bits_per_byte_for_the_token_predictors(runs):
    for family in ("elmo", "cove", "ulmfit"):
        val = rows_of(runs[family], "val")
        assert [row["step"] for row in val] == [20, 40]
        assert val[-1]["bits_per_byte"] > 0 and val[-1]["bits_per_byte"] < val[0]["bits_per_byte"] + 0.05
    assert rows_of(runs["elmo"], "val")[-1]["perplexity"] > 1  # a language model: perplexity is reported
    cvt_val = rows_of(runs["cvt"], "val")[-1]
    assert cvt_val["bits_per_byte"] is None and set(cvt_val["losses"]) == {"labelled", "unlabelled"}


@pytest.mark.slow
def test_ulmfit_rows_record_stage_and_the_rate_of_every_layer_group(runs):
    rows = rows_of(runs["ulmfit"])
    assert [row["stage"] for row in rows] == [1] * 20 + [2] * 10 + [3] * 10
    assert rows[0]["stage_name"] == "general LM pretraining" and rows[-1]["stage_name"] == "classifier fine-tuning"
    names = ["embedding", "lstm_1", "lstm_2", "lstm_3", "head"]
    # stage 1 (20 steps, cut 2): STLR on --lr for every LM group
    for t, row in enumerate(rows[:20]):
        assert row["lr"] == pytest.approx(slanted_triangular_lr(t, 20, 3e-3))
        assert row["lrs"]["head"] == 0 and row["lrs"]["embedding"] == pytest.approx(row["lr"])
    # stage 2: discriminative, the top LM group at the STLR
    for t, row in enumerate(rows[20:30]):
        peak = slanted_triangular_lr(t, 10, 3e-3)
        assert [row["lrs"][n] for n in names[:4]] == pytest.approx(discriminative_lrs(peak, 4))
    # stage 3: gradual unfreezing, one more group every 10 // 5 = 2 steps
    assert [row["unfrozen_groups"] for row in rows[30:]] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [sum(1 for n in names if row["lrs"][n] > 0) for row in rows[30:]] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert all(set(row["losses"]) == {"lm", "classifier"} for row in rows[30:])
    assert all(row["losses"]["lm"] is None and row["losses"]["classifier"] > 0 for row in rows[30:])
    assert all(row["losses"]["lm"] > 0 for row in rows[:30])
    val = rows_of(runs["ulmfit"], "val")
    assert set(val[-1]["losses"]) == {"lm", "classifier"}
    assert val[-1]["loss"] == pytest.approx(val[-1]["losses"]["classifier"])  # the stage's objective


@pytest.mark.slow
def test_cvt_alternates_labelled_and_unlabelled_minibatches(runs):
    rows = rows_of(runs["cvt"])
    assert all(row["losses"]["labelled"] is not None and row["losses"].get("unlabelled") is None
               for row in rows[0::2])  # odd steps: labelled
    assert all(row["losses"]["labelled"] is None and row["losses"]["unlabelled"] is not None for row in rows[1::2])
    assert all(row["loss"] == pytest.approx(row["losses"]["unlabelled"]) for row in rows[1::2])


def test_bad_rnn_arguments_exit_with_one_clear_line(tmp_path, capsys, lab_home_dir):
    for argv, message in ((["--family", "ulmfit", "--set", "task=tagging"], "task must be one of sentiment"),
                          (["--family", "elmo", "--model", "d_model=64"], "unknown model setting 'd_model'"),
                          (["--family", "cvt", "--objective", "mlm=1"], "its objectives are labelled, unlabelled")):
        code = train.main(argv + ["--out", str(tmp_path / "run")])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and message in err, err


@pytest.mark.slow
def test_train_tab_figures_show_stages_group_rates_and_alternating_losses(runs):
    from app.train.figures import loss_figure, lr_figure, stage_spans

    ulmfit_rows = rows_of(runs["ulmfit"]) + rows_of(runs["ulmfit"], "val")
    assert stage_spans(rows_of(runs["ulmfit"])) == [(1, 20, "stage 1: general LM pretraining"),
                                                   (21, 30, "stage 2: LM fine-tuning"),
                                                   (31, 40, "stage 3: classifier fine-tuning")]
    schedule = lr_figure(ulmfit_rows)
    assert [trace.name for trace in schedule.data] == ["lr embedding", "lr lstm_1", "lr lstm_2", "lr lstm_3", "lr head"]
    assert schedule.layout.yaxis.type == "log" and len(schedule.layout.shapes) == 3  # one band per stage
    head = list(schedule.data[-1].y)
    assert head[:30] == [None] * 30 and all(v > 0 for v in head[30:])  # the head trains in stage 3 only
    assert len(loss_figure(ulmfit_rows).layout.shapes) == 3
    cvt = loss_figure(rows_of(runs["cvt"]))
    lines = {trace.name: trace for trace in cvt.data}
    assert {"train labelled", "train unlabelled"} <= set(lines)
    assert lines["train labelled"].connectgaps and lines["train unlabelled"].connectgaps  # alternate steps join
    assert [trace.name for trace in lr_figure(rows_of(runs["elmo"])).data] == ["learning rate"]


# ------------------------------------------------------------------------------------------------ Compare, Understand


@pytest.mark.slow
def test_compare_elmo_and_ulmfit_continue_and_cove_translates(runs):
    from lab_models import api
    from lab_models.inference.generation.generate import _generate

    for family in ("elmo", "ulmfit"):
        generation, chosen = _generate(str(runs[family]), "the cat", mode=None, max_new_tokens=5, strategy="greedy",
                                       temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=10,
                                       blank_length=None, use_cache=True)
        assert generation.supported and generation.mode == "continue" and generation.text.startswith("the cat")
        assert 1 <= len(chosen) <= 5 and "LSTM language model" in generation.explanation
        # greedy = the language model's most likely allowed token after [EOS] + the prompt
        run = load_run(runs[family])
        ids = [run.vocab.eos_id] + run.tokenizer.encode("the cat", add_special_tokens=False).ids
        model = run.model
        with torch.no_grad():
            logits = (model.forward_logits if family == "elmo" else model.next_token_logits)(torch.tensor([ids]))
        from lab_models.inference.generation.context import DecodingContext

        allowed = logits[0, -1].masked_fill(DecodingContext(run).banned, float("-inf"))
        allowed[run.vocab.eos_id] = logits[0, -1, run.vocab.eos_id]
        assert chosen[0] == int(allowed.argmax())
    translation = api.generate(str(runs["cove"]), "the cat sees a ball .", max_new_tokens=6)
    assert translation.supported and translation.mode == "translate" and "MT-LSTM" in translation.explanation
    assert api.generate(str(runs["cove"]), "the cat", strategy="beam", beam_size=3, max_new_tokens=4).supported
    tagger = api.generate(str(runs["cvt"]), "the cat")
    assert not tagger.supported and "tagger" in tagger.explanation
    assert not api.generate(str(runs["elmo"]), "the cat", mode="translate").supported


@pytest.mark.slow
def test_understand_reads_elmo_scalar_mix_and_cove_vectors(runs):
    from lab_models.inference import representations as probes

    same = probes.contextual_similarity(runs["elmo"], "the cat sees a ball .", "the cat sees a ball .", "cat")
    assert same["layer_name"].tolist() == ["token layer [x; x]", "biLSTM 1", "biLSTM 2", "ELMo (scalar mix)"]
    assert same["cosine"].tolist() == pytest.approx([1.0] * 4)
    other = probes.contextual_similarity(runs["elmo"], "the cat sees a ball .", "the cat runs .", "cat")
    assert other["cosine"][0] == pytest.approx(1.0) and other["cosine"][1] < 0.9999  # the backward LM reads ahead
    # ULMFiT reads left to right: "cat" has the same vectors whatever follows it
    left = probes.contextual_similarity(runs["ulmfit"], "the cat sees a ball .", "the cat runs .", "cat")
    assert left["layer_name"].tolist() == ["embedding", "LSTM 1", "LSTM 2", "LSTM 3"]
    assert left["cosine"].tolist() == pytest.approx([1.0] * 4, abs=1e-5)
    cove = probes.contextual_similarity(runs["cove"], "the cat sees a ball .", "a big cat runs .", "cat")
    assert cove["layer_name"].tolist() == ["embedding (GloVe's place)", "CoVe (MT-LSTM top layer)",
                                           "[embedding; CoVe]"]
    run = load_run(runs["cove"])
    encoded, layers = probes.layer_vectors(run, "the cat sees a ball .")
    assert layers[-1][1].shape == (len(encoded.ids), 64 + 2 * 128)  # [embedding; CoVe]
    projection = probes.embedding_projection(runs["elmo"], ["the cat sees a ball .", "a big cat runs ."], "cat")
    assert len(projection) == sum(len(load_run(runs["elmo"]).tokenizer.encode(s, add_special_tokens=False).ids)
                                  for s in ["the cat sees a ball .", "a big cat runs ."])
    assert projection["is_word"].sum() >= 2 and "scalar mix" in projection.attrs["view"]
    assert len(probes.embedding_projection(runs["cvt"], ["the cat sees a ball ."])) > 0
    with pytest.raises(ValueError, match="no self-attention"):
        probes.attention_maps(runs["elmo"], "the cat")


# ------------------------------------------------------------------------------------------------ fine-tuning


@pytest.mark.slow
@pytest.mark.parametrize("family, pooling", [("elmo", "mean"), ("cove", "mean"), ("ulmfit", "last"),
                                             ("cvt", "mean")])
def test_each_family_fine_tunes_on_its_representations(runs, family, pooling, tmp_path):
    """The Understand tab's fine-tuning reads `model.representations` (ELMo's scalar mix, which now trains; CoVe's
    [embedding; CoVe]; ULMFiT's top LSTM; CVT's BiLSTM) through a fresh head, with no [CLS] framing."""
    from lab_models.inference.finetuning.config import FinetuneConfig
    from lab_models.inference.finetuning.run import finetune, prepare

    config = FinetuneConfig(run_dir=str(runs[family]), task="topic", steps=4, batch_size=8, eval_every=4,
                            out=str(tmp_path / family))
    prepared = prepare(config)
    assert prepared.config.pooling == pooling and prepared.config.lm_aux_weight == 0.0
    text = prepared.task.train[0].text
    assert prepared.train[0].ids == load_run(runs[family]).tokenizer.encode(text, add_special_tokens=False).ids
    if family == "elmo":  # the scalar mix is task-specific: pretraining left it frozen, fine-tuning trains it
        assert load_run(runs[family]).model.scalar_mix.weights.requires_grad is False
        assert prepared.model.base.scalar_mix.weights.requires_grad is True
    result = finetune(config)
    assert result["state"] == "finished" and 0.0 <= result["accuracy"] <= 1.0 and result["scored"] > 0
    with pytest.raises(ValueError, match="auxiliary LM loss .* transformer families"):
        prepare(FinetuneConfig(run_dir=str(runs[family]), task="topic", steps=2, lm_aux_weight=0.5,
                               out=str(tmp_path / f"{family}-aux")))


@pytest.mark.slow
def test_elmo_representations_ignore_right_padding(runs):
    """A fine-tuning batch is right-padded: the backward LSTM must start at each row's last real token."""
    run = load_run(runs["elmo"])
    ids = torch.tensor(run.tokenizer.encode("the cat sees a ball .", add_special_tokens=False).ids)[None]  # (1, n)
    padded = torch.cat([ids, torch.full((1, 5), run.vocab.pad_id)], dim=1)  # (1, n + 5)
    with torch.no_grad():
        alone, with_padding = run.model.representations(ids), run.model.representations(padded)
    assert torch.allclose(with_padding[:, : ids.shape[1]], alone, atol=1e-6)


@pytest.mark.slow
def test_ulmfit_defaults_to_its_own_peak_learning_rate(tmp_path):
    args = build_parser().parse_args(["--family", "ulmfit", "--out", str(tmp_path / "u")])
    config, _ = config_from_args(args)
    assert config.lr == 5e-3  # ulmfit.DEFAULT_LR, not the tiny preset's 1e-3
    args = build_parser().parse_args(["--family", "ulmfit", "--out", str(tmp_path / "u"), "--lr", "1e-3"])
    assert config_from_args(args)[0].lr == 1e-3
    args = build_parser().parse_args(["--family", "elmo", "--out", str(tmp_path / "e")])
    assert config_from_args(args)[0].lr == 1e-3


@pytest.mark.slow
def test_ulmfit_classifier_head_has_batch_norm_and_takes_one_sentence(runs):
    run = load_run(runs["ulmfit"])
    model = run.model
    assert sum(isinstance(layer, torch.nn.BatchNorm1d) for layer in model.head) == 2  # the paper's two blocks
    model.train()
    try:
        logits = model.classify(torch.tensor([[5, 6, 7]]))  # one sentence: running statistics, no error
    finally:
        model.eval()
    assert logits.shape == (1, 3)
