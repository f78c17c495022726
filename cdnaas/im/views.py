"""HTTP views of the Instance Manager."""
from flask import Blueprint, current_app, request
from sqlalchemy import select

from cdnaas.im.models import Action
from cdnaas.im.reconcile import action_view

blueprint = Blueprint("im", __name__, url_prefix="/im/v1")


@blueprint.post("/reconcile")
def reconcile():
    return {"actions": current_app.extensions["loop"].run_once()}


@blueprint.get("/actions")
def list_actions():
    query = select(Action).order_by(Action.id)
    if request.args.get("instance_id"):
        query = query.where(Action.instance_id == request.args["instance_id"])
    with current_app.extensions["db"].sessions() as session:
        return {"actions": [action_view(a) for a in session.scalars(query)]}
