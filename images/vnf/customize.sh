#!/bin/sh
# mmdebstrap customize hook of images/vnf/build.sh: $1 is the image's root directory.
set -eu
ROOT=$1

echo cdnaas-vnf > "$ROOT/etc/hostname"
cat > "$ROOT/etc/fstab" <<'EOF'
LABEL=cdnaas-root / ext4 defaults,noatime,errors=remount-ro 0 1
EOF

# cloud-init: the sources a VNF meets (OpenStack metadata, config drive, NoCloud seed)
cat > "$ROOT/etc/cloud/cloud.cfg.d/90-cdnaas.cfg" <<'EOF'
datasource_list: [NoCloud, ConfigDrive, OpenStack, None]
datasource:
  OpenStack:
    max_wait: 30
    timeout: 5
preserve_hostname: false
disable_root: true
ssh_pwauth: false
EOF

# DHCP on the first NIC until cloud-init writes the network the cloud describes
mkdir -p "$ROOT/etc/network/interfaces.d"
cat > "$ROOT/etc/network/interfaces" <<'EOF'
auto lo
iface lo inet loopback
source /etc/network/interfaces.d/*
EOF

# nginx's own service and site stay off: the VNF's user-data starts its own units
chroot "$ROOT" systemctl disable nginx.service >/dev/null 2>&1 || true
rm -f "$ROOT/etc/nginx/sites-enabled/default"

# a serial console for debugging; no passwords anywhere
chroot "$ROOT" systemctl enable serial-getty@ttyS0.service >/dev/null 2>&1 || true
chroot "$ROOT" passwd -l root >/dev/null
rm -f "$ROOT/etc/machine-id" && touch "$ROOT/etc/machine-id"
apt_cache=$ROOT/var/cache/apt
rm -rf "$apt_cache"/*.bin "$apt_cache"/archives/*.deb "$ROOT"/var/lib/apt/lists/*
