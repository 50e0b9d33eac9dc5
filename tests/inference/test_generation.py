"""lab_models/inference/generation/generate.py through `lab_models.api`: generation and fill-mask from trained runs.

Tiny runs of gpt, bert, t5, glm, xlnet and mass are trained once per module by the CLI (its main(), in two parallel
processes), into the session's lab home (gpt, bert, xlnet and t5 under the names tests/support/tiny_runs.py uses, so one
session trains them once). The other seven families get *untrained* run folders written here (the model as
`build_model` initialises it, saved the way the trainer saves it): enough to check that every mode runs and returns
what it promises.

What is checked: greedy is deterministic and each token is the argmax of a forward pass built by the family's own
batch builder (so decoding reads the model exactly as training did); the same seed gives the same sample; the KV
cache gives the tokens of a full recomputation (and the backbone's cached logits equal its uncached ones); infill
keeps the text around the blank; mask-predict fills exactly the slots; fill_mask's lists; unsupported modes; and the
ValueError of every bad input.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab_models import api
from lab_models.training import runs
from lab_models.inference.generation import generate as gen
from lab_models.inference.generation.context import DecodingContext, Generation
from lab_models.inference.generation.plans import plan_infill
from lab_models.batch import collate
from lab_models.inference.loading import load_run
from lab_models.models.family import build_model, family_model_config
from lab_models.objectives import causal_lm, glm, mass, objective_module, t5, unilm, xlnet
from lab_models.objectives.common import BatchConfig
from lab_models.text.tokenization import load_tokenizer_file
from lab_models.objectives.settings import settings_to_dict
from lab_models.text.vocab import prepare_tokenizer

REPO = Path(__file__).resolve().parents[2]
TRAINED = ("gpt", "bert", "t5", "glm", "xlnet", "mass")
SHARED_WITH_PROBES = ("gpt", "bert", "xlnet", "t5")  # tests/support/tiny_runs.py trains these under the same names
UNTRAINED = {"gpt2": "mass", "roberta": "mass", "albert": "t5", "spanbert": "bert", "electra": "bert",
             "unilm": "bert", "mpnet": "bert"}  # family -> the trained run whose tokenizer it borrows
ALL_FAMILIES = ("gpt", "gpt2", "bert", "roberta", "albert", "spanbert", "electra", "unilm", "xlnet", "mpnet", "mass",
                "glm", "t5")
PROMPT = "the girl eats"
BLANKED = "the girl ___ a red apple ."


def run_name(family: str) -> str:
    return f"{family}-tiny-understand-tab" if family in SHARED_WITH_PROBES else f"{family}-tiny-generate"


# Two processes, each running the CLI's main() for three families in a row: two torch imports instead of six, and
# the families that share a tokenizer kind (t5, glm, xlnet: unigram) train it once.
TRAINING_GROUPS = (("t5", "glm", "xlnet"), ("gpt", "bert", "mass"))
TRAIN_SCRIPT = """
import sys
from lab_models.training import run as train
home, steps, *jobs = sys.argv[1:]
for job in jobs:
    family, out = job.split("=", 1)
    code = train.main(["--family", family, "--out", out, "--steps", steps, "--device", "cpu", "--home", home])
    if code:
        sys.exit(f"training {family} failed with exit code {code}")
