"""The names of the steps RO reports as it works on a deployment: each is recorded as a
step of the deployment's progress (``progress(step, done, total)``) and shown by SO as
it is. A driver's flows (:mod:`cdnaas.ro.vim.pipeline`) name their steps from here, so
every driver reports the same step under the same name."""

# -- deploy and update: what is made ---------------------------------------------------
CREATE_NETWORKS = "create networks"
BOOT_SERVERS = "boot servers"
BOOT_ORIGIN_SHIELD = "boot origin shield"
BOOT_CACHES = "boot caches"
BOOT_STAND_INS = "boot stand-ins"
CONFIGURE_LOAD_BALANCERS = "configure load balancers"
REGISTER_MEMBERS = "register members"
CONFIGURE_DNS = "configure DNS"
VERIFY_REGIONS = "verify from each region"

# -- update: what changes ---------------------------------------------------------------
RESHAPE_ORIGIN_SHIELD = "reshape origin shield"
REBUILD_ORIGIN_SHIELD = "rebuild origin shield"
RECONFIGURE_CACHES = "reconfigure caches"
REBUILD_CACHES = "rebuild caches"
UPDATE_LOAD_BALANCERS = "update load balancers"
RECONFIGURE_LOAD_BALANCERS = "reconfigure load balancers"
RECONFIGURE_DNS = "reconfigure DNS"
RESHAPE_DNS = "reshape DNS"
REBUILD_DNS = "rebuild DNS"
TURN_HTTPS_ON = "turn HTTPS on"
TURN_HTTPS_OFF = "turn HTTPS off"
ROTATE_CERTIFICATES = "rotate certificates"
CHANGE_HTTPS_POLICY = "change HTTPS policy"

# -- update: what goes once the rest is done ---------------------------------------------
DRAIN_CACHES = "drain and stop caches"
REMOVE_CACHES = "remove caches"
REMOVE_SERVERS = "remove servers"
REMOVE_STAND_INS = "remove stand-ins"
REMOVE_REGIONS = "remove regions"
REMOVE_SHIELD_LEGS = "remove origin shield legs"

# -- restore: back to the record ----------------------------------------------------------
REMOVE_ADDED = "remove VNFs the update added"
RESTORE_REGIONS = "restore regions"
RESTART_STOPPED = "restart stopped caches"
RESTORE_ORIGIN_SHIELD = "restore origin shield"
RESTORE_HTTPS = "restore HTTPS listeners"
RESTORE_LOAD_BALANCERS = "restore load balancers"
RESTORE_DNS = "restore DNS"
DRAIN_ADDED = "drain and stop VNFs the update added"

# -- terminate ------------------------------------------------------------------------------
REMOVE_VNFS = "remove VNFs"

# -- RO around the driver: the entry point in the operator's zone, work a restart finished
PUBLISH = "publish entry point"
WITHDRAW = "withdraw entry point"
RESTART = "undo after restart"

# -- invalidate and prefetch (:meth:`~cdnaas.ro.vim.base.VimDriver.invalidate`) ------------
CACHES = "caches"
