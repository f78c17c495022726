"""Prove the VNF image is real: boot it with qemu, configured by the driver's own user-data.

    .venv/bin/python images/vnf/boot_test.py [--load] [IMAGE.qcow2]
                                             (default var/images/cdnaas-vnf.qcow2)

The image is built first (``build.sh``) when it is absent or was built from other
build inputs than the present ones (:func:`ensure_image`).

A sample origin (``cdnaas.origin.server``) listens on this machine's loopback;
the image boots under qemu (KVM when ``/dev/kvm`` works, software emulation
otherwise) on qemu's user network, where the guest is 10.0.2.15 and this
machine 10.0.2.2, with a NoCloud seed (a FAT disk labelled ``cidata``, made with
mtools) whose user-data is what the OpenStack driver renders for a cache
(:func:`cdnaas.ro.vim.openstack.userdata.cache`, with this machine as the management
source). The guest's port 80 and its management port are forwarded to loopback ports
here; an object is fetched through the cache's nginx twice: MISS (fetched from the
origin), then HIT; the status page answers 404 on port 80 and its figures on the
management port. With ``--load``, a second guest boots the same image with the
driver's load-generator user-data (:func:`cdnaas.ro.vim.openstack.userdata.load_generator`)
and its agent runs wrk and the viewer simulator at the cache (:func:`run_load`).
Exit status 0 on success; the guests' consoles are kept in
``var/images/boot-test-console.log`` and ``var/images/boot-test-loadgen-console.log``.

Needs qemu-system-x86, qemu-utils, mtools and dosfstools (Debian packages; installed
when missing), and root to build the image.
"""
import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cdnaas.calibration import qoe
from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.origin.server import serve_in_thread
from cdnaas.ro.calibration_campaign import VIDEO_PATH
from cdnaas.ro.vim import loadreport
from cdnaas.ro.vim.base import LoadTest, VimError
from cdnaas.ro.vim.openstack import loadgen, userdata
from cdnaas.vnf.endpoints import MANAGEMENT_PORT, STATUS_PATH
from tests.support.sigs import sample_sig

HERE = Path(__file__).resolve().parent
#: what booting needs: tool -> its Debian package
TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils", "mcopy": "mtools",
         "mkfs.vfat": "dosfstools"}
#: the files an image is built from (``build.sh`` stamps their digests beside it)
BUILD_INPUTS = ("build.sh", "customize.sh")
GUEST = "10.0.2.15"
HOST_ALIAS = "10.0.2.2"
OBJECT = "/objects/chunk-low"
#: what the load generator guest measures: wrk (10 connections, 5 s), then 20 viewers
#: for two windows of 8 s
LOAD_TESTS = (LoadTest("http", OBJECT, 10, 5),
              LoadTest("viewers", VIDEO_PATH, 20, 16, segments=20, window_seconds=8))


