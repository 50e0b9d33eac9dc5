r"""Five changes to Gradio 6.31's frontend, four that keep an open page light during a long demo and one that keeps
what an event drew through a change of language, and the ASGI middleware
that makes them as the page and its bundles leave the server (`GradioFixesMiddleware`, mounted by
`app.main.launch_kwargs`).

CPU profiles of the page (idle, ticking, switching language) and a count of its live objects by prototype (the Chrome
DevTools Protocol's `Runtime.queryObjects`) show each cost. Each change is matched on what Gradio 6.31's minified
bundles say, which is why requirements.txt admits Gradio 6.31 only: a release that changes a bundle no longer matches,
every change then leaves Gradio's code as it is, and the page works as Gradio made it, paying the costs again.

1. **A timer that draws frames forever** (`FIXES_SCRIPT`, first in the page's <head>). Gradio's StatusTracker counts
   an event's elapsed seconds in a loop of `requestAnimationFrame` calls that runs while its event is pending. The
   tracker of the page's own "Loading..." screen is removed while still pending, so its loop never ends: a frame 60
   times a second for as long as the page is open, 0.07 of a core in Chromium for a page with one textbox and no event
   (about:blank: 0.001). The loop shows a number with one decimal and needs no frames: the script gives callbacks of
   the tracker's timer shape (`TRACKER_TIMER_SHAPE`, matched on their source) a `TRACKER_TIMER_MS` timeout instead.
   A live tracker still counts its seconds, four times a second; the orphaned one ticks without drawing. Other callers
   (Plotly, Svelte's transitions) get the browser's own `requestAnimationFrame`.
2. **Every redrawn plot kept** (`FIXES_SCRIPT`). Gradio's Plot draws each new figure into a new `<div>` with
   `Plotly.react` and `responsive` on, and drops the old `<div>` without `Plotly.purge`: Plotly's resize listener on
   the window keeps each old figure alive, its SVG and its data. The Train tab's loss curve, redrawn every 10 s, would
   leave about 500 SVG elements and half a megabyte per tick (the heap doubling in 30 minutes). The script wraps
   Plotly's `react` and `newPlot` when Gradio sets `window.Plotly` (it loads Plotly lazily), remembers each plot it
   draws and purges those no longer in the page at the next draw.
3. **Every event tells every component its status again** (`with_status_fix`, on `Blocks-<hash>.js`). Gradio keeps a
   loading status for each component that any event of the page has used and, after each change of any event's
   status (pending, then complete: twice per event, a live tick included), hands every one of them its status again,
   changed or not; each such update first reads the component's value back (a copy of a whole figure or table) and
   those of all its children. With every tab visited that is several hundred components per step: half a second of
   the browser per language switch (in a CPU profile `update_loading_stati_state` takes 1.9 of 2.2 s over four
   switches) and a cost on every tick and click that grows with what the page shows. The changed method hands on only
   the statuses that changed since it last handed them on; the page draws the same statuses.
4. **A tab's new name copies everything in it** (`with_read_back_fix`, on `core-<hash>.js`). Before it applies an
   update that carries no value, Gradio's `update_state` reads the current value of the component and of every
   component inside it back into its tree (a structured clone of each figure and table), so that a component drawn
   again from the tree (one made visible) keeps what the reader typed. Neither a status nor a tab's name draws
   anything again, yet each pays the copy: the language switch's new tab names (every tab of the page, its whole
   content each: 191 components for the Train tab) and every status of every event. The changed statement skips the
   read-back for an update that carries only a status, or only a tab's label; any other update (visibility,
   choices, ...) still reads back first. Measured with the Train tab live and every tab visited, over ten switches
   (two runs of benchmarks/bench_page.py's `probe`): the language switch's median is 0.40 to 0.43 s with it and
   0.54 s without; the browser's main thread per probe (seven tab clicks and back, two switches) 3.9 to 4.1 s with
   it and 4.3 s without.
5. **A change of language puts the first value back** (`with_set_data_fix`, on `src-<hash>.js`). A component whose
   value held a translation marker when the page was built (Compare's "pick runs" note, a status line) keeps that
   marker and, at every change of language, sets the marker's text as its value again, even after an event has drawn
   something else there: the header's switch emptied Compare's answers. The changed `set_data` forgets a prop's
   marker when an update sets the prop to a value without one; a value with a marker is translated as before.

Gradio places `launch(head=...)` after its app has loaded, too late for the first change, so the middleware writes
`FIXES_SCRIPT` into the HTML of Gradio's page itself, and changes the three bundles as they leave the server (whole
and uncompressed, then Gradio's own compression applies).

Re-deriving the patterns for a new Gradio release. The bundles are the installed package's files under
`<site-packages>/gradio/templates/frontend/assets/` (`python -c "import gradio, pathlib;
print(pathlib.Path(gradio.__file__).parent / 'templates/frontend/assets')"`); their names carry a content hash, and
the minifier's short names (`F`, `Pe`, `#m`, ...) change with every build, so each pattern matches names as `[\w$]+`
and only the shape is written out.
1. `statustracker-<hash>.js`: search `performance.now()`; the arrow function that sets the elapsed seconds and
   requests the next frame while pending is the tracker's timer. Write its shape into `TRACKER_TIMER_SHAPE`.
2. `PlotlyPlot-<hash>.js`: search `.react(`; Gradio must still draw with `react` (or `newPlot`) of the Plotly object
   it sets as `window.Plotly`. Nothing to rewrite while it does.
3. Search every `*.js` for `update_loading_stati_state(){` (it lives in `Blocks-<hash>.js`): copy the method into
   `STATUS_UPDATE_SHAPE`, and keep `STATUS_UPDATE_FIXED` calling what the method calls (`this.loading_stati.current`,
   `this.update_state_cb`). `STATUS_BUNDLE_PATH` names the bundle's file.
4. `core-<hash>.js`: search `` `value`in `` inside `async update_state(`; the statement that reads back when the
   update has no value goes into `READ_BACK_SHAPE`, and `READ_BACK_FIXED` keeps its groups. `READ_BACK_BUNDLE_PATH`
   names the bundle's file.
5. Search every `*.js` for `set_data(e){for(` (it lives in one of the `src-<hash>.js` bundles): copy its first
   statement into `SET_DATA_SHAPE`; `SET_DATA_FIXED` keeps its groups. `SET_DATA_BUNDLE_PATH` names the bundles'
   files (the others of that name pass unchanged).
Then run `python -m pytest tests/app/test_page_cost.py tests/app/i18n/test_language_switch.py` (each shape matches
Gradio's files exactly once, nothing else is touched, the changed bundles parse with node, the served page and bundles
carry the changes) and `tests/app/test_browser.py` (the idle page asks for no frames, redrawn plots are purged, the
switch keeps Compare's answers), and raise requirements.txt's Gradio range to the release checked.
"""
from __future__ import annotations

