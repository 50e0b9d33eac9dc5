"""An open page that does nothing costs nothing: a stop to Gradio's status-tracker timer that keeps drawing frames.

Found with a CPU profile of an idle page (issue 25): Gradio 6.31's StatusTracker starts an elapsed-time loop when its
event goes pending (`requestAnimationFrame` calling itself while a flag is set) and clears the flag when the event
completes. The tracker of the page's own "Loading..." screen is removed while still pending, so its loop never ends:
a frame requested 60 times a second for as long as the page stays open. Any Gradio 6.31 page with one textbox spends
0.07 of a core in Chromium on it (about:blank 0.001), and so did the lab's page with no event running.

The loop shows a number with one decimal, so it needs no frames: a script at the very top of the page's <head>
(it must run before Gradio's modules take their copy of `requestAnimationFrame`) hands callbacks of the tracker's
timer shape (`TRACKER_TIMER_SHAPE`, matched on their source) to a `TRACKER_TIMER_MS` timeout instead. A live tracker
still counts its seconds, four times a second; the orphaned one ticks without drawing. Every other caller (Plotly,
Svelte's transitions) gets the browser's own. A Gradio release whose tracker is written differently no longer
matches, and the page then works as Gradio made it (tests/test_page_cost.py checks the shape against Gradio's file).

Gradio places `launch(head=...)` after its app has loaded, too late for this, so `IdleHeadMiddleware` writes the
script into the HTML of Gradio's page route as it leaves the server (mounted by `app.main.launch_kwargs`).
"""
from __future__ import annotations

import json
import re

TRACKER_TIMER_MS = 250
# Gradio 6.31's timer callback, minified: `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}` (set the elapsed
# seconds; request the next frame while still pending). Names vary with the build, the shape does not.
TRACKER_TIMER_SHAPE = r"^\(\)=>\{[\w$]+\([\w$]+,\(performance\.now\(\)-[\w$]+\([\w$]+\)\)/1e3\),[\w$]+&&[\w$]+\(\)\}$"
MARKER = "lab-idle-page"
IDLE_SCRIPT = f"""<script id="{MARKER}">
(() => {{
  const nativeRequest = window.requestAnimationFrame.bind(window);
  const nativeCancel = window.cancelAnimationFrame.bind(window);
  const trackerTimer = new RegExp({json.dumps(TRACKER_TIMER_SHAPE)});
  window.requestAnimationFrame = function (callback) {{
    if (typeof callback === "function" && trackerTimer.test(Function.prototype.toString.call(callback))) {{
      return -window.setTimeout(() => callback(performance.now()), {TRACKER_TIMER_MS});  // negative: a timeout's id
    }}
    return nativeRequest(callback);
  }};
  window.cancelAnimationFrame = (id) => (id < 0 ? window.clearTimeout(-id) : nativeCancel(id));
}})();
</script>"""
_HEAD_OPEN = re.compile(rb"<head[^>]*>", re.IGNORECASE)


def with_idle_script(page: bytes) -> bytes:
    """`page` (an HTML document) with IDLE_SCRIPT as the first child of its <head>; unchanged without a <head> or when
    the script is there already."""
    if MARKER.encode() in page:
        return page
    head = _HEAD_OPEN.search(page)
    if head is None:
        return page
    return page[:head.end()] + IDLE_SCRIPT.encode() + page[head.end():]


class IdleHeadMiddleware:
    """ASGI middleware: GET responses with an HTML body (Gradio's page, at "/" or a page of a multipage app) get
    IDLE_SCRIPT in their <head>. Other responses pass through untouched and unbuffered."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        body: list[bytes] = []

        async def send_page(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                is_html = headers.get(b"content-type", b"").startswith(b"text/html")
                if not is_html or headers.get(b"content-encoding"):
                    await send(message)  # not a page (or already compressed): pass it on as it comes
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = with_idle_script(b"".join(body))
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_page)
