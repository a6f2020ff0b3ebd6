#!/usr/bin/env python3
"""mpi.netns.*: ProcessGroupDDP<Mpi> on emulated nodes. Each node is a Linux network namespace
with two links to the host, both veth pairs on a bridge: a management network that OpenMPI's
launcher and I/O forwarding use (10.88.0.0/24), and a data network for MPI's TCP transport
(10.89.0.0/24, throttled with tc's token bucket: --rate). mpirun starts the ranks as a cluster
does: a hostfile with one line per node, --map-by ppr:K:node, and a launch agent (the part ssh
plays) that enters the node's namespace and gives it its own host name.

    netns_cluster.py --mpiexec mpirun --exe build/tests/ddp_check --work DIR --case placement|equivalence|linkcut
        [--nodes 2] [--per-node 2] [--rate 1gbit]

Cases:
  placement    every rank's node and local rank: rank = node * K + local_rank, the ranks of a node
               on one host, K per node
  equivalence  deterministic model C over the nodes, TCP only between them: bitwise the weights of
               one process on the global batch
  linkcut      the last node's data link goes down mid-training: every rank (both sides of the cut)
               must fail with cohort's own message naming a rank it no longer hears, within the
               3 s deadline plus slack, and mpirun must end
  steptime     a measurement, not a test: train_mnist (--train-mnist) over the nodes with float,
               bf16 and fp16 gradient buckets, --reps times each alternating, at each --rates
               link rate; prints samples/s and the median step time (bench/RESULTS.md)

Needs root (ip netns) and iproute2; exits 77 (skipped) without them. Everything it creates is
named cohort-*, removed at the end, and removed first if an earlier run was killed.
Latency is not emulated: this kernel has no netem qdisc (tc's token bucket only shapes rate).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

PREFIX = "cohort-"
MGMT, DATA = "10.88.0", "10.89.0"


def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def namespaces():
    r = sh("ip", "netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.startswith(PREFIX)]


def cleanup():
    for ns in namespaces():
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            sh("kill", "-9", pid, check=False)
        sh("ip", "netns", "del", ns, check=False)
    # A namespace outlives `ip netns del` while a killed process still holds it, and with it the
    # host ends of its links: delete those by name.
    links = re.findall(r"^\d+: (c[md]\d+)@", sh("ip", "-o", "link", "show", check=False).stdout, re.M)
    for link in links + ["cohort-mgmt", "cohort-data"]:
        sh("ip", "link", "del", link, check=False)


def node_ip(net, i):
    return f"{net}.{10 + i}"


def shape_data_link(ns, rate, burst="256kb"):
    """Limits node `ns`'s data link to `rate` (tc's token bucket with `burst` and a 50 ms queue,
    replacing any earlier one)."""
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "data0", "root", check=False)
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "data0", "root", "tbf", "rate", rate, "burst", burst,
       "latency", "50ms")


def partial_epoch_samples_per_s(out):
    """samples/s of train_mnist's partial-epoch line ("epoch 0 (partial): 1.23 s, 4860 samples/s"),
    or None."""
    m = re.search(r"epoch 0 \(partial\): ([0-9.]+) s, ([0-9.]+) samples/s", out)
    return float(m[2]) if m else None


def setup(nodes, rate):
    cleanup()
    for bridge, net in (("cohort-mgmt", MGMT), ("cohort-data", DATA)):
        sh("ip", "link", "add", bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{net}.1/24", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
    for i in range(nodes):
        ns = f"{PREFIX}n{i}"
        sh("ip", "netns", "add", ns)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        for bridge, net, host_end, dev in (("cohort-mgmt", MGMT, f"cm{i}", "mgmt0"), ("cohort-data", DATA, f"cd{i}", "data0")):
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", dev, "netns", ns)
            sh("ip", "link", "set", host_end, "master", bridge)
            sh("ip", "link", "set", host_end, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{node_ip(net, i)}/24", "dev", dev)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
        if rate:
            shape_data_link(ns, rate)


def write_launcher(work, nodes):
    """The launch agent (OpenMPI's plm_rsh_agent, ssh's part): `agent HOST COMMAND...` runs the
    command in HOST's namespace with HOST as its host name, as ssh would run it there."""
    agent = os.path.join(work, "enter_node.sh")
    cases = "\n".join(f"  {node_ip(MGMT, i)}) node=n{i} ;;" for i in range(nodes))
    with open(agent, "w") as f:
        f.write(f"""#!/bin/sh
# OpenMPI's launch agent for the emulated nodes (tests/mpi/netns_cluster.py): plays ssh.
host=$1; shift
case "$host" in
{cases}
  *) echo "enter_node.sh: no emulated node $host" >&2; exit 1 ;;
esac
# The command is one shell line, as ssh hands it to the remote shell: mpirun started by its full
# path prefixes "PATH=...; export PATH; ..." to it, so it is evaluated, not exec'ed.
exec ip netns exec {PREFIX}$node unshare --uts sh -c "hostname $node && $*"
""")
    os.chmod(agent, 0o755)
    hostfile = os.path.join(work, "hostfile")
    with open(hostfile, "w") as f:
        f.write("".join(f"{node_ip(MGMT, i)} slots={args.per_node}\n" for i in range(nodes)))
    return agent, hostfile


