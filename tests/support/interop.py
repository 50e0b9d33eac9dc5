"""Shared pieces of the interop tests (tests/interop/): small tokenizers of every kind, random-init
transformers checkpoints saved into temporary folders (nothing is downloaded), and the lab's logits of an imported
or exported model next to the reference's.

Random init is not enough for a parity test: transformers initialises biases to 0 and LayerNorm weights to 1, so a
bias or a LayerNorm put in the wrong place would still agree. `perturb` adds noise to every parameter first.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from lab_models.training import runs
from lab_models.inference.loading import load_run
from lab_models.models.family import build_model, family_model_config
from lab_models.objectives import objective_module
from lab_models.text.tokenization import train_tokenizer
from lab_models.objectives.settings import settings_to_dict
from lab_models.text.vocab import prepare_tokenizer

TEXTS = ["the cat sat on the mat .", "a dog ran in the park and the cat ran too !", "hello world , the end .",
         "the girl eats a red apple at the market .", "she walks to the park every morning ."] * 8
ATOL = 1e-4  # the bound for fp32 logits
LAB_VOCAB_SIZES = {"wordpiece": 90, "bpe": 90, "unigram": 46, "byte_bpe": 280}  # what TEXTS supports, per kind


def byte_bpe(specials: list[str], vocab_size: int = 260) -> Tokenizer:
    """GPT-2 / RoBERTa style byte-level BPE over ASCII text (no 256-byte alphabet: every token decodes to text)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials))
    return tok


def wordpiece(vocab_size: int = 120) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(TEXTS, trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    return tok


def unigram(vocab_size: int = 90) -> Tokenizer:
    """ALBERT style: SentencePiece-like unigram with ▁ word starts."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(TEXTS, trainers.UnigramTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], unk_token="<unk>"))
    return tok


def gpt_bpe(vocab_size: int = 120) -> Tokenizer:
    """GPT-1 style BPE: lower case, `</w>` end-of-word marks, only <unk> special (no end-of-text token)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"],
                                                       end_of_word_suffix="</w>"))
    return tok


def _words_and_characters() -> tuple[list[str], list[str]]:
    words = sorted({word for text in TEXTS for word in text.split()})
    characters = sorted({char for text in TEXTS for char in text if not char.isspace()})
    return words, characters


def sentencepiece_like(head: list[str], tail: list[str] = (), unk_id: int = 0) -> Tokenizer:
    """A SentencePiece-style unigram tokenizer over a tiny hand-made vocabulary (nothing trained, so the same on every
    machine): the special tokens `head` first, then "▁", every word of TEXTS as "▁word", every character, then the
    special tokens `tail` (T5's sentinels, counted down). Pre-tokenized and decoded as T5's and XLNet's are (whitespace
    split, then ▁ before every word)."""
    words, characters = _words_and_characters()
    vocab = [(token, 0.0) for token in head] + [("\u2581", -3.0)]
    vocab += [("\u2581" + word, -4.0 - 0.01 * i) for i, word in enumerate(words)]
    vocab += [(char, -8.0) for char in characters] + [(token, 0.0) for token in tail]
    tok = Tokenizer(models.Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    return tok


def t5_sentencepiece(n_sentinels: int = 8) -> Tokenizer:
    """T5's layout: <pad> 0, </s> 1, <unk> 2, the pieces, then <extra_id_{n-1}> ... <extra_id_0> (the last id)."""
    return sentencepiece_like(["<pad>", "</s>", "<unk>"], [f"<extra_id_{k}>" for k in range(n_sentinels - 1, -1, -1)],
                              unk_id=2)


XLNET_SPECIALS = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]  # xlnet-base's ids


def xlnet_sentencepiece() -> Tokenizer:
    return sentencepiece_like(XLNET_SPECIALS, unk_id=0)


