"""nn: the lab's neural network, the bottom of the stack beside `text/`.

One Transformer backbone for every family (backbone.py) with its attention under any boolean mask (attention.py,
relative_attention.py, relative_position.py), the feed-forward layer and the Switch Transformer's experts
(feed_forward.py, moe.py), norms, dropout, weight initialization, the size presets and `ModelConfig` (config.py), and
the small heads that sit on hidden states (heads.py). It knows nothing of families or objectives: a family is a
`ModelConfig` plus a batch builder (objectives/) and a structure (models/).

May import: `lab_models.batch` (the ignore index) and torch. Nothing above it.
"""
