"""umd-healthcheck as Slurm's HealthCheckProgram, against a real single-node Slurm (Debian's
slurm-wlm and munge) run here as root without systemd: munged on its own socket, slurmctld and
slurmd on their own ports with state under a temporary folder, HealthCheckInterval=5.
  - a fake GPU with a degraded link: sinfo shows the node drained with umd's reason
  - healthy fake GPUs: the node stays idle
  - a busy GPU (a long job holds it, or another process uses it): not drained
  - a GPU paused (a prolog) while the check's GPU pairs run: not drained
  - something other than umd answering (a proxy's HTML 503, a document of the wrong shape, a
    server that accepts and never answers; hostile.py): not drained, and each run ends
Skips, saying why, only when Slurm cannot be started here.

A busy GPU is made two ways: occupy() holds it with a long umd job, and fake_gpu_state makes
the (faked) NVML report another process on it."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import free_port
from hostile import HANG, Hostile, accepted_then_hanging, job, job_id
from test_jobs import submit
from test_sched_pause import pairs_final, pause_during_pairs
from test_umdctl import HEALTHCHECK, UMDCTL

# One Slurm (the module fixture) for the whole file: its tests stay on one xdist worker.
pytestmark = [pytest.mark.system, pytest.mark.xdist_group("slurm")]

NODE = socket.gethostname().split(".")[0]
BINS = ("munged", "slurmctld", "slurmd", "scontrol", "sinfo")
CHECK_TIMEOUT = "3s"  # the canonical check's wait inside the program (default 45 s)


class Slurm:
    def __init__(self, tmp):
        self.tmp = tmp
        self.conf = tmp / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs = []
        self.runs = tmp / "hc.runs"
        self.target = tmp / "hc.env"

    def start(self, what, cmd, log):
        f = open(self.tmp / log, "ab")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                             env=self.env, start_new_session=True)
        self.procs.append((what, p, f))
        return p

    def logs(self):
        out = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "hc.log"):
            p = self.tmp / name
            if p.exists():
                out.append(f"--- {name}\n" + "\n".join(p.read_text(errors="replace")
                                                         .splitlines()[-15:]))
        return "\n".join(out)

    def stop(self):
        for what, p, f in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            f.close()

    def run(self, *cmd):
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=self.env)

    def node(self):
        """(state, reason) as sinfo shows them."""
        p = self.run("sinfo", "-h", "-N", "-n", NODE, "-o", "%T|%E")
        state, _, reason = p.stdout.strip().partition("|")
        return state, reason

    def check_against(self, d, resume=True, **env):
        """Point the health-check program at umd d (or a URL), with env exported to it, and
        clear any earlier drain unless resume is False."""
        tmp = self.target.with_suffix(".tmp")
        env = {"UMD_URL": getattr(d, "base_url", d), **env}
        tmp.write_text("".join(f"{k}='{v}'\nexport {k}\n" for k, v in env.items()))
        tmp.replace(self.target)
        # a run that began against the previous target finishes before the node is resumed
        self.wait_runs(1)
        if resume:
            self.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")

    def drain(self, reason):
        p = self.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN", f"Reason={reason}")
        assert p.returncode == 0, p.stderr

    def wait_runs(self, n, timeout=30):
        """Wait until the program has run n more times (against the current target)."""
        def count():
            return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0
        want = count() + n
        deadline = time.monotonic() + timeout
        while count() < want:
            assert time.monotonic() < deadline, "health check did not run:\n" + self.logs()
            time.sleep(0.2)


def write_conf(s, ctld_port, d_port):
    tmp = s.tmp
    program = tmp / "umd-check"
    # slurmd runs the program with a bare environment: everything it needs is set here,
    # SLURM_CONF for scontrol above all.
    program.write_text(f"""#!/bin/sh
export SLURM_CONF={s.conf} UMDCTL={UMDCTL} PATH=/usr/sbin:/usr/bin:/sbin:/bin
[ -f {s.target} ] && . {s.target}
/bin/sh {HEALTHCHECK} --mode slurm --timeout {CHECK_TIMEOUT} >>{tmp}/hc.log 2>&1
echo done >>{s.runs}
""")
    program.chmod(0o755)
    for sub in ("ctld", "d"):
        (tmp / sub).mkdir(exist_ok=True)
    s.conf.write_text(f"""ClusterName=umdtest
