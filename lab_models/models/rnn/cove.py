"""CoVe: context vectors from the encoder of an attentional LSTM translation model. McCann, Bradbury, Xiong, Socher
(2017). Learned in Translation: Contextualized Word Vectors. NeurIPS.

The MT-LSTM (§3): a 2-layer bidirectional LSTM encoder reads the English sentence, H = MT-LSTM(w) (B, n, 2h); a
2-layer unidirectional LSTM decoder writes the translation, attending over H at each step:

    h_t^dec = LSTM(z_(t-1), h_(t-1)^dec)                  (the decoder reads the previous target token)
    alpha_t = softmax(H (W_1 h_t^dec + b_1))              (attention over the encoder positions)
    h~_t    = tanh(W_2 [H^T alpha_t ; h_t^dec] + b_2)     (the attentional state)
    p(w_t | X, w_1..w_(t-1)) = softmax(W_out h~_t + b_out)

Trained here on English -> Chinese sentence pairs, the same as MASS's and T5's `translation` objective
(lab_models/objectives/translation.py, `language_pairs` and `build_example`): a built-in bilingual corpus's own
pairs ("synthetic" or "stories"), and the synthetic corpus's for any other --corpus (which then only adds to the
tokenizer's training text). The one objective is `nmt`.

CoVe(w) = MT-LSTM(w): the top encoder layer's outputs. Downstream models read [GloVe(w); CoVe(w)] (eq. 6);
`CoVe.representations(ids)` returns [input embedding; CoVe(w)] (B, n, E + 2h), or CoVe(w) alone with
`with_embedding=False`. Understand's probes and embedding view read it.

Worked example (the batch of one pair, ids as in objectives/translation.py's golden example):

    encoder inputs   the cat sees a ball .            -> H: 6 context vectors of 2h
    decoder inputs   [BOS] 猫 看见 一个 球 。
    targets          猫 看见 一个 球 。 [EOS]

Deviations, stated:
- No GloVe: the encoder reads the model's own token embeddings (trained with it), and downstream reads those.
- No input feeding: the paper's decoder (OpenNMT's) feeds h~_(t-1) back into the LSTM at step t, which forces a
  Python loop over time steps. Here the decoder LSTM reads the target tokens only, so it runs as one fused nn.LSTM
  call over the whole target sequence, and attention is computed for all steps at once (Luong et al. 2015's
  attention without input feeding).
- The decoder starts from the encoder's final states (forward + backward, summed per layer; if the decoder is deeper
  or shallower, the top layer's are repeated): OpenNMT's bridge. One embedding table serves both languages (one
  tokenizer); the output layer is its own (V, h) matrix.
- Sentences are cut to the model's max_positions (as translation.py's rows).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch, collate
from lab_models.objectives import translation
from lab_models.models.rnn.common import (DataContext, RNNFamilyModel, build_loss, init_lstm_family, mean_or_zero,
                                          token_nll, weighted_total)
from lab_models.models.rnn.layers import lengths_of, run_lstm
from lab_models.text.corpora import Corpus
from lab_models.text.corpora import content_fingerprint

CHOICES: tuple[str, ...] = ()
RULE = Message("seq2seq: a biLSTM encoder reads the English; an LSTM decoder with attention writes the Chinese left "
               "to right")
OBJECTIVE = "nmt"


@dataclass(frozen=True)
class Settings:
    """CoVe's toggles."""

    attention: bool = True  # the decoder attends over the encoder states (off: it reads only the bridged final state)
    with_embedding: bool = True  # representations are [embedding; CoVe] as the paper's [GloVe; CoVe]; off: CoVe only


# ------------------------------------------------------------------------------------------------ data


def tokenizer_corpus(corpus, settings):
    """The run's tokenizer must know the Chinese side: the corpus plus both sides of the training pairs (unless the
    corpus is a built-in bilingual one, which holds them). Returns `corpus` itself when nothing is added."""

    if translation.holds_its_pairs(corpus):
        return corpus
    train = tuple(corpus.train) + tuple(text for pair in translation.synthetic_pairs("train") for text in pair)
    return Corpus(corpus.name, corpus.source, train, corpus.validation, content_fingerprint(train, corpus.validation))


