"""ImageFolder's cost (issue 34), on a quiet machine (nothing else running):

    .venv/bin/pip install pillow torchvision==0.29.2 --no-deps      # once (torchvision's side)
    .venv/bin/python bench/image_folder.py --build build [--data /tmp/cohort_image_bench] [--repeats 3]

1. Training from a folder: cohort_image_folder train, model A and ResNet-20, batch 128, 2 threads,
   on the first 12,800 (A) or 6,400 (ResNet-20) Fashion-MNIST PNGs (bench/make_image_folders.py), read through
   ImageFolder with 1 and 2 decode workers (and with ImageFolderOptions::cache, 1 worker) against
   the same pixels in memory. The processes
   alternate (folder-1, folder-2, memory, then again); each reports its median epoch's step time.
   Target: folder within 5% of memory.
2. Decoding: RandomResizedCrop(224) + flip + Normalize of 512 colour JPEGs (256-400 px), cohort
   (ImageFolder.load_samples, 1 and 2 worker threads) against torchvision's DataLoader over
   datasets.ImageFolder (PIL; num_workers 0 = the main process, and 2), batch 64, alternating;
   images/s per decoding core.
Appends JSON lines to bench/image_folder.jsonl and prints the medians with peak memory.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

TORCH_DECODE = r"""
import json, resource, sys, time
import torch
from torch.utils.data import DataLoader, Subset
from torchvision import datasets, transforms as T
root, workers, images, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = Subset(datasets.ImageFolder(root, tf), range(images))
loader = DataLoader(ds, batch_size=64, num_workers=workers, persistent_workers=workers > 0)
rates = []
for r in range(repeats + 1):
    t0 = time.perf_counter()
    n = sum(len(y) for _, y in loader)
    if r:
        rates.append(n / (time.perf_counter() - t0))
rates.sort()
rate = rates[len(rates) // 2]
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"bench": "image_folder_decode", "side": "torchvision", "workers": workers, "images": images,
                  "images_per_s": round(rate, 1), "images_per_s_per_core": round(rate / max(workers, 1), 1),
                  "peak_rss_mib": round(rss / 1024, 1)}))
"""


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()
    return json.loads(out[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--data", default="/tmp/cohort_image_bench")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "cohort_image_folder")
    if not os.path.exists(os.path.join(a.data, "jpeg224")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_image_folders.py"), "--out", a.data], check=True)
    machine = platform.processor() or platform.machine()
    try:
        machine = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    results = []
    if not a.skip_train:
        png = os.path.join(a.data, "fmnist_png", "train")
        for model in ("A", "resnet20"):
            for _ in range(a.repeats):
                for source, workers in (("folder", 1), ("folder", 2), ("folder-cached", 1), ("memory", 2)):
                    samples = "12800" if model == "A" else "6400"  # 100 / 50 steps per timed epoch
                    cache = ["--cache"] if source.endswith("-cached") else []
                    r = run([exe, "train", "--root", png, "--model", model, "--source", source.split("-")[0],
                             "--workers", str(workers), "--samples", samples] + cache)
                    print(json.dumps(r), flush=True)
                    results.append(r)
    jpeg = os.path.join(a.data, "jpeg224")
    for _ in range(0 if a.skip_decode else a.repeats):
        for workers in (1, 2):
            r = run([exe, "decode", "--root", jpeg, "--workers", str(workers)])
            print(json.dumps(r), flush=True)
            results.append(r)
        for workers in (0, 2):
            r = run([sys.executable, "-c", TORCH_DECODE, jpeg, str(workers), "512", "2"])
            print(json.dumps(r), flush=True)
            results.append(r)
    stamp = time.strftime("%Y-%m-%d %H:%M")
    with open(os.path.join(HERE, "image_folder.jsonl"), "a") as f:
        for r in results:
            f.write(json.dumps({**r, "machine": machine, "when": stamp}) + "\n")

    print(f"\n{machine}; medians of {a.repeats} alternating processes")
    groups = {}
    for r in results:
        key = (r["bench"], r.get("model"), r.get("source", r.get("side")), r["workers"])
        groups.setdefault(key, []).append(r)
    for (bench, model, source, workers), rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
        rss = max(r["peak_rss_mib"] for r in rs)
        if bench == "image_folder_train":
            ms = statistics.median(r["step_ms"] for r in rs)
            mem = statistics.median(x["step_ms"] for (b, m, s, w), xs in groups.items()
                                    if b == bench and m == model and s == "memory" for x in xs)
            print(f"train {model:9s} {source:6s} workers {workers}: {ms:8.2f} ms/step ({100 * (ms / mem - 1):+5.1f}% "
                  f"vs memory), peak {rss:.0f} MiB")
        else:
            rate = statistics.median(r["images_per_s_per_core"] for r in rs)
            print(f"decode {source:11s} workers {workers}: {rate:7.1f} images/s per core "
                  f"({statistics.median(r['images_per_s'] for r in rs):7.1f} images/s), peak {rss:.0f} MiB")


if __name__ == "__main__":
    main()
