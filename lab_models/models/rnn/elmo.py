"""ELMo: a bidirectional LSTM language model (biLM) and its learned scalar mix. Peters, Neumann, Iyyer, Gardner, Clark,
Lee, Zettlemoyer (2018). Deep contextualized word representations. NAACL.

The biLM (§3.1): a forward LSTM LM reads t_1 .. t_k and predicts t_(k+1); a backward LSTM LM reads t_N .. t_k and
predicts t_(k-1). The two directions share the token representation x_k and the softmax layer, and keep their own
LSTMs. Training maximises the log likelihood of both directions; the lab's loss is their mean: the objectives
`forward_lm` and `backward_lm` with weight 0.5 each (total = 0.5 * forward + 0.5 * backward).

ELMo's representation (§3.2, eq. 1): for L LSTM layers, R_k = {x_k, h_(k,j) | j = 1..L}, with layer 0 the token
vector duplicated to [x_k; x_k] and layer j the concatenation [forward h_(k,j); backward h_(k,j)];
ELMo_k = gamma * sum_j s_j h_(k,j), s = softmax(w). `ELMo.representations(ids)` returns it (Understand's probes and
embedding view read it); with `scalar_mix=False`, the top layer alone (§3.2's simplest case).

Worked example (one row "a b c d", 2 layers):

    position            0   1   2   3
    forward reads       a   ab  abc abcd      predicts  b  c  d  -
    backward reads      abcd bcd cd  d        predicts  -  a  b  c
    representation at k: gamma * (s_0 [x_k; x_k] + s_1 [f1_k; b1_k] + s_2 [f2_k; b2_k])

No leak (the test): changing tokens after t never changes the forward prediction at t; changing tokens before t never
changes the backward prediction at t. Both hold by construction: each direction is one nn.LSTM call over the
sequence (the backward one over the flipped rows).

Deviations, stated:
- The character CNN (2048 character n-gram filters and two highway layers) is replaced by a token embedding table of
  `embedding_size` (the lab's tokenizers give sub-word tokens, as every other family here uses).
- The LSTMs are nn.LSTM with a projection (`proj_size` = embedding_size, the paper's 4096 cells -> 512), one per
  layer and direction so that every layer's output is kept for the mix; the residual connection from the first to the
  second layer (§3.4) is added to every layer above the first. The softmax is a separate (V, E) matrix with a bias,
  shared by both directions (with `share_softmax=False` each direction has its own).
- The scalar mix's w and gamma are task-specific (trained with the downstream model); pretraining does not train
  them, so they stay at w = 0 (s uniform) and gamma = 1, and a pretrained run's representation is the layers' mean.
- Dropout `dropout` (0.1, the paper's) on the token vectors and between layers.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from lab_models.messages import LabError, Message
from lab_models.batch import IGNORE_INDEX, Batch
from lab_models.models.rnn.common import (BACKWARD_TARGETS, RNNFamilyModel, build_loss, init_lstm_family, lm_batch,
                                          mean_or_zero, token_nll, weighted_total)
from lab_models.models.rnn.layers import ScalarMix

CHOICES: tuple[str, ...] = ()
RULE = Message("biLM: the forward LSTM at t reads x_1..x_t and predicts x_(t+1); the backward LSTM reads x_t..x_N, "
               "predicts x_(t-1)")
OBJECTIVES = ("forward_lm", "backward_lm")


@dataclass(frozen=True)
class Settings:
    """ELMo's toggles."""

    scalar_mix: bool = True  # representations are the scalar mix of all layers (eq. 1); off: the top biLM layer only
    residual: bool = True  # residual connection between stacked LSTM layers (the paper's, from layer 1 to layer 2)
    share_softmax: bool = True  # one softmax for both directions (the paper's); off: one per direction


def make_batch(token_ids, generator: torch.Generator, cfg) -> Batch:
    """Rows -> the language-model batch: forward targets t+1, backward targets t-1 (rnn/common.py: lm_batch)."""
    return lm_batch(token_ids, cfg.vocab)


def _reverse_index(input_ids: torch.Tensor, pad_id: int) -> torch.Tensor | None:
    """(B, T) positions that reverse each right-padded row within its length (padding stays in place; the map is
    its own inverse), or None when no row is padded.

    >>> _reverse_index(torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8]]), pad_id=0).tolist()
    [[2, 1, 0, 3], [3, 2, 1, 0]]
    """
    padded = input_ids == pad_id  # (B, T)
    if not bool(padded.any()):
        return None
    T = input_ids.shape[1]
    lengths = (~padded).sum(dim=1, keepdim=True)  # (B, 1): rows are right-padded
    positions = torch.arange(T, device=input_ids.device)[None, :]  # (1, T)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)  # (B, T)


