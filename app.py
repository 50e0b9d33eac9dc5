"""Launch the Pretraining Lab: `python app.py [--host 127.0.0.1] [--port 7860] [--home DIR] [--corpus-root DIR]`.

Binds loopback unless told otherwise and never opens a public share link.
"""
from __future__ import annotations

import argparse
import logging
import signal

from app.main import build_app, configure_queue, launch_kwargs


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Serve the Pretraining Lab (a Gradio app).")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=7860, help="port to serve on (default: 7860)")
    parser.add_argument("--home", default=None,
                        help="lab home for corpora, tokenizers and runs (default: $PRETRAINING_LAB_HOME or "
                             "~/.pretraining-lab)")
    parser.add_argument("--corpus-root", default=None,
                        help="the folder whose corpora the Corpora tab may read in place (default: "
                             "$PRETRAINING_LAB_CORPUS_ROOT or <home>/server-corpora)")
    return parser.parse_args(argv)


def _shut_down_like_ctrl_c(signum, frame):
    """SIGTERM (`kill`, a service manager) ends the server as Ctrl-C does, so the job manager is closed too."""
    raise KeyboardInterrupt


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    demo = build_app(args.home, corpus_root=args.corpus_root)
    signal.signal(signal.SIGTERM, _shut_down_like_ctrl_c)
    try:
        configure_queue(demo)
        demo.launch(server_name=args.host, server_port=args.port, share=False, **launch_kwargs(demo))
    finally:
        demo.lab_jobs.close()  # running trainers checkpoint and end "stopped" (resumable); none outlive the server
        demo.lab_tokenize_jobs.close()  # running tokenizations keep what they did; a new start continues them


if __name__ == "__main__":
    main()
