"""The Attention section's model view and its figures to take away (bertviz's most asked features).

Under the head view (one layer's heads, app/understand/tab.py), for the same run, sentence and stream:
* **Download as HTML** of the head view shown (the layer picked), refreshed after every attention event;
* **Show the model view**: every layer x head as a small heatmap on one grid (a row per layer); a click on one draws
  it large below, with its tokens; **Download the model view as HTML** saves every layer x head as one interactive
  page. Every plot's camera button saves a PNG. The figures are app/understand/model_view.py's.

Endpoints: `/understand_attention_html` (and `_on_submit`, `_stream`, `_view`, chained after the head view's four
events): (run, sentence, stream, layer) -> the head view's HTML file; `/understand_model_view`: (run, sentence,
stream) -> (gallery, the first head large, its HTML file, the model view's HTML file, layer 1, head 1);
`/understand_attention_head`: (run, sentence, stream, layer, head) -> (the head large, its HTML file). A click on the
gallery (private: its input is the browser's click) sets the layer and head, then calls the last one.
"""
from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from lab_models import api

from app.errors import user_errors
from app.i18n.language import text, tr
from app.inputs import whole_number
from app.understand.export import FigureFiles
from app.understand.figures import attention_figure
from app.understand.model_view import head_figure, model_view_figure, thumbnails


class ModelViewHandlers:
    """The handlers, bound to the app's run store and the tab's figure files."""

    def __init__(self, jobs, files: FigureFiles):
        self.jobs = jobs
        self.files = files

    def _maps(self, run_id, sentence, stream):
        if isinstance(run_id, (list, tuple)):
            run_id = run_id[0] if run_id else None
        if not run_id or not str(run_id).strip():
            raise api.LabError("Choose a run first: pick one with weights in the Run list.")
        maps = api.attention_maps(self.jobs.run_dir(str(run_id).strip()), sentence)
        streams = list(maps.streams)
        return maps, stream if stream in streams else streams[0]

    def head_view_file(self, run_id, sentence, stream=None, layer=1):
        """The head view of the picked layer as a standalone HTML file."""
        maps, stream = self._maps(run_id, sentence, stream)
        layer = min(max(whole_number(layer, tr("understand.layer_label"), 1, 1, 10_000), 1),
                    int(maps.weights[stream].shape[0]))
        return self.files.figure(attention_figure(maps, stream, layer), f"attention-{maps.run_id}-layer-{layer}")

    def model_view(self, run_id, sentence, stream=None):
        """(gallery, heads per layer, head 1 of layer 1 large, its HTML file, the model view's HTML file, 1, 1)."""
        maps, stream = self._maps(run_id, sentence, stream)
        n_heads = int(maps.weights[stream].shape[1])
        head = head_figure(maps, stream, 1, 1)
        return (gr.update(value=thumbnails(maps, stream), columns=min(n_heads, 12)), n_heads, head,
                self.files.figure(head, f"attention-{maps.run_id}-1-1"),
                self.files.figure(model_view_figure(maps, stream), f"model-view-{maps.run_id}"), 1, 1)

    def head(self, run_id, sentence, stream=None, layer=1, head=1):
        """(the head large, its HTML file); the layer and head are clamped to the run's."""
        maps, stream = self._maps(run_id, sentence, stream)
        n_layers, n_heads = int(maps.weights[stream].shape[0]), int(maps.weights[stream].shape[1])
        layer = min(max(whole_number(layer, tr("understand.layer_label"), 1, 1, 10_000), 1), n_layers)
        head = min(max(whole_number(head, tr("probing.head_label"), 1, 1, 10_000), 1), n_heads)
        figure = head_figure(maps, stream, layer, head)
        return figure, self.files.figure(figure, f"attention-{maps.run_id}-{layer}-{head}")

    @staticmethod
    def select(heads_per_layer, event: gr.SelectData):
        """A click on the gallery: its (layer, head), 1-based (the gallery lists heads layer by layer)."""
        if event is None or event.index is None:
            return gr.skip(), gr.skip()
        index = event.index if isinstance(event.index, int) else event.index[0]
        heads = max(1, int(heads_per_layer or 1))
        return index // heads + 1, index % heads + 1


def build(jobs, files: FigureFiles, run, sentence, stream, layer):
    """Lay out the downloads and the model view under the head view. Returns a namespace whose `follow(events)`
    redraws the head view's HTML file after each of the head view's events [(event, api_name suffix)]."""
    handlers = ModelViewHandlers(jobs, files)
    with gr.Row():
        head_view_html = gr.DownloadButton(text("probing.download_html"), value=None, size="sm", scale=0,
                                           min_width=220, elem_id="understand-attention-html")
        gr.Markdown(text("probing.png_hint"))
    with gr.Accordion(text("probing.model_view_accordion"), open=False):
        gr.Markdown(text("probing.model_view_intro"))
        show = gr.Button(text("probing.model_view_button"), elem_id="understand-model-view")
        gallery = gr.Gallery(label=text("probing.model_view_label"), columns=4, allow_preview=False,
                             object_fit="contain", height="auto", elem_id="understand-model-view-gallery")
        heads_per_layer = gr.Number(4, visible=False, precision=0)
        with gr.Row():
            layer_pick = gr.Number(1, precision=0, minimum=1, label=text("understand.layer_label"), scale=1,
                                   min_width=100)
            head_pick = gr.Number(1, precision=0, minimum=1, label=text("probing.head_label"), scale=1,
                                  min_width=100)
            model_view_html = gr.DownloadButton(text("probing.model_view_download"), value=None, size="sm", scale=0,
                                                min_width=260, elem_id="understand-model-view-html")
            head_html = gr.DownloadButton(text("probing.head_download"), value=None, size="sm", scale=0,
                                          min_width=220)
        head_plot = gr.Plot(label=text("probing.head_plot_label"), elem_id="understand-attention-head-plot")
    def follow(events) -> None:
        for event, suffix in events:
            event.success(user_errors(handlers.head_view_file), [run, sentence, stream, layer], head_view_html,
                          api_name=f"understand_attention_html{suffix}", show_progress="hidden")

    show.click(user_errors(handlers.model_view), [run, sentence, stream],
               [gallery, heads_per_layer, head_plot, head_html, model_view_html, layer_pick, head_pick],
               api_name="understand_model_view")
    head_inputs = [run, sentence, stream, layer_pick, head_pick]
    gallery.select(handlers.select, heads_per_layer, [layer_pick, head_pick], api_name="understand_model_view_select",
                   api_visibility="private").then(user_errors(handlers.head), head_inputs, [head_plot, head_html],
                                                  api_name="understand_attention_head_after_select",
                                                  api_visibility="private")
    layer_pick.submit(user_errors(handlers.head), head_inputs, [head_plot, head_html],
                      api_name="understand_attention_head")
    return SimpleNamespace(handlers=handlers, gallery=gallery, head_plot=head_plot, follow=follow)
