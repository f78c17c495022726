"""Who may call which route of the customer API: oslo.policy, each rule declared with its route.

A view is declared with :class:`Routes`, which adds the route to its blueprint and registers
its rule (an :class:`oslo_policy.policy.DocumentedRuleDefault`: name, check string,
description, the route's method and path, scope types) in the same statement::

    routes = policy.Routes(blueprint)

    @routes.delete("/vcdns/<vcdn_id>", "cdn:vcdn:delete", policy.MEMBER, "End a vCDN.")
    def delete_vcdn(vcdn_id): ...

Before any view runs (and before the body is validated), :func:`authorize_request` checks
the rule of the endpoint called against the caller (:class:`cdnaas.api.auth.Caller`: roles,
project, system scope), the target being the caller's own project; records of another
project stay hidden by the views (404). An endpoint without a rule is refused.

The defaults follow Keystone's default roles: ``reader`` reads its project's vCDNs, usage
and the catalogue, ``member`` also leases, changes, purges and ends them, ``cdn_purger``
only purges, and ``admin`` with system scope (an operator) reaches the operator routes and
every project's records. Operators override any rule in a ``policy.yaml`` named by
``CDNAAS_POLICY_FILE`` (read again when it changes); ``oslopolicy-sample-generator
--namespace cdnaas`` writes the sample of every default (``docs/policy.yaml.sample``).
"""
import dataclasses
import importlib
import os
import re
import threading

from flask import g, request
from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from cdnaas.common import errors, settings

SYSTEM = "system"
PROJECT = "project"


@dataclasses.dataclass(frozen=True)
class Access:
    """Who a route is for: the check string of its rule and the token scopes it takes."""

    check_str: str
    scope_types: tuple


#: the caller's project's records, or (system reader) every project's
READER = Access("rule:system_reader or rule:project_reader", (SYSTEM, PROJECT))
#: changes to the caller's project's records, or (system admin) any project's
MEMBER = Access("rule:system_admin or rule:project_member", (SYSTEM, PROJECT))
#: purges: a member, an operator, or a purge-only role
PURGER = Access("rule:system_admin or rule:project_member or rule:project_purger",
                (SYSTEM, PROJECT))
#: a vCDN and its operations as a purge-only caller follows its purge (and any reader)
PURGE_FOLLOWER = Access("rule:system_reader or rule:project_reader or rule:project_purger",
                        (SYSTEM, PROJECT))
#: any authenticated caller (who am I)
ANYONE = Access("", (SYSTEM, PROJECT))
#: reads on behalf of the caller's own project (a token without a project has none)
PROJECT_READER = Access("rule:project_reader", (SYSTEM, PROJECT))
#: records created for the caller's own project
PROJECT_MEMBER = Access("rule:project_member", (SYSTEM, PROJECT))
#: the operator's views of the whole installation
ADMIN_READER = Access("rule:system_reader", (SYSTEM,))
#: the operator's changes to the installation
ADMIN = Access("rule:system_admin", (SYSTEM,))

#: rules the routes' check strings are made of (Keystone's default roles)
BASE_RULES = [
    oslo_policy.RuleDefault(
        "system_admin", "role:admin and system_scope:all",
        "An operator: the admin role with system scope (or in the operator's own project, "
        "CDNAAS_KEYSTONE_OPERATOR_PROJECT; a local operator tenant's token)."),
    oslo_policy.RuleDefault(
        "system_reader", "role:reader and system_scope:all",
        "Reads the whole installation: the reader role with system scope."),
    oslo_policy.RuleDefault(
        "project_member", "role:member and project_id:%(project_id)s",
        "The member role in the project the records belong to."),
    oslo_policy.RuleDefault(
        "project_reader", "role:reader and project_id:%(project_id)s",
        "The reader role in the project the records belong to."),
    oslo_policy.RuleDefault(
        "project_purger", "role:cdn_purger and project_id:%(project_id)s",
        "The purge-only role cdn_purger in the project the vCDN belongs to."),
]

_DECLARED = {}  # endpoint -> DocumentedRuleDefault, in the order routes are declared
_ENFORCERS = {}  # policy file ("" for none) -> Enforcer
_LOCK = threading.Lock()
#: the most decisions kept per set of rules (:func:`_decision`)
DECISIONS_KEPT = 10_000
_decisions = {"rules": None, "made": {}}  # the rules they were made with, and the decisions