class PairBatches:
    """The batch source: `batch_size` pairs drawn uniformly with replacement per step; validation batch i holds the
    fixed validation pairs i*B .. i*B+B-1 (as translation.TranslationPairs)."""

    def __init__(self, context: DataContext):
        self.vocab = context.vocab
        self.batch_size = context.batch_size
        self.eval_batches = context.eval_batches
        self.max_len = context.max_positions
        pairs = context.pairs_language
        self.train = self._encode(context.tokenizer, translation.language_pairs(pairs, "train"))
        self.validation = self._encode(context.tokenizer, translation.language_pairs(pairs, "validation")) or self.train
        self.validation_note = ""

    @staticmethod
    def _encode(tokenizer, pairs):
        english = tokenizer.encode_batch([en for en, _ in pairs], add_special_tokens=False)
        chinese = tokenizer.encode_batch([zh for _, zh in pairs], add_special_tokens=False)
        return [(en.ids, zh.ids) for en, zh in zip(english, chinese) if en.ids]

    def _batch(self, pairs) -> Batch:
        return collate([translation.build_example(en, zh, self.vocab, self.max_len) for en, zh in pairs],
                       pad_id=self.vocab.pad_id)

    def train_batch(self, generator: torch.Generator) -> Batch:
        picks = torch.randint(len(self.train), (self.batch_size,), generator=generator).tolist()
        return self._batch([self.train[i] for i in picks])

    def validation_batches(self, generators) -> list[Batch]:
        n = len(self.validation)
        return [self._batch([self.validation[(i * self.batch_size + k) % n] for k in range(self.batch_size)])
                for i in range(self.eval_batches)]


def batch_source(context: DataContext) -> PairBatches:
    return PairBatches(context)


# ------------------------------------------------------------------------------------------------ the model


