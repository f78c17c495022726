"""Console scripts ``cdnaas-<service>``: run one service's app with waitress."""
import importlib
import logging

import waitress

from cdnaas.common import config, service_auth

LOG = logging.getLogger(__name__)


def serve(service):
    """Migrate nothing, make the service key if missing, build ``cdnaas.<service>.app.create_app()`` and serve it forever."""
    logging.basicConfig(level=config.setting("CDNAAS_LOG_LEVEL"),
                        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")
    LOG.info("service key: %s", service_auth.ensure_key())
    module = importlib.import_module(f"cdnaas.{service}.app")
    app = module.create_app()
    host, port = config.bind_address(service)
    LOG.info("serving %s on %s:%s", service, host, port)
    serve_wsgi(app, host, port, f"cdnaas-{service}")


def serve_wsgi(app, host, port, ident):
    """Serve the WSGI ``app`` on ``host:port`` forever, as every service is served
    (the benchmarks' floors too, so that they measure the same server)."""
    waitress.serve(app, host=host, port=port, threads=16, ident=ident, channel_timeout=300)


def main_api():
    serve("api")


def main_so():
    serve("so")


def main_sidr():
    serve("sidr")


def main_ro():
    serve("ro")


def main_im():
    serve("im")
