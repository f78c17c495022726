"""A CDNaaS stack whose customer API takes Keystone tokens, on the mini cloud's real Keystone.

``keystone_stack(clouds_yaml, tmp_path)`` creates, with openstacksdk as the cloud's admin,
projects ``a`` and ``b`` and the operator's project, a service user (role ``service``) that
``auth_token`` validates tokens with, and one user per role below; starts a stack (noop
driver) with ``CDNAAS_AUTH_STRATEGY=keystone`` and registers regions, hosts and the static
template as the operator; yields a :class:`KeystoneCloud`; then stops the stack and deletes
what it created (the role ``cdn_purger`` stays: a deployment's role, made when missing).

======================  ==============================================================
user                    roles
======================  ==============================================================
``member``              member of project ``a`` (implies reader)
``reader``              reader of ``a``
``purger``              cdn_purger of ``a`` (purges only)
``project-admin``       admin of ``a``: not an operator
``other``               member of project ``b``
``operator``            admin of the operator's project (``CDNAAS_KEYSTONE_OPERATOR_PROJECT``)
``system-admin``        the cloud's admin, system-scoped
======================  ==============================================================

The API reads ``cloud.policy_file`` (``CDNAAS_POLICY_FILE``, ``{}`` at first) again whenever
it changes: a test may write overrides there (and put ``{}`` back).

Its ``clouds_yaml`` has an entry per user (same names), ``member-appcred`` (an application
credential of ``member``) and ``cdnaas-api`` (the service user): ``openstack --os-cloud
member ...`` with ``OS_CLIENT_CONFIG_FILE=cloud.clouds_yaml`` acts as that user.

Test modules get it as a fixture (their names must hold ``openstack``, so they join the
mini cloud's pytest-xdist group)::

    from tests.support.keystone import keystone_cloud  # noqa: F401 (fixture)

    def test_x(keystone_cloud):
        keystone_cloud.api("member").ok("GET", "/vcdns")
"""
import contextlib
import dataclasses
import secrets
import uuid
from pathlib import Path

import pytest
import yaml
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from openstack import config as os_config
from openstack import connection, exceptions

from tests.support.api import Api, populate_catalogue
from tests.support.stack import RunningStack, running_stack

#: user -> (project key, role); project keys: "a", "b", "operator"
USERS = {"member": ("a", "member"), "reader": ("a", "reader"), "purger": ("a", "cdn_purger"),
         "project-admin": ("a", "admin"), "other": ("b", "member"),
         "operator": ("operator", "admin")}
ADMIN_CLOUD = "minicloud-admin"
SERVICE_CLOUD = "cdnaas-api"
PURGER_ROLE = "cdn_purger"


@dataclasses.dataclass
class KeystoneCloud:
    """What a test needs of the stack and the Keystone users made for it."""

    running: RunningStack
    clouds_yaml: Path           # entries per user (see the module's docstring)
    projects: dict              # {"a"|"b"|"operator": Keystone project id = CDNaaS tenant}
    auth_url: str
    user_ids: dict              # {user: Keystone user id}
    appcred: tuple              # (id, secret) of member's application credential
    policy_file: Path           # the API's CDNAAS_POLICY_FILE: no override ("{}") at first
    _tokens: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def url(self):
        """The customer API's base URL."""
        return self.running.urls["api"]

    def token(self, user):
        """A Keystone token of ``user``, scoped to its project (``system-admin``'s: to the
        system); one per user, issued at its first use (Keystone takes a second or two)."""
        if user not in self._tokens:
            entry = yaml.safe_load(self.clouds_yaml.read_text())["clouds"][user]
            self._tokens[user] = _session(v3.Password(**entry["auth"])).get_token()
        return self._tokens[user]

    def appcred_token(self):
        """A Keystone token of ``member``'s application credential."""
        return _session(v3.ApplicationCredential(
            auth_url=self.auth_url, application_credential_id=self.appcred[0],
            application_credential_secret=self.appcred[1])).get_token()

    def api(self, user, token=None):
        """An :class:`~tests.support.api.Api` of ``user`` sending ``X-Auth-Token`` (its
        :meth:`token` unless ``token`` is given)."""
        return Api(self.url, token or self.token(user), x_auth_token=True)


