"""Writes tests/reference/fixtures/images/: small PNG and JPEG files of every kind cohort's image
component decodes, what PIL and torchvision make of them, and a folder in ImageFolder's layout
with the sample list torchvision.datasets.ImageFolder gives (tests/data/image_decode.cpp,
image_transforms.cpp and image_folder.cpp read them).

    .venv/bin/pip install pillow torchvision==0.29.2 --no-deps   # once
    .venv/bin/python3 tests/reference/make_image_fixtures.py

Files:
  decode/<name>             the image (PIL writes it; 16-bit RGB and RGBA are written by hand below,
                            PIL cannot)
  decode/<name>.L, .RGB     Image.open(f).convert("L" | "RGB") as raw bytes (row-major, interleaved)
  transforms.txt            one line per case: `name|source|op|args|width height channels|file`,
                            file holding the PIL image's bytes after the op (or float32 for tensor)
  folder/                   a tree in root/<class>/... layout; folder_samples.txt: torchvision's
                            (relative path, label) list and, first, its class list
Deterministic: the same Pillow (13.0) and libjpeg-turbo (3.x, bundled) give the same bytes.
"""
import os
import shutil
import struct
import zlib

import numpy as np
from PIL import Image
import torch
from torchvision import datasets
from torchvision.transforms import functional as F
from torchvision import transforms as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "images")
rng = np.random.default_rng(34)


