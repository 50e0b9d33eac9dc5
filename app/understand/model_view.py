"""The attention model view (bertviz's, Vig 2019): every layer x head of one stream as a small heatmap on one grid,
one row per layer, one column per head; a click on one draws it large, with its tokens.

Presentation only: the probabilities are `api.attention_maps`' (lab_models/inference/representations.py). The grid
is a gallery of small images drawn here with Pillow (no plotting library renders images on the server), each
scaled to its own largest probability so that a diffuse head still shows its pattern, and cells the mask forbids
grey; the enlarged head and the HTML export are plotly figures (`head_figure`, `model_view_figure`, the latter every
layer x head on one page, with hover). Words are the reader's (area `probing`).
"""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from PIL import Image
from plotly.subplots import make_subplots

from app.display import FONT
from app.i18n.language import tr
from app.understand.figures import BLOCKED_BACKGROUND, stream_title

THUMBNAIL_PIXELS = 96  # each small heatmap is upscaled (nearest) to about this many pixels a side
BLUES = np.array([[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]], dtype=float)
BLOCKED = (226, 232, 240)  # BLOCKED_BACKGROUND as RGB


def blues(values: np.ndarray) -> np.ndarray:
    """Values in [0, 1] (any shape) -> RGB uint8 (shape + (3,)) on a white-to-navy ramp (matplotlib's "Blues" stops).

    >>> blues(np.array([0.0, 1.0])).tolist()
    [[247, 251, 255], [8, 48, 107]]
    """
    position = np.clip(values, 0.0, 1.0) * (len(BLUES) - 1)
    low = np.floor(position).astype(int).clip(0, len(BLUES) - 2)
    fraction = (position - low)[..., None]
    return np.rint(BLUES[low] * (1 - fraction) + BLUES[low + 1] * fraction).astype(np.uint8)


def head_image(weights: np.ndarray, allowed: np.ndarray | None) -> Image.Image:
    """One head's (Tq, Tk) probabilities as a small RGB image: scaled to its own maximum, forbidden cells grey."""
    top = float(weights.max()) if weights.size and float(weights.max()) > 0 else 1.0
    pixels = blues(weights / top)  # (Tq, Tk, 3)
    if allowed is not None:
        pixels[~allowed] = BLOCKED
    rows, cols = weights.shape
    scale = max(1, THUMBNAIL_PIXELS // max(rows, cols, 1))
    return Image.fromarray(pixels, "RGB").resize((cols * scale, rows * scale), Image.NEAREST)


def thumbnails(maps, stream: str) -> list[tuple[Image.Image, str]]:
    """The gallery: (image, caption) for every layer x head, layer by layer (a row of heads each)."""
    weights = maps.weights[stream].numpy()  # (L, H, Tq, Tk)
    mask = maps.masks.get(stream)
    allowed = mask.numpy().astype(bool) if mask is not None else None
    return [(head_image(weights[layer, head], allowed), tr("probing.model_view_caption", layer=layer + 1,
                                                           head=head + 1))
            for layer in range(weights.shape[0]) for head in range(weights.shape[1])]


def head_figure(maps, stream: str, layer: int, head: int) -> go.Figure:
    """Layer `layer`, head `head` (1-based) of `stream`, large: rows attend, columns are attended, with the tokens."""
    weights = maps.weights[stream][layer - 1, head - 1]  # (Tq, Tk)
    mask = maps.masks.get(stream)
    rows, cols = maps.streams[stream]
    z = weights.tolist()
    if mask is not None:
        z = [[value if allowed else None for value, allowed in zip(z_row, m_row)] for z_row, m_row in
             zip(z, mask.tolist())]
    figure = go.Figure(go.Heatmap(
        z=z, x=list(range(len(cols))), y=list(range(len(rows))), colorscale="Blues", zmin=0, xgap=1, ygap=1,
        customdata=[[(r, c) for c in cols] for r in rows],
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>",
        colorbar={"title": "p", "thickness": 12}))
    figure.update_xaxes(tickvals=list(range(len(cols))), ticktext=list(cols), tickangle=-60, showgrid=False)
    figure.update_yaxes(tickvals=list(range(len(rows))), ticktext=list(rows), autorange="reversed", showgrid=False)
    title = tr("probing.head_title", run_id=html.escape(maps.run_id), stream=stream_title(stream), layer=layer,
               head=head)
    size = max(360, min(640, 18 * max(len(rows), 1) + 160))
    figure.update_layout(title={"text": title, "font": {"size": 14}}, height=size, template="plotly_white",
                         font={"family": FONT}, plot_bgcolor=BLOCKED_BACKGROUND,
                         margin={"l": 80, "r": 20, "t": 60, "b": 80})
    return figure


def model_view_figure(maps, stream: str) -> go.Figure:
    """Every layer x head of `stream` as one plotly grid (the HTML export): rows are layers, columns heads; each cell
    a heatmap with the tokens on hover, one colour scale (0 to the largest probability of the stream)."""
    weights = maps.weights[stream]  # (L, H, Tq, Tk)
    mask = maps.masks.get(stream)
    rows, cols = maps.streams[stream]
    n_layers, n_heads = int(weights.shape[0]), int(weights.shape[1])
    titles = [tr("probing.model_view_caption", layer=layer + 1, head=head + 1) for layer in range(n_layers)
              for head in range(n_heads)]
    figure = make_subplots(rows=n_layers, cols=n_heads, subplot_titles=titles, horizontal_spacing=0.02,
                           vertical_spacing=min(0.08, 0.3 / n_layers))
    allowed = mask.tolist() if mask is not None else None
    for layer in range(n_layers):
        for head in range(n_heads):
            z = weights[layer, head].tolist()
            if allowed is not None:
                z = [[value if ok else None for value, ok in zip(z_row, m_row)] for z_row, m_row in zip(z, allowed)]
            figure.add_trace(go.Heatmap(z=z, coloraxis="coloraxis", customdata=[[(r, c) for c in cols] for r in rows],
                                        hovertemplate=("%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra>"
                                                       + titles[layer * n_heads + head] + "</extra>")),
                             row=layer + 1, col=head + 1)
    figure.update_xaxes(showticklabels=False, showgrid=False)
    figure.update_yaxes(showticklabels=False, showgrid=False, autorange="reversed")
    figure.update_annotations(font_size=10)
    top = float(weights.max()) if weights.numel() and float(weights.max()) > 0 else 1.0
    title = tr("probing.model_view_title", run_id=html.escape(maps.run_id), stream=stream_title(stream),
               layers=n_layers, heads=n_heads)
    figure.update_layout(title={"text": title, "font": {"size": 14}}, height=80 + 170 * n_layers,
                         width=max(480, 170 * n_heads + 120), template="plotly_white", font={"family": FONT},
                         plot_bgcolor=BLOCKED_BACKGROUND, margin={"l": 30, "r": 30, "t": 80, "b": 30},
                         coloraxis={"colorscale": "Blues", "cmin": 0, "cmax": top,
                                    "colorbar": {"title": "p", "thickness": 12}})
    return figure
