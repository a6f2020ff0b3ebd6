"""Writes tests/reference/fixtures/lr_schedules.txt: the learning rates torch.optim.lr_scheduler
gives for the schedules cohort::LrSchedule replicates (tests/optim/lr_schedule.cpp reads it).

    .venv/bin/python3 tests/reference/make_lr_schedules.py

One line per case: `spec|base_lr|lr_0 lr_1 ... lr_T`, lr_t being param_groups[0]["lr"] after
constructing the scheduler and calling step() t times; repr() floats, which read back exactly.
OneCycleLR cases that cycle the momentum add `|m_0 ... m_T`, param_groups[0]["momentum"].
"""
import os
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def build(spec, opt):
    kind, *pairs = spec.split(",")
    kv = dict(p.split("=") for p in pairs)
    S = torch.optim.lr_scheduler
    if kind == "step":
        return S.StepLR(opt, step_size=int(kv.get("step_size", 1)), gamma=float(kv.get("gamma", 0.1)))
    if kind == "multistep":
        return S.MultiStepLR(opt, milestones=[int(m) for m in kv["milestones"].split("/")],
                             gamma=float(kv.get("gamma", 0.1)))
    if kind == "constant":
        return S.ConstantLR(opt, factor=float(kv.get("factor", 1 / 3)), total_iters=int(kv.get("total_iters", 5)))
    if kind == "cosine":  # (with warmup: fresh() builds the SequentialLR)
        return S.CosineAnnealingLR(opt, T_max=int(kv["t_max"]), eta_min=float(kv.get("eta_min", 0.0)))
    if kind == "onecycle":
        return S.OneCycleLR(opt, max_lr=float(kv["max_lr"]), total_steps=int(kv["total_steps"]),
                            pct_start=float(kv.get("pct_start", 0.3)), anneal_strategy=kv.get("anneal", "cos"),
                            div_factor=float(kv.get("div_factor", 25.0)),
                            final_div_factor=float(kv.get("final_div_factor", 1e4)),
                            three_phase=bool(int(kv.get("three_phase", 0))),
                            cycle_momentum=bool(int(kv.get("cycle_momentum", 1))),
                            base_momentum=float(kv.get("base_momentum", 0.85)),
                            max_momentum=float(kv.get("max_momentum", 0.95)))
    raise ValueError(spec)


def fresh(base, spec):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=base, momentum=0.9)  # momentum: what OneCycleLR cycles
    if spec.startswith("cosine") and "warmup=" in spec and "warmup=0" not in spec:
        # SequentialLR's documented use: LinearLR and CosineAnnealingLR built on the optimiser first.
        kind, *pairs = spec.split(",")
        kv = dict(q.split("=") for q in pairs)
        S = torch.optim.lr_scheduler
        warmup, t_max = int(kv["warmup"]), int(kv["t_max"])
        lin = S.LinearLR(opt, start_factor=float(kv.get("start_factor", 1 / 3)), end_factor=1.0, total_iters=warmup)
        cos = S.CosineAnnealingLR(opt, T_max=t_max, eta_min=float(kv.get("eta_min", 0.0)))
        return opt, S.SequentialLR(opt, schedulers=[lin, cos], milestones=[warmup])
    return opt, build(spec, opt)


CASES = [
    ("step,step_size=1,gamma=0.7", 1.0, 30),  # pytorch/examples' mnist recipe (Adadelta lr 1.0)
    ("step,step_size=3,gamma=0.1", 0.05, 20),
    ("multistep,milestones=5/9/9/14,gamma=0.3", 0.1, 20),  # a repeated milestone counts twice
    ("constant,factor=0.5,total_iters=4", 0.01, 10),
    ("constant,factor=1,total_iters=5", 0.02, 8),
    ("cosine,t_max=10", 0.1, 25),  # past t_max: torch's cosine comes back up
    ("cosine,t_max=7,eta_min=0.001", 0.05, 20),
    ("cosine,warmup=5,start_factor=0.1,t_max=95", 0.1, 100),  # the ResNet recipe's shape
    ("cosine,warmup=3,start_factor=0.25,t_max=6,eta_min=0.0005", 0.2, 15),
    ("onecycle,max_lr=0.1,total_steps=100", 0.0, 100),
    ("onecycle,max_lr=0.3,total_steps=50,pct_start=0.25,anneal=linear,div_factor=10,final_div_factor=100", 0.0, 50),
    ("onecycle,max_lr=0.05,total_steps=40,three_phase=1", 0.0, 40),
    ("onecycle,max_lr=0.1,total_steps=30,anneal=linear,base_momentum=0.8,max_momentum=0.9", 0.0, 30),
    ("onecycle,max_lr=0.1,total_steps=20,cycle_momentum=0", 0.0, 20),
]


def main():
    warnings.simplefilter("ignore")  # SequentialLR's step(0) deprecation warning
    lines = []
    for spec, base, steps in CASES:
        opt, sched = fresh(base, spec)
        values = [opt.param_groups[0]["lr"]]
        momenta = [opt.param_groups[0]["momentum"]]
        for _ in range(steps):
            opt.step()
            sched.step()
            values.append(opt.param_groups[0]["lr"])
            momenta.append(opt.param_groups[0]["momentum"])
        line = f"{spec}|{base!r}|" + " ".join(repr(float(v)) for v in values)
        if spec.startswith("onecycle") and "cycle_momentum=0" not in spec:
            line += "|" + " ".join(repr(float(m)) for m in momenta)
        lines.append(line)
    out = os.path.join(HERE, "fixtures", "lr_schedules.txt")
    with open(out, "w") as f:
        f.write(f"# torch {torch.__version__}: tests/reference/make_lr_schedules.py\n")
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(lines)} cases)")


if __name__ == "__main__":
    main()