class Routes:
    """The routes of ``blueprint``, each declared with its policy rule.

    ``get``, ``post``, ``put``, ``patch`` and ``delete`` take the route's path (relative to
    the blueprint's prefix, Flask syntax), the rule's name (``cdn:<resource>:<action>``),
    its :class:`Access` and a one-line description, and return a decorator that adds the
    route and registers the rule.

    :raises ValueError: a rule name declared twice.
    """

    def __init__(self, blueprint):
        self.blueprint = blueprint

    def route(self, method, path, name, access, description):
        full_path = (self.blueprint.url_prefix or "") + path
        rule = oslo_policy.DocumentedRuleDefault(
            name=name, check_str=access.check_str, description=description,
            operations=[{"method": method, "path": re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}",
                                                          full_path)}],
            scope_types=list(access.scope_types))

        def declare(view):
            endpoint = f"{self.blueprint.name}.{view.__name__}"
            if any(r.name == name for e, r in _DECLARED.items() if e != endpoint):
                raise ValueError(f"policy rule {name} is declared twice")
            _DECLARED[endpoint] = rule
            self.blueprint.add_url_rule(path, view_func=view, methods=[method])
            return view
        return declare

    def get(self, path, name, access, description):
        return self.route("GET", path, name, access, description)

    def post(self, path, name, access, description):
        return self.route("POST", path, name, access, description)

    def put(self, path, name, access, description):
        return self.route("PUT", path, name, access, description)

    def patch(self, path, name, access, description):
        return self.route("PATCH", path, name, access, description)

    def delete(self, path, name, access, description):
        return self.route("DELETE", path, name, access, description)


def list_rules():
    """Every rule of the customer API (base rules, then one per route): the
    ``oslo.policy.policies`` entry point ``cdnaas`` (sample generator, checker)."""
    return BASE_RULES + list(_declared().values())


def rule_of(endpoint):
    """The rule declared for the Flask ``endpoint``, or None."""
    return _declared().get(endpoint)


def _declared():
    """``{endpoint: rule}`` of every route, once the API's app module (and so every
    blueprint it serves) is imported."""
    importlib.import_module("cdnaas.api.app")
    return _DECLARED


def enforcer():
    """The Enforcer of the policy file ``CDNAAS_POLICY_FILE`` names now (none: the
    defaults), built once per file; oslo.policy reads the file again when it changes.

    :raises cdnaas.common.errors.CdnaasError: (500) the file cannot be read or parsed.
    """
    path = settings.get("CDNAAS_POLICY_FILE") or ""
    with _LOCK:
        found = _ENFORCERS.get(path)
        if found is None:
            if path and not os.path.isfile(path):
                raise errors.CdnaasError(f"CDNAAS_POLICY_FILE={path}: no such file")
            conf = cfg.ConfigOpts()
            conf([], project="cdnaas", default_config_files=[], default_config_dirs=[])
            found = oslo_policy.Enforcer(conf, policy_file=path or None, use_conf=bool(path))
            conf.set_override("policy_dirs", [], group="oslo_policy")
            found.register_defaults(list_rules())
            if not path:  # without a file oslo.policy loads nothing: the defaults are the rules
                found.set_rules(oslo_policy.Rules({r.name: r.check for r in list_rules()}))
            _ENFORCERS[path] = found
    try:
        found.load_rules()
    except (OSError, ValueError) as exc:
        raise errors.CdnaasError(f"CDNAAS_POLICY_FILE={path}: {exc}") from None
    return found


def credentials(caller):
    """What the rules see of ``caller``: roles, project, user and system scope."""
    return {"roles": sorted(caller.roles), "project_id": caller.tenant or None,
            "user_id": caller.user, "system_scope": "all" if caller.system else None}


def authorize(endpoint, caller):
    """Check the rule of ``endpoint`` for ``caller``, the target being its own project.

    :raises Forbidden: no rule is declared for the endpoint, the token's scope is not one
        the rule takes, or the check string refuses the caller's roles.
    """
    rule = rule_of(endpoint)
    if rule is None:
        raise errors.Forbidden(f"no policy rule is declared for {endpoint}")
    what = rule.description.rstrip(".")
    refused = _decision(enforcer(), rule.name, caller)
    if refused == "scope":
        scope = SYSTEM if caller.system else PROJECT
        raise errors.Forbidden(f"{what}: this route takes a {' or '.join(rule.scope_types)}"
                               f"-scoped token, not a {scope}-scoped one (policy {rule.name})")
    if refused == "roles":
        roles = ", ".join(sorted(caller.roles)) or "none"
        raise errors.Forbidden(f"{what}: not allowed to roles {roles} (policy {rule.name}: "
                               f"{enforcer().rules.get(rule.name, rule.check)})")


def _decision(found, name, caller):
    """None if ``found`` (an Enforcer) lets ``caller`` pass rule ``name`` for its own project,
    else why not: ``"scope"`` (the token's) or ``"roles"``. A decision depends only on the
    rules and the credentials, so it is made once per rules loaded (a changed policy file
    is new rules) and caller: oslo.policy's enforcement cost 0.3-1.7 ms of CPU a request."""
    key = (name, caller)
    with _LOCK:
        if _decisions["rules"] is not found.rules or len(_decisions["made"]) > DECISIONS_KEPT:
            _decisions.update(rules=found.rules, made={})
        made = _decisions["made"]
        if key in made:
            return made[key]
    try:
        found.enforce(name, {"project_id": caller.tenant}, credentials(caller), do_raise=True)
        refused = None
    except oslo_policy.InvalidScope:
        refused = "scope"
    except oslo_policy.PolicyNotAuthorized:
        refused = "roles"
    with _LOCK:
        if _decisions["rules"] is found.rules:
            _decisions["made"][key] = refused
    return refused


def authorize_request():
    """``before_request`` hook, after authentication: the rule of the endpoint called."""
    if "caller" in g:
        authorize(request.endpoint, g.caller)
