"""The Mask Explorer's handlers in-process (app/explorer/tab.py `MaskExplorer`): a fifth family is taken back when it
is ticked, and the header lists only the choices the drawn mask uses."""
from __future__ import annotations

import warnings

import pytest

from app.explorer.tab import MAX_FAMILIES, MaskExplorer


def test_a_family_beyond_the_limit_is_unticked_at_once_with_a_note():
    ticked = ["gpt", "bert", "t5", "glm", "mass"]
    with warnings.catch_warnings(record=True) as said:  # gr.Warning outside a request: a Python warning
        warnings.simplefilter("always")
        update = MaskExplorer.limit_families(ticked)
    assert MAX_FAMILIES == 4 and update == {"__type__": "update", "value": ["gpt", "bert", "t5", "glm"]}
    assert [str(w.message) for w in said] == ["At most 4 families side by side: untick one before you tick another."]
    assert MaskExplorer.limit_families(ticked[:4]) == {"__type__": "update"}  # within the limit: nothing changes
    assert MaskExplorer.limit_families(None) == {"__type__": "update"}  # an API client's odd value: left to Draw


@pytest.mark.parametrize("mode, src_len, used", [
    ("left_to_right", None, "**Choices used:** mode=left_to_right, masked=[1]"),  # no src_len=None
    ("seq2seq", 3, "**Choices used:** mode=seq2seq, src_len=3, masked=[1]"),
])
def test_the_header_lists_the_choices_the_mask_uses(tmp_path, mode, src_len, used):
    header = MaskExplorer(tmp_path).explore("a b c d e f", "whitespace", ["unilm"], 0, "", mode, src_len, "", None,
                                            "", True)[0]["value"]
    assert header.endswith(used) and "None" not in header
