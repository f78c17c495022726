"""The ``small-objects`` CDNaaS flavor: a vCDN for web assets (see :mod:`.plugin`)."""
