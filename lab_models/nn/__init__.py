"""The lab's neural network: one Transformer backbone for every family, its attention, config and heads."""
from .attention import AttentionMask, MultiHeadAttention, prepare_mask
from .backbone import Backbone, Block, Embeddings, FeedForward, init_weights
from .config import PRESETS, ModelConfig, preset_config
from .dropout import Dropout, dropout
from .heads import SequenceClassificationHead, SpanBoundaryHead, TokenClassificationHead

__all__ = [
    "AttentionMask", "MultiHeadAttention", "prepare_mask",
    "Backbone", "Block", "Embeddings", "FeedForward", "init_weights",
    "PRESETS", "ModelConfig", "preset_config",
    "Dropout", "dropout",
    "SequenceClassificationHead", "SpanBoundaryHead", "TokenClassificationHead",
]
