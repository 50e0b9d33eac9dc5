"""Probes of what a trained run has learned: contextual embeddings (the "apple" example) and attention maps.

    contextual_similarity(run_dir, "I ate an apple.", "She works at Apple.", "apple")
        -> DataFrame (run, family, layer, layer_name, cosine, pieces_a, pieces_b): one row per layer
    embedding_projection(run_dir, ["I ate an apple.", "She works at Apple."])
        -> DataFrame (run, family, sentence, position, token, is_word, x, y): the final layer's token vectors in 2-D
    attention_maps(run_dir, "the cat sees a ball .")
        -> AttentionMaps: per stream, (layers, heads, Tq, Tk) softmax probabilities and the mask they were taken under

Nothing here changes the model. Everything is read from the real forward pass through **forward hooks**: a hook on
`backbone.embeddings` and on every block gives the hidden states per layer (layer 0 = the embedding output, layer k =
the output of block k; the last entry is the backbone's own output, i.e. after the final LayerNorm of pre-LN models, as
Hugging Face's `hidden_states` do). A hook on every `MultiHeadAttention` captures its input, its context (keys and
values) and its `AttentionMask`; the probabilities are then recomputed from the module's own fused `qkv` projection:
softmax(q k^T / sqrt(hs)) under the mask, rows that may attend nothing set to 0. As a check, probabilities @ v through
the output projection is compared with what the module really returned (`AttentionMaps.check_error`, ~1e-7).

Which input each family sees (the "view"). Text is encoded with the run's tokenizer and framed as the run reads a
text (`run.framing`, lab_models/text/framing.py): bare for the lab's runs, as in training (the lab's objectives add no
[CLS]/[SEP]); as its own tokenizer frames it for an imported checkpoint (BERT's `[CLS] ... [SEP]`, RoBERTa's
`<s> ... </s>`, XLNet's `<sep> <cls>` in its segments, T5's `</s>`), as transformers' `AutoModel` reads
`tokenizer(text)`. The framing tokens are shown with their token strings.

    family                          embeddings (similarity, projection)     attention maps: streams and masks
    gpt, gpt2                       causal                                  self: causal (j <= i)
    bert, roberta, albert,          full                                    self: full
    spanbert, electra, unilm
    glm                             full (the text is GLM's Part A)         self: full (Part A is bidirectional)
    xlnet, mpnet                    content stream, full                    content + query, left-to-right order
    mass, t5                        the encoder, full                       encoder: full; decoder: causal; cross: full

- ELECTRA: the discriminator (`model.backbone`), the model the paper keeps; its generator is only for training.
- UniLM: its bidirectional mode (the mask it uses for understanding tasks).
- XLNet and MPNet, embeddings: the content stream with every token visible, the way both are used downstream
  (XLNet fine-tunes without a permutation mask; MPNet like BERT). The query stream only exists to predict.
- XLNet and MPNet, attention maps: the family's own batch builder (`build_example`) with the left-to-right
  factorization order (order = 0, 1, ..., n-1), its default number of predicted tokens and generator seed 0, so the
  maps show the two-stream masks the model was trained under. XLNet: content i sees j <= i, query i sees j < i (the
  first query row sees nothing: its probabilities are all 0). MPNet: the last num_predict tokens are predicted and get
  [MASK] slots (drawn 80/10/10 with seed 0) appended to the input; the content stream then has n + b rows.
  Runs whose settings give one stream (XLNet two_stream=False, MPNet input_mode="mlm") show one "self" stream, full.
- The RNN-era families (lab_models/models/rnn/) have no blocks and (but for CoVe's decoder) no attention; their layers
  are read from the model's own methods, not from hooks (`layer_vectors`):

    family   layers (similarity; the last one is the projection's)
    elmo     token layer [x; x], biLSTM 1 .. L ([forward; backward] at each layer), ELMo (the scalar mix, eq. 1)
    cove     embedding (GloVe's place), CoVe (the MT-LSTM's top layer), [embedding; CoVe] (what downstream reads)
    ulmfit   embedding, LSTM 1 .. L (left to right: a token sees the tokens before it)
    cvt      embedding, BiLSTM 1, BiLSTM 2 (what the primary tagger reads)

  Layers of different widths (CoVe) are compared within a layer only, as always. Attention maps: none (ValueError).
- MASS and T5, attention maps: the encoder reads the sentence uncorrupted; the decoder reads its start token ([BOS];
  T5: the pad token) + the sentence shifted right by one (teacher forcing, as if the model were asked to write the
  sentence back: MASS's decoder layout for a span covering the whole sentence, T5's shift-right), at positions 0..n-1.
"""
from __future__ import annotations

import inspect
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F

from lab_models.messages import LabError, Message
from lab_models.families import family_record
from lab_models.inference.loading import TrainedRun, load_run
from lab_models.nn.attention import prepare_mask
from lab_models.text.word_split import word_pattern
from lab_models.text.vocab import special_ids
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.objectives.translation import decoder_start_id


MAX_TOKENS = 64  # the longest sentence (in the run's tokens) a probe takes: 64 x 64 heatmaps stay readable
MAX_SENTENCES = 8  # the most sentences one projection draws
SIMILARITY_COLUMNS = ["run", "family", "layer", "layer_name", "cosine", "pieces_a", "pieces_b"]
PROJECTION_COLUMNS = ["run", "family", "sentence", "position", "token", "is_word", "x", "y"]

