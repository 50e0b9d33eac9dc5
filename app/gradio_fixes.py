"""Two leaks of Gradio 6.31's frontend that an open page pays for during a long demo, stopped by a script that the
page runs before Gradio's own (issue 25). Found with a CPU profile of an idle page and a count of the page's live
objects by prototype (CDP `Runtime.queryObjects`) while the Train tab ticked.

1. **A timer that draws frames forever.** Gradio's StatusTracker counts an event's elapsed seconds in a loop of
   `requestAnimationFrame` calls that runs while its event is pending. The tracker of the page's own "Loading..."
   screen is removed while still pending, so its loop never ends: a frame 60 times a second for as long as the page
   is open. Any Gradio 6.31 page with one textbox cost Chromium 0.07 of a core with no event at all (about:blank
   0.001). The loop shows a number with one decimal and needs no frames: callbacks of the tracker's timer shape
   (`TRACKER_TIMER_SHAPE`, matched on their source) get a `TRACKER_TIMER_MS` timeout instead. A live tracker still
   counts its seconds, four times a second; the orphaned one ticks without drawing. Other callers (Plotly, Svelte's
   transitions) get the browser's own `requestAnimationFrame`.
2. **Every redrawn plot kept.** Gradio's Plot draws each new figure into a new `<div>` with `Plotly.react` and
   `responsive` on, and drops the old `<div>` without `Plotly.purge`: Plotly's resize listener on the window keeps
   each old figure alive, its SVG and its data (the Train tab's loss curve, redrawn every 10 s, left about 500 SVG
   elements and half a megabyte per tick: the page's heap doubled in 30 minutes). The script wraps Plotly's `react`
   and `newPlot` when Gradio sets `window.Plotly` (it loads Plotly lazily), remembers each plot it draws, and purges
   those no longer in the page at the next draw.

Both are matched on what Gradio does today; a release that changes it no longer matches, and the page then works as
Gradio made it (tests/test_page_cost.py checks the tracker's shape against Gradio's file; tests/test_browser.py
counts the idle page's frames). Gradio places `launch(head=...)` after its app has loaded, too late for the first
fix, so `GradioFixesMiddleware` writes the script into the HTML of Gradio's page as it leaves the server (mounted by
`app.main.launch_kwargs`).
"""
from __future__ import annotations

import json
import re

TRACKER_TIMER_MS = 250
# Gradio 6.31's timer callback, minified: `()=>{F(Pe,(performance.now()-w(de))/1e3),W&&ze()}` (set the elapsed
# seconds; request the next frame while still pending). Names vary with the build, the shape does not.
TRACKER_TIMER_SHAPE = r"^\(\)=>\{[\w$]+\([\w$]+,\(performance\.now\(\)-[\w$]+\([\w$]+\)\)/1e3\),[\w$]+&&[\w$]+\(\)\}$"
MARKER = "lab-gradio-fixes"
FIXES_SCRIPT = f"""<script id="{MARKER}">
(() => {{
  // 1. the status tracker's timer: a timeout, not a frame
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

  // 2. plots that Gradio drew and dropped: purged at the next draw
  const drawn = new Set();
  const purgeDropped = (Plotly) => {{
    for (const plot of drawn) {{
      if (plot.isConnected) {{ continue; }}
      drawn.delete(plot);
      try {{ Plotly.purge(plot); }} catch (error) {{}}
    }}
  }};
  const adopt = (Plotly) => {{
    if (!Plotly || typeof Plotly !== "object" || Plotly.labPurgesDropped) {{ return Plotly; }}
    for (const name of ["react", "newPlot"]) {{
      const draw = Plotly[name];
      if (typeof draw !== "function") {{ continue; }}
      Plotly[name] = function (plot, ...rest) {{
        purgeDropped(Plotly);
        if (plot instanceof Element) {{ drawn.add(plot); }}
        return draw.call(this, plot, ...rest);
      }};
    }}
    Plotly.labPurgesDropped = true;
    return Plotly;
  }};
  let plotly = adopt(window.Plotly);
  Object.defineProperty(window, "Plotly", {{
    configurable: true, enumerable: true, get: () => plotly, set: (value) => {{ plotly = adopt(value); }},
  }});
}})();
</script>"""
_HEAD_OPEN = re.compile(rb"<head[^>]*>", re.IGNORECASE)


def with_fixes_script(page: bytes) -> bytes:
    """`page` (an HTML document) with FIXES_SCRIPT as the first child of its <head>; unchanged without a <head> or
    when the script is there already."""
    if MARKER.encode() in page:
        return page
    head = _HEAD_OPEN.search(page)
    if head is None:
        return page
    return page[:head.end()] + FIXES_SCRIPT.encode() + page[head.end():]


class GradioFixesMiddleware:
    """ASGI middleware: GET responses with an HTML body (Gradio's page, at "/" or a page of a multipage app) get
    FIXES_SCRIPT in their <head>. Other responses pass through untouched and unbuffered."""

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
            page = with_fixes_script(b"".join(body))
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_page)