SlurmctldHost={NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={tmp}/munge.sock
CredType=cred/munge
StateSaveLocation={tmp}/ctld
SlurmdSpoolDir={tmp}/d
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
SlurmctldLogFile={tmp}/slurmctld.log
SlurmdLogFile={tmp}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=300
HealthCheckProgram={program}
HealthCheckInterval=5
HealthCheckNodeState=ANY
NodeName={NODE} NodeAddr=127.0.0.1 CPUs=1 RealMemory=1 State=UNKNOWN
PartitionName=umd Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [b for b in BINS if not shutil.which(b)]
    if missing:
        pytest.skip(f"Slurm cannot start: {', '.join(missing)} not installed "
                    "(packaging/install-deps --test installs slurm-wlm and munge)")
    if os.geteuid() != 0:
        pytest.skip("Slurm cannot start: slurmd must run as root here")
    if not UMDCTL:
        pytest.fail("UMDCTL must point at the built umdctl")
    tmp = tmp_path_factory.mktemp("slurm")
    tmp.chmod(0o700)
    s = Slurm(tmp)
    key = tmp / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    s.start("munged", ["munged", "-F", "--force", f"--socket={tmp}/munge.sock",
                       f"--key-file={key}", f"--log-file={tmp}/munged.log",
                       f"--pid-file={tmp}/munged.pid", f"--seed-file={tmp}/munged.seed"],
            "munged.out")
    deadline = time.monotonic() + 10
    while not (tmp / "munge.sock").exists():
        if time.monotonic() > deadline:
            s.stop()
            pytest.skip("Slurm cannot start: munged did not come up\n" + s.logs())
        time.sleep(0.1)
    write_conf(s, free_port(), free_port())
    s.start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(s.conf)], "slurmctld.out")
    time.sleep(1)
    s.start("slurmd", ["slurmd", "-D", "-f", str(s.conf), "-N", NODE], "slurmd.out")
    deadline = time.monotonic() + 30
    while True:
        state, _ = s.node()
        if state.startswith("idle") or state.startswith("drain"):
            break
        if time.monotonic() > deadline or any(p.poll() is not None for _, p, _ in s.procs):
            s.stop()
            pytest.skip(f"Slurm cannot start: node state '{state}'\n" + s.logs())
        time.sleep(0.3)
    yield s
    s.stop()


def wait_state(s, prefix, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        state, reason = s.node()
        if state.startswith(prefix):
            return state, reason
        assert time.monotonic() < deadline, f"node is {state} ({reason}):\n" + s.logs()
        time.sleep(0.3)


def occupy(d, device=0):
    """Hold the GPU with a long job so the canonical check cannot run within its timeout."""
    return submit(d, {"benchmark": "copy", "device": device,
                      "params": {"fake_delay_ms": 120000}})["id"]


def test_a_gpu_used_by_another_process_does_not_drain_the_node(slurm, umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"0": {"other_processes": 1}}))
    d = umd(fake_devices=1, args=["--fake-gpu-state", str(state), "--busy-poll-ms", "100"])
    slurm.check_against(d)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state == "idle", (state, reason, slurm.logs())


def test_degraded_link_drains_the_node_with_umds_reason(slurm, umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    slurm.check_against(d)
    state, reason = wait_state(slurm, "drain")
    assert reason.startswith("umd: GPU 1 WARN: the PCIe link runs at Gen4 x8"), reason


def test_healthy_gpus_leave_the_node_idle(slurm, umd):
    d = umd(fake_devices=2)
    slurm.check_against(d)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state == "idle", (state, reason, slurm.logs())


def test_a_busy_gpu_does_not_drain_the_node(slurm, umd):
    d = umd(fake_devices=1)
    occupy(d)
    slurm.check_against(d)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state == "idle", (state, reason, slurm.logs())
    assert "UNKNOWN" in (slurm.tmp / "hc.log").read_text()


def test_a_gpu_paused_while_the_pairs_run_does_not_drain_the_node(slurm, umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"node": {"delay_ms": 2000}}))  # inside CHECK_TIMEOUT
    d = umd(fake_devices=2, args=["--fake-gpu-state", str(state)])
    slurm.check_against(d)
    job = pause_during_pairs(d)  # the program's own check, caught while its pairs run
    assert pairs_final(d, job["id"])["error"].startswith("cancelled: device paused: GPU 1 ")
    slurm.wait_runs(2)  # the run that saw the cancel, and one with GPU 1 still paused
    state, reason = slurm.node()
    assert state == "idle", (state, reason, slurm.logs())