_WORD_MARKERS = re.compile(r"^(▁|Ġ|##)+|</w>$")
CAUSAL = "causal"
FULL = "full"
# The one-stream mask each family uses on plain text at inference. Families not listed: "causal" for kind "decoder",
# "full" otherwise. GLM is a "decoder" family, but text without blanks is all Part A, which GLM reads bidirectionally.
_ONE_STREAM_VIEW = {"glm": FULL}


@dataclass(frozen=True)
class AttentionMaps:
    """The attention probabilities of one sentence in one run, per stream.

    streams[name] = (row labels, column labels): row i attends column j. weights[name]: (layers, heads, Tq, Tk)
    float tensor, each row summing to 1 over the keys the mask allows (0 where it forbids; all 0 for a row that may
    attend nothing). masks[name]: the (Tq, Tk) bool mask used (True = may attend). Stream names follow the Anatomy's:
    "self"; "content" and "query"; "encoder", "decoder" and "cross".
    """

    run_id: str
    family: str
    tokens: list[str]  # the sentence's tokens as the run's tokenizer splits it (their text)
    streams: dict[str, tuple[list[str], list[str]]]
    weights: dict[str, torch.Tensor]
    masks: dict[str, torch.Tensor] = field(default_factory=dict)
    note: Message | str = ""  # which input and masks were used, in words
    check_error: float = 0.0  # max |module output - output recomputed from these probabilities| over all calls
    step: int = 0  # the training step of the weights

    @property
    def n_layers(self) -> int:
        return next(iter(self.weights.values())).shape[0] if self.weights else 0

    @property
    def n_heads(self) -> int:
        return next(iter(self.weights.values())).shape[1] if self.weights else 0


@dataclass(frozen=True)
class Encoded:
    """A sentence encoded by a run's tokenizer: ids, one display label per token (its text), character offsets."""

    text: str
    ids: list[int]
    labels: list[str]
    offsets: list[tuple[int, int]]
    segments: list[int] | None = None  # one segment (token type) id per token, from the run's framing


# ---------------------------------------------------------------------------------------------- input checks


def _check_text(sentence, what: Message) -> str:
    if sentence is None or not isinstance(sentence, str):
        raise LabError("{what} must be text, got {sentence_type}.", what=what, sentence_type=type(sentence).__name__)
    if not sentence.strip():
        raise LabError("Type {what} first: it is empty.", what=what)
    return sentence.strip()


