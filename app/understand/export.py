"""Figures to take away: a plotly figure (or a block of HTML) as one standalone HTML file, for the Understand tab's
download buttons (attention, model view, probes, logit lens, attributions).

PNG needs nothing from the server: every plot's toolbar (plotly's modebar, top right of the plot) has a camera
button, "Download plot as a png", that the browser renders from the plot as shown, in the reader's language. The HTML
file is what bertviz users ask for most: the interactive figure (hover, zoom) in one file that opens without the lab
and without a network, because plotly.js is inlined (`include_plotlyjs=True`, about 4.8 MB per file), never loaded
from a CDN. The figure's words are those of the page that drew it (the reader's language); plotly's own toolbar
tips stay English (plotly's locale files are not bundled).

`FigureFiles` owns one temporary folder per page (created when the tab is built) and keeps its newest `KEEP` files,
so a long session does not fill the disk; each file gets a fresh name, so two readers never share one.
"""
from __future__ import annotations

import html
import re
import tempfile
import uuid
from pathlib import Path

import plotly.graph_objects as go

KEEP = 24  # files kept per folder (each about 4.8 MB): the newest ones, enough for every open view of a few readers
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def slug(name: str) -> str:
    """A file-name part: "Probes · GPT" -> "probes-gpt".

    >>> slug("Probes · GPT / T5!")
    'probes-gpt-t5'
    """
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-")[:60] or "figure"


class FigureFiles:
    """Standalone HTML files of figures, in one temporary folder."""

    def __init__(self, prefix: str = "pretraining-lab-figures-"):
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))

    def _path(self, name: str) -> Path:
        self._prune()
        return self.folder / f"{slug(name)}-{uuid.uuid4().hex[:8]}.html"

    def _prune(self) -> None:
        files = sorted(self.folder.glob("*.html"), key=lambda path: path.stat().st_mtime)
        for path in files[:max(0, len(files) - KEEP + 1)]:
            path.unlink(missing_ok=True)

    def figure(self, figure: go.Figure, name: str) -> str:
        """The figure as a standalone HTML file (plotly.js inlined); returns its path."""
        path = self._path(name)
        path.write_text(figure.to_html(include_plotlyjs=True, full_html=True, config=PLOT_CONFIG), encoding="utf-8")
        return str(path)

    def page(self, body: str, name: str, title: str) -> str:
        """A block of the page's own HTML (the attribution chips) as a standalone file; returns its path."""
        path = self._path(name)
        path.write_text(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
                        f"</head><body style=\"font-family: sans-serif\">\n{body}\n</body></html>\n",
                        encoding="utf-8")
        return str(path)
