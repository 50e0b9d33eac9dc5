"""Numerical parity of the lab's XLNet with transformers' `XLNetLMHeadModel`, through lab_models/interop/xlnet.py.

A small random XLNet of transformers (every weight perturbed, so that LayerNorms and biases are not 1 and 0) is
imported and compared in fp32: (a) one stream without perm_mask or target_mapping, with two segments and padding;
(b) the query stream at the target rows, under the perm_mask and target_mapping equivalent to the lab's own
factorization-order batches; then a lab-built XLNet is exported, loaded by transformers (`from_pretrained` on the
written folder) and gives the same logits; import(export(model)) is the model again; what cannot be represented is
refused with a ValueError. Nothing is downloaded.

Through the framework: an XLNet saved with xlnet-base's token layout and XLNetTokenizerFast goes through api.import_hf
(roles, logits, greedy continuation and fill-mask against transformers' perm_mask/target_mapping computation) and
api.export_hf (the import and a lab run, loaded by AutoModelForCausalLM and AutoTokenizer).
"""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

transformers = pytest.importorskip("transformers")

from lab_models.batch import IGNORE_INDEX  # noqa: E402
from lab_models.interop import xlnet as interop  # noqa: E402
from lab_models.models.family import build_model, family_model_config  # noqa: E402
from lab_models.objectives import xlnet  # noqa: E402
from lab_models import api  # noqa: E402
from lab_models.inference.generation import generate as gen  # noqa: E402
from lab_models.inference.generation.context import DecodingContext  # noqa: E402
from lab_models.objectives.common import BatchConfig
from lab_models.text.vocab import VocabInfo  # noqa: E402
from tests.support.interop import (assert_close, display, lab_run, masked_ids, read_json,  # noqa: E402
                                   reference_top_k, write_lab_run, xlnet_sentencepiece)

V = 96
VOCAB = VocabInfo(size=V, pad_id=5, mask_id=6, cls_id=3, sep_id=4, bos_id=1, eos_id=2, start_id=7, end_id=8,
                  sentinel_ids=(9, 10), random_ids=tuple(range(16, V)))
ATOL = 1e-4  # the bar for fp32 logits


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def perturb(model: torch.nn.Module, seed: int, scale: float = 0.1) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))


def hf_model(**overrides):
    torch.manual_seed(0)
    config = transformers.XLNetConfig(vocab_size=V, d_model=64, n_layer=2, n_head=4, d_inner=128, **overrides)
    model = transformers.XLNetLMHeadModel(config).eval()
    perturb(model, seed=1)
    return model


def imported(hf):
    config, settings, weights = interop.import_config(hf.config.to_dict())
    model = build_model("xlnet", config, xlnet.Settings(**settings), VOCAB, weights, seed=2).eval()
    model.load_state_dict(interop.import_state(hf.config.to_dict(), hf.state_dict(), model), strict=True)
    return model


def token_ids(B: int, T: int, seed: int = 3) -> torch.Tensor:
    return torch.randint(16, V, (B, T), generator=torch.Generator().manual_seed(seed))


def plm_batch(seed: int = 4, lengths=(12, 9)):
    """The lab's own XLNet batch (random factorization orders, the last n/K of each predicted; padded)."""
    rows = [token_ids(1, n, seed=seed + i)[0] for i, n in enumerate(lengths)]
    return xlnet.make_batch(rows, torch.Generator().manual_seed(seed), BatchConfig(xlnet.Settings(k=3), VOCAB))


def hf_query_logits(hf, batch) -> torch.Tensor:
    """transformers' query-stream logits at the lab batch's targets, row-major like `target_logits`: perm_mask = NOT
    the lab's query mask (transformers' content stream adds the diagonal back: the lab's content mask), and one
    target_mapping row per target position."""
    is_target = batch.targets != IGNORE_INDEX  # (B, T)
    B, T = is_target.shape
    P = int(is_target.sum(1).max())
    mapping = torch.zeros(B, P, T)
    for b in range(B):
        where = is_target[b].nonzero().flatten()
        mapping[b, torch.arange(len(where)), where] = 1.0
    assert torch.equal(batch.attention["content"], batch.attention["query"] | torch.eye(T, dtype=torch.bool))
    with torch.no_grad():
        logits = hf(batch.input_ids, perm_mask=(~batch.attention["query"]).float(), target_mapping=mapping,
                    token_type_ids=batch.segment_ids).logits  # (B, P, V)
    return torch.cat([logits[b, : int(is_target[b].sum())] for b in range(B)])


