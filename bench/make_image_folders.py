"""Makes the image folders bench/image_folder.py measures, from Fashion-MNIST (Debian's
dataset-fashion-mnist) with PIL:

    .venv/bin/python bench/make_image_folders.py --out /tmp/cohort_image_bench [--jpegs 1024]

  <out>/fmnist_png/{train,test}/<k>_<name>/<index>.png   the 70,000 images as 28x28 gray PNGs
                                                          (class directories sort in label order)
  <out>/jpeg224/<k>_<name>/<i>.jpg                        --jpegs colour JPEGs (quality 90, 4:2:0)
                                                          of 256-400 x 256-400 pixels: Fashion-MNIST
                                                          images enlarged, tinted and noised, for
                                                          RandomResizedCrop(224)
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image

NAMES = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]
DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(split, what):
    stem = f"{split}-{what}-idx{3 if what == 'images' else 1}-ubyte"
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(DATA, name)):
            return os.path.join(DATA, name)
    raise SystemExit(f"no {stem}[.gz] in {DATA} (apt-get install dataset-fashion-mnist)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--jpegs", type=int, default=1024)
    a = ap.parse_args()
    for split, tag in (("train", "train"), ("test", "t10k")):
        x, y = read_idx(find(tag, "images")), read_idx(find(tag, "labels"))
        root = os.path.join(a.out, "fmnist_png", split)
        for k, name in enumerate(NAMES):
            os.makedirs(os.path.join(root, f"{k}_{name}"), exist_ok=True)
        for i in range(len(y)):
            Image.fromarray(x[i], "L").save(os.path.join(root, f"{y[i]}_{NAMES[y[i]]}", f"{i:05d}.png"))
    x, y = read_idx(find("train", "images")), read_idx(find("train", "labels"))
    rng = np.random.default_rng(34)
    root = os.path.join(a.out, "jpeg224")
    for i in range(a.jpegs):
        w, h = (int(v) for v in rng.integers(256, 401, size=2))
        img = np.asarray(Image.fromarray(x[i], "L").resize((w, h), Image.BILINEAR), np.float32)
        tint = rng.uniform(0.4, 1.0, size=3)
        rgb = img[..., None] * tint + rng.normal(0, 8, size=(h, w, 3)) + rng.uniform(0, 60, size=3)
        d = os.path.join(root, f"{y[i]}_{NAMES[y[i]]}")
        os.makedirs(d, exist_ok=True)
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB").save(os.path.join(d, f"{i:05d}.jpg"), quality=90)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