class CoVe(RNNFamilyModel):
    def __init__(self, family, model_config, settings: Settings, vocab, objective_weights):
        super().__init__(family, model_config, settings, vocab, objective_weights)
        c = model_config
        if c.decoder_layers < 1:
            raise LabError("CoVe needs a decoder: decoder_layers must be at least 1")
        E, H = c.embedding_size, c.hidden_size
        self.embedding = nn.Embedding(c.vocab_size, E)
        self.encoder = nn.LSTM(E, H, num_layers=c.n_layers, bidirectional=True, batch_first=True,
                               dropout=c.dropout if c.n_layers > 1 else 0.0)  # the MT-LSTM
        self.decoder = nn.LSTM(E, H, num_layers=c.decoder_layers, batch_first=True,
                               dropout=c.dropout if c.decoder_layers > 1 else 0.0)
        self.attention_query = nn.Linear(H, 2 * H) if settings.attention else None  # W_1
        self.attention_out = nn.Linear(2 * H + H, H) if settings.attention else None  # W_2
        self.output = nn.Linear(H, c.vocab_size)  # W_out
        self.dropout = nn.Dropout(c.dropout)
        init_lstm_family(self)

    # ---- encoder: the context vectors ---------------------------------------------------------------------

    def encode(self, input_ids: torch.Tensor):
        """English ids (B, n), right-padded -> (H (B, n, 2h), lengths (B,), final (h, c) of the encoder)."""
        lengths = lengths_of(input_ids, self.vocab.pad_id)  # (B,)
        x = self.dropout(self.embedding(input_ids))  # (B, n, E)
        H, final = run_lstm(self.encoder, x, lengths=lengths)  # (B, n, 2h)
        return H, lengths, final

    def context_vectors(self, input_ids: torch.Tensor) -> torch.Tensor:
        """CoVe(w) (B, n, 2h): the top encoder layer's outputs."""
        return self.encode(input_ids)[0]

    @torch.no_grad()
    def encoder_layers(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """Every MT-LSTM layer's outputs, L tensors (B, n, 2h), the last one CoVe(w) (the probes read each layer)."""
        lengths = lengths_of(input_ids, self.vocab.pad_id)  # (B,)
        x = self.dropout(self.embedding(input_ids))  # (B, n, E)
        outputs = []
        for layer in range(self.model_config.n_layers):
            x, _ = run_lstm(_one_layer(self.encoder, layer, x.shape[-1]), x, lengths=lengths)  # (B, n, 2h)
            outputs.append(x)
        return outputs

    @torch.no_grad()
    def decoder_layers(self, decoder_ids: torch.Tensor, state) -> list[torch.Tensor]:
        """Every decoder LSTM layer's outputs for decoder ids (B, S) from `state` (the bridge's (h, c), each
        (L_dec, B, h)): L_dec tensors (B, S, h), the last one what `attend` and W_out read (the logit lens reads
        each layer that way)."""
        y = self.dropout(self.embedding(decoder_ids))  # (B, S, E)
        h, c = state
        outputs = []
        for layer in range(self.model_config.decoder_layers):
            y, _ = _one_layer(self.decoder, layer, y.shape[-1])(y, (h[layer:layer + 1].contiguous(),
                                                                   c[layer:layer + 1].contiguous()))  # (B, S, h)
            outputs.append(y)
        return outputs

    def representations(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[embedding; CoVe] (B, n, E + 2h), or CoVe alone with `with_embedding=False`."""
        cove = self.context_vectors(input_ids)
        if not self.settings.with_embedding:
            return cove
        return torch.cat([self.embedding(input_ids), cove], dim=-1)

    def bridge(self, final) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's final (h, c) (2L, B, h) -> the decoder's initial state (L_dec, B, h): directions summed."""
        L, L_dec = self.model_config.n_layers, self.model_config.decoder_layers
        h, c = (s.view(L, 2, *s.shape[1:]).sum(dim=1) for s in final)  # (L, B, h)
        if L_dec != L:
            h, c = (s[-1:].expand(L_dec, *s.shape[1:]).contiguous() for s in (h, c))
        return h, c

    # ---- decoder --------------------------------------------------------------------------------------------

    def attend(self, decoder_states: torch.Tensor, H: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """h^dec (B, S, h) and H (B, n, 2h) -> h~ (B, S, h) for every decoder step at once."""
        if self.attention_query is None:
            return decoder_states
        scores = torch.einsum("bsd,bnd->bsn", self.attention_query(decoder_states), H)  # (B, S, n)
        padded = torch.arange(H.shape[1], device=H.device)[None, :] >= lengths[:, None]  # (B, n)
        alpha = torch.softmax(scores.masked_fill(padded[:, None, :], float("-inf")), dim=-1)  # (B, S, n)
        context = torch.einsum("bsn,bnd->bsd", alpha, H)  # (B, S, 2h): H^T alpha_t
        return torch.tanh(self.attention_out(torch.cat([context, decoder_states], dim=-1)))  # (B, S, h)

    def decoder_logits(self, decoder_ids: torch.Tensor, H, lengths, state) -> tuple[torch.Tensor, tuple]:
        """Decoder ids (B, S) from `state` -> (logits (B, S, V), the new state)."""
        y = self.dropout(self.embedding(decoder_ids))  # (B, S, E)
        states, state = self.decoder(y, state)  # (B, S, h)
        return self.output(self.dropout(self.attend(states, H, lengths))), state

    def target_logits(self, batch: Batch, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The decoder's vocabulary logits (N, V) at `positions` (default: where batch.targets has a target), in
        row-major order, as `FamilyModel.target_logits` (back-translation reads both the same way)."""
        if batch.decoder_input_ids is None:
            raise LabError("CoVe's batch needs decoder inputs: build it with cove.batch_source")
        H, lengths, final = self.encode(batch.input_ids)
        y = self.dropout(self.embedding(batch.decoder_input_ids))  # (B, S, E)
        states, _ = self.decoder(y, self.bridge(final))  # (B, S, h): one fused call over all target steps
        where = batch.targets != IGNORE_INDEX if positions is None else positions  # (B, S)
        attended = self.attend(states, H, lengths)  # (B, S, h)
        return self.output(self.dropout(attended[where]))  # (N, V)

    def compute_loss(self, batch: Batch):
        where = batch.targets != IGNORE_INDEX  # (B, S)
        logits = self.target_logits(batch, where)  # (N, V)
        nll = token_nll(logits, batch.targets[where])
        parts = {OBJECTIVE: mean_or_zero(nll)}
        return build_loss(weighted_total(self.objective_weights, parts), parts, batch.targets[where], nll)

    @torch.no_grad()
    def translate(self, english_ids: list[int], max_new_tokens: int = 64) -> list[int]:
        """Greedy decoding of one sentence: the Chinese ids before [EOS] (or max_new_tokens of them)."""
        device = self.embedding.weight.device
        ids = torch.tensor([english_ids[: self.model_config.max_positions]], dtype=torch.long, device=device)
        H, lengths, final = self.encode(ids)
        state = self.bridge(final)
        token = torch.tensor([[self.vocab.bos_id]], device=device)
        out: list[int] = []
        for _ in range(max_new_tokens):  # inference only: one step at a time, the LSTM state carried
            logits, state = self.decoder_logits(token, H, lengths, state)
            next_id = int(logits[0, -1].argmax())
            if next_id == self.vocab.eos_id:
                break
            out.append(next_id)
            token = torch.tensor([[next_id]], device=device)
        return out


def _one_layer(lstm: nn.LSTM, layer: int, input_size: int) -> nn.LSTM:
    """Layer `layer` of a stacked nn.LSTM as a one-layer LSTM holding that layer's weights. nn.LSTM returns only its
    top layer; in eval mode the stack is exactly these layers applied in turn (its dropout acts between layers in
    training only), so the probes and the logit lens read every layer this way."""
    single = nn.LSTM(input_size, lstm.hidden_size, bidirectional=lstm.bidirectional, batch_first=lstm.batch_first)
    suffix = re.compile(rf"_l{layer}(?=$|_)")
    single.load_state_dict({suffix.sub("_l0", name): value for name, value in lstm.state_dict().items()
                            if suffix.search(name)})
    return single.to(lstm.weight_ih_l0.device)


def build(family, model_config, settings, vocab, objective_weights) -> CoVe:
    return CoVe(family, model_config, settings, vocab, objective_weights)
