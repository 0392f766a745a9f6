"""Red-team 2026-11-26 (second pass), finding 37: an AMD job could get the root group.

The AMD backend adds the numeric groups owning the job's ``/dev/kfd`` and DRM nodes to the
container. On a host where a node is owned by group 0 (no ``render`` group, or udev rules not
installed), the job's uid 65534 got supplementary group ``root``: it could then read and write
every root-group file it can see (a mounted volume's, the image's). Group 0 is never added.
"""

from __future__ import annotations

import os

from dlc.devices.amd.backend import node_groups


def test_the_root_group_is_never_handed_to_a_job(tmp_path):
    assert os.geteuid() == 0, "chown to other groups needs root (CI runs as root)"
    kfd, render, card = (tmp_path / n for n in ("kfd", "renderD128", "card0"))
    for path, gid in ((kfd, 0), (render, 4242), (card, 0)):
        path.write_text("")
        os.chown(path, 0, gid)
    assert node_groups([str(kfd), str(render), str(card)]) == ("4242",)
