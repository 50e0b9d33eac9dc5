"""Gradio's installed frontend bundles and the check every bundle fix of app/gradio_fixes.py must pass: its shape
matches exactly one place in exactly one bundle, the fix changes that place once, and nothing else."""
from __future__ import annotations

import re
from pathlib import Path

import gradio as gr

ASSETS = Path(gr.__file__).parent / "templates" / "frontend" / "assets"


def fixed_once(shape: re.Pattern, fix, bundle: str) -> tuple[bytes, bytes]:
    """(the bundle as Gradio ships it, as `fix` leaves it), after asserting that `shape` matches once, in the one
    bundle whose name starts with `bundle` ("core", "src"), that the fix changes it and is idempotent, and that
    everything before and after the matched place is left as it was."""
    holding = [path for path in ASSETS.glob("*.js") if shape.search(path.read_bytes())]
    assert [path.name.split("-")[0] for path in holding] == [bundle]
    original = holding[0].read_bytes()
    fixed = fix(original)
    assert len(shape.findall(original)) == 1 and fix(fixed) == fixed != original
    before, after = original.split(shape.search(original).group(0))
    assert fixed.startswith(before) and fixed.endswith(after)  # nothing else touched
    return original, fixed
