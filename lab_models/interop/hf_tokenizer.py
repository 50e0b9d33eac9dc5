"""A checkpoint folder's tokenizer as a `tokenizers` tokenizer.json, its own special tokens playing the lab's roles.

Reading (no transformers at run time; the `tokenizers` library's own model classes):

| the folder holds           | what happens                                                                          |
| -------------------------- | ------------------------------------------------------------------------------------- |
| `tokenizer.json` (fast)    | used as it is                                                                         |
| `vocab.txt` (BERT, ELECTRA) | WordPiece with BERT's normaliser (lower case unless tokenizer_config.json says      |
|                            | do_lower_case=false) and pre-tokenizer, `##` continuations                             |
| `vocab.json` + `merges.txt` | byte-level BPE (GPT-2, RoBERTa), or GPT-1's BPE with the `</w>` end-of-word mark     |
| `spiece.model` only        | refused: converting SentencePiece's protobuf needs sentencepiece; save the tokenizer   |
|                            | once with transformers (`AutoTokenizer.from_pretrained(d).save_pretrained(d)`)         |

The conversions follow transformers' own `convert_slow_tokenizer` (BertConverter, GPT2Converter, RobertaConverter,
OpenAIGPTConverter): the same normalisers, pre-tokenizers, decoders and post-processors.

Roles. The lab's objectives and decoders name special tokens by role ([PAD] [MASK] [CLS] [SEP] [BOS] [EOS], GLM's
[S] [E], T5's sentinels); see lab_models/objectives/common.py. An imported model never saw the lab's own "[MASK]"
string, so each role is played by the checkpoint's token for it (tokenizer_config.json / special_tokens_map.json, or
the architecture's documented defaults), through a chain of stand-ins:

    [PAD] <- pad, eos          [MASK] <- mask            [CLS] <- cls, bos, eos     [SEP] <- sep, eos
    [BOS] <- bos, cls, eos     [EOS] <- eos, sep          [S] <- [BOS]'s token       [E] <- [EOS]'s token

A model whose family never reads a mask token (GPT, GPT-2: converter attribute USES_MASK_TOKEN = False) lets
[MASK] stand in as its [EOS] token. A converter may also prefer other stand-ins for a role (ROLE_CHAINS, e.g. T5's
decoder start).
A role that is still empty gets a new special token with the lab's name, appended after the vocabulary (GPT-1 has no
end-of-text token: it gains "[EOS]"); the importer gives its embedding row the mean of the others and says in the
run's note that the model never saw it (GPT-1's own fine-tuning added its delimiter tokens the same way).

Worked example (GPT-2's tokenizer has one special token, which plays every role):

>>> roles, added, notes = assign_roles({"eos": "<|endoftext|>", "bos": "<|endoftext|>"}, vocab={"<|endoftext|>": 0},
...                                    uses_mask=False)
>>> roles["[PAD]"], roles["[MASK]"], roles["[SEP]"], added
('<|endoftext|>', '<|endoftext|>', '<|endoftext|>', ())
>>> roles, added, notes = assign_roles({"unk": "<unk>"}, vocab={"<unk>": 0}, uses_mask=False)  # GPT-1
>>> added, roles["[BOS]"], roles["[MASK]"]
(('[EOS]',), '[EOS]', '[EOS]')
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from lab_models.messages import LabError, Message
from lab_models.text.vocab import BOS, CLS, EOS, GLM_END, GLM_START, MASK, PAD, SEP, sentinel
from lab_models.text.tokenizer_inspect import tokenizer_kind
from lab_models.interop.checkpoint import read_json_file

TOKENIZER_FILE = "tokenizer.json"
HF_ROLES = ("pad", "mask", "cls", "sep", "bos", "eos", "unk")
# the lab role -> the checkpoint roles that may play it, in order (see the module docstring)
ROLE_CHAINS: dict[str, tuple[str, ...]] = {
    PAD: ("pad", "eos"), MASK: ("mask",), CLS: ("cls", "bos", "eos"), SEP: ("sep", "eos"),
    BOS: ("bos", "cls", "eos"), EOS: ("eos", "sep"),
}
MAX_SENTINELS = 1000

# each architecture's special tokens as its tokenizer class defines them, for folders without a tokenizer config
DEFAULT_SPECIALS: dict[str, dict[str, str]] = {
    "gpt2": {"bos": "<|endoftext|>", "eos": "<|endoftext|>", "unk": "<|endoftext|>"},
    "openai-gpt": {"unk": "<unk>"},
    "bert": {"pad": "[PAD]", "mask": "[MASK]", "cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]"},
    "electra": {"pad": "[PAD]", "mask": "[MASK]", "cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]"},
    "roberta": {"pad": "<pad>", "mask": "<mask>", "cls": "<s>", "sep": "</s>", "bos": "<s>", "eos": "</s>",
                "unk": "<unk>"},
    "mpnet": {"pad": "<pad>", "mask": "<mask>", "cls": "<s>", "sep": "</s>", "bos": "<s>", "eos": "</s>",
              "unk": "[UNK]"},
    "albert": {"pad": "<pad>", "mask": "[MASK]", "cls": "[CLS]", "sep": "[SEP]", "bos": "[CLS]", "eos": "[SEP]",
               "unk": "<unk>"},
    "xlnet": {"pad": "<pad>", "mask": "<mask>", "cls": "<cls>", "sep": "<sep>", "bos": "<s>", "eos": "</s>",
              "unk": "<unk>"},
    "t5": {"pad": "<pad>", "eos": "</s>", "unk": "<unk>"},
}


@dataclass(frozen=True)
class CheckpointTokenizer:
    """The folder's tokenizer, ready to be the run's tokenizer.json."""

    tokenizer: Tokenizer  # with the checkpoint's special tokens marked special and the lab's additions appended
    source: str  # which files it came from, for the note
    kind: str  # the lab's tokenizer kind (byte_bpe, wordpiece, unigram, bpe): word starts and bytes per token
    roles: dict[str, str]  # lab role name -> token string (config.json "token_roles")
    added: tuple[str, ...]  # tokens the lab appended (never seen by the model in training)
    notes: tuple[str, ...]  # what stands in for what, for the run's note
    original_size: int  # the vocabulary size before the additions

    @property
    def size(self) -> int:
        return self.tokenizer.get_vocab_size()


def _token_text(value) -> str | None:
    """A tokenizer config's special token: a string, or {"content": ...} (AddedToken as JSON)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str) and value["content"]:
        return value["content"]
    return None