def mpnet_wordpiece() -> Tokenizer:
    """mpnet-base's layout: <s> 0, <pad> 1, </s> 2, <unk> 3, then BERT's word pieces ([UNK] among them, the one the
    WordPiece model uses), <mask> last; lower-cased, BERT's pre-tokenizer."""
    words, characters = _words_and_characters()
    tokens = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", *words, *(c for c in characters if c not in words),
              *(f"##{c}" for c in characters), "<mask>"]
    tok = Tokenizer(models.WordPiece({token: i for i, token in enumerate(tokens)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    return tok


def perturb(model: torch.nn.Module, seed: int = 0, scale: float = 0.1) -> torch.nn.Module:
    """Add N(0, scale) noise to every parameter, in place (tied parameters once); returns the model in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * scale)
    return model.eval()


def save_hf(model, tokenizer: Tokenizer, folder: Path, **special_tokens) -> Path:
    """save_pretrained of the model and of the tokenizer (a fast tokenizer: tokenizer.json + tokenizer_config.json)."""
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special_tokens).save_pretrained(folder)
    return folder


def causal(T: int) -> torch.Tensor:
    return torch.ones(1, T, T, dtype=torch.bool).tril()


def full(T: int) -> torch.Tensor:
    return torch.ones(1, T, T, dtype=torch.bool)


def backbone_logits(backbone, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The lab's vocabulary logits (1, T, V) of `ids` (1, T) under `mask`, positions 0..T-1, segment 0."""
    T = ids.shape[1]
    segments = torch.zeros_like(ids) if backbone.config.n_segments else None
    with torch.no_grad():
        return backbone.lm_logits(backbone(ids, mask, torch.arange(T).unsqueeze(0), segments))


def assert_close(lab: torch.Tensor, reference: torch.Tensor, atol: float = ATOL) -> float:
    assert lab.shape == reference.shape, (lab.shape, reference.shape)
    gap = (lab.float() - reference.float()).abs().max().item()
    assert gap <= atol, f"max abs difference {gap:.3g} > {atol}"
    return gap


def masked_ids(tokenizer: Tokenizer, text: str, mask_id: int) -> tuple[list[int], list[int]]:
    """The ids `api.fill_mask` builds for `text` with [MASK] slots: each piece encoded on its own (the piece before
    a slot without its trailing spaces), the mask id at each slot. Returns (ids, slot positions)."""
    pieces = text.split("[MASK]")
    ids, slots = [], []
    for i, piece in enumerate(pieces):
        if i < len(pieces) - 1:
            piece = piece.rstrip()
        ids += tokenizer.encode(piece, add_special_tokens=False).ids if piece.strip() else []
        if i < len(pieces) - 1:
            slots.append(len(ids))
            ids.append(mask_id)
    return ids, slots


def display(tokenizer: Tokenizer, left: list[int], token_id: int) -> str:
    """How the lab shows a predicted token after `left` (inference/generation/context.py `display_pieces`): the text it
    adds."""
    from lab_models.text.tokenizer_inspect import tokenizer_kind
    from lab_models.text.word_split import close_wide_spaces

    def decode(ids: list[int]) -> str:  # a WordPiece decoder spaces every Chinese character; the lab closes them
        text = tokenizer.decode(ids, skip_special_tokens=True)
        return close_wide_spaces(text) if tokenizer_kind(tokenizer) == "wordpiece" else text

    base = decode(left[-32:])
    full_text = decode(left[-32:] + [token_id])
    return full_text[len(base):] if full_text.startswith(base) else decode([token_id])


def reference_top_k(logits_row: torch.Tensor, banned: set[int], k: int = 5) -> tuple[list[int], list[float]]:
    """Top-k ids and probabilities of one logits row as the lab's fill_mask gives them: the probabilities are the
    model's own (a softmax over the whole vocabulary, as transformers' fill-mask pipeline), the special tokens are
    left out of the ranking."""
    probs = torch.softmax(logits_row.float(), dim=-1)
    ranked = probs.clone()
    ranked[list(banned)] = -1.0
    top = torch.topk(ranked, k)
    return top.indices.tolist(), top.values.tolist()


def special_ids(tokenizer: Tokenizer) -> set[int]:
    return {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}


def write_lab_run(run_dir: Path, family: str, kind: str, seed: int = 0, **model_overrides) -> Path:
    """A run folder as the trainer writes it (config.json, tokenizer.json, model.safetensors) with the family's
    current defaults, a lab tokenizer of `kind`, and perturbed random weights: a lab run to export."""
    run_dir.mkdir(parents=True)
    tokenizer, vocab = prepare_tokenizer(train_tokenizer(kind, TEXTS, vocab_size=LAB_VOCAB_SIZES[kind]))
    (run_dir / runs.TOKENIZER_FILE).write_text(tokenizer.to_str(), encoding="utf-8")
    settings = objective_module(family).Settings()
    config = family_model_config(family, "tiny", vocab.size, settings=settings, dropout=0.0,
                                 **{"max_positions": 32, **model_overrides})
    model = perturb(build_model(family, config, settings, vocab, None, seed=seed), seed=seed)
    runs.write_config(run_dir, {"family": family, "model": config.to_dict(), "settings": settings_to_dict(settings),
                                "objectives": model.objective_weights, "preset": "tiny", "corpus": "synthetic",
                                "seq_len": 32})
    runs.save_weights(model, run_dir / runs.MODEL_FILE)
    runs.write_status(run_dir, "finished", step=0, total_steps=0)
    return run_dir


def lab_run(run_dir: Path):
    return load_run(run_dir)


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def save_tiny_checkpoint(family: str, folder: Path) -> Path:
    """A small random (perturbed) T5, MPNet or XLNet with its own tokenizer layout (t5_sentencepiece, mpnet_wordpiece,
    xlnet_sentencepiece), saved by save_pretrained: a folder as a hub download holds it."""
    import transformers

    torch.manual_seed(0)
    if family == "t5":
        tokenizer = t5_sentencepiece(8)
        model = transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=tokenizer.get_vocab_size(), d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
            relative_attention_num_buckets=8, relative_attention_max_distance=20, pad_token_id=0, eos_token_id=1,
            decoder_start_token_id=0))
        hf_tokenizer = transformers.T5TokenizerFast(tokenizer_object=tokenizer, extra_ids=8)
    elif family == "mpnet":
        tokenizer = mpnet_wordpiece()
        model = transformers.MPNetForMaskedLM(transformers.MPNetConfig(
            vocab_size=tokenizer.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=40, pad_token_id=1))
        hf_tokenizer = transformers.MPNetTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]")
    elif family == "xlnet":
        tokenizer = xlnet_sentencepiece()
        model = transformers.XLNetLMHeadModel(transformers.XLNetConfig(
            vocab_size=tokenizer.get_vocab_size(), d_model=32, n_layer=2, n_head=4, d_inner=64, pad_token_id=5,
            bos_token_id=1, eos_token_id=2))
        hf_tokenizer = transformers.XLNetTokenizerFast(tokenizer_object=tokenizer)
    else:
        raise ValueError(f"no tiny checkpoint recipe for {family!r}")
    perturb(model, scale=0.3).save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    return folder