HOSTILE = {
    "a proxy's HTML 503": lambda req: (503, "text/html", "<html><h1>503 Service Unavailable"
                                       "</h1></html>"),
    # a "job" without parts: once read as "umd owns no GPU", a failure
    "a document of the wrong shape": lambda req: (202, "application/json",
                                                  job("01a233e6-4ca0-7760-a47b-375318ca1d3a",
                                                      parts=[])),
    "a server that never answers": lambda req: HANG,
}


@pytest.mark.parametrize("what", HOSTILE)
def test_something_other_than_umd_answering_does_not_drain_the_node(slurm, what):
    with Hostile(HOSTILE[what]) as h:
        slurm.check_against(h.url)
        slurm.wait_runs(2)
        state, reason = slurm.node()
        assert state == "idle", (state, reason, slurm.logs())
        assert any(r.method == "POST" for r in h.requests), "the program never asked"


def test_a_check_accepted_then_hanging_ends_and_does_not_drain(slurm):
    with Hostile(accepted_then_hanging(job_id())) as h:
        slurm.check_against(h.url)
        slurm.wait_runs(2)
        state, reason = slurm.node()
        assert state == "idle", (state, reason, slurm.logs())
    assert "UNKNOWN: no verdict within 3 s" in (slurm.tmp / "hc.log").read_text()


# -- resuming what umd drained (--resume-own), and nothing else --

RESUME_OWN = {"UMD_HEALTHCHECK_RESUME_OWN": "1"}


def drained_by_umd(slurm, umd):
    """The node drained by umd's own check (a degraded link), as in production."""
    bad = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    slurm.check_against(bad)
    state, reason = wait_state(slurm, "drain")
    assert reason.startswith("umd: "), reason
    return bad


def test_a_node_umd_drained_is_resumed_once_every_gpu_passes(slurm, umd):
    drained_by_umd(slurm, umd)
    slurm.check_against(umd(fake_devices=2), resume=False, **RESUME_OWN)
    state, reason = wait_state(slurm, "idle")
    assert "resumed" in (slurm.tmp / "hc.log").read_text()


def test_without_resume_own_a_node_umd_drained_stays_drained(slurm, umd):
    drained_by_umd(slurm, umd)
    slurm.check_against(umd(fake_devices=2), resume=False)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state.startswith("drain") and reason.startswith("umd: "), (state, reason)


def test_a_node_an_administrator_drained_is_never_resumed(slurm, umd):
    slurm.check_against(umd(fake_devices=2), **RESUME_OWN)
    slurm.drain("admin: DIMM replacement")
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state.startswith("drain") and reason == "admin: DIMM replacement", (state, reason)
    assert "stays drained: its reason is not umd's" in (slurm.tmp / "hc.log").read_text()


def test_a_node_umd_drained_that_still_fails_stays_drained(slurm, umd):
    bad = drained_by_umd(slurm, umd)
    slurm.check_against(bad, resume=False, **RESUME_OWN)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state.startswith("drain") and reason.startswith("umd: GPU 1 WARN"), (state, reason)


def test_a_failing_gpu_keeps_an_administrators_drain_reason(slurm, umd):
    bad = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    slurm.check_against(bad, **RESUME_OWN)
    slurm.drain("admin: firmware update")
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state.startswith("drain") and reason == "admin: firmware update", (state, reason)
    # once the GPU is healthy again the node is still the administrator's to resume
    slurm.check_against(umd(fake_devices=2), resume=False, **RESUME_OWN)
    slurm.wait_runs(2)
    state, reason = slurm.node()
    assert state.startswith("drain") and reason == "admin: firmware update", (state, reason)
