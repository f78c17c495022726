"""The HTTPS policy (``https_policy``) on the ``openstack`` driver against the mini cloud's
Octavia: the balancer is made with it in one call, and Octavia keeps what the policy
says (the TERMINATED_HTTPS listener's TLS versions and HSTS, the HTTP listener's L7
redirect per served name); a change of it on the live vCDN is refused, nothing left."""
import uuid

from cdnaas.delivery import https
from cdnaas.ro.vim.base import DeploymentFailed
from tests.test_openstack_driver import nothing_left
from tests.test_openstack_tls import (driver, https_sig, listeners,  # noqa: F401 (fixture)
                                      store_certificate)

POLICY = {"http": "redirect", "min_tls_version": "1.3",
          "hsts": {"max_age": 31536000, "include_subdomains": True, "preload": True}}


def l7_policies(admin_conn, listener, keys=("redirect_prefix", "redirect_http_code")):
    """``[(action, *the policy's keys, rules)]`` of ``listener``'s L7 policies as Octavia's
    API shows them, by position (openstacksdk has no redirect_http_code)."""
    def read(path):
        answer = admin_conn.load_balancer.get(path)  # relative to Octavia's v2 endpoint
        assert answer.status_code == 200, answer.text
        return answer.json()
    policies = [read(f"/lbaas/l7policies/{item['id']}")["l7policy"]
                for item in listener.l7_policies]
    return [(p["action"], *(p.get(key) for key in keys),
             [(r["type"], r["compare_type"], r["value"])
              for r in read(f"/lbaas/l7policies/{p['id']}/rules")["rules"]])
            for p in sorted(policies, key=lambda p: p["position"])]


def test_octavia_keeps_the_policy_the_balancer_is_made_with(driver, admin_conn):  # noqa: F811
    vcdn_id = f"pol-{uuid.uuid4().hex[:8]}"
    _issued, kept = store_certificate(driver, vcdn_id)
    sig = https_sig(vcdn_id, {"north": 1}, kept)
    sig.service["https_policy"] = https.check(POLICY, "https_policy")
    deployment = None
    try:
        deployment = driver.deploy(sig)
        info = deployment.resources["regions"]["north"]
        found = listeners(admin_conn, info["lb_id"])
        tls = found["TERMINATED_HTTPS"]
        assert tls.tls_versions == ["TLSv1.3"]
        assert (tls.hsts_max_age, tls.is_hsts_include_subdomains, tls.is_hsts_preload) == \
            (31536000, True, True)
        assert l7_policies(admin_conn, found["HTTP"]) == [
            ("REDIRECT_PREFIX", f"https://{sig.hostname}", 301,
             [("HOST_NAME", "EQUAL_TO", sig.hostname)])]
        relaxed = https_sig(vcdn_id, {"north": 1}, kept)
        try:
            driver.update(deployment, relaxed, previous=sig)
        except DeploymentFailed as exc:
            assert "https_policy" in str(exc)
        else:
            raise AssertionError("a changed policy was not refused")
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert nothing_left(admin_conn, vcdn_id) == {}
