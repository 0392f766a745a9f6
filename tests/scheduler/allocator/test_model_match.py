"""The GPU-model matching rule gives the same answer through both of its cached forms.

Placement asks :func:`model_matches` per job and agent; the fragmentation mix asks
:func:`model_access` per shape and the model table. Both are one rule (normalise case and
punctuation away, then any allowed part is a substring of the model; an empty part matches
nothing), checked here on many drawn names against a plain restatement of it.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dlc.scheduler.allocator.base import model_access, model_choices, model_matches

REAL = ["Tesla_V100-SXM2-16GB", "Tesla V100-SXM2-32GB", "A100-SXM4-80GB", "NVIDIA_A10",
        "Tesla_T4", "H100", "V100M16", "V100M32", "G2", "", "-", ".*"]  # fmt: skip
#: letters of either case, digits and the punctuation agent attributes and specs carry
TEXT = st.text(alphabet="aAvVtT0146 -_.*/", max_size=8)
NAMES = st.lists(st.one_of(st.sampled_from(REAL), TEXT), min_size=1, max_size=12)
WANTED = st.lists(st.one_of(st.sampled_from(REAL), TEXT), min_size=1, max_size=4).map("|".join)


def _plain(wanted: str, model: str) -> bool:
    def norm(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    return any(part and part in norm(model) for part in map(norm, wanted.split("|")))


@settings(max_examples=300, deadline=None)
@given(WANTED, NAMES)
def test_both_forms_of_the_model_rule_agree_on_every_name(wanted, names):
    by_table = model_access(frozenset(model_choices(wanted)), tuple(names))
    by_pair = tuple(model_matches(wanted, name) for name in names)
    assert by_table == by_pair == tuple(_plain(wanted, name) for name in names)


def test_the_forms_agree_on_the_real_names_both_ways():
    for wanted in REAL:
        for choices in (wanted, f"{wanted}|T4"):
            got = model_access(frozenset(model_choices(choices)), tuple(REAL))
            assert got == tuple(model_matches(choices, name) for name in REAL), choices
    assert model_access(frozenset({"V100"}), ("Tesla_V100-SXM2", "G2")) == (True, False)
    assert model_access(frozenset({".*", "-"}), tuple(REAL)) == (False,) * len(REAL)