# ---- import: parity -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, segmented", [({}, False), (dict(clamp_len=3, ff_activation="gelu_new"), True)])
def test_one_stream_logits_match_transformers(overrides, segmented):
    hf = hf_model(**overrides)
    model = imported(hf)
    B, T = 2, 10
    x = token_ids(B, T)
    real = torch.ones(B, T, dtype=torch.bool)
    real[1, 7:] = False  # the second row is padded
    segments = torch.tensor([[0] * 4 + [1] * 5 + [2], [0] * 3 + [1] * 4 + [0] * 3]) if segmented else None
    with torch.no_grad():
        expected = hf(x, attention_mask=real.float(), token_type_ids=segments).logits  # (B, T, V)
        mask = real.unsqueeze(1).expand(B, T, T) | torch.eye(T, dtype=torch.bool)  # padded rows attend themselves
        hidden = model.backbone(x, mask, torch.arange(T).expand(B, T), segments)
        ours = model.backbone.lm_logits(hidden)
    assert (ours[real] - expected[real]).abs().max() <= ATOL
    assert torch.equal(ours[real].topk(5).indices, expected[real].topk(5).indices)


@pytest.mark.parametrize("segmented", [False, True])
def test_query_stream_logits_at_the_targets_match_transformers(segmented):
    hf = hf_model()
    model = imported(hf)
    batch = plm_batch()
    if segmented:
        batch.segment_ids = (torch.arange(batch.input_ids.shape[1]) >= 5).long().expand_as(batch.input_ids).clone()
    with torch.no_grad():
        ours = model.target_logits(batch)  # (N, V): the query stream at every target, row-major
    expected = hf_query_logits(hf, batch)
    assert ours.shape == expected.shape and ours.shape[0] >= 6
    assert (ours - expected).abs().max() <= ATOL
    # and the lab's own loss is transformers' loss on the same targets
    targets = batch.targets[batch.targets != IGNORE_INDEX]
    torch.testing.assert_close(model.loss(batch).total, torch.nn.functional.cross_entropy(expected, targets),
                               atol=ATOL, rtol=0)


# ---- export ---------------------------------------------------------------------------------------------------------

def lab_xlnet():
    config = family_model_config("xlnet", "tiny", V)
    model = build_model("xlnet", config, None, VOCAB, seed=5).eval()
    perturb(model, seed=6)
    return model


def test_an_exported_lab_xlnet_loads_in_transformers_with_the_same_logits(tmp_path):
    model = lab_xlnet()
    (tmp_path / "config.json").write_text(json.dumps(interop.export_config(model)))
    save_file(interop.export_state(model), tmp_path / "model.safetensors")  # refuses tensors that share storage
    hf = transformers.XLNetLMHeadModel.from_pretrained(tmp_path).eval()
    assert hf.lm_loss.weight.data_ptr() == hf.transformer.word_embedding.weight.data_ptr()  # tied, as written
    x = token_ids(2, 11)
    with torch.no_grad():
        full = torch.ones(2, 11, 11, dtype=torch.bool)
        ours = model.backbone.lm_logits(model.backbone(x, full, torch.arange(11).expand(2, 11)))
        assert (ours - hf(x).logits).abs().max() <= ATOL
        batch = plm_batch(seed=7)
        assert (model.target_logits(batch) - hf_query_logits(hf, batch)).abs().max() <= ATOL


def test_import_of_an_export_is_the_same_model():
    model = lab_xlnet()
    hf_config, hf_state = interop.export_config(model), interop.export_state(model)
    config, _, _ = interop.import_config(hf_config)
    assert config == model.model_config.__class__(**{**model.model_config.to_dict(), "max_positions": 512})
    again = build_model("xlnet", config, None, VOCAB, seed=8)
    state = interop.import_state(hf_config, {k.removeprefix("transformer."): v for k, v in hf_state.items()}, again)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


# ---- what cannot be represented -------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    (dict(attn_type="uni"), "attn_type='uni'"),
    (dict(bi_data=True), "bi_data=True"),
    (dict(ff_activation="swish"), "ff_activation='swish'"),
    (dict(model_type="bert"), "not an XLNet config"),
    (dict(d_head=32), "d_head=32"),
])
def test_configs_the_lab_cannot_represent_are_refused(change, match):
    config = {**hf_model().config.to_dict(), **change}
    with pytest.raises(ValueError, match=match):
        interop.import_config(config)


def test_missing_or_misshapen_tensors_are_named():
    hf = hf_model()
    model = imported(hf)
    state = dict(hf.state_dict())
    del state["transformer.layer.1.rel_attn.seg_embed"]
    with pytest.raises(ValueError, match="no tensor 'layer.1.rel_attn.seg_embed'"):
        interop.import_state(hf.config.to_dict(), state, model)
    state = {**hf.state_dict(), "lm_loss.bias": torch.zeros(V + 1)}
    with pytest.raises(ValueError, match=r"'lm_loss.bias' has shape \(97,\)"):
        interop.import_state(hf.config.to_dict(), state, model)


