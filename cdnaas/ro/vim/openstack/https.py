"""HTTPS on the ``openstack`` driver's Octavia balancers: each region's TERMINATED_HTTPS
listener and its pool, made by an update and put back as recorded by a restore.

Octavia locks a balancer during each call on it: every write here waits for the
balancer to be ACTIVE before and after it.
"""
from cdnaas.ro.vim.pipeline import Undo
from cdnaas.ro.vim.openstack import cloud as oscloud

PROTOCOL = "TERMINATED_HTTPS"


def add(conn, lb_id, spec, undo, listener_id=None):
    """Give balancer ``lb_id`` the HTTPS listener ``spec`` describes (the second of
    :func:`.plan.listeners`), unless ``listener_id`` names it already, and its default
    pool (without members); push the undo of each.

    :returns: ``(listener id, pool id)``.
    """
    spec = dict(spec)
    pool_spec = spec.pop("default_pool")
    wait_active(conn, lb_id)
    if listener_id is None:
        listener_id = conn.load_balancer.create_listener(load_balancer_id=lb_id, **spec).id
        undo.push(f"HTTPS listener {spec['name']}", delete_on_balancer, conn, lb_id,
                  conn.load_balancer.delete_listener, listener_id)
        wait_active(conn, lb_id)
    pool_id = conn.load_balancer.create_pool(listener_id=listener_id, **pool_spec).id
    undo.push(f"HTTPS pool {pool_spec['name']}", delete_on_balancer, conn, lb_id,
              conn.load_balancer.delete_pool, pool_id)
    wait_active(conn, lb_id)
    return listener_id, pool_id


def give_container(conn, lb_id, listener_id, container):
    """Give HTTPS listener ``listener_id`` of balancer ``lb_id`` the certificate container
    ``container`` (Octavia reloads the balancer gracefully)."""
    wait_active(conn, lb_id)
    conn.load_balancer.update_listener(listener_id, default_tls_container_ref=container)
    wait_active(conn, lb_id)


def delete_on_balancer(conn, lb_id, delete, resource_id):
    """``delete(resource_id)`` (an Octavia listener or pool of balancer ``lb_id``; gone
    already is fine), the balancer waited ACTIVE before and after."""
    wait_active(conn, lb_id)
    oscloud.gone(delete, resource_id)
    wait_active(conn, lb_id)


def restore(conn, info, spec):
    """Put the HTTPS of region ``info``'s balancer back as ``spec`` describes it (the
    HTTPS listener of :func:`.plan.listeners`; None: the region serves HTTP only).

    Pools but the recorded HTTP one (``pool_id``) and the default pool of the HTTPS
    listener ``spec`` keeps are deleted first, then the HTTPS listener without ``spec``;
    with it, the listener is made again if gone (:func:`add`), given ``spec``'s
    certificate container if it has another, and given a pool if it has none.
    ``info`` then names the HTTPS listener and pool (``tls_listener_id``,
    ``tls_pool_id``), or neither. Where all is as ``info`` and ``spec`` say, nothing is
    written; new pools have no members yet.
    """
    lb = conn.load_balancer.get_load_balancer(info["lb_id"])
    listener = listener_of(conn, lb)
    kept = listener if spec is not None else None
    wanted = {info["pool_id"], kept.default_pool_id if kept is not None else None}
    for pool_id in sorted({p["id"] for p in lb.pools} - wanted):
        delete_on_balancer(conn, lb.id, conn.load_balancer.delete_pool, pool_id)
    if listener is not None and kept is None:
        delete_on_balancer(conn, lb.id, conn.load_balancer.delete_listener, listener.id)
    info.pop("tls_listener_id", None)
    info.pop("tls_pool_id", None)
    if spec is not None:
        info["tls_listener_id"], info["tls_pool_id"] = _put_back(conn, lb.id, kept, spec)


def _put_back(conn, lb_id, listener, spec):
    """``(listener id, pool id)`` of the HTTPS listener ``spec`` describes on balancer
    ``lb_id``: ``listener`` (None: made again), given ``spec``'s certificate container
    where it has another, its default pool made where it has none. Nothing is undone
    should a call fail: restoring again finishes the work."""
    container = spec["default_tls_container_ref"]
    if listener is not None and listener.default_tls_container_ref != container:
        give_container(conn, lb_id, listener.id, container)
    if listener is not None and listener.default_pool_id:
        return listener.id, listener.default_pool_id
    return add(conn, lb_id, spec, Undo(), listener.id if listener is not None else None)


def listener_of(conn, lb, protocol=PROTOCOL):
    """The listener of Octavia balancer ``lb`` for ``protocol`` (by default its HTTPS,
    TERMINATED_HTTPS, one), or None."""
    for item in lb.listeners:
        listener = conn.load_balancer.get_listener(item["id"])
        if listener.protocol == protocol:
            return listener
    return None


def wait_active(conn, lb_id):
    """Wait until balancer ``lb_id`` is ACTIVE (Octavia takes the next call)."""
    oscloud.load_balancer_active(conn, lb_id, oscloud.timeout("lb"))