class ELMo(RNNFamilyModel):
    is_language_model = True

    def __init__(self, family, model_config, settings: Settings, vocab, objective_weights):
        super().__init__(family, model_config, settings, vocab, objective_weights)
        c = model_config
        if c.embedding_size >= c.hidden_size:
            raise LabError("ELMo projects its LSTM cells down to the embedding width: embedding_size "
                           "({embedding_size}) must be smaller than hidden_size ({hidden_size})",
                           embedding_size=c.embedding_size, hidden_size=c.hidden_size)
        E, H, L = c.embedding_size, c.hidden_size, c.n_layers
        self.embedding = nn.Embedding(c.vocab_size, E)  # x_k, shared by both directions
        self.forward_layers = nn.ModuleList(nn.LSTM(E, H, proj_size=E, batch_first=True) for _ in range(L))
        self.backward_layers = nn.ModuleList(nn.LSTM(E, H, proj_size=E, batch_first=True) for _ in range(L))
        self.softmax = nn.Linear(E, c.vocab_size)  # shared by both directions
        self.backward_softmax = None if settings.share_softmax else nn.Linear(E, c.vocab_size)
        self.dropout = nn.Dropout(c.dropout)
        self.scalar_mix = ScalarMix(L + 1)
        init_lstm_family(self)
        self.scalar_mix.requires_grad_(False)  # trained downstream, not in pretraining (module docstring)
        if self.weight("forward_lm") == 0:
            self.forward_layers.requires_grad_(False)
        if self.weight("backward_lm") == 0:
            self.backward_layers.requires_grad_(False)
            if self.backward_softmax is not None:
                self.backward_softmax.requires_grad_(False)
        if self.weight("forward_lm") == 0 and self.backward_softmax is not None:
            self.softmax.requires_grad_(False)

    # ---- the biLM ---------------------------------------------------------------------------------------------

    def _direction(self, layers: nn.ModuleList, x: torch.Tensor) -> list[torch.Tensor]:
        """x (B, T, E) in reading order -> every layer's outputs (B, T, E), in reading order."""
        outputs = []
        h = x
        for i, lstm in enumerate(layers):
            with warnings.catch_warnings():  # oneDNN (CPU) has no projected LSTM; PyTorch's own kernel is used
                warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")
                out, _ = lstm(h)  # (B, T, E): one fused call over the whole sequence
            if self.settings.residual and i > 0:
                out = out + h
            outputs.append(out)
            h = self.dropout(out)
        return outputs

    def token_vectors(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(input_ids)  # (B, T, E)

    def directional_states(self, input_ids: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(forward layers, backward layers): L tensors (B, T, E) each, aligned with the input positions. The forward
        state at t has read tokens 0..t; the backward state at t has read tokens t..T-1."""
        x = self.dropout(self.token_vectors(input_ids))  # (B, T, E)
        forward = self._direction(self.forward_layers, x)
        reverse = _reverse_index(input_ids, self.vocab.pad_id)  # (B, T): reading order of the backward LSTM
        if reverse is None:  # no padding (every pretraining row): a plain flip
            backward = [h.flip(1) for h in self._direction(self.backward_layers, x.flip(1))]
        else:  # right-padded rows (fine-tuning): each row reversed within its length, so the backward LSTM starts
            # at the row's last real token and the padding it reads last cannot reach a real position
            gather = reverse[..., None].expand_as(x)  # (B, T, E)
            backward = [h.gather(1, gather) for h in self._direction(self.backward_layers, x.gather(1, gather))]
        return forward, backward

    def forward_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, V): the forward LM's next-token logits at every position (generation reads the last one)."""
        forward, _ = self.directional_states(input_ids)
        return self.softmax(self.dropout(forward[-1]))

    def backward_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T, V): the backward LM's previous-token logits at every position."""
        _, backward = self.directional_states(input_ids)
        head = self.backward_softmax or self.softmax
        return head(self.dropout(backward[-1]))

    def layers(self, input_ids: torch.Tensor) -> list[torch.Tensor]:
        """R_k: L + 1 tensors (B, T, 2E): [x; x], then [forward h_j; backward h_j] for j = 1..L."""
        x = self.token_vectors(input_ids)
        forward, backward = self.directional_states(input_ids)
        return [torch.cat([x, x], dim=-1)] + [torch.cat([f, b], dim=-1) for f, b in zip(forward, backward)]

    def representations(self, input_ids: torch.Tensor) -> torch.Tensor:
        """ELMo_k (B, T, 2E): the scalar mix of all layers, or the top layer with `scalar_mix=False`."""
        layers = self.layers(input_ids)
        return self.scalar_mix(layers) if self.settings.scalar_mix else layers[-1]

    # ---- the loss -------------------------------------------------------------------------------------------

    def compute_loss(self, batch: Batch):
        forward, backward = self.directional_states(batch.input_ids)
        parts, ids, nlls = {}, [], []
        for name, states, targets, head in (
                ("forward_lm", forward, batch.targets, self.softmax),
                ("backward_lm", backward, batch.extras.get(BACKWARD_TARGETS), self.backward_softmax or self.softmax)):
            if self.weight(name) == 0:
                continue
            if targets is None:
                raise LabError("ELMo's batch needs extras['backward_targets']: build it with elmo.make_batch")
            where = targets != IGNORE_INDEX  # (B, T)
            logits = head(self.dropout(states[-1][where]))  # (N, V): only rows with a target reach the softmax
            nll = token_nll(logits, targets[where])  # (N,)
            parts[name] = mean_or_zero(nll)
            ids.append(targets[where])
            nlls.append(nll)
        # bits per byte: both directions' predictions (each token scored by each direction: the mean of the two)
        return build_loss(weighted_total(self.objective_weights, parts), parts, torch.cat(ids), torch.cat(nlls))


def build(family, model_config, settings, vocab, objective_weights) -> ELMo:
    return ELMo(family, model_config, settings, vocab, objective_weights)