def log(message):
    print(f"[boot-test {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def kvm_usable():
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
        return True
    except OSError:
        return False


def seed_disk(path, user_data, instance_id):
    """A NoCloud seed: FAT file system labelled cidata, written without mounting (mtools)."""
    scratch = Path(path).parent
    files = {"user-data": user_data,
             "meta-data": f"instance-id: {instance_id}\nlocal-hostname: {instance_id}\n",
             "network-config": "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"}
    subprocess.run(["mkfs.vfat", "-C", "-n", "CIDATA", str(path), "2048"], check=True,
                   capture_output=True)
    for name, text in files.items():
        (scratch / name).write_text(text)
        subprocess.run(["mcopy", "-i", str(path), str(scratch / name), f"::/{name}"], check=True)


def fetch(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, dict(response.headers), response.read()


def status_of(url):
    try:
        return fetch(url)[0]
    except urllib.error.HTTPError as exc:
        return exc.code


class AccelFailed(Exception):
    """qemu died early with this accelerator (e.g. KVM inside a VM that does not nest it)."""


def ensure_tools():
    """Install the Debian packages of :data:`TOOLS` that are missing (as ``build.sh`` does
    for its own)."""
    missing = [package for tool, package in TOOLS.items()
               if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin"))]
    if missing:
        log(f"installing {' '.join(missing)}")
        subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q",
                        "--no-install-recommends", *missing],
                       check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def inputs_stamp():
    """What ``build.sh`` writes beside an image (``sha256sum`` of its build inputs)."""
    return "".join(f"{hashlib.sha256((HERE / name).read_bytes()).hexdigest()}  {name}\n"
                   for name in BUILD_INPUTS)


def ensure_image(image):
    """Build ``image`` with ``build.sh`` unless it exists and was built from the build
    inputs as they are now (its ``.inputs`` stamp); return whether it was built."""
    image = Path(image)
    stamp = Path(f"{image}.inputs")
    if image.exists() and stamp.exists() and stamp.read_text() == inputs_stamp():
        return False
    log(f"building {image}: " + ("its build inputs changed" if image.exists() else "absent"))
    subprocess.run([str(HERE / "build.sh"), str(image)], check=True)
    return True


def accelerators():
    """The accelerators to try, in order: ``CDNAAS_QEMU_ACCEL``, else KVM (when it opens)
    then software emulation."""
    if os.environ.get("CDNAAS_QEMU_ACCEL"):
        return [os.environ["CDNAAS_QEMU_ACCEL"]]
    return ["kvm", "tcg"] if kvm_usable() else ["tcg"]


def with_origin(check, image, timeout=None):
    """``check(image, accel, timeout, origin port)`` with the sample origin on this
    machine, on KVM, else (or if KVM fails) software emulation; return what it returns."""
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    failures = []
    try:
        for accel in accelerators():
            try:
                return check(image, accel, timeout or (240 if accel == "kvm" else 900),
                             origin.server_address[1])
            except AccelFailed as exc:
                log(f"{accel} failed ({exc}); trying the next accelerator")
                failures.append(f"{accel}: {exc}")
    finally:
        origin.shutdown()
        origin.server_close()
    raise SystemExit("qemu could not boot the image: " + "; ".join(failures))


class Guest:
    """A running qemu guest: its forwarded loopback ports and what qemu said."""

    def __init__(self, name, process, ports, errors, started):
        self.name, self.process, self.ports = name, process, ports
        self.errors, self.started = errors, started

    def check(self):
        """:raises AccelFailed: qemu died in its first minute (or KVM failed);
        :raises SystemExit: it died later."""
        if "KVM internal error" in self.errors.read_text(errors="replace"):
            raise AccelFailed("KVM internal error (nested virtualisation?)")
        if self.process.poll() is not None:
            if time.monotonic() - self.started < 60:
                said = self.errors.read_text(errors="replace").strip()[-500:]
                raise AccelFailed(f"qemu exited with {self.process.returncode}: {said}")
            raise SystemExit(f"qemu of {self.name} exited with {self.process.returncode}")


@contextlib.contextmanager
def guest(image, accel, name, user_data, guest_ports):
    """Boot ``image`` (a throwaway overlay) with ``user_data`` on a NoCloud seed, the
    guest's ``guest_ports`` forwarded to free loopback ports; yield the :class:`Guest`.
    Its console goes to ``var/images/<name>-console.log``."""
    console = REPO / f"var/images/{name}-console.log"
    console.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"cdnaas-{name}-") as scratch:
        overlay = Path(scratch, "disk.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                        str(Path(image).resolve()), str(overlay)], check=True)
        seed = Path(scratch, "seed.img")
        seed_disk(seed, user_data, name)
        # distinct, and no connect() takes them
        ports = dict(zip(guest_ports, free_loopback_ports(len(guest_ports))))
        forwards = ",".join(f"hostfwd=tcp:127.0.0.1:{host}-{GUEST}:{port}"
                            for port, host in ports.items())
        argv = ["qemu-system-x86_64", "-accel", accel, "-m", "1024", "-smp", "2",
                "-cpu", "max" if accel == "tcg" else "qemu64",
                "-drive", f"file={overlay},if=virtio,format=qcow2",
                "-drive", f"file={seed},if=virtio,format=raw",
                "-netdev", f"user,id=n0,{forwards}", "-device", "virtio-net-pci,netdev=n0",
                "-display", "none", "-serial", f"file:{console}", "-monitor", "none"]
        log(f"booting {name} from {image} with {accel} (console: {console})")
        errors = Path(scratch, "qemu.err")
        with open(errors, "wb") as err:
            qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=err)
        try:
            yield Guest(name, qemu, ports, errors, time.monotonic())
        finally:
            qemu.terminate()
            try:
                qemu.wait(20)
            except subprocess.TimeoutExpired:
                qemu.kill()
                qemu.wait()
            sys.stderr.write(errors.read_text(errors="replace")[-2000:])


def wait_for(probe, guests, timeout, what):
    """``probe()`` every 2 s until it stops raising OSError; return its value.

    :raises SystemExit: ``timeout`` passed first, or a guest died (AccelFailed early on).
    """
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for each in guests:
            each.check()
        try:
            return probe()
        except OSError:
            time.sleep(2)
    raise SystemExit(f"{what} did not answer within {timeout} s; see var/images/*-console.log")


def cache_guest(image, accel, origin_port):
    """:func:`guest` booted as the driver's cache (ports 80 and management forwarded)."""
    document = sample_sig("image-test", {"north": 1})
    document["origin"] = {"scheme": "http", "host": HOST_ALIAS, "port": origin_port}
    sig = ServiceInstanceGraph.from_dict(document)
    vnf = sig.vnfs_in(role="cache")[0]
    # qemu's user network forwards this machine's connections from HOST_ALIAS
    user_data = userdata.cache(sig, vnf, GUEST, HOST_ALIAS, [HOST_ALIAS])
    return vnf, guest(image, accel, "boot-test", user_data, [80, MANAGEMENT_PORT])


def run(image, timeout=None):
    """Boot ``image`` as a cache, fetch through it; return the seconds from power-on to
    the first object served."""
    return with_origin(_serve, image, timeout)


def _serve(image, accel, timeout, origin_port):
    vnf, booting = cache_guest(image, accel, origin_port)
    with booting as cache:
        return serves(cache, vnf, [cache], timeout)


def serves(cache, vnf, guests, timeout):
    """Check the booted ``cache`` guest as the driver's cache ``vnf``: an object fetched
    twice (MISS from the origin, then HIT), the status page refused on port 80 and served
    on the management port; return the seconds from its power-on to the first object."""
    port, management_port = cache.ports[80], cache.ports[MANAGEMENT_PORT]
    status, headers, body = wait_for(lambda: fetch(f"http://127.0.0.1:{port}{OBJECT}"),
                                     guests, timeout, "the cache")
    served = time.monotonic() - cache.started
    second = fetch(f"http://127.0.0.1:{port}{OBJECT}")
    log(f"first fetch after {served:.0f} s: {status}, X-Cache-Status "
        f"{headers.get('X-Cache-Status')}, X-Served-By {headers.get('X-Served-By')}, "
        f"{len(body)} bytes; second: X-Cache-Status {second[1].get('X-Cache-Status')}")
    assert status == 200 and headers.get("X-Served-By") == vnf.name, headers
    assert headers.get("X-Cache-Status") == "MISS"
    assert second[0] == 200 and second[1].get("X-Cache-Status") == "HIT"
    assert second[2] == body
    assert status_of(f"http://127.0.0.1:{port}{STATUS_PATH}") == 404
    status, _headers, figures = fetch(f"http://127.0.0.1:{management_port}{STATUS_PATH}")
    assert status == 200 and figures.startswith(b"Active connections:"), figures
    log("status page: 404 on port 80, figures on the management port")
    return served


def run_load(image, timeout=None):
    """Boot ``image`` twice, as a cache and as the driver's load generator; have the
    generator's agent run wrk and the viewer simulator at the cache, as the openstack
    driver does (:mod:`cdnaas.ro.vim.openstack.loadgen`); return the two
    :class:`~cdnaas.ro.vim.base.LoadReport`\\ s.

    qemu's user networks are one per guest, each with this machine at ``HOST_ALIAS``:
    the generator reaches the cache at ``HOST_ALIAS``, on the loopback port this machine
    forwards to the cache's port 80 (one hop through this machine's loopback, which a
    cloud's network has not).
    """
    return with_origin(_load, image, timeout)


def _load(image, accel, timeout, origin_port):
    user_data = userdata.load_generator("image-test", "loadgen-test", GUEST,
                                        [f"{HOST_ALIAS}/32"], [f"{HOST_ALIAS}/32"])
    vnf, booting = cache_guest(image, accel, origin_port)
    with booting as cache, \
            guest(image, accel, "boot-test-loadgen", user_data, [MANAGEMENT_PORT]) as generator:
        port, agent_port = cache.ports[80], generator.ports[MANAGEMENT_PORT]
        serves(cache, vnf, [cache, generator], timeout)
        health = loadgen.wait_for_agent("127.0.0.1", timeout - (time.monotonic()
                                                                - generator.started),
                                        port=agent_port)
        log(f"agent after {time.monotonic() - generator.started:.0f} s: {health}")
        assert health["tools"]["http"] != "wrk (missing)", health  # the image has wrk
        refused = None
        try:
            loadgen.measure("127.0.0.1", LoadTest("http", OBJECT, 1, 1), "10.9.9.9",
                            port=agent_port)
        except VimError as exc:
            refused = str(exc)
        assert refused and "outside the prefixes" in refused, refused
        reports = []
        for test in LOAD_TESTS:
            done = loadgen.measure("127.0.0.1", test, HOST_ALIAS, target_port=port,
                                   port=agent_port)
            reports.append(loadreport.report(test, done, None, isolated=True))
            log(f"{test.kind}: {reports[-1].requests_per_second} req/s, "
                f"{reports[-1].errors} errors, latency {reports[-1].latency_ms}, "
                f"generator CPU {reports[-1].generator_cpu_seconds} s ({reports[-1].tool})")
        return reports


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("image", nargs="?", default=str(REPO / "var/images/cdnaas-vnf.qcow2"))
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--load", action="store_true",
                        help="also measure the cache from a load-generator guest")
    args = parser.parse_args(argv)
    ensure_tools()
    ensure_image(args.image)
    served = run(args.image, args.timeout)
    log(f"OK: the image served through its nginx cache {served:.0f} s after power-on")
    if args.load:
        http, viewers = run_load(args.image, args.timeout)
        log(f"OK: its load generator measured {http.requests_per_second} req/s (wrk) and "
            f"MOS {qoe.summary(viewers.windows, LOAD_TESTS[1].window_seconds)['mos']} for {len(viewers.windows)} viewers")


if __name__ == "__main__":
    main()