"""


def train_runs(home: Path, steps: int = 30) -> dict[str, Path]:
    """`python -m lab_models train --family F --steps 30 --out DIR` for each trained family (through the CLI's
    main(), in two parallel processes with one thread each); runs that already have weights are reused."""
    out = {family: home / "runs" / run_name(family) for family in TRAINED}
    processes = []
    for group in TRAINING_GROUPS:
        jobs = [f"{family}={out[family]}" for family in group if not (out[family] / "model.safetensors").is_file()]
        if not jobs:
            continue
        env = {**os.environ, "PRETRAINING_LAB_HOME": str(home), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-c", TRAIN_SCRIPT, str(home), str(steps), *jobs]
        processes.append((group, subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                                  stderr=subprocess.STDOUT)))
    for group, process in processes:
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"training {group} failed:\n{output.decode(errors='replace')[-2000:]}"
    return out


def write_untrained_run(run_dir: Path, family: str, tokenizer_from: Path) -> Path:
    """A run folder as the trainer writes it (config.json, tokenizer.json, model.safetensors), weights as
    initialised."""
    if (run_dir / runs.MODEL_FILE).is_file():
        return run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(tokenizer_from / runs.TOKENIZER_FILE, run_dir / runs.TOKENIZER_FILE)
    _, vocab = prepare_tokenizer(load_tokenizer_file(run_dir / runs.TOKENIZER_FILE))
    settings = objective_module(family).Settings()
    config = family_model_config(family, "tiny", vocab.size, settings=settings)
    model = build_model(family, config, settings, vocab, None, seed=0)
    runs.write_config(run_dir, {"family": family, "model": config.to_dict(), "settings": settings_to_dict(settings),
                                "objectives": model.objective_weights, "preset": "tiny"})
    runs.save_weights(model, run_dir / runs.MODEL_FILE)
    return run_dir


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def run_dirs(lab_home_dir) -> dict[str, Path]:
    home = Path(lab_home_dir)
    out = train_runs(home)
    for family, source in UNTRAINED.items():
        out[family] = write_untrained_run(home / "runs" / f"{family}-untrained-generate", family, out[source])
    return out


def first_ids(run_dir, prompt: str, **options) -> list[int]:
    """The ids generate chose (greedy unless told otherwise)."""
    defaults = dict(mode=None, max_new_tokens=1, strategy="greedy", temperature=1.0, top_k=0, top_p=1.0,
                    beam_size=1, seed=0, iterations=10, blank_length=None, use_cache=True)
    return gen._generate(run_dir, prompt, **{**defaults, **options})[1]


def allowed_probs(logits: torch.Tensor, run, *also: int) -> torch.Tensor:
    """softmax over the tokens decoding may produce: special tokens masked except `also` (the end tokens)."""
    banned = DecodingContext(run).banned.clone()
    banned[list(also)] = False
    return torch.softmax(logits.float().masked_fill(banned, float("-inf")), dim=-1)


def best_allowed(logits: torch.Tensor, run, *also: int) -> int:
    return int(torch.argmax(allowed_probs(logits, run, *also)))


def encode(run, text: str) -> list[int]:
    return run.tokenizer.encode(text, add_special_tokens=False).ids


# ------------------------------------------------------------------------------------------------------- modes
def test_generation_modes_for_all_13_families():
    expected = {"gpt": ["continue"], "gpt2": ["continue"], "bert": ["mask_predict"], "roberta": ["mask_predict"],
                "albert": ["mask_predict"], "spanbert": ["mask_predict"], "electra": ["mask_predict"],
                "mpnet": ["mask_predict"], "unilm": ["continue", "infill", "mask_predict"],
                "xlnet": ["continue", "mask_predict"], "glm": ["infill", "continue"], "mass": ["infill", "translate"],
                "t5": ["infill", "translate"]}
    assert sorted(expected) == sorted(ALL_FAMILIES)
    for spec in api.families():
        if spec.name in expected:
            modes = api.generation_modes(spec.name)
            assert modes == expected[spec.name]
            assert set(modes) <= set(api.GENERATION_MODES)
    assert api.generation_modes("elmo") == ["continue"] and api.generation_modes("ulmfit") == ["continue"]
    assert api.generation_modes("cove") == ["translate"] and api.generation_modes("cvt") == []  # a tagger
    with pytest.raises(ValueError, match="Unknown family 'nope'"):
        api.generation_modes("nope")


def test_api_exports_the_generation_interface():
    assert api.generate is gen.generate and api.fill_mask is gen.fill_mask and api.Generation is Generation
    assert api.GENERATION_MODES == ("continue", "infill", "mask_predict", "translate")
    fields = list(Generation.__dataclass_fields__)
    assert fields == ["run_id", "family", "mode", "supported", "explanation", "prompt", "text", "new_text", "tokens",
                      "probs", "seconds", "ms_per_token", "step", "note"]


# ----------------------------------------------------------------------------- greedy = the training forward pass
@pytest.mark.slow
def test_gpt_greedy_is_deterministic_and_each_token_is_the_argmax(run_dirs):
    a = api.generate(run_dirs["gpt"], PROMPT, max_new_tokens=8)
    b = api.generate(run_dirs["gpt"], PROMPT, max_new_tokens=8)
    assert a.supported and a.mode == "continue" and a == dataclasses_replace_timing(b, a)
    assert len(a.tokens) == len(a.probs) and 1 <= len(a.tokens) <= 8
    assert a.text.startswith(PROMPT) and a.new_text == "".join(a.tokens)
    assert "KV cache" in a.explanation and "greedy" in a.explanation
    run = load_run(run_dirs["gpt"])
    assert a.step == run.step > 0 and a.run_id == Path(run_dirs["gpt"]).name
    chosen = first_ids(run_dirs["gpt"], PROMPT, max_new_tokens=8)
    ids = [run.vocab.eos_id] + encode(run, PROMPT)  # a document start, then the prompt
    for step, token in enumerate(chosen):
        row = torch.tensor(ids + chosen[:step] + [token])  # the last row of the decode predicts `token`
        batch = collate([causal_lm.build_example(row, {}, None, None)], pad_id=run.vocab.pad_id)
        with torch.inference_mode():
            logits = run.model.target_logits(batch)  # (T - 1, V): row i predicts token i + 1
        probs = allowed_probs(logits[-1], run, run.vocab.eos_id)
        assert token == int(torch.argmax(probs))
        if step < len(a.probs):
            assert a.probs[step] == pytest.approx(float(probs[token]), abs=1e-5)


def dataclasses_replace_timing(g, like):
    """g with like's timing fields, so two generations compare on everything but the clock."""
    return dataclasses.replace(g, seconds=like.seconds, ms_per_token=like.ms_per_token)