def test_export_refuses_what_xlnet_cannot_hold():
    config = family_model_config("xlnet", "tiny", V, relative_attention=None)  # learned absolute positions
    model = build_model("xlnet", config, None, VOCAB, seed=0)
    with pytest.raises(ValueError, match="relative_attention=None.*learned absolute positions"):
        interop.export_config(model)


# ---- through the framework: a saved folder with XLNet's SentencePiece-style tokenizer, api.import_hf/export_hf ----
PROMPT = "the girl eats a red apple at the market ."


@pytest.fixture(scope="module")
def folder_and_run(tmp_path_factory, lab_home_dir):
    """A random XLNet (perturbed) with xlnet-base's token layout (<unk> 0, <s> 1, </s> 2, <cls> 3, <sep> 4, <pad> 5,
    <mask> 6, <eod> 7, <eop> 8), saved with its XLNetTokenizerFast, imported through api.import_hf."""
    tokenizer = xlnet_sentencepiece()
    config = transformers.XLNetConfig(vocab_size=tokenizer.get_vocab_size(), d_model=32, n_layer=2, n_head=4,
                                      d_inner=64, pad_token_id=5, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    hf = transformers.XLNetLMHeadModel(config).eval()
    perturb(hf, seed=1, scale=0.5)  # enough that greedy decoding does not repeat one token
    folder = tmp_path_factory.mktemp("hf") / "xlnet"
    hf.save_pretrained(folder)
    transformers.XLNetTokenizerFast(tokenizer_object=tokenizer).save_pretrained(folder)
    run_dir = api.import_hf(folder, tmp_path_factory.mktemp("runs") / "xlnet", corpus="synthetic", home=lab_home_dir)
    return hf, tokenizer, folder, run_dir


def test_a_saved_xlnet_folder_imports_with_its_own_special_tokens_and_parity(folder_and_run):
    hf, tokenizer, _, run_dir = folder_and_run
    run = lab_run(run_dir)
    v = run.vocab
    assert (v.bos_id, v.eos_id, v.cls_id, v.sep_id, v.pad_id, v.mask_id) == (1, 2, 3, 4, 5, 6)
    assert v.size == run.model_config.vocab_size == tokenizer.get_vocab_size()  # nothing added
    assert read_json(run_dir / "config.json")["imported_from"]["added_tokens"] == {}
    x = torch.tensor([tokenizer.encode(PROMPT).ids])  # (1, T)
    T = x.shape[1]
    with torch.no_grad():
        ours = run.model.backbone.lm_logits(run.model.backbone(x, torch.ones(1, T, T, dtype=torch.bool),
                                                               torch.arange(T)[None]))
        assert_close(ours, hf(x).logits)
        batch = plm_batch_of(run.vocab, [x[0, :9], x[0, 2:]])
        assert_close(run.model.target_logits(batch), hf_query_logits(hf, batch))


def plm_batch_of(vocab, rows):
    return xlnet.make_batch(rows, torch.Generator().manual_seed(4), BatchConfig(xlnet.Settings(k=3), vocab))


def hf_slot_logits(hf, ids: list[int], predicted: list[int], causal: bool, segments: list[int] | None = None
                   ) -> torch.Tensor:
    """transformers' query-stream logits (len(predicted), V) at `predicted`, whose content no one reads; the other
    tokens' content sees the other tokens (all of them, or the earlier ones when `causal`); `segments`: the token
    type ids."""
    n = len(ids)
    perm = torch.triu(torch.ones(n, n), diagonal=1) if causal else torch.zeros(n, n)  # 1: may not attend
    perm[:, predicted] = 1.0
    mapping = torch.zeros(1, len(predicted), n)
    mapping[0, torch.arange(len(predicted)), torch.tensor(predicted)] = 1.0
    with torch.no_grad():
        types = None if segments is None else torch.tensor([segments])
        return hf(torch.tensor([ids]), perm_mask=perm[None], target_mapping=mapping, token_type_ids=types).logits[0]


def test_continue_and_fill_mask_through_the_lab_match_transformers(folder_and_run):
    hf, tokenizer, _, run_dir = folder_and_run
    run = lab_run(run_dir)
    v = run.vocab
    banned = DecodingContext(run).banned.clone()
    # continue: the prompt as XLNet's own tokenizer starts a text (nothing before it); the query stream at an
    # appended slot predicts the next token; the known tokens see each other (bidirectional_context, the official
    # code's _local_perm), as transformers' prepare_inputs_for_generation arranges it: perm_mask hides only the slot,
    # target_mapping reads the slot
    assert run.settings.bidirectional_context
    prompt = "she walks to the"  # a prompt this random checkpoint continues with several different tokens
    generation, lab_ids = gen._generate(run_dir, prompt, mode="continue", max_new_tokens=6, strategy="greedy",
                                        temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=10,
                                        blank_length=None, use_cache=True)
    known, produced = tokenizer.encode(prompt).ids, []
    allowed = banned.clone()
    allowed[v.eos_id] = False
    while len(produced) < 6:  # recomputed in full at every step
        logits = hf_slot_logits(hf, known + produced + [v.mask_id], [len(known) + len(produced)], causal=False)[0]
        produced.append(int(logits.masked_fill(allowed, float("-inf")).argmax()))
        if produced[-1] == v.eos_id:
            break
    assert lab_ids == produced and len(set(produced)) > 2
    assert generation.supported and generation.text.startswith(prompt)
    # transformers' own generate gives the same tokens when it recomputes everything (use_mems=False; with its mems
    # it recomputes only the last two tokens: an approximation of this computation, not the same numbers)
    with torch.no_grad():
        out = hf.generate(input_ids=torch.tensor([known]), max_new_tokens=6, do_sample=False, num_beams=1,
                          eos_token_id=v.eos_id, pad_token_id=v.pad_id, use_mems=False,
                          suppress_tokens=[i for i in range(v.size) if banned[i] and i != v.eos_id])
    assert out[0, len(known):].tolist() == produced
    # fill-mask: every slot read by the query stream, from the other tokens, never from a slot
    text = "the girl [MASK] a red apple at the [MASK] ."
    lab = api.fill_mask(run_dir, text, top_k=5)
    ids, slots = masked_ids(tokenizer, text, v.mask_id)
    # XLNet's own tokenizer frames a text "a <sep> <cls>", its <cls> in segment 2; so does the lab
    sep, cls = tokenizer.token_to_id("<sep>"), tokenizer.token_to_id("<cls>")
    logits = hf_slot_logits(hf, ids + [sep, cls], slots, causal=False, segments=[0] * (len(ids) + 1) + [2])
    for row, slot in enumerate(slots):
        top_ids, top_probs = reference_top_k(logits[row], set(banned.nonzero().flatten().tolist()))
        assert [piece for piece, _ in lab[row]] == [display(tokenizer, ids[:slot], i) for i in top_ids]
        assert [p for _, p in lab[row]] == pytest.approx(top_probs, abs=1e-4)


def test_the_export_of_an_imported_xlnet_loads_in_transformers_as_the_source(folder_and_run, tmp_path):
    hf, tokenizer, folder, run_dir = folder_and_run
    out = api.export_hf(run_dir, tmp_path / "export")
    again = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(again).__name__ == "XLNetLMHeadModel"
    x = torch.tensor([tokenizer.encode(PROMPT).ids])
    with torch.no_grad():
        assert_close(again(x).logits, hf(x).logits)
    batch = plm_batch_of(lab_run(run_dir).vocab, [x[0, :9], x[0, 2:]])
    assert_close(hf_query_logits(again, batch), hf_query_logits(hf, batch))
    source, loaded = transformers.AutoTokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(out)
    assert loaded(PROMPT).input_ids == source(PROMPT).input_ids  # the checkpoint's own framing: text <sep> <cls>
    assert loaded(PROMPT, add_special_tokens=False).input_ids == \
        lab_run(run_dir).tokenizer.encode(PROMPT, add_special_tokens=False).ids  # what the lab reads
    assert source(PROMPT).input_ids[-2:] == [4, 3]
    assert (loaded.mask_token, loaded.pad_token, loaded.cls_token, loaded.sep_token) == ("<mask>", "<pad>", "<cls>",
                                                                                         "<sep>")


def test_a_lab_xlnet_run_exports_with_its_tokenizer(tmp_path):
    run_dir = write_lab_run(tmp_path / "lab-xlnet", "xlnet", "unigram")
    run = lab_run(run_dir)
    out = api.export_hf(run_dir, tmp_path / "export")
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    loaded = transformers.AutoTokenizer.from_pretrained(out)
    assert loaded(PROMPT).input_ids == run.tokenizer.encode(PROMPT).ids  # no framing, as the lab trained
    assert (loaded.mask_token_id, loaded.pad_token_id) == (run.vocab.mask_id, run.vocab.pad_id)
    x = torch.tensor([run.tokenizer.encode(PROMPT).ids])
    T = x.shape[1]
    with torch.no_grad():
        ours = run.model.backbone.lm_logits(run.model.backbone(x, torch.ones(1, T, T, dtype=torch.bool),
                                                               torch.arange(T)[None]))
    assert_close(hf(x).logits, ours)
    batch = plm_batch_of(run.vocab, [x[0, :9], x[0, 1:]])
    with torch.no_grad():
        assert_close(hf_query_logits(hf, batch), run.model.target_logits(batch))