import json
import re

# ------------------------------------------------------------------ 1 and 2: the script that the page runs first
TRACKER_TIMER_MS = 250  # how often the tracker's loop runs instead of every frame: its number has one decimal
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


# ------------------------------------------------------------------ 3: the statuses handed on (Blocks-<hash>.js)
# Gradio 6.31's method, minified: after each status change, every known component's status handed on again.
STATUS_UPDATE_SHAPE = re.compile(
    rb"async update_loading_stati_state\(\)\{await Promise\.all\(Object\.entries\(this\.loading_stati\.current\)"
    rb"\.map\(\(\[([\w$]+),([\w$]+)\]\)=>this\.update_state_cb\(Number\(\1\),\{loading_status:\2\},!1\)\)\)\}")
# The same method handing on only what changed since the last time (compared as JSON: a status is a small plain
# object, rebuilt on every change of any event, so its identity says nothing).
STATUS_UPDATE_FIXED = (
    b"async update_loading_stati_state(){const labSent=this.labSentStati||(this.labSentStati=new Map());"
    b"await Promise.all(Object.entries(this.loading_stati.current).filter(([id,status])=>{let now;"
    b"try{now=JSON.stringify(status)}catch(error){return!0}if(labSent.get(id)===now)return!1;"
    b"labSent.set(id,now);return!0}).map(([id,status])=>this.update_state_cb(Number(id),{loading_status:status},!1)))}")
# the bundle that holds it, as Gradio serves it ("/assets/Blocks-D1GWYZdr.js")
STATUS_BUNDLE_PATH = re.compile(r"/assets/Blocks-[\w-]+\.js$")


def with_status_fix(bundle: bytes) -> bytes:
    """Gradio's `Blocks-<hash>.js` with STATUS_UPDATE_FIXED in place of the method of STATUS_UPDATE_SHAPE; unchanged
    when the bundle has no such method (another Gradio release) or has it fixed already."""
    return STATUS_UPDATE_SHAPE.sub(lambda _: STATUS_UPDATE_FIXED, bundle, count=1)


# ------------------------------------------------------------------ 4: the read-back (core-<hash>.js)
# Gradio 6.31's `update_state(id, update)`, minified: `r&&!(`value`in t)&&(await this.#m(e,r),await this.#h(r));`
# (node r, update t, id e: without a value in the update, read back the node's values, then its descendants').
READ_BACK_SHAPE = re.compile(
    rb"([\w$]+)&&!\(`value`in ([\w$]+)\)&&\(await this\.(#[\w$]+)\(([\w$]+),\1\),await this\.(#[\w$]+)\(\1\)\);")