@pytest.mark.slow
def test_xlnet_first_token_is_the_query_stream_argmax_of_the_left_to_right_order(run_dirs):
    run = load_run(run_dirs["xlnet"])
    ids = [run.vocab.eos_id] + encode(run, PROMPT)
    n = len(ids)
    row = torch.tensor(ids + [run.vocab.mask_id])  # the slot's token is never read by its query
    cfg = BatchConfig(run.settings, run.vocab)
    batch = collate([xlnet.build_example(row, {"order": list(range(n + 1)), "num_predict": 1}, None, cfg)],
                    pad_id=run.vocab.pad_id)
    with torch.inference_mode():
        logits = run.model.target_logits(batch)  # (1, V): the query stream at position n
    assert first_ids(run_dirs["xlnet"], PROMPT) == [best_allowed(logits[0], run, run.vocab.eos_id)]
    g = api.generate(run_dirs["xlnet"], PROMPT, max_new_tokens=4)
    assert g.supported and "recomputed every step" in g.explanation


@pytest.mark.slow
def test_glm_t5_mass_unilm_infill_read_the_blank_as_their_batch_builders_write_it(run_dirs):
    """The first two tokens of each infill are the argmax of the training example that has them as its truth: the
    encoder/Part A, the decoder/Part B inputs and their (2-D) positions are the batch builder's."""
    left, right = "the girl", " a red apple ."
    prompt = left + " ___" + right
    for family in ("glm", "t5", "mass", "unilm"):
        run = load_run(run_dirs[family])
        v = run.vocab
        ends = {"glm": (v.end_id,), "t5": (v.eos_id, v.sentinel_ids[1]), "mass": (v.eos_id,), "unilm": (v.eos_id,)}
        left_ids, right_ids = encode(run, left), encode(run, right)
        u = len(left_ids)
        chosen = first_ids(run_dirs[family], prompt, mode="infill", blank_length=2, max_new_tokens=2)
        # a predicting row never reads the token it predicts, so any ordinary token may stand in for it
        x = v.random_ids[0]
        for k in range(len(chosen)):
            if chosen[k] in ends[family]:
                break
            truth = chosen[:k] + [x] * (2 - k)  # the blank's two tokens: the ones chosen before step k, then x
            text = torch.tensor(left_ids + truth + right_ids)
            if family == "glm":
                cfg = BatchConfig(glm.Settings(), v)
                example = glm.build_example(text, {"spans": [(u, u + 2)], "shuffle": False}, None, cfg)
                row = k  # Part B: [S] t0 t1 -> t0 t1 [E]
            elif family == "t5":
                example = t5.build_example(text, {"spans": [(u, u + 2)]}, None, BatchConfig(t5.Settings(), v))
                row = k + 1  # decoder [BOS] <extra_id_0> t0 t1 -> <extra_id_0> t0 t1 <extra_id_1>
            elif family == "mass":
                cfg = BatchConfig(mass.Settings(mask_prob=1.0, random_prob=0.0), v)  # every slot [MASK]
                example = mass.build_example(text, {"span": (u, u + 2)}, torch.Generator().manual_seed(0), cfg)
                row = k  # decoder x_(u-1) t0 -> t0 t1, at positions u, u + 1
            else:  # the seq2seq mask: source = the text before the blank; the target token at u + k is [MASK]
                settings = unilm.Settings(mask_token_rate=1.0, random_token_rate=0.0)
                choices = {"mode": "seq2seq", "src_len": u, "masked": [u + k]}
                example = unilm.build_example(torch.tensor(left_ids + truth), choices, torch.Generator(),
                                              BatchConfig(settings, v))
                row = 0  # the one target
            batch = collate([example], pad_id=v.pad_id)
            with torch.inference_mode():
                logits = run.model.target_logits(batch)  # (N, V), rows in target order
            # T5 and GLM never end a span before its first token (a training span is never empty)
            may_end = ends[family] if k > 0 or family in ("mass", "unilm") else ()
            assert chosen[k] == best_allowed(logits[row], run, *may_end), (family, k)


