"""The VNF image (``images/vnf``) booted in qemu with the OpenStack driver's user-data.

No cloud is needed: the image is built when absent (or built from other inputs), then
booted under qemu (software emulation here, minutes) with a NoCloud seed holding what
Nova would have given it. One test boots both guests (a cache and a load generator): each
boot under software emulation costs a minute or more of CPU; its pytest-xdist group keeps
it from sharing the CPU with another emulated guest.
"""
import os

import pytest

from cdnaas.calibration import qoe
from images.vnf import boot_test

pytestmark = [pytest.mark.xdist_group("vnf-image"),
              pytest.mark.skipif(os.geteuid() != 0,
                                 reason="building the VNF image needs root (mmdebstrap)")]


@pytest.fixture
def image():
    """The qcow2, built first when absent or built from other inputs."""
    boot_test.ensure_tools()
    path = boot_test.REPO / "var/images/cdnaas-vnf.qcow2"
    boot_test.ensure_image(path)
    return str(path)


def test_vnf_image_load_generator_measures_a_cache_guest(image):
    """images/vnf in qemu, twice: a cache guest and a load-generator guest booted with the
    driver's user-data. The cache serves an object (MISS, then HIT) and its status page
    only on the management port; the agent in the generator guest runs the image's wrk and the
    viewer simulator at the cache guest (via this machine: qemu's user networks are one
    per guest), RO's side reading them as the driver does. About 3 minutes with software
    emulation."""
    http, watch = boot_test.run_load(image)
    assert http.requests > 0 and http.errors == http.non_2xx == 0, http
    assert http.tool.startswith("wrk") and http.generator_cpu_seconds > 0
    figures = qoe.summary(watch.windows, boot_test.LOAD_TESTS[1].window_seconds)
    assert len(watch.windows) == boot_test.LOAD_TESTS[1].connections
    assert figures["failed_viewers"] == 0 and figures["mos"] >= 3.0, figures