# the same, skipped when the update carries only a status, or only a tab's label
READ_BACK_FIXED = (rb"\1&&!(`value`in \2)&&!Object.keys(\2).every(labKey=>labKey===`loading_status`||"
                   rb"labKey===`label`&&\1.type===`tabitem`)&&(await this.\3(\4,\1),await this.\5(\1));")
# the bundle that holds it ("/assets/core-Bdx9080F.js")
READ_BACK_BUNDLE_PATH = re.compile(r"/assets/core-[\w-]+\.js$")


def with_read_back_fix(bundle: bytes) -> bytes:
    """Gradio's `core-<hash>.js` with its read-back (READ_BACK_SHAPE) skipped for an update of a status alone or
    of a tab's label alone; unchanged when the bundle has no such statement (another Gradio release) or has it
    fixed already."""
    return READ_BACK_SHAPE.sub(READ_BACK_FIXED, bundle, count=1)


# ------------------------------------------------------------------ 5: a drawn value kept (src-<hash>.js)
# Gradio 6.31's `set_data(e)`, minified: each prop of an update is translated (and its marker remembered for the next
# change of language) when it holds a translation marker, and set as it is otherwise, its old marker still remembered.
SET_DATA_SHAPE = re.compile(
    rb"set_data\(([\w$]+)\)\{for\(let ([\w$]+) in \1\)\{let ([\w$]+)=\1\[\2\],([\w$]+)=([\w$]+)\(\3\)\?"
    rb"this\._translate_and_store\(this\.shared_props\.includes\(\2\)\?`shared`:`props`,\2,\3\):\3;")
# the same, forgetting the old marker of a prop set to a value without one
SET_DATA_FIXED = (rb"set_data(\1){for(let \2 in \1){let \3=\1[\2],\4=\5(\3)?this._translate_and_store("
                  rb"this.shared_props.includes(\2)?`shared`:`props`,\2,\3):(delete this.translatable_props["
                  rb"(this.shared_props.includes(\2)?`shared`:`props`)+`.`+\2],\3);")
# the bundle that holds it ("/assets/src-DcSdoR3U.js")
SET_DATA_BUNDLE_PATH = re.compile(r"/assets/src-[\w-]+\.js$")


def with_set_data_fix(bundle: bytes) -> bytes:
    """Gradio's `src-<hash>.js` with its `set_data` (SET_DATA_SHAPE) forgetting a prop's translation marker when an
    update sets the prop to a value without one; unchanged when the bundle has no such method (another Gradio
    release) or has it fixed already."""
    return SET_DATA_SHAPE.sub(SET_DATA_FIXED, bundle, count=1)


# ------------------------------------------------------------------ the middleware
# Gradio's bundles that leave the server changed, and how
CHANGED_BUNDLES = ((STATUS_BUNDLE_PATH, with_status_fix), (READ_BACK_BUNDLE_PATH, with_read_back_fix),
                   (SET_DATA_BUNDLE_PATH, with_set_data_fix))


# a request for the changed bundle asks for it whole and uncompressed: the server's copy is the one changed
_WHOLE_RESPONSE_ONLY = {b"accept-encoding", b"if-none-match", b"if-modified-since", b"range", b"if-range"}
# what described Gradio's own copy of the bundle: a browser must not mix it up with the changed one
_STALE_HEADERS = {b"content-length", b"etag", b"last-modified", b"accept-ranges"}


class GradioFixesMiddleware:
    """ASGI middleware: GET responses with an HTML body (Gradio's page, at "/" or a page of a multipage app) get
    FIXES_SCRIPT in their <head>; Gradio's bundles of CHANGED_BUNDLES get their change (`Blocks-<hash>.js`
    `with_status_fix`, `core-<hash>.js` `with_read_back_fix`, `src-<hash>.js` `with_set_data_fix`). Other responses
    pass through untouched and unbuffered."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        for path, change in CHANGED_BUNDLES:
            if path.search(scope.get("path", "")):
                headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in _WHOLE_RESPONSE_ONLY]
                await self.app({**scope, "headers": headers}, receive, self._changing(send, b"javascript", change))
                return
        await self.app(scope, receive, self._changing(send, b"text/html", with_fixes_script))

    @staticmethod
    def _changing(send, content_type: bytes, change):
        """A `send` that passes on a 200 response whose content type contains `content_type` as `change(body)`,
        and any other response as it comes."""
        start: dict | None = None
        body: list[bytes] = []

        async def send_changed(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if (message.get("status") != 200 or content_type not in headers.get(b"content-type", b"")
                        or headers.get(b"content-encoding")):
                    await send(message)  # not ours to change (or compressed already): pass it on as it comes
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            changed = change(b"".join(body))
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() not in _STALE_HEADERS]
            headers.append((b"content-length", str(len(changed)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": changed})

        return send_changed
