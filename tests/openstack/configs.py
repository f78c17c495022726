"""Configuration files of the mini cloud's services (see ``minicloud.py``).

Standard library only: ``minicloud.py`` runs under the system Python before any
virtualenv exists. Every service listens on 127.0.0.1; MariaDB, RabbitMQ and
its epmd use ports of their own so the machine's instances (3306, 5672, 4369)
are left alone.
"""
import textwrap

HOST = "127.0.0.1"
REGION = "RegionOne"
PASSWORD = "minicloud"  # loopback-only throwaway cloud: one password for everything

#: below the ephemeral port range (32768-60999): a client socket never holds one of them
PORTS = {
    "mariadb": 13306, "rabbitmq": 15682, "rabbitmq_dist": 15683, "epmd": 14369,
    "keystone": 5000, "glance": 9292, "placement": 8778, "nova": 8774,
    "neutron": 9696, "octavia": 9876, "barbican": 9311,
    # Designate's API and mini-DNS (the primary its DNS servers transfer zones from), and
    # BIND, the DNS server of its pool (the port it answers on, and its rndc control channel)
    "designate": 9001, "designate_mdns": 15354, "bind": 15353, "bind_rndc": 15953,
}

#: nova-compute processes: (host name, availability zone): two "regional data centers" of
#: two compute hosts each, so a test can tell a server placed on its planned host from one
#: the scheduler put beside it (each fake nova-compute takes about 120 MB)
COMPUTE_HOSTS = (("mc-north-1", "north-az"), ("mc-north-2", "north-az"),
                 ("mc-south-1", "south-az"), ("mc-south-2", "south-az"))

DATABASES = ("keystone", "glance", "placement", "nova_api", "nova", "nova_cell0", "neutron",
             "octavia", "barbican", "designate")

#: (service user, catalog type, catalog name, URL path after host:port)
SERVICES = (
    ("glance", "image", "glance", ""),
    ("placement", "placement", "placement", ""),
    ("nova", "compute", "nova", "/v2.1"),
    ("neutron", "network", "neutron", ""),
    ("octavia", "load-balancer", "octavia", ""),
    ("barbican", "key-manager", "barbican", ""),
    ("designate", "dns", "designate", ""),
)

#: Designate's pool: its one BIND server, and the name its zones' NS records give it
POOL_ID = "794ccc2c-d751-44fe-b57f-8894c9f5c842"  # designate's default pool
POOL_NS = "ns1.minicloud.test."


def url(service):
    return f"http://{HOST}:{PORTS[service]}"


def db_url(name):
    return f"mysql+pymysql://openstack:{PASSWORD}@{HOST}:{PORTS['mariadb']}/{name}?charset=utf8"


def transport_url():
    return f"rabbit://guest:guest@{HOST}:{PORTS['rabbitmq']}/"


def _auth_section(section, user, extra=""):
    return textwrap.dedent(f"""\
        [{section}]
        auth_type = password
        auth_url = {url('keystone')}/v3
        project_domain_name = Default
        user_domain_name = Default
        project_name = service
        username = {user}
        password = {PASSWORD}
        region_name = {REGION}
        """) + extra


def _authtoken(user):
    return _auth_section("keystone_authtoken", user,
                         f"www_authenticate_uri = {url('keystone')}/v3\n"
                         "service_token_roles_required = true\n")


def _common(run, service, *, messaging=True):
    text = textwrap.dedent(f"""\
        [DEFAULT]
        debug = false
        use_stderr = true
        graceful_shutdown_timeout = 2
        state_path = {run}/state/{service}
        """)
    if messaging:
        text += f"transport_url = {transport_url()}\n"
    return text