# ---- realistic tokenizers for the user-level parity tests (tests/interop/test_user_level_parity.py) -----------------------------
# A Chinese text the lab's corpora do not hold, and English with capitals, so that the normalisers matter (BERT's
# splitting of Chinese characters and lower-casing) and the framing post-processors are the checkpoints' own.
CHINESE_TEXT = ["秋天的早晨，河边的雾气慢慢散开，渔夫划着小船回到岸边。", "图书馆三楼有一间安静的阅览室，学生们在那里复习功课。",
                "山上的寺庙已经有八百年的历史，每年春天都有很多游客来参观。", "她跨过小桥，走进了开满桃花的村子。",
                "城市的地铁线路越来越多，上班的人不再担心堵车。", "老师说，读书的时候要认真思考，不要只记住答案。",
                "火车穿过长长的隧道，窗外忽然出现了一片金黄的稻田。", "爷爷每天下午都在院子里下棋，邻居们常常围过来看。",
                "这家小饭馆的面条很有名，排队的客人从门口一直排到街角。", "雨停了以后，天空中出现了一道彩虹，孩子们高兴地跑出门外。"]
ENGLISH_TEXT = ["The Library opens at Nine every Morning, and Students read there until Noon.",
                "A Fisherman rowed his small Boat back to the River bank.", "The Train crossed a long Tunnel near the Mountains.",
                "She walked across the Bridge into a Village full of peach blossoms.",
                "My Grandfather plays chess in the Garden every afternoon."]
MIXED_TEXTS = (CHINESE_TEXT + ENGLISH_TEXT) * 4