@pytest.mark.slow
def test_decoders_feed_what_the_batch_builders_write_for_any_history(run_dirs):
    """Step by step, with a history the model did not choose (so spans run past their first token and across
    blanks): each decoder's logits equal the training example's at the row that predicts the same token."""
    a, b, c = 300, 301, 302  # ordinary tokens of every tiny vocabulary
    for family in ("glm", "t5", "mass", "unilm"):
        run = load_run(run_dirs[family])
        ctx, v = DecodingContext(run), run.vocab
        left, mid, right = encode(run, "the girl"), encode(run, " a red"), encode(run, " .")
        u1, u2 = len(left), len(left) + 2 + len(mid)
        two_blanks = left + [a, b] + mid + [c] + right
        with torch.inference_mode():
            if family == "glm":
                cfg = BatchConfig(glm.Settings(), v)
                example = glm.build_example(torch.tensor(two_blanks), {"spans": [(u1, u1 + 2), (u2, u2 + 1)],
                                                                       "shuffle": False}, None, cfg)
                plan = plan_infill(ctx, ["", "", ""], [left, mid, right], 10, True, None)
                history = [a, b, v.end_id, c, v.end_id]  # Part B: [S] a b [S] c -> a b [E] c [E]
                references = [run.model.target_logits(collate([example], pad_id=v.pad_id))]
            elif family == "t5":
                example = t5.build_example(torch.tensor(two_blanks), {"spans": [(u1, u1 + 2), (u2, u2 + 1)]}, None,
                                           BatchConfig(t5.Settings(), v))
                plan = plan_infill(ctx, ["", "", ""], [left, mid, right], 10, True, None)
                history = [a, b, v.sentinel_ids[1], c, v.sentinel_ids[2]]  # after the forced <extra_id_0>
                references = [run.model.target_logits(collate([example], pad_id=v.pad_id))[1:]]
            elif family == "mass":
                cfg = BatchConfig(mass.Settings(mask_prob=1.0, random_prob=0.0), v)
                example = mass.build_example(torch.tensor(left + [a, b] + right), {"span": (u1, u1 + 2)},
                                             torch.Generator().manual_seed(0), cfg)
                plan = plan_infill(ctx, ["", ""], [left, right], 10, True, 2)
                history = [a, b]
                references = [run.model.target_logits(collate([example], pad_id=v.pad_id))]
            else:  # unilm seq2seq: one example per target position, the earlier target tokens real
                settings = unilm.Settings(mask_token_rate=1.0, random_token_rate=0.0)
                history = [a, b, c]
                references = []
                for k in range(3):
                    choices = {"mode": "seq2seq", "src_len": u1, "masked": [u1 + k]}
                    example = unilm.build_example(torch.tensor(left + history), choices, torch.Generator(),
                                                  BatchConfig(settings, v))
                    references.append(run.model.target_logits(collate([example], pad_id=v.pad_id)))
                plan = plan_infill(ctx, ["", ""], [left, right], 10, True, 3)
            expected = torch.cat(references)  # (steps, V)
            dec = plan.decoder
            got = [dec.first()[0]] + [dec.next([history[:k]], [0])[0] for k in range(1, len(history))]
        torch.testing.assert_close(torch.stack(got), expected[:len(history)], atol=1e-4, rtol=0, msg=family)


# ------------------------------------------------------------------------------------------------ sampling
@pytest.mark.slow
def test_the_same_seed_gives_the_same_sample_and_other_seeds_differ(run_dirs):
    options = dict(max_new_tokens=8, strategy="sample", temperature=1.5, top_k=50, top_p=0.95)
    a = api.generate(run_dirs["gpt"], PROMPT, seed=7, **options)
    b = api.generate(run_dirs["gpt"], PROMPT, seed=7, **options)
    assert a.tokens == b.tokens and a.probs == b.probs and "seed 7" in a.explanation
    samples = {tuple(api.generate(run_dirs["gpt"], PROMPT, seed=s, **options).tokens) for s in range(5)}
    assert len(samples) > 1
    assert all(0 < p <= 1 for p in a.probs)


@pytest.mark.slow
def test_top_k_one_sampling_is_greedy(run_dirs):
    greedy = api.generate(run_dirs["t5"], BLANKED, max_new_tokens=6)
    top1 = api.generate(run_dirs["t5"], BLANKED, max_new_tokens=6, strategy="sample", top_k=1, seed=3)
    assert greedy.tokens == top1.tokens


@pytest.mark.slow
def test_beam_search_with_one_beam_is_greedy_and_wider_beams_report_their_tokens(run_dirs):
    for family, prompt in (("gpt", PROMPT), ("t5", BLANKED), ("mass", "the cat sees a ball .")):
        mode = "translate" if family == "mass" else None
        greedy = first_ids(run_dirs[family], prompt, mode=mode, max_new_tokens=6)
        one_beam = first_ids(run_dirs[family], prompt, mode=mode, max_new_tokens=6, strategy="beam")
        assert greedy == one_beam, family
        g = api.generate(run_dirs[family], prompt, mode=mode, max_new_tokens=6, strategy="beam", beam_size=3)
        assert g.supported and "beam search with 3 beams" in g.explanation
        assert len(g.tokens) == len(g.probs) <= 6 and all(0 < p <= 1 for p in g.probs)


