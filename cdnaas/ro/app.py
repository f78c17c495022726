"""Factory of the Resource Orchestrator's Flask app."""
import logging

from cdnaas.common import config, keyfiles, plugins
from cdnaas.common.app import make_app
from cdnaas.db import engine
from cdnaas.ro import secrets
from cdnaas.ro.calibration_views import blueprint as calibration_blueprint
from cdnaas.ro.power_views import blueprint as power_blueprint
from cdnaas.ro.service import DeploymentService
from cdnaas.ro.views import blueprint
from cdnaas.ro.vim.secret_backends import FernetBackend

LOG = logging.getLogger(__name__)


def create_app(database=None, driver=None):
    """The RO app, after undoing what a previous run left half-done.

    :param database: a :class:`~cdnaas.db.engine.Database`; the RO's configured one by default.
    :param driver: a :class:`~cdnaas.ro.vim.base.VimDriver`; by default the one named by
        ``CDNAAS_VIM_DRIVER``, loaded from the ``cdnaas.vim_drivers`` entry points.
    """
    database = database or engine.for_service("ro")
    driver = driver or plugins.load(plugins.VIM_DRIVERS, config.vim_driver_name())
    backend = driver.secret_backend()
    if backend is None:
        keyfiles.ensure_secret_key()
        backend = FernetBackend()
    driver.secrets = secrets.SecretStore(database, backend)
    service = DeploymentService(database, driver)
    service.recover()
    app = make_app("ro", [blueprint, calibration_blueprint, power_blueprint])
    app.extensions["ro"] = service
    app.extensions["secrets"] = driver.secrets
    LOG.info("resource orchestrator ready with VIM driver %s", driver.name)
    return app