def mpirun_command(agent, hostfile, program_args, extra=()):
    """mpirun over the emulated nodes, as a cluster's hostfile launch does."""
    return [args.mpiexec, "--allow-run-as-root", "--hostfile", hostfile, "--map-by", f"ppr:{args.per_node}:node",
           "-np", str(args.nodes * args.per_node), "--mca", "plm_rsh_agent", agent,
           "--mca", "plm_rsh_no_tree_spawn", "1",
           "--mca", "oob_tcp_if_include", f"{MGMT}.0/24",
           # Between nodes only TCP on the data network; within a node shared memory, as on a cluster.
           "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", f"{DATA}.0/24",
           "--bind-to", "none", *extra, args.exe, *program_args]


def mpirun(agent, hostfile, program_args, timeout, extra=()):
    cmd = mpirun_command(agent, hostfile, program_args, extra)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() + (e.stderr or b"").decode() if isinstance(e.stdout, bytes) else \
            (e.stdout or "") + (e.stderr or "")
        rc = "timeout"
    print(f"$ {' '.join(cmd)}\n-> exit {rc} after {time.monotonic() - t0:.1f} s\n{out}")
    return rc, out


def link_bytes(dev):
    """Bytes received plus sent by a host-side link end."""
    total = 0
    for what in ("rx_bytes", "tx_bytes"):
        with open(f"/sys/class/net/{dev}/statistics/{what}") as f:
            total += int(f.read())
    return total


def fail(message):
    print(f"netns_cluster: FAILED: {message}")
    sys.exit(1)


def case_placement(agent, hostfile):
    rc, out = mpirun(agent, hostfile, ["placement"], 60)
    if rc != 0:
        fail(f"placement run failed (exit {rc})")
    seen = {}
    for m in re.finditer(r"placement: rank (\d+) of (\d+) host (\S+) local_rank (\d+) local_size (\d+)", out):
        rank, size, host, local, local_size = int(m[1]), int(m[2]), m[3], int(m[4]), int(m[5])
        seen[rank] = (host, local, local_size)
        node = int(host[1:]) if re.fullmatch(r"n\d+", host) else -1
        if node < 0:
            fail(f"rank {rank} ran on host {host}, not on an emulated node")
        if rank != node * args.per_node + local or local_size != args.per_node:
            fail(f"rank {rank} is local rank {local} of {local_size} on node {node}: expected rank = node * "
                 f"{args.per_node} + local_rank with {args.per_node} per node")
    if sorted(seen) != list(range(args.nodes * args.per_node)):
        fail(f"expected ranks 0..{args.nodes * args.per_node - 1}, saw {sorted(seen)}")
    print(f"placement: {len(seen)} ranks, rank = node * {args.per_node} + local_rank on every one")


def case_equivalence(agent, hostfile):
    single = os.path.join(args.work, "single.bin")
    r = subprocess.run([args.exe, "equivalence", "--deterministic", "--out", single], capture_output=True, text=True,
                       timeout=120)
    print(f"one process: exit {r.returncode}\n{r.stdout}{r.stderr}")
    if r.returncode != 0:
        fail("the one-process reference failed")
    multi = os.path.join(args.work, "nodes.bin")
    before = [link_bytes(f"cd{i}") for i in range(args.nodes)]
    rc, out = mpirun(agent, hostfile, ["equivalence", "--deterministic", "--out", multi], 120)
    if rc != 0:
        fail(f"the run over {args.nodes} nodes failed (exit {rc})")
    # The gradients crossed the emulated data network: model C's 402,442 values per all-reduce,
    # 8 steps, so megabytes through every node's link.
    moved = [link_bytes(f"cd{i}") - b for i, b in enumerate(before)]
    print(f"bytes through each node's data link: {moved}")
    if min(moved) < 4_000_000:
        fail(f"a node's data link carried {min(moved)} bytes: the ranks did not talk over it")
    with open(single, "rb") as a, open(multi, "rb") as b:
        if a.read() != b.read():
            fail(f"{args.nodes} nodes x {args.per_node} ranks and one process on the global batch differ")
    print(f"equivalence: {args.nodes} nodes x {args.per_node} ranks over TCP == one process, bitwise")


