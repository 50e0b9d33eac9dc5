"""Tests for the add-on objectives (lab_models/objectives/addons.py): contrastive learning, adversarial training and
back-translation. Cheapest first: worked examples and the pieces on toy models, statistical tests of the batches,
the leakage tests, bad input, then short training runs through the CLI (each add-on's loss falls, nothing is NaN,
the validation rows carry its numbers), fine-tuning with adversarial training, the sentence-similarity view, and the
app's endpoints.

The leakage tests: a contrastive sentence never changes the family's loss nor a family row the contrastive one
(separate rows of separate passes); SMART's perturbation is the same whatever the masked tokens were (it reads no
target), while FreeLB's is not (the label leaking that keeps FreeLB out of pretraining); a back-translated pair's
decoder does not see later target tokens.
"""
from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from hypothesis import given, settings as hypothesis_settings, strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from lab_models import api
from lab_models.training import run as train_cli
from lab_models.batch import IGNORE_INDEX, Batch, collate
from lab_models.models.family import build_model, family_model_config, resolve_objective_weights
from lab_models.objectives import adversarial, addons, back_translation, contrastive, objective_module, translation
from lab_models.objectives.common import StringVocab

from tests.support.toy_families import VOCAB, leak_settings, make_batch, make_model, random_rows
from tests.support.files import rows_of

