"""Small dataset archives in the formats the trainer reads, written for a test."""

import io
import os
import pickle
import tarfile
import zipfile

import numpy as np


def write_cifar(data_dir, n_train=64, n_test=32):
  """Writes a CIFAR-100 archive of ``n_train`` and ``n_test`` random images into ``data_dir``."""
  rng = np.random.default_rng(0)
  folder = "cifar-100-python"
  with tarfile.open(os.path.join(data_dir, "cifar-100-python.tar.gz"), "w:gz") as tar:
    for split, n in (("train", n_train), ("test", n_test)):
      blob = pickle.dumps({"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                           "fine_labels": list(rng.integers(0, 100, n))})
      info = tarfile.TarInfo(f"{folder}/{split}")
      info.size = len(blob)
      tar.addfile(info, io.BytesIO(blob))


def write_tinyimagenet(data_dir, per_class=4, classes=3):
  """Writes a Tiny ImageNet archive of ``classes`` classes into ``data_dir``."""
  from PIL import Image
  rng = np.random.default_rng(1)
  wnids = [f"n{i:08d}" for i in range(classes)]
  def jpeg():
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()
  with zipfile.ZipFile(os.path.join(data_dir, "tiny-imagenet-200.zip"), "w") as zf:
    zf.writestr("tiny-imagenet-200/wnids.txt", "\n".join(wnids))
    notes = []
    for w in wnids:
      for j in range(per_class):
        zf.writestr(f"tiny-imagenet-200/train/{w}/images/{w}_{j}.JPEG", jpeg())
      zf.writestr(f"tiny-imagenet-200/val/images/val_{w}.JPEG", jpeg())
      notes.append(f"val_{w}.JPEG\t{w}\t0\t0\t63\t63")
    zf.writestr("tiny-imagenet-200/val/val_annotations.txt", "\n".join(notes))