def _json_or_empty(path: Path, what: Message) -> dict:
    return read_json_file(path, what) if path.is_file() else {}


def special_tokens(folder: Path, model_type: str) -> dict[str, str]:
    """role (pad, mask, cls, sep, bos, eos, unk) -> token string: the folder's tokenizer_config.json and
    special_tokens_map.json, over the architecture's defaults."""
    found = dict(DEFAULT_SPECIALS.get(model_type, {}))
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        data = _json_or_empty(folder / name, Message("tokenizer config"))
        for role in HF_ROLES:
            token = _token_text(data.get(f"{role}_token"))
            if token is not None:
                found[role] = token
    return found


def _lowercase(folder: Path, default: bool) -> bool:
    value = _json_or_empty(folder / "tokenizer_config.json", Message("tokenizer config")).get("do_lower_case")
    return value if isinstance(value, bool) else default


def _wordpiece(folder: Path, specials: dict[str, str]) -> Tokenizer:
    """BERT's slow vocab.txt -> WordPiece with BERT's normaliser and pre-tokenizer (transformers' BertConverter)."""
    vocab = models.WordPiece.read_file(str(folder / "vocab.txt"))
    unk = specials.get("unk", "[UNK]")
    if unk not in vocab:
        raise LabError("{path} has no unknown token {unk!r}: it is not a BERT vocabulary",
                       path=folder / 'vocab.txt', unk=unk)
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                      lowercase=_lowercase(folder, True))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    cls, sep = specials.get("cls"), specials.get("sep")
    if cls in vocab and sep in vocab:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    return tokenizer


