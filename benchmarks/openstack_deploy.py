"""Deploy time and API calls of the ``openstack`` VIM driver, for 2 and 16 caches per region.

    .venv/bin/python benchmarks/openstack_deploy.py [--caches 2 16] [--repeat 1] [--start-minicloud]

Against the cloud named by ``OS_CLOUD`` (clouds.yaml), or with ``--start-minicloud``
against the test mini OpenStack (``tests/openstack/minicloud.py``: started if
needed, left running). For each size, a 2-region vCDN (north, south) is deployed:
the time is from the request to the driver's return (every server ACTIVE, every
balancer ACTIVE with its members registered by one batch update per region); API
calls are every HTTP request the driver's connections made (keystone included),
counted by a response hook. Then the vCDN is terminated (timed too). Prints a
table and the ratio of the large deploy's time to the small one's.

On the mini cloud the servers are fake (nova's fake virt driver), so the times
are those of the control plane: API, scheduler, conductor, compute, placement.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cdnaas.common.sig import ServiceInstanceGraph
from cdnaas.ro.vim.openstack.driver import OpenStackDriver
from tests.support.sigs import sample_sig

ORIGIN = {"scheme": "http", "host": "192.0.2.10", "port": 8080}


def start_minicloud():
    subprocess.run([sys.executable, str(REPO / "tests/openstack/minicloud.py"), "start"],
                   check=True)
    base = Path(os.environ.get("CDNAAS_MINICLOUD_DIR") or "/opt/cdnaas-minicloud")
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(base / "clouds.yaml")
    os.environ["OS_CLOUD"] = "minicloud"


def measure(driver, caches):
    document = sample_sig(f"bench-{uuid.uuid4().hex[:8]}", {"north": caches, "south": caches},
                          cache_hosts=caches)
    document["origin"] = dict(ORIGIN)
    sig = ServiceInstanceGraph.from_dict(document)
    cloud = driver.cloud
    cloud.conn()  # connect (and discover endpoints) before the clock starts
    before = dict(cloud.calls)
    started = time.monotonic()
    deployment = driver.deploy(sig)
    deploy_s = time.monotonic() - started
    calls = {f"{service} {method}": count - before.get((service, method), 0)
             for (service, method), count in cloud.calls.items()
             if count - before.get((service, method), 0)}
    started = time.monotonic()
    driver.terminate(deployment)
    terminate_s = time.monotonic() - started
    total_caches = 2 * caches
    total = sum(calls.values())
    return {"caches_per_region": caches, "caches": total_caches, "servers": total_caches + 1,
            "deploy_s": round(deploy_s, 1), "terminate_s": round(terminate_s, 1),
            "api_calls": total, "api_calls_per_cache": round(total / total_caches, 1),
            "by_service": dict(sorted(calls.items()))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--caches", type=int, nargs="+", default=[2, 16],
                        help="caches per region (default: 2 16)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--start-minicloud", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.start_minicloud:
        start_minicloud()
    os.environ.setdefault("CDNAAS_OS_OWNER", "benchmark")
    os.environ.setdefault("CDNAAS_OS_POLL_INTERVAL", "0.5")
    driver = OpenStackDriver()
    driver.check_prerequisites()
    results = [measure(driver, n) for n in args.caches for _ in range(args.repeat)]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'caches/region':>13} {'servers':>7} {'deploy s':>8} {'terminate s':>11} "
          f"{'API calls':>9} {'calls/cache':>11}")
    for r in results:
        print(f"{r['caches_per_region']:>13} {r['servers']:>7} {r['deploy_s']:>8} "
              f"{r['terminate_s']:>11} {r['api_calls']:>9} {r['api_calls_per_cache']:>11}")
    for r in results:
        print(f"  {r['caches_per_region']} per region: " + ", ".join(
            f"{k} {v}" for k, v in r["by_service"].items()))
    sizes = sorted({r["caches_per_region"] for r in results})
    if len(sizes) >= 2:
        mean = {n: sum(r["deploy_s"] for r in results if r["caches_per_region"] == n)
                / sum(1 for r in results if r["caches_per_region"] == n) for n in sizes}
        print(f"deploy time ratio {sizes[-1]}/{sizes[0]} caches per region: "
              f"{mean[sizes[-1]] / mean[sizes[0]]:.2f} "
              f"(caches x{sizes[-1] / sizes[0]:.0f})")


if __name__ == "__main__":
    main()
