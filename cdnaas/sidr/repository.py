"""Queries on ``sidr_templates``; every function works inside the caller's session."""
from sqlalchemy import select

from cdnaas.sidr.models import Template


def add(session, template):
    """Stage ``template`` for insertion and flush it, so a duplicate fails here.

    :raises sqlalchemy.exc.IntegrityError: (flavor, version) is already stored.
    """
    session.add(template)
    session.flush()
    return template


def find(session, flavor, version):
    """The template of ``flavor`` at ``version``, or None."""
    return session.scalars(select(Template).where(Template.flavor == flavor,
                                                  Template.version == version)).one_or_none()


def latest(session, flavor, offered=False):
    """The highest version of ``flavor`` (not deprecated, when ``offered``), or None."""
    query = select(Template).where(Template.flavor == flavor).order_by(Template.version.desc())
    if offered:
        query = query.where(Template.deprecated_at.is_(None))
    return session.scalars(query.limit(1)).one_or_none()


def remove(session, template):
    """Delete ``template`` (a row read in this session)."""
    session.delete(template)
    session.flush()


def all_versions(session, flavor=None):
    """Every template (of ``flavor`` only, when given), ordered by flavor then version."""
    query = select(Template).order_by(Template.flavor, Template.version)
    if flavor is not None:
        query = query.where(Template.flavor == flavor)
    return list(session.scalars(query))