def _bpe(folder: Path, model_type: str, specials: dict[str, str]) -> Tokenizer:
    """vocab.json + merges.txt -> GPT-1's `</w>` BPE, or GPT-2/RoBERTa's byte-level BPE."""
    vocab, merges = models.BPE.read_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
    if model_type == "openai-gpt":
        unk = specials.get("unk", "<unk>")
        tokenizer = Tokenizer(models.BPE(vocab, merges, unk_token=unk if unk in vocab else None,
                                         end_of_word_suffix="</w>"))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.BPEDecoder(suffix="</w>")
        return tokenizer
    add_prefix_space = bool(_json_or_empty(folder / "tokenizer_config.json", Message("tokenizer config")).get(
        "add_prefix_space", False))
    tokenizer = Tokenizer(models.BPE(vocab, merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    cls, sep = specials.get("cls"), specials.get("sep")
    if model_type == "roberta" and cls in vocab and sep in vocab:
        tokenizer.post_processor = processors.RobertaProcessing(sep=(sep, vocab[sep]), cls=(cls, vocab[cls]),
                                                                add_prefix_space=add_prefix_space)
    else:
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def read_tokenizer(folder: Path, model_type: str) -> tuple[Tokenizer, dict[str, str], str]:
    """(the tokenizer, its special tokens by role, where it came from); ValueError when the folder has none the lab
    can read."""
    specials = special_tokens(folder, model_type)
    if (folder / TOKENIZER_FILE).is_file():
        try:
            tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        except Exception as error:  # noqa: BLE001 - tokenizers raises its own Exception type
            raise LabError("{path} is not a tokenizer.json the tokenizers library reads "
                           "({first_line})",
                           path=folder / TOKENIZER_FILE,
                           first_line=str(error).splitlines()[0] if str(error) else type(error).__name__) from None
        source = TOKENIZER_FILE
    elif (folder / "vocab.txt").is_file():
        tokenizer, source = _wordpiece(folder, specials), "vocab.txt (converted to WordPiece)"
    elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        tokenizer = _bpe(folder, model_type, specials)
        source = "vocab.json + merges.txt (converted to " + ("BPE)" if model_type == "openai-gpt" else
                                                              "byte-level BPE)")
    elif any((folder / name).is_file() for name in ("spiece.model", "sentencepiece.bpe.model")):
        raise LabError("{folder} has only a SentencePiece model (spiece.model) and no tokenizer.json; converting "
                       "it needs the sentencepiece library. Save a tokenizer.json once with transformers: "
                       "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR)", folder=folder)
    else:
        raise LabError("{folder} has no tokenizer: expected tokenizer.json (or vocab.txt for BERT, or vocab.json "
                       "with merges.txt for GPT-2, RoBERTa and GPT)", folder=folder)
    vocab = tokenizer.get_vocab()
    already = {added.content for added in tokenizer.get_added_tokens_decoder().values() if added.special}
    marked = []
    for role, token in specials.items():  # a token already special keeps its own flags (MPNet's <mask> lstrip)
        if token in vocab and token not in marked and token not in already:
            marked.append(token)
    if marked:  # the checkpoint's special tokens, marked special (a tokenizer.json usually has them already)
        tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False,
                                                 lstrip=token == specials.get("mask") and model_type == "roberta")
                                      for token in marked])
    return tokenizer, {role: token for role, token in specials.items() if token in vocab}, source


def assign_roles(specials: dict[str, str], vocab: dict[str, int], uses_mask: bool = True,
                 chains: dict[str, tuple[str, ...]] | None = None
                 ) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """(lab role -> token, tokens to append, notes) for a vocabulary and its special tokens by role (pad, mask, cls,
    sep, bos, eos); see the module docstring for the rule. `chains` overrides ROLE_CHAINS for some roles."""
    chains = {**ROLE_CHAINS, **(chains or {})}
    roles: dict[str, str] = {}
    added: list[str] = []
    notes: list[str] = []
    present = {role: token for role, token in specials.items() if token in vocab}

    def fill() -> None:
        for name, chain in chains.items():
            for role in chain:
                if name not in roles and role in present:
                    roles[name] = present[role]

    fill()
    if EOS not in roles:  # no end-of-text token at all (GPT-1): append the lab's, then fill the chains again
        added.append(EOS)
        present["eos"] = EOS
        fill()
    if MASK not in roles:
        if not uses_mask:
            roles[MASK] = roles[EOS]
            notes.append(f"[MASK] stands in as {roles[EOS]}: this vocabulary has no mask token and the family "
                         "never reads one")
        else:
            added.append(MASK)
            roles[MASK] = MASK
    roles[GLM_START], roles[GLM_END] = roles[BOS], roles[EOS]
    notes.append(f"GLM's [S] and [E] (unused by this family) stand in as {roles[BOS]} and {roles[EOS]}")
    played = [f"{name}={token}" for name, token in roles.items() if name not in (GLM_START, GLM_END)]
    notes.insert(0, "the lab's roles are played by the checkpoint's tokens: " + ", ".join(played))
    for k in range(MAX_SENTINELS):  # T5's <extra_id_k>, when the vocabulary has them
        if sentinel(k) not in vocab:
            break
        roles[sentinel(k)] = sentinel(k)
    return roles, tuple(added), tuple(notes)


