"""Two torchrun "nodes" on one machine: each node is its own
``torchrun --nnodes 2 --nproc_per_node 1`` process, they meet through a rendezvous on 127.0.0.1 (loopback
only), train a few iterations of a tiny config, and must end with identical parameters and one TensorBoard
run. docs/distributed.md ("Several machines") is the recipe this test follows."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.checkpoint import read_checkpoint


def _load_helpers():
    """tests/faults/run_fault_helpers.py, imported by path (the configs import it by path too)."""
    path = Path(__file__).resolve().parent / "run_fault_helpers.py"
    if "run_fault_helpers" not in sys.modules:
        spec = importlib.util.spec_from_file_location("run_fault_helpers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["run_fault_helpers"] = module
        spec.loader.exec_module(module)
    return sys.modules["run_fault_helpers"]


helpers = _load_helpers()
DUMP_ENV = "RLEARN_TEST_DUMP_DIR"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node_command(node_rank: int, rendezvous: str, port: int, config: Path, work: Path) -> list:
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node_rank),
               "--nproc_per_node", "1", "--max_restarts", "0"]
    if rendezvous == "c10d":
        command += ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "rlearn-test"]
    else:  # static: node_rank decides the ranks, node 0 hosts the store at master_addr:master_port
        command += ["--master_addr", "127.0.0.1", "--master_port", str(port)]
    return command + ["-m", "rlearn", "train", str(config), "--work-dir", str(work)]


@pytest.mark.slow  # about 20 s on an idle 2-core machine, 38 s loaded
@pytest.mark.parametrize("rendezvous", ["c10d", "static"])
def test_two_nodes_train_identical_parameters_into_one_tensorboard_run(tmp_path, rendezvous):
    work, dumps = tmp_path / "run", tmp_path / "dumps"
    dumps.mkdir()
    # 2 ranks x 2 envs x 4 steps = 16 global env steps per iteration: 10 iterations
    config = helpers.probe_config(tmp_path, max_env_steps=160)
    port = _free_port()
    env = helpers.child_env(**{DUMP_ENV: str(dumps)})
    start = time.monotonic()
    nodes = [subprocess.Popen(_node_command(n, rendezvous, port, config, work), cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in (0, 1)]
    try:
        outputs = [node.communicate(timeout=240)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.communicate()
    elapsed = time.monotonic() - start
    for n, (node, output) in enumerate(zip(nodes, outputs)):
        assert node.returncode == 0, f"node {n}:\n{output[-4000:]}"

    states = [torch.load(dumps / f"rank{r}.pt") for r in range(2)]
    assert [s["iterations"] for s in states] == [10, 10]
    for name in ("net", "net_target"):
        for key, value in states[0]["modules"][name].items():
            assert torch.equal(value, states[1]["modules"][name][key]), f"{name}.{key} differs between the nodes"
    checkpoint = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (checkpoint["train_iter"], checkpoint["envstep"]) == (10, 160)
    assert "parameters identical on all 2 ranks (net, net_target)" in (work / "probe.log").read_text()
    assert "exp probe: ProbePolicy" in (work / "probe_rank1.log").read_text()

    events = [p for p in work.rglob("*") if "tfevents" in p.name]
    assert len(events) == 1 and events[0].parent == work / "tb"
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("learner_iter/rank_value_avg")] == [(5, 0.5), (10, 0.5)]
    assert [e.step for e in acc.Scalars("learner_step/loss_avg")] == [80, 160]
    print(f"two {rendezvous} nodes: {elapsed:.1f} s")