def bert_style_wordpiece(specials=("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), cls="[CLS]", sep="[SEP]",
                         roberta_pairs: bool = False, vocab_size: int = 400, unk: str = "[UNK]") -> Tokenizer:
    """BERT's tokenizer as bert-base-chinese and bert-base-uncased build it: BertNormalizer (each Chinese character
    its own word, lower case), BERT's pre-tokenizer, `##` pieces, and the framing post-processor `cls $A sep` (pairs
    `cls $A sep $B:1 sep:1`, or MPNet/RoBERTa's `cls $A sep sep $B sep`)."""
    from tokenizers import processors

    tok = Tokenizer(models.WordPiece(unk_token=unk))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(MIXED_TEXTS, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(specials)))
    ids = [(cls, tok.token_to_id(cls)), (sep, tok.token_to_id(sep))]
    pair = f"{cls} $A {sep} {sep} $B {sep}" if roberta_pairs else f"{cls} $A {sep} $B:1 {sep}:1"
    tok.post_processor = processors.TemplateProcessing(single=f"{cls} $A {sep}", pair=pair, special_tokens=ids)
    return tok


def roberta_style_bpe(vocab_size: int = 500) -> Tokenizer:
    """RoBERTa's byte-level BPE with its RobertaProcessing: <s> $A </s>, pairs <s> A </s></s> B </s>."""
    from tokenizers import processors

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(MIXED_TEXTS, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")), trim_offsets=True)
    from tokenizers import AddedToken  # roberta-base's <mask> takes the space before it ("small <mask>": no lone Ġ)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    return tok


def gpt2_style_bpe(vocab_size: int = 400) -> Tokenizer:
    """GPT-2's byte-level BPE (the 256-byte alphabet: every script) with its ByteLevel post-processor: no BOS."""
    from tokenizers import processors

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(MIXED_TEXTS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def gpt1_style_bpe(vocab_size: int = 400) -> Tokenizer:
    """GPT-1's BPE: lower case, BERT's pre-tokenizer (each Chinese character its own word), `</w>` word ends."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(MIXED_TEXTS, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>"],
                                                             end_of_word_suffix="</w>"))
    return tok


def sentencepiece_style(head: list[str], tail: list[str] = (), unk_id: int = 0, single: str | None = None,
                        pair: str | None = None, lowercase: bool = False, strip_accents: bool = False) -> Tokenizer:
    """A SentencePiece-style unigram over MIXED_TEXTS (each word "▁word", every character, the specials `head`
    first and `tail` last), optionally lower-cased (ALBERT), with a framing template (`single`, `pair`).
    `strip_accents`: XLNet's and ALBERT's normaliser (`` and '' as ", NFKD, accents dropped), which transformers'
    XLNetTokenizer and AlbertTokenizer build for keep_accents=False (NFKD turns the full-width "，" into ",")."""
    from tokenizers import processors

    import unicodedata

    def normal(text: str) -> str:
        text = unicodedata.normalize("NFKD", text) if strip_accents else text
        return text.lower() if lowercase else text

    words = sorted({normal(word) for text in MIXED_TEXTS for word in text.split() if word.isascii()})
    characters = sorted({char for text in MIXED_TEXTS for char in normal(text) if not char.isspace()})
    vocab = [(token, 0.0) for token in head] + [("\u2581", -3.0)]
    vocab += [("\u2581" + word, -4.0 - 0.01 * i) for i, word in enumerate(words)]
    vocab += [(char, -8.0) for char in characters] + [(token, 0.0) for token in tail]
    tok = Tokenizer(models.Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"'), normalizers.NFKD(),
             normalizers.StripAccents()] if strip_accents else []
    steps += [normalizers.Lowercase()] if lowercase else []
    if steps:
        tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    if single is not None:
        names = {part.split(":")[0] for part in (single + " " + (pair or "")).split() if not part.startswith("$")}
        tok.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=[(name, tok.token_to_id(name)) for name in sorted(names)])
    return tok


def place_in_hf_cache(folder: Path, cache: Path, repo_id: str, commit: str = "0123456789abcdef0123456789abcdef01234567"
                      ) -> Path:
    """Lay the checkpoint `folder` out as `from_pretrained(repo_id)` leaves it in a Hugging Face cache: blobs named
    by their content's hash, a snapshot folder of links into them, refs/main naming the snapshot. Returns the
    snapshot folder."""
    import hashlib
    import os

    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    for file in sorted(Path(folder).iterdir()):
        if not file.is_file():
            continue
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / file.name)
    return snapshot
