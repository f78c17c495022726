"""``cdnaas image``: VNF images in the operator's OpenStack (Glance), through openstacksdk.

The first of the three steps of a new flavor (image, plugin, template; see
``docs/operator-openstack.md``): build the image (``images/vnf/build.sh``), then

    cdnaas image register var/images/cdnaas-vnf.qcow2 --name cdnaas-cache

The cloud is the clouds.yaml entry named by ``--cloud``, ``CDNAAS_OS_CLOUD`` or
``OS_CLOUD``, as for the RO's ``openstack`` VIM driver, which finds the image
by the name (or tag) that the flavor's template gives its VNFs.
"""
from pathlib import Path

import click

from cdnaas.cli import output
from cdnaas.ro.vim.openstack import cloud as oscloud

#: what the image recipe writes (qcow2); raw and others are accepted by suffix
DISK_FORMATS = {".qcow2": "qcow2", ".img": "raw", ".raw": "raw", ".vmdk": "vmdk", ".iso": "iso"}


@click.group()
def image():
    """VNF images in the OpenStack image service (Glance)."""


@image.command("register")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Image name the flavor's template uses "
              "(e.g. cdnaas-cache).")
@click.option("--cloud", "cloud_name", metavar="CLOUD",
              help="clouds.yaml entry (default: CDNAAS_OS_CLOUD, then OS_CLOUD).")
@click.option("--region", metavar="REGION", multiple=True,
              help="OpenStack region to upload to (repeat for several; default: the cloud's).")
@click.option("--tag", "tags", multiple=True, help="Extra image tag (repeatable).")
@click.option("--public", is_flag=True, help="Visible to every project (needs the admin role).")
@click.option("--replace", is_flag=True, help="Delete older images with the same name "
              "once the new one is active.")
@click.option("--disk-format", type=click.Choice(sorted(set(DISK_FORMATS.values()))),
              help="Default: from the file's suffix (qcow2 for the recipe's output).")
def register(file, name, cloud_name, region, tags, public, replace, disk_format):
    """Upload FILE to Glance as image NAME, tagged ``cdnaas``; print its id."""
    fmt = disk_format or DISK_FORMATS.get(file.suffix.lower())
    if fmt is None:
        raise click.ClickException(f"cannot tell the disk format of {file.name}; "
                                   "give --disk-format")
    for image_id in register_image(file, name, cloud_name=cloud_name, regions=region or [None],
                                   tags=tags, public=public, replace=replace, disk_format=fmt):
        output.note(f"image {name} registered: {image_id}")
        click.echo(image_id)


def register_image(file, name, *, cloud_name=None, regions=(None,), tags=(), public=False,
                   replace=False, disk_format="qcow2"):
    """Upload ``file`` as image ``name`` to each region; return the new image ids.

    :raises click.ClickException: no cloud is configured or Glance refused.
    """
    import openstack  # here: it takes half a second, which other commands need not wait
    from openstack import exceptions

    cloud_name = cloud_name or oscloud.cloud_name()
    if not cloud_name:
        raise click.ClickException("no cloud: give --cloud or set OS_CLOUD to an entry of "
                                   "clouds.yaml")
    ids = []
    for region in regions:
        try:
            conn = openstack.connect(cloud=cloud_name, region_name=region)
            older = [i for i in conn.image.images(name=name)]
            created = conn.image.create_image(
                name=name, filename=str(file), disk_format=disk_format, container_format="bare",
                visibility="public" if public else "private", tags=["cdnaas", *tags],
                wait=True, allow_duplicates=True)
            if replace:
                for old in older:
                    conn.image.delete_image(old, ignore_missing=True)
        except exceptions.SDKException as exc:
            raise click.ClickException(f"Glance of {cloud_name} ({region or 'default region'}) "
                                       f"refused {file.name}: {exc}") from exc
        ids.append(created.id)
    return ids
