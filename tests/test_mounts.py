"""Which filesystem a ledger is on, from a fake mounts table (nothing is mounted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yieldgate.ledger.mounts import filesystem_of, network_filesystem


def table(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "mounts"
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_the_longest_mount_point_holding_the_real_path_wins(tmp_path):
    root = str(tmp_path)
    mounts = table(
        tmp_path,
        [
            "/dev/vda / ext4 rw 0 0",
            f"server:/export {root}/shared nfs4 rw 0 0",
            f"/dev/vdb {root}/shared/local ext4 rw 0 0",
            f"/dev/vdc {root}/sharedx ext4 rw 0 0",
            f"host:/home {root}/with\\040space fuse.sshfs rw 0 0",
        ],
    )
    assert network_filesystem(f"{root}/shared/runs/l.db", mounts) == (f"{root}/shared", "nfs4")
    assert network_filesystem(f"{root}/shared/local/l.db", mounts) is None  # a local disk mounted inside it
    assert network_filesystem(f"{root}/sharedx/l.db", mounts) is None  # a prefix of the name, not of the path
    assert network_filesystem(f"{root}/with space/l.db", mounts) == (f"{root}/with space", "fuse.sshfs")
    assert filesystem_of("/etc/l.db", mounts) == ("/", "ext4")
    # A symlink on a local disk pointing into the network mount is judged by where it points.
    (tmp_path / "shared").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "shared")
    assert network_filesystem(f"{root}/link/l.db", mounts) == (f"{root}/shared", "nfs4")


@pytest.mark.parametrize("kind", ["nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "fuse", "fuse.gcsfuse"])
def test_network_and_fuse_filesystems_are_named(tmp_path, kind):
    mounts = table(tmp_path, ["/dev/vda / ext4 rw 0 0", f"remote:/x /mnt/x {kind} rw 0 0"])
    assert network_filesystem("/mnt/x/l.db", mounts) == ("/mnt/x", kind)


def test_no_mounts_table_means_no_judgement(tmp_path):
    assert network_filesystem("/mnt/x/l.db", str(tmp_path / "none")) is None
