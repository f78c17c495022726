"""A vCDN's HTTPS policy changed live on a region's Octavia balancer: the TERMINATED_HTTPS
listener's TLS versions and HSTS, and the HTTP listener's L7 policies (redirect, refusal,
the ACME challenge path), brought to what :func:`.plan.listeners` describes.

Octavia locks a balancer during each call on it: every write here waits for the balancer
to be ACTIVE before and after it. Each function reads what the balancer has and writes
only what differs, so running it again after an interruption finishes the work.
"""
from cdnaas.delivery import https as https_option
from cdnaas.ro.vim.base import VimError
from cdnaas.ro.vim.openstack import cloud as oscloud
from cdnaas.ro.vim.openstack import https

#: the TERMINATED_HTTPS listener's attributes a policy sets, with what each is without it
#: (Octavia's defaults: TLS 1.2 and 1.3, no HSTS); openstacksdk reads the flags as ``is_*``
TLS_DEFAULTS = {"tls_versions": [f"TLSv{v}" for v in https_option.TLS_VERSIONS],
                "hsts_max_age": None, "hsts_include_subdomains": False,
                "hsts_preload": False}
_READ_AS = {"hsts_include_subdomains": "is_hsts_include_subdomains",
            "hsts_preload": "is_hsts_preload"}
#: what tells two L7 policies apart: their rules and code follow from these
_POLICY_KEYS = ("name", "action", "redirect_prefix")


def converge(conn, lb_id, pool_id, listener_specs):
    """Bring balancer ``lb_id``'s listeners to the HTTPS policy of ``listener_specs``
    (:func:`.plan.listeners` for the vCDN: the HTTP listener's ``l7policies``, the HTTPS
    listener's TLS versions and HSTS). ``pool_id`` is the HTTP listener's default pool, to
    which an ACME challenge policy sends the challenge path.
    """
    lb = conn.load_balancer.get_load_balancer(lb_id)
    tls = https.listener_of(conn, lb)
    if tls is not None and len(listener_specs) > 1:
        _converge_tls(conn, lb_id, tls, listener_specs[1])
    _converge_l7(conn, lb_id, https.listener_of(conn, lb, "HTTP").id, pool_id,
                 listener_specs[0].get("l7policies", []))


def _converge_tls(conn, lb_id, listener, spec):
    """Give ``listener`` the TLS versions and HSTS of ``spec`` where it has others."""
    wanted = {key: spec.get(key, default) for key, default in TLS_DEFAULTS.items()}
    found = {key: getattr(listener, _READ_AS.get(key, key)) for key in TLS_DEFAULTS}
    differs = {key: value for key, value in wanted.items()
               if _comparable(found[key], key) != _comparable(value, key)}
    if differs:
        https.wait_active(conn, lb_id)
        conn.load_balancer.update_listener(listener.id, **differs)
        https.wait_active(conn, lb_id)


def _comparable(value, key):
    """Listener attribute ``key``'s ``value`` as compared: unset is its default, a list
    (TLS versions) in any order."""
    value = TLS_DEFAULTS[key] if value is None else value
    return sorted(value) if isinstance(value, list) else value


def _converge_l7(conn, lb_id, listener_id, pool_id, wanted):
    """Give HTTP listener ``listener_id`` the L7 policies ``wanted`` (by position) where it
    has others: the wanted ones made first, ahead of the old ones, then the old ones
    deleted, so a request never meets neither (a refusal turned into redirects never
    serves plain HTTP meanwhile)."""
    found = sorted(conn.load_balancer.l7_policies(listener_id=listener_id),
                   key=lambda p: p.position)
    if [_key(p.to_dict()) for p in found] == [_key(spec) for spec in wanted]:
        return
    for spec in wanted:
        https.wait_active(conn, lb_id)
        policy_id = _create_policy(conn, listener_id, spec, pool_id)
        for rule in spec["rules"]:  # Octavia 18 answers 500 to rules in the policy's create
            https.wait_active(conn, lb_id)
            conn.load_balancer.create_l7_rule(policy_id, **rule)
    for policy in found:
        https.wait_active(conn, lb_id)
        oscloud.gone(conn.load_balancer.delete_l7_policy, policy.id)
    https.wait_active(conn, lb_id)


def _key(policy):
    return tuple(policy.get(key) for key in _POLICY_KEYS)


def _create_policy(conn, listener_id, spec, pool_id):
    """Make L7 policy ``spec`` (:func:`.plan.http_l7_policies`) on ``listener_id``; return
    its id. A pool named in it (the one-call balancer create takes names) becomes
    ``pool_id``; its rules are made apart (a policy without rules matches no request).
    Sent as Octavia's API has it: openstacksdk's L7 policy drops ``redirect_http_code``.

    :raises VimError: Octavia refused it.
    """
    body = {key: value for key, value in spec.items() if key not in ("redirect_pool", "rules")}
    if "redirect_pool" in spec:
        body["redirect_pool_id"] = pool_id
    answer = conn.load_balancer.post("/lbaas/l7policies",
                                     json={"l7policy": {**body, "listener_id": listener_id}})
    if answer.status_code != 201:
        raise VimError(f"Octavia refused L7 policy {spec['name']}: {answer.status_code} "
                       f"{answer.text[:200]}")
    return answer.json()["l7policy"]["id"]


