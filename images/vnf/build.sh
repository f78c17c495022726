#!/usr/bin/env bash
# Build the CDNaaS VNF image: a Debian 12 qcow2 with nginx, dnsmasq, nftables,
# cloud-init (and its python3) and wrk, from Debian packages only. The caches, DNS
# servers and calibration load generators of the openstack driver all boot it.
#
#   images/vnf/build.sh [OUTPUT.qcow2]      (default: var/images/cdnaas-vnf.qcow2)
#
# Then register it in Glance (the operator's first step for a new flavor):
#   cdnaas image register var/images/cdnaas-vnf.qcow2 --name cdnaas-cache
#
# How: mmdebstrap makes the root file system in a directory (no root mounts, no
# loop devices), mkfs.ext4 -d turns it into the root partition, the boot
# partition is FAT with syslinux installed through mtools, and the two are laid
# into one MBR disk (sfdisk on a plain file) converted to qcow2. It boots under
# BIOS (OpenStack's default) with console on ttyS0; cloud-init reads NoCloud,
# ConfigDrive or the OpenStack metadata service. nginx and dnsmasq ship disabled:
# the VNF's user-data (cdnaas.ro.vim.openstack.userdata) writes and starts them;
# a load generator's user-data starts the agent that runs wrk and the viewer
# simulator (cdnaas.calibration.agent). Beside the image, OUTPUT.inputs holds the
# sha256sum of this script and customize.sh: images/vnf/boot_test.py rebuilds an
# image whose inputs changed (a package added here, say).
#
# Needs root and the Debian packages: mmdebstrap syslinux syslinux-common mtools
# dosfstools qemu-utils fdisk e2fsprogs (installed when missing).
# Takes about 3-5 minutes on 2 cores; the image is about 400 MB.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${1:-$REPO/var/images/cdnaas-vnf.qcow2}
SUITE=${CDNAAS_IMAGE_SUITE:-bookworm}
MIRROR=${CDNAAS_IMAGE_MIRROR:-http://deb.debian.org/debian}
DISK_MB=${CDNAAS_IMAGE_DISK_MB:-2048}
BOOT_MB=128

log() { printf '[image] %s\n' "$*" >&2; }

declare -A NEEDED=([mmdebstrap]=mmdebstrap [syslinux]=syslinux [mcopy]=mtools
                   [mkfs.vfat]=dosfstools [qemu-img]=qemu-utils [sfdisk]=fdisk
                   [mkfs.ext4]=e2fsprogs)
missing=()
for tool in "${!NEEDED[@]}"; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || missing+=("${NEEDED[$tool]}")
done
[ -e /usr/lib/syslinux/mbr/mbr.bin ] || missing+=(syslinux-common)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
fi

WORK=$(mktemp -d /var/tmp/cdnaas-vnf-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROOTFS=$WORK/rootfs

PACKAGES=(
  linux-image-cloud-amd64 initramfs-tools systemd-sysv udev dbus
  ifupdown isc-dhcp-client iproute2 netbase ca-certificates
  cloud-init nginx-light libnginx-mod-http-cache-purge libnginx-mod-http-brotli-filter
  libnginx-mod-http-js dnsmasq-base nftables curl
  python3 wrk
)

log "debootstrapping $SUITE into $ROOTFS"
started=$(date +%s)
mmdebstrap --variant=minbase --mode=root --format=directory \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="$HERE/customize.sh \"\$1\"" \
  "$SUITE" "$ROOTFS" "$MIRROR"
log "root file system ready in $(( $(date +%s) - started )) s"

KERNEL=$(ls "$ROOTFS"/boot/vmlinuz-* | sort -V | tail -1)
INITRD=$(ls "$ROOTFS"/boot/initrd.img-* | sort -V | tail -1)

# Boot partition: FAT with syslinux (installed through mtools: nothing is mounted).
BOOT=$WORK/boot.img
mkfs.vfat -C -n CDNAASBOOT "$BOOT" $((BOOT_MB * 1024)) >/dev/null
cat > "$WORK/syslinux.cfg" <<EOF
DEFAULT cdnaas
PROMPT 0
TIMEOUT 0
SERIAL 0 115200
LABEL cdnaas
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND root=LABEL=cdnaas-root ro console=tty0 console=ttyS0,115200n8 net.ifnames=0 quiet
EOF
mcopy -i "$BOOT" "$KERNEL" ::/vmlinuz
mcopy -i "$BOOT" "$INITRD" ::/initrd.img
mcopy -i "$BOOT" "$WORK/syslinux.cfg" ::/syslinux.cfg
syslinux --install "$BOOT"

# Root partition from the directory.
ROOT_MB=$((DISK_MB - BOOT_MB - 1))
ROOT=$WORK/root.img
mkfs.ext4 -q -L cdnaas-root -d "$ROOTFS" -E root_owner=0:0 "$ROOT" "${ROOT_MB}M"

# One MBR disk: syslinux's MBR, boot (active) at 1 MiB, root after it.
DISK=$WORK/disk.raw
truncate -s "${DISK_MB}M" "$DISK"
printf 'label: dos\nstart=2048, size=%d, type=c, bootable\nstart=%d, type=83\n' \
  $((BOOT_MB * 2048)) $(((BOOT_MB + 1) * 2048)) | sfdisk -q "$DISK"
dd if=/usr/lib/syslinux/mbr/mbr.bin of="$DISK" conv=notrunc bs=440 count=1 status=none
dd if="$BOOT" of="$DISK" conv=notrunc bs=1M seek=1 status=none
dd if="$ROOT" of="$DISK" conv=notrunc bs=1M seek=$((BOOT_MB + 1)) status=none

mkdir -p "$(dirname "$OUT")"
qemu-img convert -c -f raw -O qcow2 "$DISK" "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
(cd "$HERE" && sha256sum build.sh customize.sh) > "$OUT.inputs"
log "built $OUT ($(du -h "$OUT" | cut -f1)) in $(( $(date +%s) - started )) s"