# ------------------------------------------------------------------------------------------------ the KV cache
@pytest.mark.slow
@pytest.mark.parametrize("family, prompt, mode", [
    ("gpt", PROMPT, "continue"), ("unilm", PROMPT, "continue"), ("unilm", BLANKED, "infill"),
    ("gpt2", PROMPT, "continue"), ("glm", "the girl ___ a red ___ .", "infill"), ("glm", PROMPT, "continue"),
    ("t5", "the girl ___ a red ___ .", "infill"), ("mass", BLANKED, "infill"), ("t5", "the cat .", "translate"),
])
def test_kv_cached_decoding_gives_the_tokens_of_full_recomputation(run_dirs, family, prompt, mode):
    for strategy, extra in (("greedy", {}), ("beam", {"beam_size": 3}), ("sample", {"seed": 1, "temperature": 2.0})):
        options = dict(mode=mode, max_new_tokens=12, strategy=strategy, blank_length=4, **extra)
        cached = gen._generate(run_dirs[family], prompt, **{**first_defaults(), **options, "use_cache": True})
        full = gen._generate(run_dirs[family], prompt, **{**first_defaults(), **options, "use_cache": False})
        assert cached[1] == full[1], (family, strategy)
        assert cached[0].probs == pytest.approx(full[0].probs, abs=1e-5)
        assert "KV cache" in cached[0].explanation and "no cache" in full[0].explanation


def first_defaults() -> dict:
    return dict(mode=None, max_new_tokens=1, strategy="greedy", temperature=1.0, top_k=0, top_p=1.0, beam_size=1,
                seed=0, iterations=10, blank_length=None, use_cache=True)


@pytest.mark.slow
def test_backbone_cached_logits_equal_uncached(run_dirs):
    for family in ("gpt", "albert"):  # ALBERT: one shared block, one cache entry per layer
        model = load_run(run_dirs[family]).model
        backbone = model.backbone
        ids = torch.randint(100, 400, (2, 10))
        positions = torch.arange(10).expand(2, 10)
        causal = torch.ones(10, 10, dtype=torch.bool).tril().expand(2, 10, 10)
        with torch.inference_mode():
            full = backbone.lm_logits(backbone(ids, causal, positions))  # (2, 10, V)
            cache = backbone.new_cache()
            parts = [backbone(ids[:, :4], causal[:, :4, :4], positions[:, :4], cache=cache)]
            for t in range(4, 10):
                parts.append(backbone(ids[:, t:t + 1], torch.ones(2, 1, t + 1, dtype=torch.bool),
                                      positions[:, t:t + 1], cache=cache))
            incremental = backbone.lm_logits(torch.cat(parts, dim=1))
        assert cache.length == 10
        torch.testing.assert_close(incremental, full, atol=1e-5, rtol=0)
    backbone = load_run(run_dirs["t5"]).model.backbone  # the decoder: causal self-attention, cross K/V once
    enc = torch.randint(100, 400, (1, 7))
    dec = torch.randint(100, 400, (1, 5))
    with torch.inference_mode():
        memory = backbone.encode(enc, torch.ones(1, 7, 7, dtype=torch.bool), torch.arange(7).unsqueeze(0))
        full = backbone.decode(dec, torch.ones(1, 5, 5, dtype=torch.bool).tril(), torch.ones(1, 5, 7, dtype=torch.bool),
                               torch.arange(5).unsqueeze(0), memory)
        cache = backbone.new_cache(decoder=True)
        steps = [backbone.decode(dec[:, t:t + 1], torch.ones(1, 1, t + 1, dtype=torch.bool),
                                 torch.ones(1, 1, 7, dtype=torch.bool), torch.tensor([[t]]), memory, cache=cache)
                 for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="exceed the model's"):
        backbone.decode(dec[:, :1], torch.ones(1, 1, 200, dtype=torch.bool), torch.ones(1, 1, 7, dtype=torch.bool),
                        torch.tensor([[5]]), memory, cache=_long_cache(backbone, 199))