def render(run, venv, kek, rndc_secret):
    """``{path relative to run/etc: text}`` of every config file (``kek``: Barbican's
    key-encryption key, a Fernet key kept in its state: the secrets are encrypted with it;
    ``rndc_secret``: the key designate's worker controls BIND with, kept in BIND's state)."""
    files = {}
    files["keystone/keystone.conf"] = _common(run, "keystone", messaging=False) + textwrap.dedent(f"""\
        [database]
        connection = {db_url('keystone')}
        [token]
        provider = fernet
        expiration = 86400
        [fernet_tokens]
        key_repository = {run}/state/keystone/fernet-keys
        [fernet_receipts]
        key_repository = {run}/state/keystone/fernet-keys
        [credential]
        key_repository = {run}/state/keystone/credential-keys
        [identity]
        # bcrypt's least cost: every password authentication (each new connection of the
        # tests and of the driver) otherwise costs keystone about 0.25 s of CPU
        password_hash_rounds = 4
        [cache]
        # In this one keystone process: a token is validated once, not once per service
        # that sees it (each validation otherwise reads the token's roles from MariaDB,
        # behind a lock per token, while every API waits for it).
        enabled = true
        backend = dogpile.cache.memory
        [oslo_messaging_notifications]
        driver = noop
        """)
    files["glance/glance-api.conf"] = _common(run, "glance", messaging=False) + textwrap.dedent(f"""\
        enabled_backends = file:file
        [glance_store]
        default_backend = file
        [file]
        filesystem_store_datadir = {run}/state/glance/images
        [os_glance_staging_store]
        filesystem_store_datadir = {run}/state/glance/staging
        [os_glance_tasks_store]
        filesystem_store_datadir = {run}/state/glance/tasks
        [database]
        connection = {db_url('glance')}
        [paste_deploy]
        flavor = keystone
        [oslo_concurrency]
        lock_path = {run}/state/glance/locks
        [oslo_messaging_notifications]
        driver = noop
        """) + _authtoken("glance")
    files["placement/placement.conf"] = _common(run, "placement", messaging=False) + \
        textwrap.dedent(f"""\
        [placement_database]
        connection = {db_url('placement')}
        [api]
        auth_strategy = keystone
        """) + _authtoken("placement")
    files["nova/nova.conf"] = _common(run, "nova") + textwrap.dedent(f"""\
        compute_driver = cdnaas_fake.PredictableFakeDriver
        my_ip = {HOST}
        instances_path = {run}/state/nova/instances
        allow_resize_to_same_host = true
        cpu_allocation_ratio = 16.0
        ram_allocation_ratio = 4.0
        # fake hosts: no info cache to heal from neutron every minute, resources reported
        # at each claim and every 5 minutes (not every minute by each of the four)
        heal_instance_info_cache_interval = -1
        update_resources_interval = 300
        [wsgi]
        api_paste_config = {run}/etc/nova/api-paste.ini
        [api]
        auth_strategy = keystone
        [api_database]
        connection = {db_url('nova_api')}
        [database]
        connection = {db_url('nova')}
        [conductor]
        workers = 1
        [scheduler]
        workers = 1
        discover_hosts_in_cells_interval = 5
        [oslo_concurrency]
        lock_path = {run}/state/nova/locks
        [oslo_messaging_notifications]
        driver = noop
        [vnc]
        enabled = false
        [glance]
        region_name = {REGION}
        [cinder]
        os_region_name = {REGION}
        [compute]
        resource_provider_association_refresh = 60
        [cache]
        # No cache at all: nova-api otherwise keeps each host's zone for an hour per
        # worker, and one that looked before the bootstrap put the host in its zone
        # would refuse that zone ("requested availability zone is not available").
        enabled = true
        backend = dogpile.cache.null
        """) + _authtoken("nova") + _auth_section("service_user", "nova",
                                                  "send_service_user_token = true\n") \
        + _auth_section("placement", "placement") \
        + _auth_section("neutron", "neutron", "service_metadata_proxy = false\n")
    for host, _zone in COMPUTE_HOSTS:
        files[f"nova/compute-{host}.conf"] = textwrap.dedent(f"""\
            [DEFAULT]
            host = {host}
            state_path = {run}/state/nova-{host}
            instances_path = {run}/state/nova-{host}/instances
            """)
    files["neutron/neutron.conf"] = _common(run, "neutron") + textwrap.dedent(f"""\
        core_plugin = ml2
        service_plugins =
        auth_strategy = keystone
        api_paste_config = {venv}/etc/neutron/api-paste.ini
        notify_nova_on_port_status_changes = false
        notify_nova_on_port_data_changes = false
        # no DHCP agent runs here: each port change otherwise tries to schedule one
        dhcp_agent_notification = false
        api_workers = 1
        rpc_workers = 1
        [database]
        connection = {db_url('neutron')}
        [oslo_concurrency]
        lock_path = {run}/state/neutron/locks
        [oslo_messaging_notifications]
        driver = noop
        [agent]
        root_helper =
        """) + _authtoken("neutron") + _auth_section("nova", "nova")
    files["neutron/plugins/ml2/ml2_conf.ini"] = textwrap.dedent("""\
        [ml2]
        type_drivers = vxlan
        tenant_network_types = vxlan
        mechanism_drivers = cdnaas_bindall
        extension_drivers = port_security,tag_ports_during_bulk_creation
        [ml2_type_vxlan]
        vni_ranges = 1:100000
        [securitygroup]
        enable_security_group = true
        firewall_driver = noop
        """)
    files["octavia/octavia.conf"] = _common(run, "octavia") + textwrap.dedent(f"""\
        [api_settings]
        bind_host = {HOST}
        bind_port = {PORTS['octavia']}
        auth_strategy = keystone
        enabled_provider_drivers = amphora:The noop amphora of the mini cloud
        default_provider_driver = amphora
        [database]
        connection = {db_url('octavia')}
        [controller_worker]
        amphora_driver = amphora_noop_driver
        compute_driver = compute_noop_driver
        network_driver = cdnaas_faults_noop
        volume_driver = volume_noop_driver
        image_driver = image_noop_driver
        loadbalancer_topology = SINGLE
        workers = 1
        amp_image_tag = amphora
        client_ca = {run}/state/octavia/ca.pem
        amp_flavor_id = 1
        amp_boot_network_list = 00000000-0000-0000-0000-000000000000
        amp_secgroup_list = 00000000-0000-0000-0000-000000000000
        [task_flow]
        jobboard_enabled = false
        [certificates]
        # the tenants' certificates (TERMINATED_HTTPS listeners): Barbican containers, read
        # with the service user once the API gave it read ACLs with the tenant's token
        cert_manager = barbican_cert_manager
        barbican_auth = barbican_acl_auth
        region_name = {REGION}
        endpoint_type = public
        ca_certificate = {run}/state/octavia/ca.pem
        ca_private_key = {run}/state/octavia/ca.key
        ca_private_key_passphrase = minicloud
        server_certs_key_passphrase = minicloud-minicloud-minicloud-32
        [haproxy_amphora]
        client_cert = {run}/state/octavia/client.pem
        server_ca = {run}/state/octavia/ca.pem
        [health_manager]
        heartbeat_key = minicloud
        [oslo_messaging]
        topic = octavia_prov
        [oslo_concurrency]
        lock_path = {run}/state/octavia/locks
        [oslo_messaging_notifications]
        driver = noop
        """) + _authtoken("octavia") + _auth_section("service_auth", "octavia")
    # Barbican as shipped (its policy's legacy defaults: the ``creator`` role stores secrets),
    # in-process tasks (no queue, no worker), secrets encrypted by the simple_crypto plugin
    files["barbican/barbican.conf"] = _common(run, "barbican", messaging=False) + \
        textwrap.dedent(f"""\
        host_href = {url('barbican')}
        [database]
        connection = {db_url('barbican')}
        [queue]
        enable = false
        [secretstore]
        enabled_secretstore_plugins = store_crypto
        [crypto]
        enabled_crypto_plugins = simple_crypto
        [simple_crypto_plugin]
        kek = {kek}
        [oslo_messaging_notifications]
        driver = noop
        """) + _authtoken("barbican")
    # Designate: its DNS servers are one BIND (``bind/named.conf``) that takes each zone from
    # designate's mini-DNS (rndc addzone; NOTIFY, then a transfer); the worker polls BIND
    # every second until it serves a change (the zone or record set is ACTIVE then)
    files["designate/designate.conf"] = _common(run, "designate") + textwrap.dedent(f"""\
        root_helper =
        [storage:sqlalchemy]
        connection = {db_url('designate')}
        [service:api]
        auth_strategy = keystone
        api_base_uri = {url('designate')}/
        enable_api_v2 = true
        enable_api_admin = true
        enable_host_header = true
        enabled_extensions_admin = quotas
        [service:central]
        workers = 1
        [service:mdns]
        workers = 1
        listen = {HOST}:{PORTS['designate_mdns']}
        [service:worker]
        workers = 1
        poll_delay = 1
        poll_retry_interval = 1
        poll_max_retries = 30
        [service:producer]
        workers = 1
        # the producer bumps a changed zone's serial and notifies its servers every
        # second (default 5 s): a change is served sooner
        [producer_task:increment_serial]
        interval = 1
        [producer_task:delayed_notify]
        interval = 1
        [oslo_concurrency]
        lock_path = {run}/state/designate/locks
        [oslo_messaging_notifications]
        driver = noop
        """) + _authtoken("designate")
    # designate-manage's calls to central: a call lost before central listened is retried
    files["designate/manage.conf"] = "[DEFAULT]\nrpc_response_timeout = 5\n"
    files["designate/pools.yaml"] = textwrap.dedent(f"""\
        - name: default
          id: {POOL_ID}
          description: the mini cloud's BIND
          attributes: {{}}
          ns_records:
            - hostname: {POOL_NS}
              priority: 1
          nameservers:
            - host: {HOST}
              port: {PORTS['bind']}
          targets:
            - type: bind9
              description: BIND of the mini cloud
              masters:
                - host: {HOST}
                  port: {PORTS['designate_mdns']}
              options:
                host: {HOST}
                port: {PORTS['bind']}
                rndc_host: {HOST}
                rndc_port: {PORTS['bind_rndc']}
                rndc_key_file: {run}/etc/bind/rndc.key
                clean_zonefile: true
        """)
    files["bind/rndc.key"] = textwrap.dedent(f"""\
        key "rndc-key" {{
            algorithm hmac-sha256;
            secret "{rndc_secret}";
        }};
        """)
    # on every address of this machine (the local driver's region bridges too: their clients
    # reach it at their gateway), zones added by rndc only, no recursion
    files["bind/named.conf"] = textwrap.dedent(f"""\
        include "{run}/etc/bind/rndc.key";
        controls {{
            inet {HOST} port {PORTS['bind_rndc']} allow {{ {HOST}; }} keys {{ "rndc-key"; }};
        }};
        options {{
            directory "{run}/state/bind";
            pid-file "{run}/state/bind/named.pid";
            session-keyfile "{run}/state/bind/session.key";
            managed-keys-directory "{run}/state/bind";
            listen-on port {PORTS['bind']} {{ any; }};
            listen-on-v6 {{ none; }};
            allow-new-zones yes;
            recursion no;
            dnssec-validation no;
            notify no;
            minimal-responses yes;
            auth-nxdomain no;
        }};
        """)
    files["rabbitmq/rabbitmq.conf"] = textwrap.dedent(f"""\
        listeners.tcp.default = {HOST}:{PORTS['rabbitmq']}
        log.console = false
        log.file.level = warning
        """)
    files["rabbitmq/enabled_plugins"] = "[].\n"
    files["rabbitmq/rabbitmq-env.conf"] = ""
    return files
