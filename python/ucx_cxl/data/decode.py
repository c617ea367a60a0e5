"""Turning a sample's bytes into what a training loop wants, per format.

Decoders never keep per-sample state: a ``.npy`` row's dtype and shape come
from its file's info string ("descr=<f4 shape=3,32,32"), parsed once per
distinct string.
"""

from __future__ import annotations

import functools
import io
import tarfile
from typing import Dict, Tuple

import numpy as np


@functools.lru_cache(maxsize=1024)
def npy_row(info: str) -> Tuple[np.dtype, Tuple[int, ...]]:
    fields = dict(kv.split("=", 1) for kv in info.split() if "=" in kv)
    if "descr" not in fields:
        raise ValueError(f"not a .npy row description: {info!r}")
    shape = tuple(int(x) for x in fields.get("shape", "").split(",") if x)
    return np.dtype(fields["descr"]), shape


def npy(buf: np.ndarray, info: str) -> np.ndarray:
    dtype, shape = npy_row(info)
    return buf.view(dtype).reshape(shape)


def tar_members(data: bytes) -> Dict[str, bytes]:
    """A WebDataset sample (a small tar stream) as {extension: bytes}."""
    out: Dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        for m in tf:
            if not m.isfile():
                continue
            base = m.name.rsplit("/", 1)[-1]
            ext = base.split(".", 1)[1] if "." in base else ""
            f = tf.extractfile(m)
            out[ext] = f.read() if f is not None else b""
    return out