def case_linkcut(agent, hostfile):
    stamp = os.path.join(args.work, "stamp")
    if os.path.exists(stamp):
        os.remove(stamp)
    cut = args.nodes - 1
    # Each rank's output into its own file: the cut node's cannot reach mpirun over the network.
    cmd = mpirun_command(agent, hostfile, ["linkcut", "--stamp", stamp],
                         ("--output-filename", os.path.join(args.work, "ranks")))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(stamp):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            fail(f"training never reached its third epoch:\n{proc.communicate()[0]}")
        time.sleep(0.05)
    sh("ip", "link", "set", f"cd{cut}", "down")  # node `cut`'s data link, host side: nothing passes
    cut_at = time.monotonic()
    with open(stamp, "w") as f:  # report_fault prints "detected N ms after" this moment
        f.write(f"{int(time.time() * 1000)}\n")
    try:
        out = proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
        fail(f"mpirun did not end within 30 s of the cut:\n{out}")
    took = time.monotonic() - cut_at
    print(f"mpirun ended {took:.1f} s after the cut (exit {proc.returncode})\n{out}")
    world = args.nodes * args.per_node
    cut_ranks = set(range(cut * args.per_node, world))
    texts = {}
    for rank in range(world):
        path = os.path.join(args.work, "ranks", "1", f"rank.{rank}", "stderr")
        texts[rank] = open(path).read() if os.path.exists(path) else ""
        print(f"--- rank {rank} (node {rank // args.per_node}) stderr:\n{texts[rank]}")
    for rank in range(world):
        other = (set(range(world)) - cut_ranks) if rank in cut_ranks else cut_ranks
        pattern = (rf"rank {rank} of {world} \([^)]*\), step \d+: [^\n]*(did not complete within 3 s|was abandoned: rank "
                   rf"\d+ gave up at step \d+ \(see its message\)); rank (\d+) (silent for [0-9.]+ s|unreachable)")
        m = re.search(pattern, texts[rank])
        if not m:
            fail(f"rank {rank} did not fail with cohort's message naming a silent rank (\"{pattern}\")")
        if int(m[2]) not in other:
            fail(f"rank {rank} named rank {m[2]}, which is on its own side of the cut")
        d = re.search(r"detected (\d+) ms after", texts[rank])
        if not d or int(d[1]) > 3000 + 3000:
            fail(f"rank {rank} caught the cut {d[1] if d else '?'} ms after it (deadline 3 s)")
        print(f"rank {rank}: named rank {m[2]} across the cut, {d[1]} ms after it")
    if "training went on" in out + "".join(texts.values()):
        fail("a rank trained on after the cut")
    print(f"linkcut: all {world} ranks failed with cohort's message within the deadline")


def case_steptime(agent, hostfile):
    rows = []
    for rate in args.rates.split(","):
        for i in range(args.nodes):
            shape_data_link(f"{PREFIX}n{i}", rate)
        results = {c: [] for c in ("none", "bf16", "fp16")}
        for _ in range(args.reps):
            for c in results:
                rc, out = mpirun(agent, hostfile, ["--model", args.model, "--parallel", "ddp", "--epochs", "1",
                                                   "--max-steps", str(args.steps), "--threads", "1", "--compress", c,
                                                   "--log-interval", "0"], 600)
                if rc != 0:
                    fail(f"train_mnist --compress {c} failed at {rate}")
                results[c].append(partial_epoch_samples_per_s(out))
        for c, v in results.items():
            v.sort()
            med = v[len(v) // 2]
            global_batch = 128 * args.nodes * args.per_node if args.model != "B" else 100 * args.nodes * args.per_node
            rows.append((rate, c, med, 1000 * global_batch / med, v))
    print(f"\n{args.nodes} nodes x {args.per_node} rank(s), model {args.model}, {args.steps} steps, 1 thread per rank")
    print("| link | gradients | samples/s (median) | step ms | runs |")
    print("|---|---|---|---|---|")
    for rate, c, med, ms, v in rows:
        print(f"| {rate} | {c} | {med:.0f} | {ms:.1f} | {', '.join(f'{x:.0f}' for x in v)} |")


def main():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        print("COHORT_SKIP: needs root, ip (iproute2) and unshare to create network namespaces")
        return 77
    probe = sh("ip", "netns", "add", f"{PREFIX}probe", check=False)
    if probe.returncode != 0:
        print(f"COHORT_SKIP: cannot create network namespaces here: {probe.stderr.strip()}")
        return 77
    sh("ip", "netns", "del", f"{PREFIX}probe", check=False)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    try:
        setup(args.nodes, args.rate)
        agent, hostfile = write_launcher(args.work, args.nodes)
        cases = {"placement": case_placement, "equivalence": case_equivalence, "linkcut": case_linkcut,
                 "steptime": case_steptime}
        cases[args.case](agent, hostfile)
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mpiexec", default="mpirun")
    p.add_argument("--exe", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--case", required=True, choices=["placement", "equivalence", "linkcut", "steptime"])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--per-node", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="tc tbf rate of each node's data link ('' for none)")
    p.add_argument("--rates", default="1gbit,100mbit", help="steptime: the link rates to measure at")
    p.add_argument("--model", default="A", help="steptime: train_mnist's --model")
    p.add_argument("--steps", type=int, default=60, help="steptime: steps per run")
    p.add_argument("--reps", type=int, default=3, help="steptime: runs per configuration")
    args = p.parse_args()
    sys.exit(main())