def _long_cache(backbone, length: int):
    cache = backbone.new_cache(decoder=True)
    H, nh = backbone.config.d_model, backbone.config.n_heads
    for layer in cache.layers:
        layer.self_attn.k = layer.self_attn.v = torch.zeros(1, nh, length, H // nh)
    return cache


# ------------------------------------------------------------------------------------------------ infill
@pytest.mark.slow
def test_infill_keeps_the_text_around_the_blank(run_dirs):
    for family in ("t5", "glm", "mass", "unilm"):
        g = api.generate(run_dirs[family], BLANKED, mode="infill", max_new_tokens=6)
        assert g.supported and g.mode == "infill", family
        assert g.text.startswith("the girl") and g.text.endswith("a red apple ."), (family, g.text)
        assert "___" not in g.text and g.new_text.strip() in g.text
        assert len(g.tokens) == len(g.probs) <= 6
    mass_fill = api.generate(run_dirs["mass"], BLANKED, mode="infill", blank_length=2)
    assert len(mass_fill.tokens) <= 2 and ("blank_length" in mass_fill.explanation
                                           or "stopped at [EOS]" in mass_fill.explanation)


@pytest.mark.slow
def test_t5_and_glm_never_end_a_span_before_its_first_token(run_dirs):
    """Training spans are never empty, so the span's end (T5: the next sentinel or [EOS]; GLM: [E]) is not allowed as
    its first token; each blank of the output holds at least one token (an empty blank would say nothing)."""
    from lab_models.inference.generation.decoders import GLMInfillDecoder, T5InfillDecoder
    t5_run, glm_run = load_run(run_dirs["t5"]), load_run(run_dirs["glm"])
    t5_decoder = T5InfillDecoder.__new__(T5InfillDecoder)
    t5_decoder.ctx, t5_decoder.sentinels, t5_decoder.n_blanks = (DecodingContext(t5_run),
                                                                 tuple(t5_run.vocab.sentinel_ids), 2)
    sentinel_1, a = t5_run.vocab.sentinel_ids[1], t5_run.vocab.random_ids[0]
    assert t5_decoder.allowed_specials([]) == [] and t5_decoder.allowed_specials([a, sentinel_1]) == []
    assert t5_decoder.allowed_specials([a]) == [t5_run.vocab.eos_id, sentinel_1]
    glm_decoder = GLMInfillDecoder.__new__(GLMInfillDecoder)
    glm_decoder.ctx, glm_decoder.n_blanks = DecodingContext(glm_run), 2
    end = glm_run.vocab.end_id
    assert glm_decoder.allowed_specials([]) == [] and glm_decoder.allowed_specials([a, end]) == []
    assert glm_decoder.allowed_specials([a]) == [end]
    for family, run in (("t5", t5_run), ("glm", glm_run)):
        starts = set(run.vocab.sentinel_ids) if family == "t5" else {run.vocab.end_id}  # what precedes a span
        ends = {run.vocab.eos_id, *run.vocab.sentinel_ids} if family == "t5" else {run.vocab.end_id}
        for prompt in (BLANKED, "the girl ___ a red ___ in the kitchen .", "the beautiful horse wants ___"):
            g, chosen = gen._generate(run_dirs[family], prompt, mode="infill", max_new_tokens=12, strategy="greedy",
                                      temperature=1.0, top_k=0, top_p=1.0, beam_size=1, seed=0, iterations=10,
                                      blank_length=None, use_cache=True)
            firsts = [token for before, token in zip([None] + chosen, chosen) if before is None or before in starts]
            assert firsts and not ends & set(firsts), (family, prompt, chosen)
            assert "span" in g.explanation and "at least one token" in g.explanation
            # a blank may still read empty (only whitespace, or the limit ran out first), but never without a why
            fills = g.new_text.split(" | ") if prompt.count("___") > 1 else [g.new_text]
            for index in range(1, prompt.count("___") + 1):
                fill = fills[index - 1] if index <= len(fills) else ""
                assert fill.strip() or f"blank {index} is empty" in g.explanation, (family, prompt, g.explanation)


@pytest.mark.slow
def test_auto_mode_gives_each_family_a_task_it_can_do_with_the_prompt(run_dirs):
    tasks = {family: api.auto_task(family, "the girl eats") for family in ALL_FAMILIES + ("elmo", "cove", "cvt")}
    continuing = {"gpt", "gpt2", "unilm", "xlnet", "glm", "elmo"}
    for family, task in tasks.items():
        if family in continuing:
            assert (task.mode, task.prompt, task.note) == ("continue", "the girl eats", ""), family
    for family in ("bert", "roberta", "albert", "spanbert", "electra", "mpnet"):
        assert (tasks[family].mode, tasks[family].prompt) == ("mask_predict", "the girl eats ___")
        assert tasks[family].note == (f"{api.family(family).title} fills blanks and does not continue a text, so a "
                                      "blank (___) was added at the end of the prompt")
    assert (tasks["t5"].mode, tasks["t5"].prompt) == ("infill", "the girl eats ___") == \
        (tasks["mass"].mode, tasks["mass"].prompt)
    assert (tasks["cove"].mode, tasks["cove"].prompt, tasks["cove"].note) == ("translate", "the girl eats", "")
    assert tasks["cvt"].mode is None  # a tagger: generate says why
    blanked = {family: api.auto_task(family, BLANKED) for family in ("gpt", "bert", "t5", "glm", "xlnet", "unilm")}
    assert (blanked["gpt"].mode, blanked["gpt"].prompt) == ("continue", "the girl")
    assert "continues the text before the first blank" in blanked["gpt"].note
    assert [blanked[f].mode for f in ("bert", "t5", "glm", "xlnet", "unilm")] == \
        ["mask_predict", "infill", "infill", "mask_predict", "infill"]
    assert all(blanked[f].prompt == BLANKED and not blanked[f].note for f in ("bert", "t5", "glm", "xlnet"))
    assert api.auto_task("gpt", "___ the girl").prompt == "the girl"  # nothing before the blank: the rest
    with pytest.raises(ValueError, match="prompt is empty"):
        api.auto_task("bert", "  ")
    with pytest.raises(ValueError):
        api.auto_task("nope", "the girl")


@pytest.mark.slow
def test_generate_in_auto_mode_answers_for_every_family_and_says_what_it_added(run_dirs):
    for family in ("gpt", "bert", "t5", "glm", "xlnet", "mass"):
        g = api.generate(run_dirs[family], "the girl eats", mode="auto", max_new_tokens=6)
        task = api.auto_task(family, "the girl eats")
        assert g.supported and g.mode == task.mode and g.prompt == task.prompt and g.note == task.note, family
        assert g.tokens and (g.new_text.strip() or "is empty" in g.explanation), family
        assert g.text.startswith("the girl eats"), (family, g.text)
    # the families that only fill blanks had one added: BERT's three mask-predict slots, T5's span
    assert api.generate(run_dirs["bert"], "the girl eats", mode="auto").note.startswith("BERT fills blanks")
    assert len(api.generate(run_dirs["bert"], "the girl eats", mode="auto").tokens) == 3


@pytest.mark.slow
def test_t5_and_glm_fill_several_blanks(run_dirs):
    prompt = "the girl ___ a red ___ in the kitchen ."
    for family in ("t5", "glm"):
        g = api.generate(run_dirs[family], prompt, mode="infill", max_new_tokens=20)
        assert g.text.startswith("the girl") and g.text.endswith("in the kitchen ."), g.text
        assert " a red " in g.text and "___" not in g.text


@pytest.mark.slow
def test_translate_decodes_and_says_whether_the_run_trained_translation(run_dirs):
    for family in ("t5", "mass"):
        g = api.generate(run_dirs[family], "the cat sees a ball .", mode="translate", max_new_tokens=8)
        assert g.supported and g.text == g.new_text and len(g.tokens) <= 8
        assert "did not train translation" in g.explanation


# ------------------------------------------------------------------------------------------------ mask-predict
@pytest.mark.slow
def test_mask_predict_fills_exactly_the_slots(run_dirs):
    for family in ("bert", "xlnet", "roberta", "albert", "spanbert", "electra", "unilm", "mpnet"):
        g = api.generate(run_dirs[family], "the girl [MASK] a red [MASK] .", mode="mask_predict")
        assert g.supported and len(g.tokens) == len(g.probs) == 2, family
        assert "[MASK]" not in g.text and g.text.startswith("the girl") and g.text.endswith(".")
        assert " a red " in g.text and "mask-predict" in g.explanation
    greedy = api.generate(run_dirs["bert"], "the girl [MASK] a red [MASK] .")
    beam = api.generate(run_dirs["bert"], "the girl [MASK] a red [MASK] .", strategy="beam", beam_size=4)
    assert beam.tokens == greedy.tokens and "beam search does not apply" in beam.explanation  # greedy, said so
    g = api.generate(run_dirs["bert"], "the girl ___ apple .", mode="mask_predict", blank_length=2, iterations=3)
    assert len(g.tokens) == 2 and "2 slots" in g.explanation and "___" not in g.text


@pytest.mark.slow
def test_one_round_of_mask_predict_is_fill_masks_best_guess(run_dirs):
    text = "the girl [MASK] a red [MASK] ."
    for family in ("bert", "xlnet", "mpnet", "electra"):
        chosen = first_ids(run_dirs[family], text, mode="mask_predict", iterations=1)
        best = api.fill_mask(run_dirs[family], text, top_k=1)
        g = api.generate(run_dirs[family], text, mode="mask_predict", iterations=1)
        assert [b[0][0].strip() for b in best] == [t.strip() for t in g.tokens] and len(chosen) == 2, family
        assert [b[0][1] for b in best] == pytest.approx(g.probs, abs=1e-5)


# ------------------------------------------------------------------------------------------------ fill_mask
@pytest.mark.slow
def test_fill_mask_returns_top_k_per_slot_best_first(run_dirs):
    for family in ("bert", "xlnet", "t5", "glm", "unilm", "mpnet", "electra", "albert"):
        out = api.fill_mask(run_dirs[family], "the girl [MASK] a red [MASK] .", top_k=4)
        assert len(out) == 2, family
        for slot in out:
            assert len(slot) == 4
            probs = [p for _, p in slot]
            assert probs == sorted(probs, reverse=True) and all(0 < p <= 1 for p in probs)
            assert sum(probs) <= 1 + 1e-6
            assert all(isinstance(token, str) and "[MASK]" not in token for token, _ in slot)


@pytest.mark.slow
@pytest.mark.parametrize("family, text, message", [
    ("gpt", "the girl [MASK] .", "GPT reads left to right only and cannot fill a \\[MASK\\]; use a BERT-style run"),
    ("mass", "the girl [MASK] .", "MASS predicts a masked fragment"),
    ("bert", "the girl eats .", "has no \\[MASK\\]"),
    ("bert", "   ", "empty"),
    ("bert", "the " * 200 + "[MASK]", "at most 128 tokens"),
])
def test_fill_mask_refuses_with_an_actionable_message(run_dirs, family, text, message):
    with pytest.raises(ValueError, match=message):
        api.fill_mask(run_dirs[family], text)


# ------------------------------------------------------------------------------------------------ unsupported
@pytest.mark.slow
@pytest.mark.parametrize("family, mode, words", [
    ("bert", "continue", "Mask-predict"), ("gpt", "infill", "Continue"), ("gpt", "mask_predict", "Continue"),
    ("gpt", "translate", "MASS and T5"), ("t5", "continue", "Infill"), ("glm", "translate", "MASS and T5"),
    ("mass", "mask_predict", "Infill"), ("xlnet", "infill", "Mask-predict"),
])
def test_unsupported_modes_explain_instead_of_raising(run_dirs, family, mode, words):
    g = api.generate(run_dirs[family], "the girl [MASK] a red apple .", mode=mode)
    assert not g.supported and g.mode == mode and words in g.explanation
    assert g.text == g.new_text == "" and g.tokens == [] and g.probs == []
    assert g.explanation.count(".") <= 3 and len(g.explanation) < 200


# ------------------------------------------------------------------------------------------------ limits
@pytest.mark.slow
def test_generation_stops_at_max_positions_and_says_so(run_dirs):
    run = load_run(run_dirs["gpt"])
    prompt = " ".join(["the"] * 120)
    n = len(encode(run, prompt))
    g = api.generate(run_dirs["gpt"], prompt, max_new_tokens=50)
    room = run.max_positions - (n + 1) + 1  # [EOS] + prompt, then one token per position
    assert len(gen._generate(run_dirs["gpt"], prompt, **{**first_defaults(), "max_new_tokens": 50})[1]) <= room
    assert "positions" in g.explanation or "stopped at [EOS]" in g.explanation


@pytest.mark.slow
@pytest.mark.parametrize("family, prompt, options, message", [
    ("gpt", "", {}, "the prompt is empty"),
    ("gpt", "   \n", {}, "the prompt is empty"),
    ("gpt", "the " * 300, {}, "the prompt is 300 tokens long, but this GPT model can read at most 127 tokens"),
    ("t5", "the girl eats .", {"mode": "infill"}, "infill needs a blank"),
    ("mass", "the ___ girl ___ .", {"mode": "infill"}, "MASS fills one blank at a time, but the prompt has 2"),
    ("gpt", PROMPT, {"mode": "poem"}, "unknown mode 'poem'"),
    ("gpt", PROMPT, {"strategy": "creative"}, "unknown strategy 'creative'"),
    ("gpt", PROMPT, {"max_new_tokens": 0}, "max_new_tokens must be a whole number from 1 to 1024"),
    ("gpt", PROMPT, {"max_new_tokens": 5000}, "max_new_tokens must be a whole number from 1 to 1024"),
    ("gpt", PROMPT, {"strategy": "sample", "temperature": 0}, "temperature must be > 0 for sampling"),
    ("gpt", PROMPT, {"top_p": 0.0}, "top_p must be in \\(0, 1\\]"),
    ("gpt", PROMPT, {"top_p": 1.5}, "top_p must be in \\(0, 1\\]"),
    ("gpt", PROMPT, {"beam_size": 0}, "beam_size must be a whole number from 1"),
    ("gpt", PROMPT, {"top_k": -1}, "top_k must be a whole number >= 0"),
    ("gpt", "the [MASK] girl", {}, "continue writes after the prompt, but the prompt has a blank"),
    ("bert", "the girl eats", {}, "mask-predict needs a blank"),
])
def test_bad_inputs_raise_value_error_with_an_actionable_message(run_dirs, family, prompt, options, message):
    with pytest.raises(ValueError, match=message):
        api.generate(run_dirs[family], prompt, **options)


@pytest.mark.slow
def test_run_folders_without_weights_are_refused(run_dirs, tmp_path):
    with pytest.raises(ValueError, match="no run folder"):
        api.generate(tmp_path / "nowhere", PROMPT)
    empty = tmp_path / "no-weights"
    empty.mkdir()
    shutil.copy(Path(run_dirs["gpt"]) / "config.json", empty / "config.json")
    shutil.copy(Path(run_dirs["gpt"]) / "tokenizer.json", empty / "tokenizer.json")
    with pytest.raises(ValueError, match="has no weights yet"):
        api.generate(empty, PROMPT)
    with pytest.raises(ValueError, match="has no weights yet"):
        api.fill_mask(empty, "the [MASK] .")
    with pytest.raises(ValueError, match="choose a run first"):
        api.generate("", PROMPT)
    assert json.loads((empty / "config.json").read_text())["family"] == "gpt"