def smooth(h, w, c):
    """Gradients plus noise: real-image-like content that exercises every coefficient."""
    y, x = np.mgrid[0:h, 0:w]
    base = [(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 7) % 256]
    img = np.stack([base[k % 3] for k in range(c)], axis=-1).astype(np.int32)
    img += rng.integers(-30, 31, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def png_by_hand(path, arr, bit_depth, color_type):
    """A PNG PIL cannot write (16-bit colour): IHDR, one IDAT (filter 0 per row), IEND."""
    h, w = arr.shape[:2]
    raw = b"".join(b"\0" + arr[r].astype(">u2" if bit_depth == 16 else "u1").tobytes() for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def write_decode_cases():
    d = os.path.join(OUT, "decode")
    os.makedirs(d, exist_ok=True)
    names = []

    def save(name, img, **kw):
        img.save(os.path.join(d, name), **kw)
        names.append(name)

    save("gray.png", Image.fromarray(smooth(9, 13, 1)[..., 0], "L"))
    save("bilevel.png", Image.fromarray(smooth(7, 11, 1)[..., 0] > 128))  # mode "1": 1-bit gray
    g16 = (smooth(8, 10, 1)[..., 0].astype(np.uint16) * 3)  # values up to 765: PIL clips at 255
    g16[0, :4] = [0, 255, 256, 65535]
    save("gray16.png", Image.fromarray(g16))  # I;16
    save("gray_alpha.png", Image.fromarray(smooth(9, 13, 2), "LA"))
    save("rgb.png", Image.fromarray(smooth(10, 14, 3), "RGB"))
    save("rgba.png", Image.fromarray(smooth(10, 14, 4), "RGBA"))
    pal = Image.fromarray(smooth(12, 9, 3), "RGB").quantize(colors=17)
    save("palette.png", pal)
    pal_t = pal.copy()
    pal_t.info["transparency"] = 3
    save("palette_trns.png", pal_t, transparency=3)
    save("palette_2bit.png", Image.fromarray(smooth(6, 10, 3), "RGB").quantize(colors=4), bits=2)
    rgb16 = smooth(7, 9, 3).astype(np.uint16) * 257 + rng.integers(0, 200, size=(7, 9, 3)).astype(np.uint16)
    png_by_hand(os.path.join(d, "rgb16.png"), rgb16, 16, 2)
    names.append("rgb16.png")
    rgba16 = np.concatenate([rgb16, np.full((7, 9, 1), 40000, np.uint16)], axis=-1)
    png_by_hand(os.path.join(d, "rgba16.png"), rgba16, 16, 6)
    names.append("rgba16.png")
    big = Image.fromarray(smooth(23, 37, 3), "RGB")
    save("rgb420.jpg", big, quality=90)  # 4:2:0 by default
    save("rgb444.jpg", big, quality=90, subsampling=0)
    save("rgb422.jpg", big, quality=85, subsampling=1)
    save("progressive.jpeg", big, quality=80, progressive=True)
    save("gray.jpg", Image.fromarray(smooth(17, 21, 1)[..., 0], "L"), quality=90)
    # Refused by cohort (FormatError), so no expected pixels.
    Image.fromarray(smooth(8, 8, 3), "RGB").convert("CMYK").save(os.path.join(d, "cmyk.jpg"), quality=90)
    for name in names:
        with Image.open(os.path.join(d, name)) as im:
            for mode in ("L", "RGB"):
                with open(os.path.join(d, f"{name}.{mode}"), "wb") as f:
                    f.write(im.convert(mode).tobytes())


def write_transform_cases():
    src_dir = os.path.join(OUT, "transforms")
    os.makedirs(src_dir, exist_ok=True)
    sources = {
        "photo.png": Image.fromarray(smooth(48, 64, 3), "RGB"),
        "tall.png": Image.fromarray(smooth(37, 23, 3), "RGB"),
        "small_gray.png": Image.fromarray(smooth(9, 7, 1)[..., 0], "L"),
        "square.png": Image.fromarray(smooth(30, 30, 3), "RGB"),
    }
    for name, img in sources.items():
        img.save(os.path.join(src_dir, name))
    lines = []
    count = 0

    def case(name, src, op, args, out):
        nonlocal count
        count += 1
        fname = f"case{count:02d}.raw"
        if isinstance(out, torch.Tensor):
            data, dims = out.numpy().astype(np.float32).tobytes(), (out.shape[2], out.shape[1], out.shape[0])
        else:
            data, dims = out.tobytes(), (out.size[0], out.size[1], len(out.getbands()))
        with open(os.path.join(src_dir, fname), "wb") as f:
            f.write(data)
        lines.append(f"{name}|{src}|{op}|{' '.join(map(str, args))}|{dims[0]} {dims[1]} {dims[2]}|{fname}")

    for src, img in sources.items():
        for size in (5, 16, 20, 30, 100):
            case(f"resize_shorter_{size}", src, "resize_shorter", [size], T.Resize(size)(img))
        for w, h in ((50, 70), (13, 13), (64, 3), (1, 1), (128, 96)):
            case(f"resize_{w}x{h}", src, "resize", [w, h], img.resize((w, h), Image.BILINEAR))
        for h, w in ((16, 16), (8, 12), (7, 9), (40, 70)):  # the last pads (larger than the image)
            case(f"center_crop_{h}x{w}", src, "center_crop", [h, w], F.center_crop(img, [h, w]))
        case("hflip", src, "hflip", [], F.hflip(img))
    # Both sides of Pillow's pass order (vertical first iff the height shrinks by more than twice
    # as many pixels as the width): 30x30 -> 20x9 vertical first, 20x10 horizontal first, ...
    for w, h in ((20, 9), (20, 10), (29, 27), (29, 28), (17, 3), (17, 4), (40, 20), (10, 3)):
        case(f"order_{w}x{h}", "square.png", "resize", [w, h], sources["square.png"].resize((w, h), Image.BILINEAR))
    W, H = sources["photo.png"].size
    for top, left, h, w in ((3, 5, 17, 11), (0, 0, H, W), (10, 20, 30, 40), (47, 63, 1, 1)):
        out = F.resized_crop(sources["photo.png"], top, left, h, w, [16, 16], T.InterpolationMode.BILINEAR)
        case(f"resized_crop_{top}_{left}_{h}_{w}", "photo.png", "resized_crop", [top, left, h, w, 16, 16], out)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    pipe = T.Compose([T.Resize(20), T.CenterCrop(16), T.ToTensor(), T.Normalize(mean, std)])
    case("eval_pipeline", "photo.png", "eval_pipeline", [20, 16] + mean + std, pipe(sources["photo.png"]))
    with open(os.path.join(OUT, "transforms.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_folder_case():
    root = os.path.join(OUT, "folder")
    shutil.rmtree(root, ignore_errors=True)
    # Names that sort differently under byte order, case folding or natural sort.
    layout = {
        "B": ["x.png", "sub/b.png", "sub-x/a.png", "sub/a/z.jpg"],
        "a": ["10.png", "9.png", "A.PNG", "_u.JPEG"],
        "a b": ["only.jpg"],
        "Ä": ["x.png"],
    }
    for cls, files in layout.items():
        for rel in files:
            p = os.path.join(root, cls, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            img = Image.fromarray(smooth(6, 5, 3), "RGB")
            fmt = "JPEG" if rel.lower().endswith((".jpg", ".jpeg")) else "PNG"
            img.save(p, format=fmt)
    with open(os.path.join(root, "a", "notes.txt"), "w") as f:
        f.write("not an image: ImageFolder ignores it\n")
    ds = datasets.ImageFolder(root)
    with open(os.path.join(OUT, "folder_samples.txt"), "w", encoding="utf-8") as f:
        f.write("classes|" + "|".join(ds.classes) + "\n")
        for path, label in ds.samples:
            f.write(f"{os.path.relpath(path, root)}|{label}\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write_decode_cases()
    write_transform_cases()
    write_folder_case()
    print("wrote", OUT)