BT_WORDS = "the cat sees a ball . 猫 看见 一个 球 。".split()
BT_VOCAB = StringVocab(BT_WORDS)  # "the" 16 ... "." 21, "猫" 22 ... "。" 26


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def word_tokenizer(vocab: StringVocab) -> Tokenizer:
    tok = Tokenizer(models.WordLevel(vocab.token_to_id, unk_token="[MASK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


# ------------------------------------------------------------------------------------------------ contrastive

def test_info_nce_at_simcse_temperature_matches_a_hand_computation():
    first = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    second = torch.tensor([[2.0, 0.0], [0.0, 3.0], [0.8, 0.6]])  # lengths do not matter: cosine
    similarity = torch.tensor([[1.0, 0.0, 0.8], [0.0, 1.0, 0.6], [0.6, 0.8, 0.96]]) / 0.05
    expected = sum(-math.log(math.exp(similarity[i, i]) / sum(math.exp(s) for s in similarity[i])) for i in range(3))
    assert contrastive.info_nce(first, second, 0.05).item() == pytest.approx(expected / 3, rel=1e-5)
    # a perfect pairing with far-apart negatives costs almost nothing; swapping the positives costs a lot
    assert contrastive.info_nce(torch.eye(3), torch.eye(3), 0.05).item() < 1e-6
    assert contrastive.info_nce(torch.eye(3), torch.eye(3)[[1, 2, 0]], 0.05).item() > 19


def test_the_contrastive_loss_pairs_each_sentence_with_its_own_second_view(monkeypatch):
    """Rows i and N+i of the one forward pass are the same sentence (the positive pair); the other N-1 second views
    are row i's negatives."""
    seen = {}

    def spy(model, ids, pad_id, pooling=None):
        seen["ids"] = ids.clone()
        return torch.nn.functional.one_hot(torch.arange(ids.shape[0]) % (ids.shape[0] // 2), 8).float()

    monkeypatch.setattr(contrastive, "sentence_vectors", spy)
    ids = torch.tensor([[2, 16, 17, 3], [2, 18, 3, 0], [2, 19, 20, 3]])
    model = type("M", (), {"vocab": VOCAB.info, "family": "bert"})()
    loss = contrastive.loss(model, ids, contrastive.Settings())
    doubled = seen["ids"]
    assert doubled.shape == (6, 4) and torch.equal(doubled[:3], ids) and torch.equal(doubled[3:], ids)
    assert loss.item() < 1e-6  # each first view matches its own second view and no other


def test_sentence_view_draws_framed_training_sentences_uniformly_and_validation_is_fixed():
    vocab = StringVocab("the cat sees a ball . dog likes it tree".split())
    texts = ["the cat sees a ball . the dog likes it .", "a tree sees the dog ."]
    view = contrastive.SentenceView("bert", word_tokenizer(vocab), vocab.info, texts, ["a ball likes it ."],
                                    contrastive.Settings(max_tokens=6))
    assert len(view.train) == 3 and all(row[0] == vocab.info.cls_id and row[-1] == vocab.info.sep_id
                                        for row in view.train)
    assert max(len(row) for row in view.train) <= 6  # cut to max_tokens, framing included
    counts = {}
    for seed in range(200):
        ids = view.sample(torch.Generator().manual_seed(seed), 3)  # (3, L)
        for row in ids.tolist():
            key = tuple(t for t in row if t != vocab.info.pad_id)
            assert list(key) in view.train
            counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 3 and all(150 < c < 250 for c in counts.values()), counts  # 600 draws, 200 expected
    assert torch.equal(view.validation(0, 2), view.validation(0, 2)) and view.validation(0, 2).shape[0] == 2
    gpt = contrastive.SentenceView("gpt", word_tokenizer(vocab), vocab.info, texts, [], contrastive.Settings())
    assert all(row[0] == vocab.info.bos_id and row[-1] == vocab.info.eos_id for row in gpt.train)
    with pytest.raises(ValueError, match="no sentence"):
        contrastive.SentenceView("bert", word_tokenizer(vocab), vocab.info, ["   "], [], contrastive.Settings())


class _RowSource:
    """A batch source whose batch is random ids from the step generator."""

    def __init__(self):
        self.validation_note = "inner"

    def train_batch(self, generator):
        ids = torch.randint(16, 40, (2, 5), generator=generator)
        return Batch(input_ids=ids, attention={"self": torch.ones(2, 5, 5, dtype=torch.bool)},
                     position_ids=torch.arange(5).expand(2, 5), targets=ids)

    def validation_batches(self, generators):
        return [self.train_batch(generators(i)) for i in range(2)]


def test_addon_batches_leave_the_family_batch_unchanged_and_draw_after_it():
    vocab = StringVocab("the cat sees a ball . dog".split())
    view = contrastive.SentenceView("bert", word_tokenizer(vocab), vocab.info, ["the cat sees a ball . the dog ."],
                                    [], contrastive.Settings())
    wrapped = addons.AddonBatches(_RowSource(), view, None, contrastive_n=4, back_translation_n=0)
    plain = _RowSource().train_batch(torch.Generator().manual_seed(7))
    batch = wrapped.train_batch(torch.Generator().manual_seed(7))
    assert torch.equal(batch.input_ids, plain.input_ids)  # the family's draws come first, byte for byte
    assert batch.addons[contrastive.IDS_KEY].shape[0] == 4 and wrapped.validation_note == "inner"
    validation = wrapped.validation_batches(lambda i: torch.Generator().manual_seed(i))
    assert [contrastive.IDS_KEY in b.addons for b in validation] == [True, True]
    moved = batch.to("cpu")
    assert torch.equal(moved.addons[contrastive.IDS_KEY], batch.addons[contrastive.IDS_KEY])


def test_addon_batches_pass_the_step_so_an_addon_can_start_later(monkeypatch):
    vocab = StringVocab("the cat sees a ball . dog".split())
    view = contrastive.SentenceView("bert", word_tokenizer(vocab), vocab.info, ["the cat sees a ball . the dog ."],
                                    [], contrastive.Settings())
    data = back_translation.MonolingualData(bt_codec(), TRAIN_PAIRS, HELD_OUT)
    wrapped = addons.AddonBatches(_RowSource(), view, data, 2, 2, back_translation_start=3, contrastive_start=5)
    flags = [(bool(b.addons[contrastive.ACTIVE_KEY]), bool(b.addons[back_translation.ACTIVE_KEY]))
             for b in (wrapped.train_batch_at(step, torch.Generator().manual_seed(0)) for step in (1, 3, 5))]
    assert flags == [(False, False), (False, True), (True, True)]
    early, late = (wrapped.train_batch_at(s, torch.Generator().manual_seed(0)) for s in (1, 9))
    assert all(torch.equal(early.addons[k], late.addons[k]) for k in back_translation.KEYS)  # drawn either way
    model = toy_mass({"seq2seq": 0.0, "translation": 1.0, "back_translation": 1.0})
    monkeypatch.setattr(back_translation, "translate", lambda *args: pytest.fail("back-translated too early"))
    _, parts = back_translation.loss(model, early, back_translation.Settings(), bt_codec())
    assert set(parts) == {"translation_zh_en"}  # not computed at all (null in the metrics row), not a 0
    _, parts = back_translation.loss(model, late, back_translation.Settings(back_translate=False), bt_codec())
    assert set(parts) == {"translation_zh_en"}  # the control run


def attached(model, settings: dict):
    model.addons = addons.Addons(addons.settings_objects(settings))
    return model


def contrastive_batch(family: str, rows, sentences, seed: int = 1) -> Batch:
    batch = make_batch(family, rows, leak_settings(family), seed=seed)
    ids = contrastive.pad([contrastive.frame(s, VOCAB.info, family, 32) for s in sentences], VOCAB.info.pad_id)
    batch.addons = {contrastive.IDS_KEY: ids}
    return batch


@pytest.mark.parametrize("family", ["bert", "gpt"])
def test_contrastive_rows_and_family_rows_do_not_leak_into_each_other(family):
    """The family's parts do not move when the contrastive sentences change, and the contrastive part does not move
    when a family row's tokens change (training mode: the dropout masks are drawn in the same order each time)."""
    main = "mlm" if family == "bert" else "clm"
    model = attached(make_model(family, leak_settings(family), {main: 1.0, "contrastive": 1.0}),
                     {"contrastive": dataclasses.asdict(contrastive.Settings())})
    model.train()
    rows = random_rows(2, 12, seed=3)
    sentences = [[20, 21, 22, 23], [24, 25, 26], [27, 28, 29, 30, 31]]

    def parts(rows, sentences):
        torch.manual_seed(0)
        with torch.no_grad():
            return model.loss(contrastive_batch(family, rows, sentences)).parts

    base = parts(rows, sentences)
    other_sentences = parts(rows, [[30, 31, 32], [33, 34, 35, 36], [21, 22]])
    assert other_sentences[main] == base[main] and other_sentences["contrastive"] != base["contrastive"]
    changed = rows.clone()
    changed[0, 4] = changed[0, 4] + 1
    other_rows = parts(changed, sentences)
    assert other_rows["contrastive"] == base["contrastive"]


# ------------------------------------------------------------------------------------------------ adversarial

@hypothesis_settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5), st.floats(0.01, 10.0), st.integers(0, 10_000))
def test_projection_puts_every_example_in_the_ball_and_keeps_the_ones_inside(B, T, E, epsilon, seed):
    delta = torch.randn(B, T, E, generator=torch.Generator().manual_seed(seed)) * 3
    projected = adversarial.project(delta, epsilon)
    norms, before = projected.flatten(1).norm(dim=1), delta.flatten(1).norm(dim=1)
    assert torch.all(norms <= epsilon * (1 + 1e-5))
    inside = before <= epsilon
    assert torch.allclose(projected[inside], delta[inside])
    cosine = torch.nn.functional.cosine_similarity(projected.flatten(1), delta.flatten(1), dim=1)
    assert torch.all(cosine > 1 - 1e-5)  # scaled, never turned


def perturbation(model, batch, settings, seed=0):
    return adversarial.EmbeddingPerturbation(model.backbone.embeddings.token, VOCAB.info.pad_id, settings,
                                             torch.Generator().manual_seed(seed))


def test_smart_ascent_stays_in_the_ball_keeps_padding_clean_and_raises_the_divergence():
    model = make_model("bert", leak_settings("bert")).train()
    settings = adversarial.Settings(steps=2, epsilon=0.5, step_size=0.5, init_magnitude=0.05)
    rows = [torch.tensor(r) for r in random_rows(3, 10, seed=2).tolist()]
    rows[1] = rows[1][:6]  # a shorter row: padding in the batch
    batch = make_batch("bert", rows, leak_settings("bert"))
    clean = model.target_logits(batch)
    p = perturbation(model, batch, settings)
    replay = adversarial._DropoutReplay(torch.device("cpu"))
    replay.replay()
    with p.active():
        start = adversarial.symmetric_kl(clean.detach(), model.target_logits(batch)).item()  # at delta_0
    p.deltas = []  # start again from the same delta_0 (same generator seed)
    p.generator = torch.Generator().manual_seed(0)
    regulariser, _ = adversarial.smart(lambda: model.target_logits(batch), clean, p, replay)
    assert regulariser.item() > start > 0  # the ascent found a worse perturbation than the random start
    for delta, real in zip(p.deltas, p.real):
        assert torch.all(delta.flatten(1).norm(dim=1) <= 0.5 * (1 + 1e-5))
        assert torch.all(delta[~real] == 0)  # padding stays clean
    assert (batch.input_ids == VOCAB.info.pad_id).any()


def test_smart_reads_no_target_but_freelb_does():
    """The leakage test. Two batches with the same (masked) input and different masked tokens: SMART's perturbation
    and its perturbed predictions are identical; FreeLB's ascent, driven by the targets' loss, moves delta
    differently (Kurakin et al.'s label leaking), which is why pretraining uses SMART."""
    settings = leak_settings("bert")
    model = make_model("bert", settings, {"mlm": 1.0, "nsp": 0.0}).eval()
    rows = random_rows(2, 12, seed=3)
    base = make_batch("bert", rows, settings, seed=5)
    target = (base.targets[0] != IGNORE_INDEX).nonzero()[0, 0].item()
    changed_rows = rows.clone()
    changed_rows[0, target] = changed_rows[0, target] + 1
    other = make_batch("bert", changed_rows, settings, seed=5)
    assert torch.equal(base.input_ids, other.input_ids) and not torch.equal(base.targets, other.targets)
    ascent = adversarial.Settings(steps=2, epsilon=1.0, step_size=0.5)

    def smart_delta(batch):
        clean = model.target_logits(batch)
        p = perturbation(model, batch, ascent)
        _, perturbed = adversarial.smart(lambda: model.target_logits(batch), clean, p,
                                         adversarial._DropoutReplay(torch.device("cpu")))
        return p.deltas[0].detach(), perturbed.detach()

    def freelb_delta(batch):
        p = perturbation(model, batch, ascent)
        targets = batch.targets[batch.targets != IGNORE_INDEX]
        adversarial.freelb(lambda logits: torch.nn.functional.cross_entropy(logits, targets),
                           lambda: model.target_logits(batch), p, adversarial._DropoutReplay(torch.device("cpu")))
        return p.deltas[0].detach()

    (delta_a, logits_a), (delta_b, logits_b) = smart_delta(base), smart_delta(other)
    assert torch.equal(delta_a, delta_b) and torch.equal(logits_a, logits_b)
    assert not torch.allclose(freelb_delta(base), freelb_delta(other))


def test_adversarial_pretraining_logs_clean_and_adversarial_parts_and_trains_every_parameter():
    model = attached(make_model("bert", leak_settings("bert"), {"mlm": 1.0, "nsp": 1.0, "adversarial": 1.0}),
                     {"adversarial": dataclasses.asdict(adversarial.Settings())}).train()
    batch = make_batch("bert", random_rows(2, 12, seed=4), leak_settings("bert"))
    out = model.loss(batch)
    assert {"mlm", "nsp", "adversarial", "clean_nll", "adversarial_nll"} == set(out.parts)
    # plain floats on both sides: pytest >= 9 no longer iterates a 0-d tensor inside approx
    parts_sum = sum(out.parts[name].item() for name in ("mlm", "nsp", "adversarial"))
    assert out.total.item() == pytest.approx(parts_sum, rel=1e-5)
    out.total.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    state = torch.get_rng_state()
    model.loss(batch)
    assert not torch.equal(torch.get_rng_state(), state)  # the RNG moves on after the replayed passes


# ------------------------------------------------------------------------------------------------ back-translation

def bt_codec(family: str = "mass") -> back_translation.Codec:
    return back_translation.Codec(family, word_tokenizer(BT_VOCAB), BT_VOCAB.info, max_len=32)


TRAIN_PAIRS = (("the cat sees a ball .", "猫 看见 一个 球 。"), ("a cat sees the ball .", "一个 猫 看见 球 。"),
               ("the ball sees a cat .", "球 看见 一个 猫 。"))
HELD_OUT = (("a ball sees the cat .", "一个 球 看见 猫 。"),)


def test_monolingual_sentences_and_real_pairs_come_from_the_training_split_only():
    data = back_translation.MonolingualData(bt_codec(), TRAIN_PAIRS, HELD_OUT)
    train_zh = {tuple(ids) for ids in data.train["zh_target"]}
    held_zh = {tuple(ids) for ids in data.held_out["zh_target"]}
    assert not train_zh & held_zh
    seen = set()
    for seed in range(50):
        drawn = data.sample(torch.Generator().manual_seed(seed), 4)
        assert set(drawn) == set(back_translation.KEYS)
        for key in ("bt_zh_target", "bt_real_source"):
            for row in drawn[key].tolist():
                ids = tuple(t for t in row if t != BT_VOCAB.info.pad_id)
                assert ids in train_zh and ids not in held_zh
                seen.add(ids)
    assert seen == train_zh  # every training sentence is drawn sooner or later
    fixed = data.validation(0, 2)
    assert {tuple(t for t in row if t) for row in fixed["bt_zh_target"].tolist()} == held_zh
    default = back_translation.MonolingualData(bt_codec())  # the synthetic corpus's own split
    assert default.train_pairs == translation.synthetic_pairs("train")
    assert default.validation_pairs == translation.synthetic_pairs("validation")
    assert not {zh for _, zh in default.validation_pairs[:50]} <= {zh for _, zh in default.train_pairs}


def toy_mass(weights):
    settings = objective_module("mass").Settings()
    config = family_model_config("mass", "tiny", BT_VOCAB.info.size, settings=settings)
    return build_model("mass", config, settings, BT_VOCAB.info, weights, seed=0)


def test_back_translation_builds_synthetic_pairs_from_the_models_own_translations(monkeypatch):
    model = toy_mass({"seq2seq": 0.0, "translation": 1.0, "back_translation": 1.0})
    codec = bt_codec()
    data = back_translation.MonolingualData(codec, TRAIN_PAIRS[:1], HELD_OUT)
    batch = Batch(input_ids=torch.zeros(1, 1, dtype=torch.long), attention={}, position_ids=torch.zeros(1, 1),
                  targets=torch.zeros(1, 1), addons=data.sample(torch.Generator().manual_seed(0), 1))
    outputs = iter([[[16, 17, 18, 20, 21]], [[]]])  # zh -> en "the cat sees ball .", then an empty en -> zh
    monkeypatch.setattr(back_translation, "translate", lambda model, sources, limit: next(outputs))
    built = {}
    original = back_translation.training_examples
    monkeypatch.setattr(back_translation, "training_examples",
                        lambda synthetic, real, vocab, max_len: built.update(synthetic=synthetic, real=real)
                        or original(synthetic, real, vocab, max_len))
    loss, parts = back_translation.loss(model, batch, back_translation.Settings(), codec)
    assert built["synthetic"] == [([16, 17, 18, 20, 21], [22, 23, 24, 25, 26])]  # (x_hat, z); the empty one dropped
    assert built["real"] == [([22, 23, 24, 25, 26], [16, 17, 18, 19, 20, 21])]  # (z, x): zh -> en on a real pair
    assert set(parts) == {"back_translation", "translation_zh_en"} and loss.requires_grad
    assert loss.item() == pytest.approx(parts["back_translation"].item() + parts["translation_zh_en"].item())


@pytest.mark.parametrize("family", ["mass", "t5", "cove"])
def test_greedy_back_translation_writes_no_special_token_and_stops(family):
    vocab = StringVocab(BT_WORDS + "translate English to Chinese: Chinese".split())
    settings = objective_module(family).Settings()
    config = family_model_config(family, "tiny", vocab.info.size, settings=settings)
    model = build_model(family, config, settings, vocab.info, {}, seed=0).train()
    sources = torch.tensor([[16, 17, 18, 0], [22, 23, 24, 25]])
    out = back_translation.translate(model, sources, max_new_tokens=7)
    assert model.training  # put back in its mode
    banned = {vocab.info.pad_id, vocab.info.bos_id, vocab.info.mask_id, vocab.info.cls_id, vocab.info.eos_id,
              *vocab.info.sentinel_ids}
    assert len(out) == 2 and all(len(row) <= 7 and not banned & set(row) for row in out)


def test_a_back_translated_pairs_decoder_does_not_see_later_target_tokens():
    model = toy_mass({"seq2seq": 0.0, "translation": 1.0}).eval()
    source, chinese = [16, 17, 18, 20, 21], [22, 23, 24, 25, 26]

    def logits(zh):
        batch = collate(back_translation.training_examples([(source, zh)], [], BT_VOCAB.info, 32), BT_VOCAB.info.pad_id)
        with torch.no_grad():
            return model.target_logits(batch)  # (S, V): row i predicts target i

    base = logits(chinese)
    for j in range(len(chinese)):
        changed = list(chinese)
        changed[j] = 22 + (changed[j] - 22 + 2) % 5
        moved = logits(changed)
        assert all(torch.allclose(moved[i], base[i], atol=1e-5) for i in range(j + 1))
        assert not torch.allclose(moved[j + 1], base[j + 1], atol=1e-5)


# ------------------------------------------------------------------------------------------------ weights and bad input

def test_addons_are_opt_in_objectives_of_the_families_that_support_them():
    specs = {spec.name: [o.name for o in spec.objectives] for spec in api.families()}
    assert specs["bert"] == ["mlm", "nsp", "contrastive", "adversarial"]
    assert specs["gpt"] == ["clm", "contrastive"] and specs["xlnet"] == ["plm"]
    assert specs["t5"] == ["span_corruption", "translation", "back_translation"]
    assert specs["cove"] == ["nmt", "back_translation"]
    assert resolve_objective_weights("bert", None, {}) == {"mlm": 1.0, "nsp": 1.0}  # off, and not listed
    assert resolve_objective_weights("gpt", None, {"contrastive": 2}) == {"clm": 1.0, "contrastive": 2.0}
    assert api.family_settings("bert")["contrastive.temperature"] == 0.05
    assert "SimCSE" in api.family_settings_help("bert")["contrastive.temperature"]


@pytest.mark.parametrize("argv, message", [
    (["--family", "t5", "--objective", "contrastive=1"],
     "contrastive is an add-on objective of bert, roberta, albert, electra, mpnet, unilm, gpt, gpt2, not of t5"),
    (["--family", "elmo", "--objective", "contrastive=1"], "not of elmo"),
    (["--family", "gpt", "--objective", "adversarial=1"], "adversarial is an add-on objective of bert, roberta, "
                                                          "albert, spanbert, not of gpt"),
    (["--family", "bert", "--objective", "back_translation=1"], "back_translation is an add-on objective of mass"),
    (["--family", "t5", "--objective", "back_translation=1"], "turn that on too (--objective translation=1)"),
    (["--family", "roberta", "--objective", "mlm=0", "--objective", "contrastive=1"],
     "still needs one of its own objectives (mlm)"),
    (["--family", "bert", "--objective", "contrastive=1", "--set", "contrastive.temperature=0"],
     "contrastive.temperature must be in (0, 10]"),
    (["--family", "bert", "--objective", "contrastive=1", "--set", "contrastive.tau=0.1"],
     "unknown setting 'contrastive.tau'"),
    (["--family", "bert", "--set", "adversarial.steps=2"], "adversarial.steps is set but adversarial is off"),
    (["--family", "bert", "--objective", "adversarial=1", "--set", "adversarial.epsilon=-1"],
     "adversarial.epsilon must be a finite number > 0"),
])
def test_bad_addon_arguments_exit_with_one_clear_line(tmp_path, capsys, argv, message):
    code = train_cli.main(argv + ["--out", str(tmp_path / "run"), "--home", str(tmp_path / "home")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_an_addon_alone_is_refused_by_the_api_with_the_familys_own_objectives_named(tmp_path):
    store = api.RunStore(tmp_path)
    with pytest.raises(ValueError, match=r"Turn on at least one of RoBERTa's objectives \(mlm\)"):
        api.training_command(store, "roberta", objectives={"mlm": 0, "contrastive": 1})
    command = api.training_command(store, "bert", objectives={"contrastive": 1},
                                   settings={"contrastive.temperature": "0.1"})
    assert "--objective contrastive=1.0" in command and "--set contrastive.temperature=0.1" in command


# ------------------------------------------------------------------------------------------------ training runs

def cli(out, family, *args, home):
    return train_cli.main(["--family", family, "--preset", "tiny", "--out", str(out), "--device", "cpu",
                           "--home", str(home), "--checkpoint-every", "0", "--log-every", "1", *args])


def falls(values, window: int = 5) -> bool:
    return sum(values[-window:]) / window < sum(values[:window]) / window


@pytest.fixture(scope="module")
def bert_run(lab_home_dir):
    """A tiny BERT trained with both add-ons, in the app's lab home (the app tests read it)."""
    out = lab_home_dir / "runs" / "bert-tiny-addons"
    if not (out / "model.safetensors").exists():
        pytest.MonkeyPatch().setattr(train_cli.StopRequest, "install", lambda self: None)
        assert cli(out, "bert", "--objective", "contrastive=1", "--objective", "adversarial=1", "--steps", "40",
                   "--batch-size", "8", "--eval-every", "20", home=lab_home_dir) == 0
    return out


@pytest.mark.slow
def test_bert_with_contrastive_and_adversarial_trains_and_reports_its_numbers(bert_run):
    rows = rows_of(bert_run)
    train = [r for r in rows if r["split"] == "train"]
    assert len(train) == 40
    assert set(train[0]["losses"]) == {"mlm", "nsp", "contrastive", "adversarial", "clean_nll", "adversarial_nll"}
    assert all(v is not None and math.isfinite(v) for r in train for v in [r["loss"], *r["losses"].values()])
    assert falls([r["losses"]["contrastive"] for r in train]) and falls([r["losses"]["mlm"] for r in train])
    assert all(r["losses"]["adversarial"] >= 0 for r in train)
    val = [r for r in rows if r["split"] == "val"]
    assert len(val) == 2 and all({"alignment", "uniformity", "topic_gap"} <= set(r) for r in val)
    assert 0 <= val[-1]["alignment"] <= 4 and val[-1]["uniformity"] <= 0
    config = json.loads((bert_run / "config.json").read_text())
    assert config["objectives"] == {"mlm": 1.0, "nsp": 1.0, "contrastive": 1.0, "adversarial": 1.0}
    facts = config["addons"]
    assert facts["contrastive"]["pooling"] == "mean" and facts["contrastive"]["train_sentences"] > 1000
    assert facts["adversarial"]["method"] == "smart" and facts["adversarial"]["settings"]["steps"] == 1
    assert config["train"]["addons"]["contrastive"]["temperature"] == 0.05
    assert api.sentence_similarity([bert_run])[0].family == "bert"  # the run loads like any other


@pytest.mark.slow
def test_a_resumed_run_with_addons_repeats_the_straight_one(tmp_path, lab_home_dir, monkeypatch):
    monkeypatch.setattr(train_cli.StopRequest, "install", lambda self: None)
    common = ["--objective", "contrastive=1", "--steps", "4", "--batch-size", "4", "--eval-every", "0",
              "--checkpoint-every", "2"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert cli(straight, "gpt", *common, home=lab_home_dir) == 0
    calls = []
    monkeypatch.setattr(train_cli.StopRequest, "__call__", lambda self: calls.append(1) or len(calls) >= 2)
    assert cli(stopped, "gpt", *common, home=lab_home_dir) == 0
    monkeypatch.setattr(train_cli.StopRequest, "__call__", lambda self: False)
    assert train_cli.main(["--out", str(stopped), "--resume", "--home", str(lab_home_dir)]) == 0
    a = [r["losses"] for r in rows_of(straight) if r["split"] == "train"]
    b = [r["losses"] for r in rows_of(stopped) if r["split"] == "train"]
    assert len(b) == 4 and a == b and set(a[0]) == {"clm", "contrastive"}


@pytest.mark.slow
@pytest.mark.parametrize("family, own", [("mass", ["--objective", "seq2seq=0", "--objective", "translation=1"]),
                                         ("cove", [])])
def test_back_translation_trains_both_directions_and_logs_bleu(family, own, tmp_path, lab_home_dir, monkeypatch):
    monkeypatch.setattr(train_cli.StopRequest, "install", lambda self: None)
    out = tmp_path / "run"
    assert cli(out, family, *own, "--objective", "back_translation=1", "--steps", "16", "--batch-size", "4",
               "--lr", "3e-3", "--eval-every", "0", "--set", "back_translation.eval_pairs=4",
               "--set", "back_translation.max_new_tokens=12", home=lab_home_dir) == 0
    rows = rows_of(out)
    train = [r for r in rows if r["split"] == "train"]
    assert {"back_translation", "translation_zh_en"} <= set(train[0]["losses"])
    assert all(math.isfinite(v) for r in train for v in r["losses"].values())
    assert falls([r["losses"]["translation_zh_en"] for r in train])
    val = rows[-1]
    assert val["split"] == "val" and all(0 <= val[k] <= 100 for k in ("bleu_en_zh", "bleu_zh_en", "chrf_en_zh",
                                                                      "chrf_zh_en"))
    facts = json.loads((out / "config.json").read_text())["addons"]["back_translation"]
    assert facts["bleu_pairs"] == 4 and facts["train_sentences"] == len(translation.synthetic_pairs("train"))


# ------------------------------------------------------------------------------------------------ fine-tuning

@pytest.mark.slow
def test_adversarial_fine_tuning_logs_both_losses_and_is_recorded(bert_run, tmp_path):
    from lab_models.inference.finetuning.config import FinetuneConfig
    from lab_models.inference.finetuning.run import finetune
    from lab_models.inference.finetuning.results import finetune_command, start_finetune

    with pytest.raises(ValueError, match="adversarial must be one of none, freelb, smart"):
        FinetuneConfig(run_dir=str(bert_run), task="topic", adversarial="pgd")
    with pytest.raises(ValueError, match="fine-tune the cove run without it"):
        FinetuneConfig(run_dir=str(bert_run), task="topic", adversarial="smart").resolved("cove", 64, 128)
    queued = []
    manager = type("Jobs", (), {"home": bert_run.parent.parent,
                                "start_command": lambda self, *args, **kwargs: queued.append(args) or "queued"})()
    assert start_finetune(manager, str(bert_run), "topic", steps=3, adversarial="freelb") == "queued"
    assert "--adversarial" in queued[0][1]  # the page's Start queues it (it once failed a check before queueing)
    for method in ("freelb", "smart"):
        config = FinetuneConfig(run_dir=str(bert_run), task="topic", steps=3, batch_size=8, eval_every=3,
                                adversarial=method, out=str(tmp_path / method))
        assert ["--adversarial", method] == finetune_command(config)[-4:-2]
        result = finetune(config)
        assert result["adversarial"] == method and 0 <= result["accuracy"] <= 1
        train = [r for r in rows_of(tmp_path / method) if r["split"] == "train"]
        assert all({"task", "adversarial", "adversarial_task"} == set(r["losses"]) for r in train)
        assert all(math.isfinite(v) for r in train for v in r["losses"].values())


# ------------------------------------------------------------------------------------------------ the views

@pytest.mark.slow
def test_sentence_similarity_view_and_figures(bert_run):
    from app.train.addon_figures import addon_figure
    from app.understand.similarity_figures import topic_gap_figure, topic_similarity_figure

    auto, mean = api.sentence_similarity([bert_run, bert_run], "auto", 5)[0], api.sentence_similarity(bert_run,
                                                                                                      "mean", 5)[0]
    assert auto.pooling == "first" and mean.pooling == "mean" and auto.sentences == 25
    assert 0 <= auto.auc <= 1 and 0 <= mean.nearest_same_topic <= 1 and api.sentence_similarity(bert_run)[0].pooling \
        == "mean"  # the default: what the contrastive add-on trains for BERT
    assert len(auto.matrix) == 5 and all(len(line) == 5 for line in auto.matrix)
    assert -1 <= auto.different <= 1 and auto.gap == pytest.approx(auto.same - auto.different)
    with pytest.raises(ValueError, match="unknown pooling"):
        api.sentence_similarity(bert_run, "cls")
    with pytest.raises(ValueError, match="from 2 to 80"):
        api.sentence_similarity(bert_run, "auto", 1)
    heatmaps = topic_similarity_figure([auto, mean])
    assert [t.type for t in heatmaps.data] == ["heatmap", "heatmap"] and "gap" in heatmaps.layout.annotations[0].text
    assert len(topic_gap_figure([auto]).data) == 2
    figure = addon_figure(rows_of(bert_run))
    assert {t.name for t in figure.data} == {"topic gap (same − different cosine, ↑)", "alignment (↓)",
                                             "uniformity (↓)"}
    assert "No add-on numbers" in addon_figure([{"split": "val", "step": 1, "loss": 1.0}]).layout.annotations[0].text


@pytest.mark.slow
def test_the_app_shows_the_addons(running_app, bert_run):
    from gradio_client import Client

    from app.i18n.language import english, text, translations
    from app.train.tab import TrainView

    rows = TrainView(bert_run.parent.parent, None).family_defaults("bert")[1:9]  # (checkbox, weight) per objective
    assert [row["label"] for row in rows[0::2]] == ["mlm", "nsp", "contrastive", "adversarial"]
    assert [row["value"] for row in rows[0::2]] == [True, True, False, False]  # the add-ons start off
    # the help text is in the page's language (app/i18n/locales): SimCSE is named in English and in Chinese
    assert rows[4]["info"] == str(text("train.objective_contrastive"))
    assert "SimCSE" in english("train.objective_contrastive") and "SimCSE" in translations()["zh"]["train"][
        "objective_contrastive"]
    client = Client(running_app[0], verbose=False)
    figure = client.predict(bert_run.name, api_name="/show_addon_numbers")  # (the State output is not returned)
    assert "topic gap" in json.dumps(figure)
    heatmaps, bars, table = client.predict([bert_run.name], "auto", 5, api_name="/understand_sentences")
    assert table["data"][0][0] == bert_run.name and json.loads(heatmaps["plot"])["data"][0]["type"] == "heatmap"
    with pytest.raises(Exception, match="Pick at least one run"):
        client.predict([], "auto", 5, api_name="/understand_sentences")


def test_the_sentence_runs_refresh_keeps_nothing_of_a_value_that_is_not_a_list_of_names(tmp_path):
    """An API client may send anything as the picked runs (found by the fuzz suite: `true` was a TypeError)."""
    from app.understand.similarity_panel import SentenceSimilarityView

    view = SentenceSimilarityView(tmp_path, None)
    view.run_choices = lambda: [("a · gpt · step 1", "a")]
    for value in (True, 3, [["a"]], None):
        assert view.refresh_runs(value)["value"] == []
    assert view.refresh_runs(["a", "gone"])["value"] == ["a"]