def token_limit(run: TrainedRun) -> int:
    """The longest sentence (in tokens) a probe takes for this run: MAX_TOKENS, or half the model's positions if less
    (MPNet appends one slot per predicted token, MASS/T5 add a decoder side)."""
    return max(2, min(MAX_TOKENS, run.max_positions // 2))


def encode_sentence(run: TrainedRun, sentence: str, what: Message = Message("the sentence")) -> Encoded:
    """The sentence in the run's tokens. Labels are the text each token covers, stripped (readable for every
    tokenizer kind, byte-level BPE's Chinese included); special and unknown tokens, and pieces that are only a word
    boundary mark (SentencePiece's lone "▁", byte-level BPE's lone "Ġ"), keep their token string. ValueError for an
    empty sentence or one longer than `token_limit(run)` tokens."""

    text = _check_text(sentence, what)
    encoding = run.tokenizer.encode(text, add_special_tokens=False)
    if not encoding.ids:
        raise LabError("{what:capitalized} gives no tokens with the tokenizer of {run_id}.", what=what,
                       run_id=run.run_id)
    framed = run.framing.reading.frame(list(encoding.ids))  # as the run reads a text (bare for the lab's runs)
    ids = framed.ids
    limit = token_limit(run)
    if len(ids) > limit:
        raise LabError("{what:capitalized} has {n_ids} tokens with the tokenizer of {run_id}; the limit is "
                       "{limit} tokens. Shorten it.",
                       what=what, n_ids=len(ids), run_id=run.run_id, limit=limit)
    specials = special_ids(run.tokenizer)
    labels = []
    for token_id, token, (start, end) in zip(encoding.ids, encoding.tokens, encoding.offsets):
        surface = text[start:end].strip()
        bare = _WORD_MARKERS.sub("", token)  # "▁", "Ġ", "##", "</w>" alone are word-boundary marks, not text
        labels.append(token if token_id in specials or not bare or not surface else surface)
    offsets = [tuple(o) for o in encoding.offsets]
    n_before, n_text = framed.start, len(encoding.ids)
    framing = [run.tokenizer.id_to_token(token_id) or str(token_id) for token_id in ids]
    labels = framing[:n_before] + labels + framing[n_before + n_text:]
    offsets = [(0, 0)] * n_before + offsets + [(0, 0)] * (len(ids) - n_before - n_text)  # no text under a frame
    return Encoded(text=text, ids=ids, labels=labels, offsets=offsets, segments=framed.segments)


def word_pieces(encoded: Encoded, word: str, what: Message = Message("the sentence")) -> list[int]:
    """The indices of the tokens that cover the first whole-word occurrence of `word` in the sentence (matched
    case-insensitively, so "Apple" counts as "apple"). ValueError when the word does not occur.

    >>> e = Encoded("I ate an apple .", [1, 2, 3, 4, 5, 6], ["I", "ate", "an", "app", "le", "."],
    ...             [(0, 1), (2, 5), (6, 8), (9, 12), (12, 14), (15, 16)])
    >>> word_pieces(e, "Apple")
    [3, 4]
    """
    word = _check_text(word, Message("the word"))
    match = re.search(word_pattern(word), encoded.text, flags=re.IGNORECASE)  # Chinese words: anywhere
    if match is None:
        raise LabError("The word {word!r} does not occur in {what} ({text!r}): it must appear in both "
                       "sentences, as a whole word.", word=word, what=what, text=encoded.text)
    start, end = match.span()
    pieces = [i for i, (s, e) in enumerate(encoded.offsets) if s < end and e > start]
    if not pieces:
        raise LabError("The tokenizer dropped the word {word!r} in {what}: no token covers it.", word=word, what=what)
    return pieces


# ---------------------------------------------------------------------------------------------- the views


RNN_VIEWS = {
    "elmo": Message("ELMo's biLM: the forward LSTM reads the tokens before each token, the backward one those after; "
                    "the representation is the scalar mix of all layers"),
    "cove": Message("CoVe's MT-LSTM encoder (a biLSTM: every token sees the whole sentence), read as [embedding; "
                    "CoVe]"),
    "ulmfit": Message("the AWD-LSTM language model (left to right: each token sees itself and the tokens before it)"),
    "cvt": Message("CVT's BiLSTM tagger (every token sees the whole sentence), the states its primary module reads"),
}


def _is_rnn(run: TrainedRun) -> bool:
    return getattr(run.model, "kind", None) == "rnn"


def one_stream_view(run: TrainedRun) -> str:
    """"causal" or "full": the mask the run's one-stream (or encoder, or content-stream) view uses."""
    if _is_rnn(run):
        return CAUSAL if run.family == "ulmfit" else FULL
    if run.model_config.decoder_layers > 0 or run.model_config.query_stream is not None:
        return FULL  # encoder of MASS/T5; content stream of XLNet/MPNet as used downstream
    if run.family in _ONE_STREAM_VIEW:
        return _ONE_STREAM_VIEW[run.family]
    return CAUSAL if family_record(run.family).kind == "decoder" else FULL


def view_description(run: TrainedRun) -> Message:
    """One line: which part of the model the embedding probes read, under which mask."""
    if _is_rnn(run):
        return RNN_VIEWS[run.family]
    part = (Message("the encoder") if run.model_config.decoder_layers > 0 else
            Message("the content stream") if run.model_config.query_stream is not None else
            Message("the discriminator") if run.family == "electra" else Message("the model"))
    if one_stream_view(run) == CAUSAL:
        return Message("{part}, causal attention (each token sees itself and the tokens before it)", part=part)
    return Message("{part}, full attention (every token sees every token)", part=part)


def square_mask(n: int, view: str) -> torch.Tensor:
    """(n, n) bool: "causal" = j <= i, "full" = all True."""
    ones = torch.ones(n, n, dtype=torch.bool)
    return ones.tril() if view == CAUSAL else ones


def position_ids_for(run: TrainedRun, n: int) -> torch.Tensor:
    """(1, T) position ids, or (1, 2, T) for GLM's 2-D positions (row 2 = 0: every token is in Part A)."""
    positions = torch.arange(n).unsqueeze(0)  # (1, T)
    if run.model_config.n_position_rows == 2:
        return torch.stack([positions, torch.zeros_like(positions)], dim=1)  # (1, 2, T)
    return positions


def _ids(values, device) -> torch.Tensor:
    return torch.tensor([list(values)], dtype=torch.long, device=device)  # (1, T)


def _segments(encoded: Encoded, device) -> torch.Tensor | None:
    """(1, T) segment ids of the framed sentence (XLNet's <cls> is in segment 2), or None when the framing gives
    none."""
    return None if encoded.segments is None else _ids(encoded.segments, device)


# ---------------------------------------------------------------------------------------------- hidden states


def _first(output):
    """A module's main output (blocks return (x, weights) when asked for weights)."""
    return output[0] if isinstance(output, tuple) else output


@torch.no_grad()
def hidden_states(run: TrainedRun, sentence: str, what: Message = Message("the "
                                                                          "sentence")) -> tuple[Encoded, torch.Tensor]:
    """The sentence's token vectors at every layer: (n_layers + 1, T, H). Layer 0 is the embedding output; layer k
    the output of block k; the last layer is the backbone's output (after the final LayerNorm where there is one).
    Captured with forward hooks on the (main) backbone's embeddings and blocks; see the module docstring for the
    mask each family uses."""
    encoded = encode_sentence(run, sentence, what)
    if _is_rnn(run):
        names, vectors = zip(*_rnn_layers(run, encoded))
        if len({v.shape[-1] for v in vectors}) > 1:
            raise LabError("the layers of a {title} run have different widths: read them "
                           "with layer_vectors", title=family_record(run.family).title)
        return encoded, torch.stack(vectors)
    states = encoder_layers(run, _ids(encoded.ids, run.device),
                            _segments(encoded, run.device))  # (L + 1, 1, T, H)
    return encoded, states[:, 0]  # (L + 1, T, H)


@contextmanager
def _captured_layers(embeddings: torch.nn.Module, blocks, embedding_call: int = 0):
    """Hooks the embeddings and the blocks; yields (embedded, captured): the `embedding_call`-th output of the
    embeddings (0: the first; an encoder-decoder's decoder embeds second) and every block output, in call order."""
    embedded: list[torch.Tensor] = []
    captured: list[torch.Tensor] = []
    calls = [0]

    def on_embeddings(module, args, output):
        if calls[0] == embedding_call:
            embedded.append(_first(output).detach())
        calls[0] += 1

    def on_block(module, args, output):
        captured.append(_first(output).detach())  # (B, T, H)

    handles = [embeddings.register_forward_hook(on_embeddings)]
    handles += [block.register_forward_hook(on_block) for block in dict.fromkeys(blocks)]  # ALBERT: one shared
    try:
        yield embedded, captured
    finally:
        for handle in handles:
            handle.remove()


def _stacked_layers(embedded, captured, final: torch.Tensor, n_layers: int) -> torch.Tensor:
    """(L + 1, B, T, H): the embedding output, the blocks' outputs, the last one replaced by the stack's own output
    (after its final norm)."""
    if len(embedded) != 1 or len(captured) != n_layers:
        raise RuntimeError(f"expected 1 embedding output and {n_layers} block outputs, captured {len(embedded)} and "
                           f"{len(captured)}")
    return torch.stack(embedded + captured[:-1] + [final.detach()]).float().cpu()


@torch.no_grad()
def encoder_layers(run: TrainedRun, input_ids: torch.Tensor,
                   segment_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Every layer of the one-stream view of a batch of equal-length rows (no padding): input_ids (B, T) and the
    framing's segment ids (B, T) or None -> (n_layers + 1, B, T, H) on the CPU. The view is the module docstring's: GPT causal, the encoders full, XLNet and
    MPNet's content stream, MASS and T5's encoder, ELECTRA's discriminator."""
    backbone = run.model.backbone  # ELECTRA: the discriminator
    B, n = input_ids.shape
    mask = square_mask(n, one_stream_view(run)).expand(B, n, n).to(run.device)  # (B, T, T)
    positions = position_ids_for(run, n).expand(B, *position_ids_for(run, n).shape[1:]).to(run.device)
    with _captured_layers(backbone.embeddings, backbone.blocks) as (embedded, captured):
        final = backbone(input_ids.to(run.device), mask, positions,
                         None if segment_ids is None else segment_ids.to(run.device))  # (B, T, H)
    return _stacked_layers(embedded, captured, final, run.model_config.n_layers)


@torch.no_grad()
def decoder_layers(run: TrainedRun, input_ids: torch.Tensor) -> torch.Tensor:
    """MASS and T5's decoder, reading each row back: the encoder reads the sentence (full attention), the decoder its
    start token ([BOS]; T5: the pad token) + the whole sentence (causal), and row i + 1, whose input is token i, is
    token i's vector. input_ids (B, T) -> (decoder_layers + 1, B, T, H) on the CPU."""
    backbone = run.model.backbone
    device = run.device
    B, n = input_ids.shape
    start = decoder_start_id(run.family, run.settings, run.vocab)
    encoder_ids = input_ids.to(device)
    decoder_ids = torch.cat([torch.full((B, 1), start, dtype=torch.long, device=device), encoder_ids], dim=1)
    full = torch.ones(B, n, n, dtype=torch.bool, device=device)
    causal = torch.ones(n + 1, n + 1, dtype=torch.bool, device=device).tril().expand(B, n + 1, n + 1)
    cross = torch.ones(B, n + 1, n, dtype=torch.bool, device=device)
    positions = torch.arange(n, device=device).expand(B, n)
    memory = backbone.encode(encoder_ids, full, positions)
    with _captured_layers(backbone.embeddings, backbone.decoder_blocks) as (embedded, captured):
        final = backbone.decode(decoder_ids, causal, cross, torch.arange(n + 1, device=device).expand(B, n + 1),
                                memory)  # (B, T + 1, H)
    return _stacked_layers(embedded, captured, final, run.model_config.decoder_layers)[:, :, 1:]  # (L + 1, B, T, H)


@dataclass(frozen=True)
class StreamLayer:
    """One layer of one stream for a batch of equal-length rows: stream ("self", "content", "encoder", "decoder";
    the RNN families' own: "biLM", "scalar mix", "MT-LSTM", ...), layer (0 = embeddings), its name, and the vectors
    (B, T, D) on the CPU. `depth` is layer / (the stream's number of layers), 0.0 to 1.0."""

    stream: str
    layer: int
    name: str
    depth: float
    states: torch.Tensor


@torch.no_grad()
def stream_layers(run: TrainedRun, input_ids: torch.Tensor) -> list[StreamLayer]:
    """Every layer of every stream a family has, for a batch of equal-length rows input_ids (B, T) (no padding, no
    framing tokens, as in pretraining): the probes' input (lab_models/inference/probing.py).

        family                   streams (layers)
        one-stream Transformers  self (embeddings, block 1 .. L)
        xlnet, mpnet             content (embeddings, block 1 .. L): the content stream, every token visible
        mass, t5                 encoder (embeddings, block 1 .. L) and decoder (embeddings, block 1 .. L), the
                                 decoder reading the sentence back (`decoder_layers`)
        elmo                     biLM (token layer [x; x], biLSTM 1 .. L) and scalar mix (one row, depth 1)
        cove                     MT-LSTM (embedding, biLSTM 1 .. L; the last is CoVe) and [embedding; CoVe] (one row)
        ulmfit                   LSTM (embedding, LSTM 1 .. L)
        cvt                      BiLSTM (embedding, BiLSTM 1, BiLSTM 2)

    XLNet and MPNet's query stream is left out: it exists to predict a token without seeing it, so its vector at a
    word never reads that word."""
    if _is_rnn(run):
        return _rnn_stream_layers(run, input_ids)

    def stream(name: str, states: torch.Tensor) -> list[StreamLayer]:
        last = states.shape[0] - 1
        prefix = "decoder " if name == "decoder" else ""
        return [StreamLayer(name, layer, prefix + _layer_name(layer), layer / last, states[layer])
                for layer in range(states.shape[0])]

    config = run.model_config
    if config.decoder_layers > 0:
        return stream("encoder", encoder_layers(run, input_ids)) + stream("decoder", decoder_layers(run, input_ids))
    return stream("content" if config.query_stream is not None else "self", encoder_layers(run, input_ids))


def _rnn_stream_layers(run: TrainedRun, input_ids: torch.Tensor) -> list[StreamLayer]:
    model, family = run.model, run.family
    ids = input_ids.to(run.device)

    def stream(name: str, named: list[tuple[str, torch.Tensor]]) -> list[StreamLayer]:
        last = max(1, len(named) - 1)
        return [StreamLayer(name, layer, label, layer / last, vectors.float().cpu())
                for layer, (label, vectors) in enumerate(named)]

    if family == "elmo":
        layers = model.layers(ids)  # L + 1 tensors (B, T, 2E)
        out = stream("biLM", [("token layer [x; x]", layers[0])] + [(f"biLSTM {j}", h)
                                                                    for j, h in enumerate(layers[1:], 1)])
        mixed = model.scalar_mix(layers) if model.settings.scalar_mix else layers[-1]
        label = "ELMo (scalar mix)" if model.settings.scalar_mix else "ELMo (top layer)"
        return out + [StreamLayer("scalar mix", len(layers) - 1, label, 1.0, mixed.float().cpu())]
    if family == "cove":
        embedding = model.embedding(ids)
        layers = model.encoder_layers(ids)  # L tensors (B, T, 2h); the last is CoVe
        out = stream("MT-LSTM", [("embedding (GloVe's place)", embedding)] + [(f"biLSTM {j}", h)
                                                                              for j, h in enumerate(layers, 1)])
        if model.settings.with_embedding:
            out.append(StreamLayer("[embedding; CoVe]", len(layers), "[embedding; CoVe]", 1.0,
                                   torch.cat([embedding, layers[-1]], dim=-1).float().cpu()))
        return out
    if family == "ulmfit":
        return stream("LSTM", [("embedding", model.embedding(ids))] + [(f"LSTM {j}", h)
                                                                       for j, h in enumerate(model.encode(ids), 1)])
    first, top = model.encode(ids, noisy=False)  # cvt
    return stream("BiLSTM", [("embedding", model.embedding(ids)), ("BiLSTM 1", first), ("BiLSTM 2", top)])


def _layer_name(layer: int) -> str:
    return "embeddings" if layer == 0 else f"block {layer}"


@torch.no_grad()
def _rnn_layers(run: TrainedRun, encoded: Encoded) -> list[tuple[str, torch.Tensor]]:
    """(name, (T, D) vectors) per layer of an RNN-era model (module docstring), in eval mode (no dropout)."""
    model, family = run.model, run.family
    ids = _ids(encoded.ids, run.device)  # (1, T)
    if family == "elmo":
        layers = model.layers(ids)  # L + 1 tensors (1, T, 2E)
        named = [("token layer [x; x]", layers[0])] + [(f"biLSTM {j}", h) for j, h in enumerate(layers[1:], 1)]
        mixed = model.scalar_mix(layers) if model.settings.scalar_mix else layers[-1]
        named.append(("ELMo (scalar mix)" if model.settings.scalar_mix else "ELMo (top layer)", mixed))
    elif family == "cove":
        embedding, cove = model.embedding(ids), model.context_vectors(ids)
        named = [("embedding (GloVe's place)", embedding), ("CoVe (MT-LSTM top layer)", cove)]
        if model.settings.with_embedding:
            named.append(("[embedding; CoVe]", torch.cat([embedding, cove], dim=-1)))
    elif family == "ulmfit":
        named = [("embedding", model.embedding(ids))] + [(f"LSTM {j}", h) for j, h in enumerate(model.encode(ids), 1)]
    else:  # cvt
        first, top = model.encode(ids, noisy=False)
        named = [("embedding", model.embedding(ids)), ("BiLSTM 1", first), ("BiLSTM 2", top)]
    return [(name, vectors[0].float().cpu()) for name, vectors in named]


def layer_vectors(run: TrainedRun, sentence: str, what: Message = Message("the "
                                                                          "sentence")) -> tuple[Encoded, list[tuple[str,
                                                                                                      torch.Tensor]]]:
    """The sentence's token vectors per layer, named: [(layer name, (T, D))], the last one the representation the
    projection draws. Transformers: `hidden_states` ("embeddings", "block 1", ...); RNN families: their own layers."""
    if _is_rnn(run):
        encoded = encode_sentence(run, sentence, what)
        return encoded, _rnn_layers(run, encoded)
    encoded, states = hidden_states(run, sentence, what)
    return encoded, [(_layer_name(layer), states[layer]) for layer in range(states.shape[0])]


def contextual_similarity(run_dir, sentence_a: str, sentence_b: str, word: str) -> pd.DataFrame:
    """How similar the word's vectors are in two sentences, layer by layer, in one run.

    The word's vector in a sentence is the mean of the vectors of the tokens that cover its first whole-word
    occurrence (sub-word pieces averaged). One row per layer (0 = the embedding output, then each block: n_layers +
    1 rows) with columns SIMILARITY_COLUMNS; `cosine` is the cosine similarity of the two vectors. The same word in
    the same sentence gives 1 at every layer; a context-free embedding gives 1 at layer 0 whatever the contexts (up to
    the position embedding), and a contextual model lowers it in the later layers when the senses differ.
    ValueError: an empty sentence or word, a sentence over the token limit, a word missing from either sentence, a
    run without weights.
    """
    word = _check_text(word, Message("the word"))
    sentence_a = _check_text(sentence_a, Message("sentence A"))
    sentence_b = _check_text(sentence_b, Message("sentence B"))
    for text, what in ((sentence_a, Message("sentence A")), (sentence_b, Message("sentence B"))):
        if re.search(word_pattern(word), text, flags=re.IGNORECASE) is None:
            raise LabError("The word {word!r} does not occur in {what} ({text!r}): it must appear in both "
                           "sentences, as a whole word.", word=word, what=what, text=text)
    run = load_run(run_dir)
    encoded_a, layers_a = layer_vectors(run, sentence_a, Message("sentence A"))
    encoded_b, layers_b = layer_vectors(run, sentence_b, Message("sentence B"))
    pieces_a = word_pieces(encoded_a, word, Message("sentence A"))
    pieces_b = word_pieces(encoded_b, word, Message("sentence B"))
    label_a = " ".join(encoded_a.labels[i] for i in pieces_a)
    label_b = " ".join(encoded_b.labels[i] for i in pieces_b)
    rows = []
    for layer, ((name, states_a), (_, states_b)) in enumerate(zip(layers_a, layers_b)):
        vector_a = states_a[pieces_a].mean(dim=0)  # (H,): sub-word pieces averaged
        vector_b = states_b[pieces_b].mean(dim=0)
        cosine = F.cosine_similarity(vector_a, vector_b, dim=0).clamp(-1.0, 1.0)
        rows.append([run.run_id, run.family, layer, name, float(cosine), label_a, label_b])
    return pd.DataFrame(rows, columns=SIMILARITY_COLUMNS)


def _sentence_list(sentences) -> list[str]:
    """A list of sentences, or one string with one sentence per line (blank lines skipped)."""
    if isinstance(sentences, str):
        sentences = [line for line in sentences.splitlines() if line.strip()]
    if sentences is None or not isinstance(sentences, (list, tuple)):
        raise LabError("Give the sentences as a list of strings, or as text with one sentence per line.")
    if not sentences:
        raise LabError("Type at least one sentence to project: the list is empty.")
    if len(sentences) > MAX_SENTENCES:
        raise LabError("{n_sentences} sentences were given; the projection takes at most {max_sentences}.",
                       n_sentences=len(sentences), max_sentences=MAX_SENTENCES)
    return [_check_text(s, Message("sentence {number}", number=i + 1)) for i, s in enumerate(sentences)]


def _pca_2d(vectors: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """(N, H) -> (N, 2) coordinates on the first two principal components (SVD of the centred vectors), and the share
    of the variance each explains. Missing components (N < 3, or all points on a line) are 0. Signs are fixed so that
    the largest loading of each component is positive: the same vectors always give the same picture."""
    centred = vectors - vectors.mean(dim=0, keepdim=True)  # (N, H)
    _, s, vh = torch.linalg.svd(centred.double(), full_matrices=False)  # s (K,), vh (K, H)
    k = min(2, s.numel())
    components = vh[:k]  # (k, H)
    signs = torch.sign(components.gather(1, components.abs().argmax(dim=1, keepdim=True)))  # (k, 1)
    components = components * torch.where(signs == 0, torch.ones_like(signs), signs)
    coords = torch.zeros(vectors.shape[0], 2, dtype=torch.float64)
    coords[:, :k] = centred.double() @ components.T  # (N, k)
    total = float((s ** 2).sum())
    explained = [float(s[i] ** 2 / total) if i < k and total > 0 else 0.0 for i in range(2)]
    return coords.float(), explained


def embedding_projection(run_dir, sentences, word: str | None = None) -> pd.DataFrame:
    """The final layer's token vectors of the sentences, projected on their first two principal components.

    One row per token of every sentence (columns PROJECTION_COLUMNS): `sentence` is the index of the sentence in the
    list (0-based), `position` the token's index in it, `token` its text, `is_word` whether it covers `word` (False
    everywhere without one; a word missing from a sentence is not an error here), `x` and `y` the coordinates. The
    PCA is fitted on all the tokens together, so points of different sentences share the axes. `attrs` holds
    "explained_variance" (the two components' shares) and "view" (which part of the model and mask).
    """
    sentences = _sentence_list(sentences)
    word = word.strip() if isinstance(word, str) and word.strip() else None
    run = load_run(run_dir)
    rows, vectors = [], []
    for index, sentence in enumerate(sentences):
        what = Message("sentence {number}", number=index + 1)
        encoded, layers = layer_vectors(run, sentence, what)
        pieces = set()
        if word is not None:
            try:
                pieces = set(word_pieces(encoded, word, what))
            except ValueError:
                pieces = set()
        vectors.append(layers[-1][1])  # (T, H): the final layer (ELMo: its scalar mix; CoVe: [embedding; CoVe])
        rows += [[run.run_id, run.family, index, position, label, position in pieces]
                 for position, label in enumerate(encoded.labels)]
    coords, explained = _pca_2d(torch.cat(vectors))
    frame = pd.DataFrame(rows, columns=PROJECTION_COLUMNS[:-2])
    frame["x"] = coords[:, 0].tolist()
    frame["y"] = coords[:, 1].tolist()
    frame.attrs["explained_variance"] = explained
    frame.attrs["view"] = view_description(run)
    return frame


# ---------------------------------------------------------------------------------------------- attention


@dataclass
class _Call:
    """One captured attention call: probabilities (B, nh, Tq, Tk), the mask (B, Tq, Tk), the output check."""

    stream: str
    probs: torch.Tensor
    allowed: torch.Tensor
    error: float


def recompute_attention(module, x: torch.Tensor, mask, context: torch.Tensor | None = None, relative=None
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The softmax probabilities a `MultiHeadAttention` used, recomputed from its inputs by its own eager path (so
    every backbone option counts: head width, biases, scale, a relative position bias folded into the mask).

    Returns (probabilities (B, nh, Tq, Tk), the output they give (B, Tq, H) after the output projection, the mask
    (B, Tq, Tk) with True = may attend as given). Rows that may attend nothing get probability 0 and output 0, as in
    the module. Matches the module's SDPA path up to float rounding.

    relative: the batch's relative positions, for a relative-attention module (relative_attention="xlnet"), which
    its own eager path reads too.
    """
    if relative is not None:
        prepared = prepare_mask(mask)
        y, probs = module.forward(x, prepared, context=context, return_weights=True, relative=relative)
        allowed = prepared.allowed[:, 0]  # (B, Tq, Tk)
        if prepared.empty_rows is not None:
            allowed = allowed & ~prepared.empty_rows
        return probs, y, allowed
    B, Tq, _ = x.shape
    Tk = Tq if context is None else context.shape[1]
    prepared = prepare_mask(mask, n_queries=Tq, n_keys=Tk, batch_size=B)
    # .forward, not __call__: this runs inside the module's own forward hook, which must not fire again
    y, probs = module.forward(x, prepared, context=context, return_weights=True)
    allowed = prepared.allowed[:, 0]  # (B, Tq, Tk), empty rows repaired to key 0
    if prepared.empty_rows is not None:
        allowed = allowed & ~prepared.empty_rows  # the mask as given: an empty row allows nothing
    return probs, y, allowed


@contextmanager
def capture_attention(modules: list[tuple[str, torch.nn.Module]]):
    """Hook each (stream, MultiHeadAttention); yields the list of `_Call`s, filled in call order as the model runs.
    A module applied several times (ALBERT's shared block) records one call per application."""
    calls: list[_Call] = []

    def hook_for(stream: str, module):
        signature = inspect.signature(module.forward)

        def hook(mod, args, kwargs, output):
            bound = signature.bind(*args, **kwargs).arguments
            x, mask, context = bound["x"], bound["mask"], bound.get("context")
            probs, y, allowed = recompute_attention(mod, x, mask, context, bound.get("relative"))
            error = float((y - _first(output)).abs().max())
            calls.append(_Call(stream, probs.detach().float().cpu(), allowed.cpu(), error))

        return hook

    handles = [module.register_forward_hook(hook_for(stream, module), with_kwargs=True)
               for stream, module in modules]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def _stack_calls(calls: list[_Call], stream: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(layers, heads, Tq, Tk) probabilities of one stream's calls (batch row 0) and its (Tq, Tk) mask."""
    mine = [c for c in calls if c.stream == stream]
    if not mine:
        raise RuntimeError(f"no attention call was captured for stream {stream!r}")
    return torch.stack([c.probs[0] for c in mine]), mine[0].allowed[0]


@torch.no_grad()
def attention_maps(run_dir, sentence: str) -> AttentionMaps:
    """The attention probabilities of every layer and head for `sentence` in one run, per stream, under the masks the
    module docstring lists (the family's real inference mask; the two-stream families' left-to-right factorization;
    MASS/T5's encoder, teacher-forced decoder and cross-attention). ValueError: an empty sentence, one over the token
    limit (64 tokens, or half the model's positions), a run without weights, fewer than 2 tokens for XLNet/MPNet."""
    run = load_run(run_dir)
    if _is_rnn(run):
        raise LabError("{title} is an LSTM model: it has no self-attention to draw. Its "
                       "contextual vectors are in the similarity and projection views.",
                       title=family_record(run.family).title)
    encoded = encode_sentence(run, sentence)
    config = run.model_config
    if config.decoder_layers > 0:
        return _encoder_decoder_maps(run, encoded)
    if config.query_stream is not None:
        return _two_stream_maps(run, encoded)
    return _one_stream_maps(run, encoded)


def _maps(run: TrainedRun, encoded: Encoded, calls: list[_Call], streams: dict[str, tuple[list[str], list[str]]],
          weights: dict[str, torch.Tensor], masks: dict[str, torch.Tensor], note: Message) -> AttentionMaps:
    return AttentionMaps(run_id=run.run_id, family=run.family, tokens=list(encoded.labels), streams=streams,
                         weights=weights, masks=masks, note=note, check_error=max(c.error for c in calls),
                         step=run.step)


def _one_stream_maps(run: TrainedRun, encoded: Encoded) -> AttentionMaps:
    backbone = run.model.backbone
    n = len(encoded.ids)
    view = one_stream_view(run)
    mask = square_mask(n, view).unsqueeze(0).to(run.device)  # (1, T, T)
    with capture_attention([("self", block.attn) for block in backbone.blocks]) as calls:
        backbone(_ids(encoded.ids, run.device), mask, position_ids_for(run, n).to(run.device),
                 _segments(encoded, run.device))
    weights, allowed = _stack_calls(calls, "self")
    labels = list(encoded.labels)
    if run.family == "unilm":
        note = Message("{view}. UniLM's bidirectional mode.", view=view_description(run))
    elif run.family == "glm":
        note = Message("{view}. The text is GLM's Part A, which it reads bidirectionally.", view=view_description(run))
    else:
        note = Message("{view}.", view=view_description(run))
    return _maps(run, encoded, calls, {"self": (labels, labels)}, {"self": weights}, {"self": allowed}, note)


def _two_stream_maps(run: TrainedRun, encoded: Encoded) -> AttentionMaps:
    """XLNet / MPNet: the family's own batch builder with the left-to-right order (seed 0 for the rest)."""

    module = objective_module(run.family)
    cfg = BatchConfig(settings=run.settings, vocab=run.vocab)
    token_ids = torch.tensor(encoded.ids, dtype=torch.long)  # (n,)
    n = token_ids.numel()
    generator = torch.Generator().manual_seed(0)
    choices = {**module.sample_choices(token_ids, generator, cfg), "order": torch.arange(n)}
    example = module.build_example(token_ids, choices, generator, cfg)
    if "content" not in example.attention:
        raise LabError("run {run_id} has a query stream but its batch builder gives one stream: its settings "
                       "do not match the model", run_id=run.run_id)
    T = example.input_ids.numel()
    if T > run.max_positions:
        raise LabError("The sentence is too long for {run_id}: with its [MASK] slots it needs {T} positions, "
                       "the model has {max_positions}. Shorten it.",
                       run_id=run.run_id, T=T, max_positions=run.max_positions)
    backbone = run.model.backbone
    device = run.device
    slots = example.query_slots  # (Q,)
    with capture_attention([("two-stream", block.attn) for block in backbone.blocks]) as calls:
        backbone.forward_two_stream(example.input_ids.unsqueeze(0).to(device),
                                    example.attention["content"].unsqueeze(0).to(device),
                                    example.attention["query"].unsqueeze(0).to(device),
                                    example.position_ids.unsqueeze(0).to(device), slots.unsqueeze(0).to(device),
                                    _segments(encoded, device) if example.input_ids.numel() == n else None)
    both, allowed = _stack_calls(calls, "two-stream")  # (L, nh, T+Q, T), (T+Q, T)
    positions = example.position_ids.tolist()
    text = list(encoded.labels)

    def slot_label(i: int) -> str:  # MPNet's appended [MASK] slots carry the position of the token they stand for
        if i < n:
            return text[i]
        token = run.tokenizer.id_to_token(int(example.input_ids[i])) or "?"
        return f"{token}@{text[positions[i]]}"

    inputs = [slot_label(i) for i in range(T)]
    query_rows = [f"q·{text[positions[int(s)]]}" for s in slots]
    weights = {"content": both[:, :, :T], "query": both[:, :, T:]}
    masks = {"content": allowed[:T], "query": allowed[T:]}
    num_predict = int(choices["num_predict"])
    if run.family == "mpnet":
        note = Message("MPNet's two streams for the left-to-right order: the last {num_predict} tokens are predicted, "
                       "each with a [MASK] slot appended at its position (slot tokens drawn with seed 0). Query row "
                       "'q·w' predicts w: it sees the context, the tokens predicted before it and the slots, never w "
                       "itself.", num_predict=num_predict)
    else:
        note = Message("XLNet's two streams for the left-to-right factorization order: content i sees tokens 0..i, "
                       "query i sees tokens 0..i-1 (never its own token; the first query row sees nothing).")
    return _maps(run, encoded, calls, {"content": (inputs, inputs), "query": (query_rows, inputs)}, weights, masks,
                 note)


def _encoder_decoder_maps(run: TrainedRun, encoded: Encoded) -> AttentionMaps:
    """MASS / T5: the sentence in the encoder, the start token ([BOS]; T5: its pad token) + the sentence shifted right
    in the decoder."""

    backbone = run.model.backbone
    device = run.device
    n = len(encoded.ids)
    start = decoder_start_id(run.family, run.settings, run.vocab)
    encoder_ids = _ids(encoded.ids, device)  # (1, n)
    decoder_ids = _ids([start] + encoded.ids[:-1], device)  # (1, n): shifted right
    positions = torch.arange(n, device=device).unsqueeze(0)  # (1, n)
    full = torch.ones(1, n, n, dtype=torch.bool, device=device)
    causal = full.tril()
    modules = [("encoder", block.attn) for block in backbone.blocks]
    modules += [("decoder", block.attn) for block in backbone.decoder_blocks]
    modules += [("cross", block.cross_attn) for block in backbone.decoder_blocks]
    with capture_attention(modules) as calls:
        memory = backbone.encode(encoder_ids, full, positions)
        backbone.decode(decoder_ids, causal, full, positions, memory)
    text = list(encoded.labels)
    start_label = run.tokenizer.id_to_token(start) or str(start)
    decoder_labels = [start_label] + text[:-1]
    streams = {"encoder": (text, text), "decoder": (decoder_labels, decoder_labels), "cross": (decoder_labels, text)}
    weights, masks = {}, {}
    for stream in streams:
        weights[stream], masks[stream] = _stack_calls(calls, stream)
    note = Message("The encoder reads the sentence (full attention); the decoder reads {start} + the sentence shifted "
                   "right (causal), as if writing the sentence back, and attends every encoder position (cross).",
                   start=start_label)
    return _maps(run, encoded, calls, streams, weights, masks, note)
