"""The HTTPS policy (``https_policy``) on the ``openstack`` driver against the mini cloud's
Octavia: the balancer is made with it in one call, and Octavia keeps what the policy
says (the TERMINATED_HTTPS listener's TLS versions and HSTS, the HTTP listener's L7
redirect per served name); a change of it on the live vCDN is given to the balancer
live, and undone should the change fail midway; nothing left."""
import uuid

import pytest
from openstack.load_balancer.v2 import _proxy

from cdnaas.delivery import https
from cdnaas.ro.vim.base import DeploymentFailed
from tests.system.test_openstack_driver import nothing_left
from tests.system.test_openstack_tls import (driver, https_sig, listeners,  # noqa: F401 (fixture)
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
        deployment = driver.update(deployment, relaxed, previous=sig)
        found = listeners(admin_conn, info["lb_id"])
        assert sorted(found["TERMINATED_HTTPS"].tls_versions) == ["TLSv1.2", "TLSv1.3"]
        assert found["TERMINATED_HTTPS"].hsts_max_age is None
        assert l7_policies(admin_conn, found["HTTP"]) == []
        assert found["TERMINATED_HTTPS"].id == tls.id  # changed, not made again
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert nothing_left(admin_conn, vcdn_id) == {}


def with_policy(sig, policy):
    sig.service["https_policy"] = https.check(policy, "https_policy")
    return sig


def test_the_policy_changes_live_and_a_failed_change_is_undone(driver, admin_conn,  # noqa: F811
                                                               monkeypatch):
    """allow -> redirect -> refuse (its deletion of the redirects failing once: undone,
    the redirects kept) -> refuse -> allow, each checked on Octavia's listeners."""
    vcdn_id = f"pol-{uuid.uuid4().hex[:8]}"
    _issued, kept = store_certificate(driver, vcdn_id)
    allowed = https_sig(vcdn_id, {"north": 1}, kept)
    deployment = None
    try:
        deployment = driver.deploy(allowed)
        lb_id = deployment.resources["regions"]["north"]["lb_id"]
        assert l7_policies(admin_conn, listeners(admin_conn, lb_id)["HTTP"]) == []
        redirected = with_policy(https_sig(vcdn_id, {"north": 1}, kept), POLICY)
        deployment = driver.update(deployment, redirected, previous=allowed)
        found = listeners(admin_conn, lb_id)
        assert found["TERMINATED_HTTPS"].tls_versions == ["TLSv1.3"]
        assert found["TERMINATED_HTTPS"].hsts_max_age == 31536000
        redirect = [("REDIRECT_PREFIX", f"https://{redirected.hostname}", 301,
                     [("HOST_NAME", "EQUAL_TO", redirected.hostname)])]
        assert l7_policies(admin_conn, found["HTTP"]) == redirect

        refused = with_policy(https_sig(vcdn_id, {"north": 1}, kept), {"http": "refuse"})
        real_delete, failures = _proxy.Proxy.delete_l7_policy, []

        def delete_failing_once(proxy, *args, **kwargs):
            if not failures:
                failures.append(args)
                raise RuntimeError("Octavia went away")
            return real_delete(proxy, *args, **kwargs)
        monkeypatch.setattr(_proxy.Proxy, "delete_l7_policy", delete_failing_once)
        with pytest.raises(DeploymentFailed, match="Octavia went away"):
            driver.update(deployment, refused, previous=redirected)
        monkeypatch.setattr(_proxy.Proxy, "delete_l7_policy", real_delete)
        found = listeners(admin_conn, lb_id)
        assert l7_policies(admin_conn, found["HTTP"]) == redirect  # the REJECT made, undone
        assert found["TERMINATED_HTTPS"].tls_versions == ["TLSv1.3"]

        deployment = driver.update(deployment, refused, previous=redirected)
        found = listeners(admin_conn, lb_id)
        assert l7_policies(admin_conn, found["HTTP"]) == [
            ("REJECT", None, None, [("PATH", "STARTS_WITH", "/")])]
        assert sorted(found["TERMINATED_HTTPS"].tls_versions) == ["TLSv1.2", "TLSv1.3"]
        assert found["TERMINATED_HTTPS"].hsts_max_age is None

        deployment = driver.update(deployment, allowed, previous=refused)
        assert l7_policies(admin_conn, listeners(admin_conn, lb_id)["HTTP"]) == []
        lb = admin_conn.load_balancer.get_load_balancer(lb_id)
        assert lb.provisioning_status == "ACTIVE"
    finally:
        if deployment is not None:
            driver.terminate(deployment)
        driver.secrets.delete(kept["ref"])
    assert nothing_left(admin_conn, vcdn_id) == {}
