"""A Hugging Face hub cache laid out on disk as huggingface_hub lays it out, so that a model is
found by its name offline (HF_HUB_OFFLINE=1) without the hub ever being reached: the tests of
transformer.importers.hf.hub (tests/importers/test_hub.py) and bench/real_models.py --hub.

    <cache>/models--<org>--<name>/blobs/<sha256 of the file>
                                 /snapshots/<commit>/<file>   a relative link to its blob
                                 /refs/main                   the commit

<cache> is what huggingface_hub calls HF_HUB_CACHE (by default HF_HOME/hub)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha256_of(data_or_path: bytes | Path) -> str:
    """The hex sha256 of bytes, or of a file's bytes (read a block at a time)."""
    if isinstance(data_or_path, bytes):
        return hashlib.sha256(data_or_path).hexdigest()
    digest = hashlib.sha256()
    with open(data_or_path, "rb") as f:
        while block := f.read(16 * 2**20):
            digest.update(block)
    return digest.hexdigest()


def lay_out_cache(cache: Path, repo: str, files: dict[str, bytes | Path],
                  commit: str = COMMIT) -> Path:
    """A repository's snapshot in a hub cache as huggingface_hub writes it; its folder. files:
    {path in the repository: its bytes, or a file whose bytes it is}; a file becomes its blob by
    a hard link where the file system allows it (no copy of a model's gigabytes), else a copy."""
    root = Path(cache) / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / commit
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for name, data in files.items():
        blob = root / "blobs" / sha256_of(data)
        if isinstance(data, bytes):
            blob.write_bytes(data)
        elif not blob.exists():
            try:
                os.link(data, blob)
            except OSError:
                shutil.copyfile(data, blob)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    return snapshot