@contextlib.contextmanager
def keystone_stack(clouds_yaml, tmp_path, extra_env=None):
    """Keystone users and projects, and a stack taking their tokens: see the module.

    :param clouds_yaml: the mini cloud's ``clouds.yaml`` (fixture ``minicloud``).
    :param extra_env: more variables of the stack.
    """
    tmp_path = Path(tmp_path)
    conn = connection.Connection(config=os_config.OpenStackConfig(
        config_files=[str(clouds_yaml)]).get_one(ADMIN_CLOUD))
    prefix = f"cdnaas-test-{uuid.uuid4().hex[:8]}"
    made_users, made_projects = [], []
    try:
        try:
            conn.identity.find_role(PURGER_ROLE, ignore_missing=False)
        except exceptions.NotFoundException:
            conn.identity.create_role(name=PURGER_ROLE)
        roles = {r.name: r for r in conn.identity.roles()}
        projects = {}
        for key in ("a", "b", "operator"):
            project = conn.identity.create_project(name=f"{prefix}-{key}", domain_id="default")
            made_projects.append(project)
            projects[key] = project.id
        service_project = conn.identity.find_project("service", domain_id="default",
                                                     ignore_missing=False)
        passwords, user_ids = {}, {}
        for name, (project, role) in {**USERS, SERVICE_CLOUD: (None, "service")}.items():
            passwords[name] = secrets.token_urlsafe(16)
            user = conn.identity.create_user(name=f"{prefix}-{name}", password=passwords[name],
                                             domain_id="default")
            made_users.append(user)
            user_ids[name] = user.id
            conn.identity.assign_project_role_to_user(
                service_project if project is None else projects[project], user, roles[role])
        admin = conn.config.config["auth"]
        auth_url = admin["auth_url"]
        entries = {name: _entry(auth_url, {"user_id": user_ids[name],
                                           "password": passwords[name],
                                           "project_id": projects[project]})
                   for name, (project, _role) in USERS.items()}
        entries[SERVICE_CLOUD] = _entry(auth_url, {
            "user_id": user_ids[SERVICE_CLOUD], "password": passwords[SERVICE_CLOUD],
            "project_id": service_project.id})
        entries["system-admin"] = _entry(auth_url, {
            "username": admin["username"], "password": admin["password"],
            "user_domain_name": admin.get("user_domain_name", "Default"),
            "system_scope": "all"})
        member = connection.Connection(session=_session(v3.Password(
            **entries["member"]["auth"])), region_name=conn.config.region_name)
        credential = member.identity.create_application_credential(
            user=user_ids["member"], name=f"{prefix}-member")
        member.close()
        appcred = (credential.id, credential.secret)
        entries["member-appcred"] = {
            "auth_type": "v3applicationcredential", "identity_api_version": 3,
            "auth": {"auth_url": auth_url, "application_credential_id": appcred[0],
                     "application_credential_secret": appcred[1]}}
        for entry in entries.values():
            entry.setdefault("region_name", conn.config.region_name)
        ours = tmp_path / "clouds.yaml"
        ours.write_text(yaml.safe_dump({"clouds": entries}))
        ours.chmod(0o600)
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text("{}\n")
        env = {"CDNAAS_AUTH_STRATEGY": "keystone", "CDNAAS_KEYSTONE_CLOUD": SERVICE_CLOUD,
               "CDNAAS_KEYSTONE_OPERATOR_PROJECT": projects["operator"],
               "CDNAAS_POLICY_FILE": str(policy_file),
               "OS_CLIENT_CONFIG_FILE": str(ours), "OS_CLOUD": None,
               **(extra_env or {})}
        with running_stack(None, tmp_path, extra_env=env) as running:
            cloud = KeystoneCloud(running=running, clouds_yaml=ours, projects=projects,
                                  auth_url=auth_url, user_ids=user_ids, appcred=appcred,
                                  policy_file=policy_file)
            populate_catalogue(cloud.api("system-admin"))
            yield cloud
    finally:
        for user in made_users:
            conn.identity.delete_user(user, ignore_missing=True)
        for project in made_projects:
            conn.identity.delete_project(project, ignore_missing=True)
        conn.close()


def _session(auth):
    return ks_session.Session(auth=auth)


def _entry(auth_url, auth):
    return {"auth_type": "password", "identity_api_version": 3,
            "auth": {"auth_url": auth_url, **auth}}


@pytest.fixture(scope="module")
def keystone_cloud(minicloud, tmp_path_factory):
    """A :class:`KeystoneCloud` for the test module (:func:`keystone_stack`)."""
    with keystone_stack(minicloud, tmp_path_factory.mktemp("keystone")) as cloud:
        yield cloud
