"""Prove the VNF image is real: boot it with qemu, configured by the driver's own user-data.

    .venv/bin/python images/vnf/boot_test.py [IMAGE.qcow2]   (default var/images/cdnaas-vnf.qcow2)

A sample origin (``cdnaas.origin.server``) listens on this machine's loopback;
the image boots under qemu (KVM when ``/dev/kvm`` works, software emulation
otherwise) on qemu's user network, where the guest is 10.0.2.15 and this
machine 10.0.2.2, with a NoCloud seed (a FAT disk labelled ``cidata``, made with
mtools) whose user-data is what the OpenStack driver renders for a cache
(:func:`cdnaas.ro.vim.openstack.userdata.cache`, with this machine as the management
source). The guest's port 80 and its management port are forwarded to loopback ports
here; an object is fetched through the cache's nginx twice: MISS (fetched from the
origin), then HIT; the status page answers 404 on port 80 and its figures on the
management port. Exit status 0 on success;
the guest's console is kept in ``var/images/boot-test-console.log``.

Needs qemu-system-x86, qemu-utils, mtools and dosfstools (Debian packages).
"""
import argparse
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

from cdnaas.common.ports import free_loopback_ports
from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.origin.server import serve_in_thread
from cdnaas.ro.vim.openstack import userdata
from cdnaas.ro.vnfconfig import MANAGEMENT_PORT, STATUS_PATH
from tests.support.sigs import sample_sig

GUEST = "10.0.2.15"
HOST_ALIAS = "10.0.2.2"
OBJECT = "/objects/chunk-low"


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


def run(image, timeout=None):
    """Boot ``image`` (KVM, else or if KVM fails, software emulation), fetch through its
    cache; return the seconds from power-on to the first object served."""
    accels = [os.environ["CDNAAS_QEMU_ACCEL"]] if os.environ.get("CDNAAS_QEMU_ACCEL") else \
        (["kvm", "tcg"] if kvm_usable() else ["tcg"])
    origin, _thread = serve_in_thread("0.0.0.0", 0)
    failures = []
    try:
        for accel in accels:
            try:
                return _boot(image, accel, timeout or (240 if accel == "kvm" else 900),
                             origin.server_address[1])
            except AccelFailed as exc:
                log(f"{accel} failed ({exc}); trying the next accelerator")
                failures.append(f"{accel}: {exc}")
    finally:
        origin.shutdown()
        origin.server_close()
    raise SystemExit("qemu could not boot the image: " + "; ".join(failures))


def _boot(image, accel, timeout, origin_port):
    document = sample_sig("image-test", {"north": 1})
    document["origin"] = {"scheme": "http", "host": HOST_ALIAS, "port": origin_port}
    sig = ServiceInstanceGraph.from_dict(document)
    vnf = sig.vnfs_in(role="cache")[0]
    # qemu's user network forwards this machine's connections from HOST_ALIAS
    user_data = userdata.cache(sig, vnf, GUEST, HOST_ALIAS, [HOST_ALIAS])
    console = REPO / "var/images/boot-test-console.log"
    console.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdnaas-boot-test-") as scratch:
        overlay = Path(scratch, "disk.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                        str(Path(image).resolve()), str(overlay)], check=True)
        seed = Path(scratch, "seed.img")
        seed_disk(seed, user_data, "image-test")
        port, management_port = free_loopback_ports(2)  # distinct, and no connect() takes them
        argv = ["qemu-system-x86_64", "-accel", accel, "-m", "1024", "-smp", "2",
                "-cpu", "max" if accel == "tcg" else "qemu64",
                "-drive", f"file={overlay},if=virtio,format=qcow2",
                "-drive", f"file={seed},if=virtio,format=raw",
                "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-{GUEST}:80,"
                           f"hostfwd=tcp:127.0.0.1:{management_port}-{GUEST}:{MANAGEMENT_PORT}",
                "-device", "virtio-net-pci,netdev=n0",
                "-display", "none", "-serial", f"file:{console}", "-monitor", "none"]
        log(f"booting {image} with {accel} (console: {console})")
        started = time.monotonic()
        errors = Path(scratch, "qemu.err")
        with open(errors, "wb") as err:
            qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=err)
        try:
            first = None
            while time.monotonic() - started < timeout:
                if "KVM internal error" in errors.read_text(errors="replace"):
                    raise AccelFailed("KVM internal error (nested virtualisation?)")
                if qemu.poll() is not None:
                    if time.monotonic() - started < 60:
                        said = errors.read_text(errors="replace").strip()[-500:]
                        raise AccelFailed(f"qemu exited with {qemu.returncode}: {said}")
                    raise SystemExit(f"qemu exited with {qemu.returncode}")
                try:
                    first = fetch(f"http://127.0.0.1:{port}{OBJECT}")
                    break
                except OSError:
                    time.sleep(2)
            if first is None:
                raise SystemExit(f"the cache did not answer within {timeout} s; see {console}")
            served = time.monotonic() - started
            status, headers, body = first
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
        finally:
            qemu.terminate()
            try:
                qemu.wait(20)
            except subprocess.TimeoutExpired:
                qemu.kill()
                qemu.wait()
            sys.stderr.write(errors.read_text(errors="replace")[-2000:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("image", nargs="?", default=str(REPO / "var/images/cdnaas-vnf.qcow2"))
    parser.add_argument("--timeout", type=float)
    args = parser.parse_args(argv)
    for tool in ("qemu-system-x86_64", "qemu-img", "mcopy", "mkfs.vfat"):
        if not (shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")):
            raise SystemExit(f"{tool} is missing (apt-get install qemu-system-x86 qemu-utils "
                             "mtools dosfstools)")
    served = run(args.image, args.timeout)
    log(f"OK: the image served through its nginx cache {served:.0f} s after power-on")


if __name__ == "__main__":
    main()
