"""A vCDN's delivery options: how its content is served, beyond its VNFs.

Each option is a top-level field of a vCDN's create and PATCH bodies (a PATCH replaces it
whole; ``null`` or the defaults remove it), checked by its own module, kept in the
instance's ``service`` and the SIG's ``service.<FIELD>`` only when it is not the defaults,
shown in the vCDN's view, and rendered by RO into the configs of the VNFs it changes.

An option is a module listed in :data:`OPTIONS` that provides:

- ``FIELD``: its name in bodies, views, the instance's ``service`` and the SIG's ``service``;
- ``ROLES``: the VNF roles whose configs render it (``"cache"``, ``"load_balancer"``);
- ``check(value, field) -> dict | None``: ``value`` checked into its stored form (defaults
  filled in), or None where it asks for the defaults; idempotent on its own output, which
  RO checks again before rendering.
  :raises cdnaas.common.errors.BadRequest: naming the first field refused (under ``field``)
  and what to send instead;
- ``view(stored) -> object``: what the vCDN's view shows (``stored`` None: the defaults;
  secrets masked);
- ``render(stored) -> object``: what the VNF templates get as the variable ``FIELD``
  (``stored`` None: the defaults), every value already in the template's terms.

Anything an option renders into an nginx config comes from whitelisted values only.
"""
from cdnaas.delivery import access, https, logstreams, origins, responses

#: every delivery option (modules of this package), in the order views and templates list them
OPTIONS = (https, origins, responses, access, logstreams)


def accept(body: dict, service: dict | None = None) -> dict:
    """``service`` (an instance's) with the options ``body`` sets, each checked; an option
    set to ``null`` or to its defaults is removed.

    :raises cdnaas.common.errors.BadRequest: an option is refused (nothing is changed).
    """
    out = dict(service or {})
    for option in OPTIONS:
        if option.FIELD in body:
            stored = None if body[option.FIELD] is None \
                else option.check(body[option.FIELD], option.FIELD)
            if stored is None:
                out.pop(option.FIELD, None)
            else:
                out[option.FIELD] = stored
    return out


def restored(service: dict | None, previous: dict | None) -> dict:
    """An instance's ``service`` with its options as the ``previous`` SIG's service has
    them (a rolled-back change puts them back)."""
    out = {k: v for k, v in (service or {}).items()
           if k not in {option.FIELD for option in OPTIONS}}
    out.update({option.FIELD: previous[option.FIELD]
                for option in OPTIONS if (previous or {}).get(option.FIELD) is not None})
    return out


def view(service: dict | None) -> dict:
    """``{FIELD: what the view shows}`` of every option of an instance's ``service``."""
    return {option.FIELD: option.view((service or {}).get(option.FIELD)) for option in OPTIONS}


def template_values(service: dict | None, role: str | None = None) -> dict:
    """``{FIELD: rendered}`` of every option of a SIG's ``service`` (those ``role``'s
    configs render: its ``ROLES`` name it; None: every option), each checked again.

    :raises cdnaas.common.errors.BadRequest: a stored option is refused.
    """
    values = {}
    for option in (o for o in OPTIONS if role is None or role in o.ROLES):
        stored = (service or {}).get(option.FIELD)
        values[option.FIELD] = option.render(
            None if stored is None else option.check(stored, f"service.{option.FIELD}"))
    return values


def reconfigures(previous: dict | None, service: dict | None, role: str) -> bool:
    """Whether going from the ``previous`` SIG service to ``service`` changes the config of
    the VNFs of ``role``."""
    return any((previous or {}).get(option.FIELD) != (service or {}).get(option.FIELD)
               for option in OPTIONS if role in option.ROLES)