def checkpoint_tokenizer(folder: Path, model_type: str, uses_mask: bool = True,
                         chains: dict[str, tuple[str, ...]] | None = None) -> CheckpointTokenizer:
    """The folder's tokenizer with its roles assigned and the lab's additions appended."""
    tokenizer, specials, source = read_tokenizer(folder, model_type)
    original_size = tokenizer.get_vocab_size()
    roles, added, notes = assign_roles(specials, tokenizer.get_vocab(), uses_mask, chains)
    if added:
        tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in added])
    kind = tokenizer_kind(tokenizer)  # ValueError for a model type the lab's tokenizers do not cover
    return CheckpointTokenizer(tokenizer=tokenizer, source=source, kind=kind, roles=roles, added=added, notes=notes,
                               original_size=original_size)


def export_tokenizer_config(roles: dict[str, str], tokenizer: Tokenizer, max_length: int,
                            extras: dict | None = None) -> dict:
    """tokenizer_config.json for `AutoTokenizer.from_pretrained`: the generic fast tokenizer over tokenizer.json,
    with the tokens that play each role as transformers' special tokens, and the converter's `extras` (T5's
    sentinels as additional_special_tokens)."""
    config: dict = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": int(max_length),
                    "clean_up_tokenization_spaces": False}
    for role, name in (("pad", PAD), ("mask", MASK), ("cls", CLS), ("sep", SEP), ("bos", BOS), ("eos", EOS)):
        if name in roles:
            config[f"{role}_token"] = roles[name]
    unk = _unknown_token(tokenizer)
    if unk is not None:
        config["unk_token"] = unk
    return {**config, **(extras or {})}


def _unknown_token(tokenizer: Tokenizer) -> str | None:
    model = json.loads(tokenizer.to_str()).get("model", {})
    if model.get("type") == "Unigram":
        unk_id = model.get("unk_id")
        return tokenizer.id_to_token(unk_id) if isinstance(unk_id, int) else None
    unk = model.get("unk_token")
    return unk if isinstance(unk, str) and tokenizer.token_to_id(unk) is not None else None


def renumber_tokenizer(tokenizer: Tokenizer, new_id: dict[int, int]) -> Tokenizer:
    """A copy of `tokenizer` in which token id i becomes new_id.get(i, i) everywhere the tokenizer.json names ids: the
    model's vocabulary (WordPiece, BPE, WordLevel: token -> id; Unigram: the list in id order and its unk_id), the
    added tokens, the post-processor's special tokens and the padding id. `new_id` must be a permutation of its keys
    (MPNet's export puts the pad token at transformers' hard-coded padding id 1).

    >>> from tokenizers import models
    >>> tok = Tokenizer(models.WordPiece({"[PAD]": 0, "[UNK]": 1, "cat": 2}, unk_token="[UNK]"))
    >>> swapped = renumber_tokenizer(tok, {0: 1, 1: 0})
    >>> swapped.token_to_id("[PAD]"), swapped.token_to_id("[UNK]"), swapped.encode("dog").ids
    (1, 0, [0])
    """
    if sorted(new_id) != sorted(new_id.values()):
        raise LabError("new_id must map a set of token ids onto itself (a permutation)")
    data = json.loads(tokenizer.to_str())

    def moved(token_id):
        return new_id.get(token_id, token_id) if isinstance(token_id, int) else token_id

    model = data.get("model") or {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        model["vocab"] = {token: moved(token_id) for token, token_id in vocab.items()}
    elif isinstance(vocab, list):  # Unigram: [piece, score] at index = id
        pieces = list(vocab)
        for old, new in new_id.items():
            pieces[new] = vocab[old]
        model["vocab"] = pieces
        model["unk_id"] = moved(model.get("unk_id"))
    for added in data.get("added_tokens") or []:
        added["id"] = moved(added["id"])
    if isinstance(data.get("padding"), dict):
        data["padding"]["pad_id"] = moved(data["padding"].get("pad_id"))

    def processor(config):
        if not isinstance(config, dict):
            return
        for key in ("sep", "cls"):  # BertProcessing, RobertaProcessing: [token, id]
            if isinstance(config.get(key), list) and len(config[key]) == 2:
                config[key][1] = moved(config[key][1])
        for special in (config.get("special_tokens") or {}).values():  # TemplateProcessing
            if isinstance(special, dict) and isinstance(special.get("ids"), list):
                special["ids"] = [moved(i) for i in special["ids"]]
        for inner in config.get("processors") or []:  # Sequence
            processor(inner)

    processor(data.get("post_processor"))
    return Tokenizer.from_str(json.dumps(data))
