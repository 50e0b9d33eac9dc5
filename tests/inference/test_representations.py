"""lab_models/inference/representations.py through `lab_models.api`: attention maps under the masks the models really
use (rows sum to 1 over the allowed keys, exactly 0 where the mask forbids, the recomputation reproduces the modules' outputs and the
eager path's weights), contextual similarity per layer, the PCA projection, and the error messages.

Tiny runs of gpt, bert, xlnet and t5 are trained once per test session by the CLI, in parallel, into the session's lab
home (tests/support/tiny_runs.py; tests/app/test_understand_tab.py uses the same runs through the app).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from lab_models import api
from lab_models.inference import representations as probes
from lab_models.inference.loading import load_run
from lab_models.nn.config import ModelConfig
from lab_models.nn.attention import MultiHeadAttention, add_position_bias, prepare_mask
from tests.support.tiny_runs import FAMILIES, OTHER, SENTENCE, train_tiny_runs

@pytest.fixture(scope="module")
def runs(lab_home_dir) -> dict[str, Path]:
    return train_tiny_runs(lab_home_dir)


def rows_sum_to_one_where_allowed(weights: torch.Tensor, mask: torch.Tensor) -> None:
    """Every row with an allowed key sums to 1, every row without one is all 0, and forbidden cells are exactly 0."""
    assert weights.shape[-2:] == mask.shape
    assert torch.all(weights[..., ~mask] == 0)  # exactly 0, not just small
    sums = weights.sum(-1)  # (L, nh, Tq)
    has_keys = mask.any(-1)  # (Tq,)
    assert torch.allclose(sums[..., has_keys], torch.ones_like(sums[..., has_keys]), atol=1e-5)
    assert torch.all(sums[..., ~has_keys] == 0)


# ------------------------------------------------------------------------------------------------ attention maps
@pytest.mark.slow
def test_gpt_attention_is_causal_and_matches_the_eager_path(runs):
    maps = api.attention_maps(runs["gpt"], SENTENCE)
    assert isinstance(maps, api.AttentionMaps) and maps.family == "gpt" and list(maps.streams) == ["self"]
    weights, mask = maps.weights["self"], maps.masks["self"]
    n = len(maps.tokens)
    run = load_run(runs["gpt"])
    assert weights.shape == (run.model_config.n_layers, run.model_config.n_heads, n, n)
    assert torch.equal(mask, torch.ones(n, n, dtype=torch.bool).tril())
    assert torch.all(weights.triu(diagonal=1) == 0)  # the upper triangle: exactly zero
    rows_sum_to_one_where_allowed(weights, mask)
    assert maps.check_error < 1e-5  # probabilities @ v through the output projection = what the module returned
    assert maps.streams["self"] == (maps.tokens, maps.tokens)

    ids = torch.tensor([run.tokenizer.encode(SENTENCE, add_special_tokens=False).ids])
    with torch.no_grad():  # the backbone's own eager path with return_attention
        _, eager = run.model.backbone(ids, mask.unsqueeze(0), torch.arange(n).unsqueeze(0), return_attention=True)
    assert torch.allclose(torch.stack([w[0] for w in eager]), weights, atol=1e-6)


@pytest.mark.slow
def test_bert_attention_is_full_and_matches_the_eager_path(runs):
    maps = api.attention_maps(runs["bert"], SENTENCE)
    weights, mask = maps.weights["self"], maps.masks["self"]
    assert mask.all() and torch.all(weights > 0)
    rows_sum_to_one_where_allowed(weights, mask)
    assert maps.check_error < 1e-5
    run = load_run(runs["bert"])
    n = len(maps.tokens)
    ids = torch.tensor([run.tokenizer.encode(SENTENCE, add_special_tokens=False).ids])
    with torch.no_grad():
        _, eager = run.model.backbone(ids, mask.unsqueeze(0), torch.arange(n).unsqueeze(0), return_attention=True)
    assert torch.allclose(torch.stack([w[0] for w in eager]), weights, atol=1e-6)


@pytest.mark.slow
def test_xlnet_query_stream_never_attends_its_own_content(runs):
    maps = api.attention_maps(runs["xlnet"], SENTENCE)
    assert list(maps.streams) == ["content", "query"]
    n = len(maps.tokens)
    content, query = maps.weights["content"], maps.weights["query"]
    assert content.shape[-2:] == (n, n) and query.shape[-2:] == (n, n)
    lower = torch.ones(n, n, dtype=torch.bool).tril()
    assert torch.equal(maps.masks["content"], lower)  # left-to-right order: content i sees 0..i
    assert torch.equal(maps.masks["query"], lower.tril(diagonal=-1))  # query i sees 0..i-1
    assert torch.all(query.diagonal(dim1=-2, dim2=-1) == 0)  # never its own token
    assert torch.all(query[..., 0, :] == 0)  # the first query row may attend nothing
    rows_sum_to_one_where_allowed(content, maps.masks["content"])
    rows_sum_to_one_where_allowed(query, maps.masks["query"])
    assert maps.check_error < 1e-5
    rows, cols = maps.streams["query"]
    assert len(rows) == n and cols == maps.tokens and rows[3] == f"q·{maps.tokens[3]}"
    assert "left-to-right" in maps.note


@pytest.mark.slow
def test_t5_attention_has_encoder_decoder_and_cross_streams(runs):
    maps = api.attention_maps(runs["t5"], SENTENCE)
    assert list(maps.streams) == ["encoder", "decoder", "cross"]
    n = len(maps.tokens)
    run = load_run(runs["t5"])
    for stream in maps.streams:
        assert maps.weights[stream].shape == (run.model_config.n_layers, run.model_config.n_heads, n, n)
        rows_sum_to_one_where_allowed(maps.weights[stream], maps.masks[stream])
    assert maps.masks["encoder"].all() and maps.masks["cross"].all()
    assert torch.equal(maps.masks["decoder"], torch.ones(n, n, dtype=torch.bool).tril())
    decoder_rows, _ = maps.streams["decoder"]
    assert decoder_rows == ["[PAD]"] + maps.tokens[:-1]  # the sentence shifted right behind T5's start token
    assert maps.streams["cross"] == (decoder_rows, maps.tokens)
    assert maps.check_error < 1e-5


@pytest.mark.parametrize("t5_like", [False, True], ids=["bert-like", "t5-like"])
def test_recomputed_attention_reproduces_the_module_with_an_empty_row(t5_like):
    """recompute_attention against softmax(q.k * scale + bias) written out here and against the module's SDPA output,
    on random weights, a random mask with an empty row, and a separate context (cross / two-stream attention); the
    T5-like module has 3-wide heads (n_heads * d_head != d_model), no biases, no 1/sqrt(d) and a position bias."""
    torch.manual_seed(0)
    options = dict(d_head=3, linear_bias=False, attention_scale=False) if t5_like else {}
    config = ModelConfig(vocab_size=10, d_model=16, n_layers=1, n_heads=4, d_ff=32, max_positions=16, **options)
    module = MultiHeadAttention(config).eval()
    x, context = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = torch.rand(2, 5, 7) > 0.4
    mask[:, :, 0] = True
    mask[1, 2] = False  # a row that may attend nothing
    prepared = prepare_mask(mask)
    bias = torch.randn(1, 4, 5, 7) if t5_like else torch.zeros(1, 4, 5, 7)
    if t5_like:
        prepared = add_position_bias(prepared, bias)
    probs, y, allowed = probes.recompute_attention(module, x, prepared, context)
    with torch.no_grad():
        A = config.attention_width
        w_q, w_k, w_v = module.qkv.weight.split(A)
        b_q, b_k, b_v = module.qkv.bias.split(A) if module.qkv.bias is not None else (0, 0, 0)
        q = (x @ w_q.T + b_q).view(2, 5, 4, -1).transpose(1, 2)  # (B, nh, Tq, hs)
        k = (context @ w_k.T + b_k).view(2, 7, 4, -1).transpose(1, 2)
        v = (context @ w_v.T + b_v).view(2, 7, 4, -1).transpose(1, 2)
        scale = 1.0 if t5_like else config.head_size ** -0.5
        scores = (q @ k.transpose(-1, -2) * scale + bias).masked_fill(~prepared.allowed, float("-inf"))
        by_hand = scores.softmax(-1).masked_fill(prepared.empty_rows.unsqueeze(1), 0.0)
        y_sdpa = module(x, prepared, context=context)  # the module's own (SDPA) path
    assert torch.allclose(probs, by_hand, atol=1e-6) and torch.allclose(y, y_sdpa, atol=1e-5)
    assert torch.all(probs[1, :, 2] == 0) and torch.all(y[1, 2] == 0)
    assert torch.equal(allowed, mask)


# ------------------------------------------------------------------------------------------------ embeddings
@pytest.mark.slow
def test_a_word_with_itself_is_one_at_every_layer(runs):
    frame = api.contextual_similarity([runs["gpt"], runs["bert"], runs["xlnet"], runs["t5"]], SENTENCE, SENTENCE,
                                      "apple")
    assert list(frame.columns) == probes.SIMILARITY_COLUMNS
    assert list(frame["family"].unique()) == list(FAMILIES)
    for family in FAMILIES:
        rows = frame[frame["family"] == family]
        assert list(rows["layer"]) == list(range(load_run(runs[family]).model_config.n_layers + 1))
        assert rows["layer_name"].iloc[0] == "embeddings" and rows["layer_name"].iloc[-1] == "block 2"
    assert (frame["cosine"] - 1).abs().max() < 1e-5


@pytest.mark.slow
def test_the_word_in_two_contexts_differs_and_the_pieces_are_named(runs):
    frame = api.contextual_similarity(runs["bert"], SENTENCE, "She works at Apple in the city.", "APPLE")
    assert len(frame) == 3 and frame["run"].eq(runs["bert"].name).all()
    assert (frame["cosine"] < 1 - 1e-4).all() and (frame["cosine"] >= -1).all()
    assert frame["pieces_a"].iloc[0].replace(" ", "") == "apple"  # the pieces' text, joined by spaces
    assert frame["pieces_b"].iloc[0]  # whatever the tokenizer made of "Apple" ([UNK] for a tiny vocabulary)


@pytest.mark.slow
def test_hidden_states_come_from_the_real_forward_pass(runs):
    """Layer 0 is the embedding output, the last layer the backbone's own output, with the family's mask."""
    run = load_run(runs["gpt"])
    encoded, states = probes.hidden_states(run, SENTENCE)
    n = len(encoded.ids)
    ids, positions = torch.tensor([encoded.ids]), torch.arange(n).unsqueeze(0)
    with torch.no_grad():
        embedded = run.model.backbone.embeddings(run.model.backbone.embeddings.token(ids), positions.unsqueeze(1),
                                                 None)
        final = run.model.backbone(ids, torch.ones(1, n, n, dtype=torch.bool).tril(), positions)
    assert states.shape == (run.model_config.n_layers + 1, n, run.model_config.d_model)
    assert torch.allclose(states[0], embedded[0], atol=1e-6) and torch.allclose(states[-1], final[0], atol=1e-6)
    # causal: the first token's vector does not depend on what follows
    _, shorter = probes.hidden_states(run, "the girl")
    assert torch.allclose(shorter[:, 0], states[:, 0], atol=1e-5)


@pytest.mark.slow
def test_pca_projection_has_one_row_per_token(runs):
    frame = api.embedding_projection(runs["t5"], [SENTENCE, OTHER], word="apple")
    run = load_run(runs["t5"])
    counts = [len(run.tokenizer.encode(s, add_special_tokens=False).ids) for s in (SENTENCE, OTHER)]
    assert list(frame.columns) == probes.PROJECTION_COLUMNS
    assert len(frame) == sum(counts)
    assert frame.groupby("sentence").size().tolist() == counts
    assert frame["is_word"].groupby(frame["sentence"]).any().tolist() == [True, True]
    variance = frame.attrs["explained_variance"]
    assert variance[0] >= variance[1] > 0 and sum(variance) <= 1 + 1e-9
    assert abs(frame["x"].mean()) < 1e-4 and abs(frame["y"].mean()) < 1e-4  # centred
    assert "encoder" in frame.attrs["view"]
    # text with one sentence per line gives the same result
    again = api.embedding_projection(runs["t5"], f"{SENTENCE}\n\n{OTHER}\n", word="apple")
    assert again[["x", "y"]].equals(frame[["x", "y"]])


def test_pca_of_points_on_a_line():
    coords, explained = probes._pca_2d(torch.tensor([[0.0, 0.0], [1.0, 2.0], [2.0, 4.0]]))
    assert torch.allclose(coords[:, 1], torch.zeros(3), atol=1e-6)
    assert explained[0] == pytest.approx(1.0) and explained[1] == pytest.approx(0.0, abs=1e-9)
    assert coords[2, 0] > 0  # the sign is fixed: the largest loading is positive
    single, _ = probes._pca_2d(torch.ones(1, 4))
    assert torch.equal(single, torch.zeros(1, 2))


# ------------------------------------------------------------------------------------------------ bad inputs
@pytest.mark.slow
@pytest.mark.parametrize("call, message", [
    (lambda r: api.attention_maps(r["gpt"], "   "), "it is empty"),
    (lambda r: api.attention_maps(r["gpt"], "the cat . " * 60), "the limit is 64 tokens"),
    (lambda r: api.contextual_similarity([r["gpt"]], SENTENCE, "the cat sees a ball .", "apple"),
     "does not occur in sentence B"),
    (lambda r: api.contextual_similarity([r["gpt"]], SENTENCE, OTHER, "  "), "the word"),
    (lambda r: api.contextual_similarity([r["gpt"]], "", OTHER, "apple"), "sentence A"),
    (lambda r: api.contextual_similarity([], SENTENCE, OTHER, "apple"), "Pick at least one run"),
    (lambda r: api.embedding_projection(r["bert"], []), "at least one sentence"),
    (lambda r: api.embedding_projection(r["bert"], ["x"] * 9), "at most 8"),
    (lambda r: api.attention_maps(None, SENTENCE), "Choose a run first"),
    (lambda r: api.attention_maps(r["gpt"].parent / "no-such-run", SENTENCE), "no run folder"),
])
def test_bad_inputs_raise_value_errors_with_their_messages(runs, call, message):
    with pytest.raises(ValueError, match=message):
        call(runs)


@pytest.mark.slow
def test_a_run_without_weights_says_so(runs, tmp_path):
    empty = tmp_path / "gpt-tiny-no-weights"
    empty.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(runs["gpt"] / name, empty / name)
    (empty / "status.json").write_text(json.dumps({"state": "queued", "step": 0}))
    with pytest.raises(ValueError, match="has no weights yet"):
        api.attention_maps(empty, SENTENCE)
    with pytest.raises(ValueError, match="has no weights yet"):
        api.contextual_similarity([runs["gpt"], empty], SENTENCE, OTHER, "apple")


@pytest.mark.slow
def test_runs_with_weights_lists_the_trained_runs(runs, lab_home_dir):
    listed = {row["run_id"]: row for row in api.runs_with_weights(home=lab_home_dir)}
    for family, run_dir in runs.items():
        assert listed[run_dir.name]["family"] == family and listed[run_dir.name]["weights_step"] == 30
