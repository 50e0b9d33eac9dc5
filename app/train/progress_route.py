"""The Train tab's progress bar, moving without Gradio events: a small JSON route and the page script that polls it.

Every Gradio event costs the browser about a tenth of a second of a core on the lab's page, whatever it returns (Gradio
6.31's frontend walks its whole component tree for each output and snapshots the inputs; measured with
benchmarks/bench_page.py and a DevTools profile), and the bar moves with every step. So while a run is queued or
running and its bar is on screen, the page's own script asks `GET lab/train/progress?run=RUN_ID` every POLL_S seconds
and writes the answer into the bar's box (`progress_html`'s `train-progress-live` div, never the nodes Gradio drew
around it); a tab that is not shown, a hidden browser tab or a run that has ended asks nothing. Gradio still draws the
bar when a run is picked, started, stopped or resumed, and with the rest of the run every LIVE_REFRESH_S
(app/train/tab.py); when the script sees the run's state change (it finished, failed or left the queue), it clicks the
tab's hidden `REFRESH_NOW_ID` button, which runs that refresh at once.

The route answers {"run": id, "state": "running", "html": the bar}, in the reader's language (the page's
`lab_language` cookie); 400 without a run id, 404 for a run that is not there, with {"error": what to do}.
Mounted by `app.main.launch_kwargs` (Gradio's FastAPI app takes it as one of its first routes).
"""
from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from lab_models import api

from app.i18n.language import reading_language, request_language
from app.train.figures import progress_bar_html

ROUTE = "/lab/train/progress"
POLL_S = 2.0
LIVE_STATES = ("queued", "running")  # a run in another state keeps its bar until Gradio draws it again
# the Train tab's hidden button that runs its live refresh at once (app/train/tab.py): clicked when the run's state
# changes, so that the status line, the runs table and the Export row follow the bar within one poll
REFRESH_NOW_ID = "train-refresh-now"


def progress_payload(jobs, run_id: str, language: str = "en") -> dict:
    """What the route answers for `run_id`: its id, state and bar, in `language`. ValueError for an unknown run."""
    with reading_language(language):
        summary = api.training_status(jobs, run_id)
        return {"run": summary["run_id"], "state": summary.get("state"), "html": progress_bar_html(summary)}


def progress_route(jobs) -> Route:
    """The GET route that serves `progress_payload` for `?run=RUN_ID` (files are read in a worker thread)."""
    async def progress(request: Request) -> JSONResponse:
        run_id = request.query_params.get("run", "").strip()
        if not run_id:
            return JSONResponse({"error": "Give a run id: lab/train/progress?run=RUN_ID."}, status_code=400)
        try:
            payload = await run_in_threadpool(progress_payload, jobs, run_id, request_language(request))
        except ValueError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        return JSONResponse(payload, headers={"Cache-Control": "no-store"})

    return Route(ROUTE, progress, methods=["GET"], name="lab_train_progress")


# The page's script (in <head>): every POLL_S, only while the bar of the picked run is on screen and that run is queued
# or running, fetch its bar and write it when it changed. The run picker's text must name the run the box shows (a run
# being typed or just picked is Gradio's to draw). A failed fetch (the server restarting) is tried again next time.
# When the state changes (the run ended, or left the queue), the tab's live refresh runs at once (REFRESH_NOW_ID);
# it also runs once when the tab's own tick drew the end before this script saw it.
POLL_SCRIPT = """<script>
(() => {
  const route = %(route)s, period = %(period)d, live = %(live)s, refreshNow = %(refresh)s;
  let waiting = false;
  const seen = new Map();  // run -> the last state this script saw, kept apart from the box Gradio may redraw
  const clickRefresh = () => {
    const refresh = document.getElementById(refreshNow);
    if (refresh !== null) { refresh.click(); }
  };
  // Write the new bar into the old one node by node (texts and attributes), replacing nodes only where the shape
  // differs: replacing the box's whole content every 2 s left the page's heap growing by about 1.5 MB a minute.
  const same = (a, b) => a.nodeType === b.nodeType && a.nodeName === b.nodeName;
  const sync = (old, fresh) => {
    if (old.nodeType === Node.TEXT_NODE) {
      if (old.nodeValue !== fresh.nodeValue) { old.nodeValue = fresh.nodeValue; }
      return;
    }
    for (const name of old.getAttributeNames()) {
      if (!fresh.hasAttribute(name)) { old.removeAttribute(name); }
    }
    for (const name of fresh.getAttributeNames()) {
      if (old.getAttribute(name) !== fresh.getAttribute(name)) { old.setAttribute(name, fresh.getAttribute(name)); }
    }
    children(old, fresh);
  };
  const children = (old, fresh) => {
    const olds = Array.from(old.childNodes), freshes = Array.from(fresh.childNodes);
    freshes.forEach((child, index) => {
      if (index < olds.length && same(olds[index], child)) { sync(olds[index], child); }
      else if (index < olds.length) { old.replaceChild(child, olds[index]); }
      else { old.appendChild(child); }
    });
    olds.slice(freshes.length).forEach((child) => old.removeChild(child));
  };
  const patch = (box, html) => {  // the box keeps its own attributes (run, state): only its content is written
    const fresh = document.createElement("div");
    fresh.innerHTML = html;
    children(box, fresh);
  };
  const poll = async () => {
    const box = document.querySelector("#train-progress .train-progress-live");
    const picker = document.querySelector("#train-run input");
    if (waiting || document.hidden || !box || !picker || box.getClientRects().length === 0) { return; }
    const run = box.dataset.run;
    if (!run || picker.value.trim() !== run) { return; }
    if (!live.includes(box.dataset.state)) {
      // the tab's own tick drew the end first: the refresh still runs once for a run this script saw live
      if (live.includes(seen.get(run))) { seen.set(run, box.dataset.state); clickRefresh(); }
      return;
    }
    seen.set(run, box.dataset.state);
    waiting = true;
    try {
      const url = new URL(route.replace(/^\\//, ""), document.baseURI);
      url.searchParams.set("run", run);
      const response = await fetch(url, {cache: "no-store", credentials: "same-origin"});
      if (!response.ok) { return; }
      const answer = await response.json();
      if (!box.isConnected || box.dataset.run !== answer.run) { return; }  // Gradio drew another run meanwhile
      if (box.labDrawn !== answer.html) { patch(box, answer.html); box.labDrawn = answer.html; }
      const changed = (answer.state || "") !== box.dataset.state;
      box.dataset.state = answer.state || "";
      seen.set(run, box.dataset.state);
      if (changed) { clickRefresh(); }
    } catch (error) {
      // the server is restarting or gone: the next period tries again
    } finally {
      waiting = false;
    }
  };
  setInterval(poll, period);
})();
</script>""" % {"route": json.dumps(ROUTE), "period": int(POLL_S * 1000), "live": json.dumps(list(LIVE_STATES)),
                "refresh": json.dumps(REFRESH_NOW_ID)}
