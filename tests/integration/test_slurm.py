"""umd-healthcheck as Slurm's HealthCheckProgram, against a real single-node Slurm (Debian's
slurm-wlm and munge) run here as root without systemd: munged on its own socket, slurmctld and
slurmd on their own ports with state under a temporary folder, HealthCheckInterval=5.
  - a fake GPU with a degraded link: sinfo shows the node drained with umd's reason
  - healthy fake GPUs: the node stays idle
  - a busy GPU (a long job holds it, or another process uses it): not drained
  - a GPU paused (a prolog) while the check's GPU pairs run: not drained
  - something other than umd answering (a proxy's HTML 503, a document of the wrong shape, a
    server that accepts and never answers; hostile.py): not drained, and each run ends
  - what umd may change (issue 57): a node an administrator set DOWN or FAIL, or drained with a
    reason holding " State=IDLE" or " Reason=umd: ", is neither drained over nor resumed; a
    look at the node slower than its bound changes nothing; --resume-own resumes only when
    every GPU and the tier umd's reason names have passed (not a --devices 1 run for GPU 0,
    not a quick run for the extended tier); UMD_HEALTHCHECK_RESUME_OWN's spellings
  - the verdict's action in umd's reason (issue 58): a pending remap, an uncorrectable error, a
    recovery action, a remap failure, a link down, a replay storm (fake_gpu_state) and a
    failing Xid (xid_source=file:) each drain with theirs; one replay and an application Xid
    drain nothing; --resume-own waits for the action's condition (reset_gpu: the pass of what a
    reset clears; reboot_node: another boot id; service: never); the reason within 200
    characters, its bracket whole
Skips, saying why, only when Slurm cannot be started here.

A busy GPU is made two ways: occupy() holds it with a long umd job, and fake_gpu_state makes
the (faked) NVML report another process on it."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import free_port, wait_for
from hostile import HANG, Hostile, accepted_then_hanging, job, job_id
from test_jobs import submit
from test_coexist import GpuState
from test_sched_pause import pairs_final, pause_during_pairs
from test_umdctl import HEALTHCHECK, UMDCTL
from test_xid import Watched, fixture, on_device

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
ReturnToService=1
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
    assert reason.startswith("umd[quick gpus=1]: GPU 1 WARN: the PCIe link runs at Gen4 x8"), reason


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
    assert reason.startswith("umd[quick gpus=1]: "), reason
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
    assert state.startswith("drain") and reason.startswith("umd[quick gpus=1]: "), (state, reason)


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
    assert state.startswith("drain"), (state, reason)
    assert reason.startswith("umd[quick gpus=1]: GPU 1 WARN"), reason


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


# -- the node's state read whole, or not acted on (issue 57) --
# These run umd-healthcheck here, as slurmd would, against the real Slurm: with the program
# pointed where nothing answers (each of its runs unknown, changing nothing), only the test's
# own runs act on the node.

GPU0_WARNS = {"UMD_FAKE_LINK": "0=4x8"}  # GPU 0's link trained below its maximum: warn


def quiet(slurm):
    """Point the health-check program where nothing listens and return the node to idle."""
    slurm.check_against("http://127.0.0.1:9")


def healthcheck(slurm, d, *args, **env):
    """One run of umd-healthcheck --mode slurm against umd d, on this node."""
    e = dict(slurm.env, UMD_URL=d.base_url, UMDCTL=UMDCTL, SLURMD_NODENAME=NODE, **env)
    return subprocess.run(["/bin/sh", str(HEALTHCHECK), "--mode", "slurm", "--timeout", "20s",
                           *args], capture_output=True, text=True, timeout=120, env=e)


def seen(slurm):
    """(state, reason) as sinfo shows them, without the "*" of a node not responding (the
    controller's view for a while after a node is resumed from DOWN; no concern here)."""
    state, reason = slurm.node()
    return state.rstrip("*"), reason


def set_state(slurm, state, reason):
    p = slurm.run("scontrol", "update", f"NodeName={NODE}", f"State={state}", f"Reason={reason}")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("state", ["DOWN", "FAIL"])
def test_a_node_an_administrator_set_down_or_fail_is_neither_drained_nor_resumed(slurm, umd,
                                                                                   state):
    quiet(slurm)
    set_state(slurm, state, "admin: bad DIMM")
    p = healthcheck(slurm, umd(fake_devices=2, env=GPU0_WARNS), **RESUME_OWN)
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(rf"left as it is: its state \S*{state}\S* is not umd's", p.stdout), p.stdout
    now = seen(slurm)
    assert now[0].startswith(state.lower()) and now[1] == "admin: bad DIMM", now
    p = healthcheck(slurm, umd(fake_devices=2), **RESUME_OWN)
    assert p.returncode == 0, p.stdout + p.stderr
    now = seen(slurm)
    assert now[0].startswith(state.lower()) and now[1] == "admin: bad DIMM", now


def test_a_reason_holding_state_idle_is_not_read_as_the_nodes_state(slurm, umd):
    quiet(slurm)
    reason = "admin: RMA, was State=IDLE before"
    slurm.drain(reason)
    p = healthcheck(slurm, umd(fake_devices=2, env=GPU0_WARNS), **RESUME_OWN)
    assert "is already drained (admin: RMA, was State=IDLE before)" in p.stdout, p.stdout
    assert seen(slurm) == ("drained", reason)
    healthcheck(slurm, umd(fake_devices=2), **RESUME_OWN)
    assert seen(slurm) == ("drained", reason)


def test_a_reason_holding_reason_umd_is_not_umds(slurm, umd):
    quiet(slurm)
    reason = "admin: RMA Reason=umd[quick gpus=0]: GPU 0 FAIL: x Reason=umd: GPU 0 FAIL: x"
    slurm.drain(reason)
    p = healthcheck(slurm, umd(fake_devices=2), **RESUME_OWN)
    assert "stays drained: its reason is not umd's" in p.stdout, p.stdout
    assert seen(slurm) == ("drained", reason)


def slow_scontrol(tmp_path, seconds):
    """An scontrol whose `show` answers only after seconds (a busy slurmctld)."""
    s = tmp_path / "slow-scontrol"
    s.write_text(f'#!/bin/sh\n[ "$1" = show ] && sleep {seconds}\nexec scontrol "$@"\n')
    s.chmod(0o755)
    return str(s)


def test_a_slow_look_at_the_node_changes_nothing(slurm, umd, tmp_path):
    quiet(slurm)
    slurm.drain("admin: slow controller")
    slow = slow_scontrol(tmp_path, 8)  # the look's bound is 2 s (the scontrol limit's third)
    t0 = time.monotonic()
    p = healthcheck(slurm, umd(fake_devices=2, env=GPU0_WARNS), SCONTROL=slow, **RESUME_OWN)
    assert time.monotonic() - t0 < 8, "the look was not cut at its bound"
    assert p.returncode == 1, p.stdout + p.stderr
    assert "left as it is: scontrol show node took longer than 2 s" in p.stdout, p.stdout
    assert seen(slurm) == ("drained", "admin: slow controller")
    # nor is a node umd drained resumed on a look that did not answer
    set_state(slurm, "DRAIN", "umd[quick gpus=0]: GPU 0 WARN: test")
    p = healthcheck(slurm, umd(fake_devices=2), SCONTROL=slow, **RESUME_OWN)
    assert "left as it is" in p.stdout, p.stdout
    assert seen(slurm) == ("drained", "umd[quick gpus=0]: GPU 0 WARN: test")


# scontrol as a wrapper around the real one: `show` answers with a flag Slurm may add one day,
# or fails.
ODD_LOOKS = {
    "a state flag umd does not know":
        'scontrol "$@" | sed "s/ State=\\([^ ]*\\)/ State=\\1+NEW_FLAG/"',
    "a look that fails":
        "echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1",
}


@pytest.mark.parametrize("what", ODD_LOOKS)
def test_a_node_whose_state_umd_cannot_read_or_does_not_know_is_not_drained(slurm, umd, tmp_path,
                                                                          what):
    quiet(slurm)
    wrapper = tmp_path / "odd-scontrol"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = show ] || exec scontrol "$@"\n{ODD_LOOKS[what]}\n')
    wrapper.chmod(0o755)
    p = healthcheck(slurm, umd(fake_devices=2, env=GPU0_WARNS), SCONTROL=str(wrapper))
    assert p.returncode == 1 and "left as it is" in p.stdout, p.stdout + p.stderr
    assert seen(slurm) == ("idle", "none")


def drained_for_gpu0(slurm, umd, *args):
    """The node drained by umd-healthcheck itself, GPU 0 warning; its reason as written."""
    bad = umd(fake_devices=2, env=GPU0_WARNS)
    healthcheck(slurm, bad, *args)
    state, reason = seen(slurm)
    assert state == "drained" and reason.startswith("umd"), (state, reason)
    return bad, reason


def test_a_run_on_a_subset_of_gpus_cannot_resume_a_node_drained_for_another(slurm, umd):
    quiet(slurm)
    bad, reason = drained_for_gpu0(slurm, umd)
    p = healthcheck(slurm, bad, "--devices", "1", **RESUME_OWN)  # GPU 1 passes; 0 still fails
    assert seen(slurm) == ("drained", reason), p.stdout
    assert p.returncode == 0 and "stays drained: umd drained it for gpus=0" in p.stdout, p.stdout
    assert reason.startswith("umd[quick gpus=0]: GPU 0 WARN: the PCIe link"), reason
    # every GPU passing resumes it: the reason umd wrote reads back
    p = healthcheck(slurm, umd(fake_devices=2), **RESUME_OWN)
    assert "resumed" in p.stdout and seen(slurm)[0] == "idle", (p.stdout, seen(slurm))


def test_a_quick_pass_cannot_resume_a_node_the_extended_tier_drained(slurm, umd):
    quiet(slurm)
    _, reason = drained_for_gpu0(slurm, umd, "--extended", "--timeout", "90s", "--limit", "100")
    ok = umd(fake_devices=2)
    p = healthcheck(slurm, ok, **RESUME_OWN)
    assert seen(slurm) == ("drained", reason), p.stdout
    assert "at the extended tier, not all passed in this quick run" in p.stdout, p.stdout
    assert reason.startswith("umd[extended gpus=0]: GPU 0 WARN"), reason
    p = healthcheck(slurm, ok, "--extended", "--timeout", "90s", "--limit", "100", **RESUME_OWN)
    assert "resumed" in p.stdout and seen(slurm)[0] == "idle", (p.stdout, seen(slurm))


def test_a_node_umd_drained_that_fails_again_keeps_what_has_not_passed(slurm, umd):
    quiet(slurm)
    set_state(slurm, "DRAIN", "umd[extended gpus=0]: GPU 0 FAIL: test")
    p = healthcheck(slurm, umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"}))
    assert p.returncode == 1, p.stdout + p.stderr
    state, reason = seen(slurm)
    assert reason.startswith("umd[extended gpus=0,1]: GPU 1 WARN"), reason


def test_resume_own_reads_every_usual_spelling_of_yes_and_no(slurm, umd):
    quiet(slurm)
    _, own = drained_for_gpu0(slurm, umd)
    ok = umd(fake_devices=2)
    for value in ("0", "false", "No", "OFF", ""):
        set_state(slurm, "DRAIN", own)
        p = healthcheck(slurm, ok, UMD_HEALTHCHECK_RESUME_OWN=value)
        assert p.returncode == 0, p.stdout + p.stderr
        assert seen(slurm) == ("drained", own), f"{value!r} resumed the node"
    for value in ("1", "true", "YES", "On"):
        set_state(slurm, "DRAIN", own)
        p = healthcheck(slurm, ok, UMD_HEALTHCHECK_RESUME_OWN=value)
        assert p.returncode == 0, p.stdout + p.stderr
        assert seen(slurm)[0] == "idle", f"{value!r} did not resume the node"


def test_resume_own_refuses_a_spelling_it_does_not_know(slurm, umd):
    quiet(slurm)
    _, own = drained_for_gpu0(slurm, umd)
    ok = umd(fake_devices=2)
    for value in ("maybe", "2", "enabled"):
        p = healthcheck(slurm, ok, UMD_HEALTHCHECK_RESUME_OWN=value)
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr == (f"umd-healthcheck: UMD_HEALTHCHECK_RESUME_OWN '{value}' is not a "
                            "boolean (1/0, true/false, yes/no, on/off)\n")
        assert seen(slurm) == ("drained", own)


# -- the verdict's action in umd's reason, and --resume-own waiting for it (issue 58) --
# The faults come from the fake devices' fake_gpu_state (docs/design.md lists its keys) and an
# Xid line fed through xid_source=file:; the boot id umd-healthcheck reads is a file of the
# test's (UMD_HEALTHCHECK_BOOT_ID_FILE), so a reboot is that file changing.

BOOT_A = "1a2b3c4d-0000-4000-8000-000000000001"
BOOT_B = "5e6f7a8b-0000-4000-8000-000000000002"

# fake_gpu_state for GPU 0, the action its verdict asks for, and what else the bracket says.
FAULTS = {
    "a pending remap": ({"gpu_errors": {"remapped_rows": {"pending": True, "uncorrected": 1}}},
                        "reset_gpu", ""),
    "an uncorrectable DRAM error": ({"gpu_errors": {"ecc": {"volatile": {"dram":
                                                                         {"uncorrected": 1}}}}},
                                    "reset_gpu", ""),
    "a recovery action of node reboot": ({"gpu_errors": {"recovery_action": {"value": 2}}},
                                         "reboot_node", " boot=1a2b3c4d"),
    "a remap failure": ({"gpu_errors": {"remapped_rows": {"failure": True, "uncorrected": 8}}},
                        "service", ""),
    "a link down": ({"nvlinks_active": 17}, "reset_gpu", ""),
    # 5000 replays since the previous check, far above Gen5 x16's 30.2 a minute
    "a replay storm": ({"replay_counter": 5004}, "service", ""),
}


class Faulty:
    """A umd with two fake GPUs whose state is a file, and a boot id file for the program."""

    def __init__(self, umd, tmp_path, *args, **kw):
        self.gpu = GpuState(tmp_path)
        self.d = umd(fake_devices=2, args=[*self.gpu.args(), *args], **kw)
        self.boot = tmp_path / "hc-boot-id"
        self.boot.write_text(BOOT_A + "\n")

    def set(self, gpu0):
        self.gpu.set({"0": gpu0})
        time.sleep(0.2)  # a look (every 50 ms) has read the file

    def run(self, slurm, *args, d=None, **env):
        return healthcheck(slurm, d or self.d, *args,
                           UMD_HEALTHCHECK_BOOT_ID_FILE=str(self.boot), **env)


def drained_by(slurm, umd, tmp_path, fault):
    """The node drained by umd-healthcheck for FAULTS[fault] on GPU 0; (Faulty, reason)."""
    quiet(slurm)
    f = Faulty(umd, tmp_path)
    state, action, extra = FAULTS[fault]
    if "replay_counter" in state:
        f.set({"replay_counter": 4})  # the first look at a counter only reports it
        assert f.run(slurm).returncode == 0
    f.set(state)
    p = f.run(slurm)
    assert p.returncode == 1, p.stdout + p.stderr
    now = seen(slurm)
    assert now[0] == "drained", (now, p.stdout)
    assert now[1].startswith(f"umd[quick gpus=0 action={action}{extra}]: GPU 0 FAIL: "), now
    assert len(now[1]) <= 200, now
    return f, now[1]


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_reaches_the_drain_reason_with_its_action(slurm, umd, tmp_path, fault):
    _, reason = drained_by(slurm, umd, tmp_path, fault)
    assert " action=" not in reason.split("]: ", 1)[1], reason  # said once, in the bracket


def test_a_failing_xid_reaches_the_drain_reason_with_its_action(slurm, umd, tmp_path):
    quiet(slurm)
    w = Watched(umd, tmp_path, boot=BOOT_A)
    w.append(on_device(fixture(79), 0))  # fallen off the bus: reboot_node
    wait_for(lambda: w.device_health(0), what="device 0's failing verdict")
    p = healthcheck(slurm, w.d, UMD_HEALTHCHECK_BOOT_ID_FILE=str(w.boot))
    assert p.returncode == 1, p.stdout + p.stderr
    state, reason = seen(slurm)
    assert state == "drained", (state, reason, p.stdout)
    assert reason.startswith("umd[quick gpus=0 action=reboot_node boot=1a2b3c4d]: GPU 0 FAIL: "), \
        reason


def test_an_application_xid_does_not_drain_the_node(slurm, umd, tmp_path):
    quiet(slurm)
    w = Watched(umd, tmp_path, boot=BOOT_A)
    w.append(on_device(fixture(31), 0))  # an MMU fault of a user's program: restart_job
    wait_for(lambda: w.device(0)["xid"]["events"], what="the Xid 31 event")
    p = healthcheck(slurm, w.d, UMD_HEALTHCHECK_BOOT_ID_FILE=str(w.boot))
    assert p.returncode == 0, p.stdout + p.stderr
    assert seen(slurm) == ("idle", "none")


def test_one_replay_does_not_drain_the_node(slurm, umd, tmp_path):
    quiet(slurm)
    f = Faulty(umd, tmp_path)
    f.set({"replay_counter": 3})
    assert f.run(slurm).returncode == 0
    f.set({"replay_counter": 4})
    p = f.run(slurm)
    assert p.returncode == 0, p.stdout + p.stderr
    assert seen(slurm) == ("idle", "none")


def test_resume_own_for_reset_gpu_waits_for_what_a_reset_clears(slurm, umd, tmp_path):
    f, reason = drained_by(slurm, umd, tmp_path, "a pending remap")
    p = f.run(slurm, **RESUME_OWN)  # still pending: no reset yet
    assert seen(slurm) == ("drained", reason), p.stdout
    f.set({})  # the reset: the remap took effect, nothing pending
    p = f.run(slurm, **RESUME_OWN)
    assert "resumed" in p.stdout and seen(slurm)[0] == "idle", (p.stdout, seen(slurm))


def test_resume_own_for_reboot_node_waits_for_a_new_boot_id(slurm, umd, tmp_path):
    f, reason = drained_by(slurm, umd, tmp_path, "a recovery action of node reboot")
    f.set({})  # every GPU passes, but this is the same boot
    p = f.run(slurm, **RESUME_OWN)
    assert seen(slurm) == ("drained", reason), p.stdout
    assert "stays drained: umd drained it for action=reboot_node and this is still boot " \
           "1a2b3c4d" in p.stdout, p.stdout
    f.boot.write_text(BOOT_B + "\n")
    p = f.run(slurm, **RESUME_OWN)
    assert "resumed" in p.stdout and seen(slurm)[0] == "idle", (p.stdout, seen(slurm))


def test_a_reboot_node_drain_that_fails_again_in_the_same_boot_keeps_its_boot(slurm, umd,
                                                                              tmp_path):
    f, reason = drained_by(slurm, umd, tmp_path, "a recovery action of node reboot")
    f.set({"nvlinks_active": 17})  # GPU 0 fails again, for a reset this time
    p = f.run(slurm, **RESUME_OWN)
    state, now = seen(slurm)
    assert now.startswith("umd[quick gpus=0 action=reboot_node boot=1a2b3c4d]: "), (now, p.stdout)


def test_a_node_drained_for_service_is_never_resumed_by_umd(slurm, umd, tmp_path):
    f, reason = drained_by(slurm, umd, tmp_path, "a remap failure")
    f.set({})
    f.boot.write_text(BOOT_B + "\n")  # not even a reboot
    p = f.run(slurm, **RESUME_OWN)
    assert seen(slurm) == ("drained", reason), p.stdout
    assert "action=service, which umd never resumes" in p.stdout, p.stdout


def test_a_reboot_node_drain_without_a_boot_id_is_not_resumed(slurm, umd, tmp_path):
    quiet(slurm)
    f = Faulty(umd, tmp_path)
    set_state(slurm, "DRAIN", "umd[quick gpus=0 action=reboot_node]: GPU 0 FAIL: test")
    p = f.run(slurm, **RESUME_OWN)
    assert seen(slurm)[0] == "drained", p.stdout
    assert "no boot id was written with the drain" in p.stdout, p.stdout


def test_the_reason_stays_within_200_characters_with_its_bracket_whole(slurm, umd, tmp_path):
    quiet(slurm)
    f = Faulty(umd, tmp_path)
    many = ",".join(str(i) for i in range(2, 60))  # GPUs this run does not have: not passed
    set_state(slurm, "DRAIN", f"umd[extended gpus={many} action=reset_gpu]: GPU 2 FAIL: test")
    f.set(FAULTS["a pending remap"][0])
    p = f.run(slurm)
    assert p.returncode == 1, p.stdout + p.stderr
    state, reason = seen(slurm)
    assert len(reason) <= 200, reason
    assert reason.startswith("umd[extended gpus=all action=reset_gpu]: GPU 0 FAIL: "), reason



def test_a_reset_gpu_xid_drain_is_resumed_only_once_umd_sees_it_cleared(slurm, umd, tmp_path):
    """An Xid asking for a reset fails its GPU until umd sees a new boot (the watch's rule), so
    --resume-own cannot resume the node before: here the reboot is umd started again with
    another boot id, its Xid state kept."""
    quiet(slurm)
    state_dir = tmp_path / "state"
    w = Watched(umd, tmp_path, state_dir=state_dir, boot=BOOT_A)
    w.append(on_device(fixture(63), 0))  # a row marked for remapping: reset_gpu
    wait_for(lambda: w.device_health(0), what="device 0's failing verdict")
    p = healthcheck(slurm, w.d, UMD_HEALTHCHECK_BOOT_ID_FILE=str(w.boot))
    state, reason = seen(slurm)
    assert reason.startswith("umd[quick gpus=0 action=reset_gpu]: GPU 0 FAIL: "), (reason, p.stdout)
    p = healthcheck(slurm, w.d, UMD_HEALTHCHECK_BOOT_ID_FILE=str(w.boot), **RESUME_OWN)
    assert seen(slurm) == ("drained", reason), p.stdout
    w.d.close()
    w.boot.write_text(BOOT_B + "\n")
    again = Watched(umd, tmp_path, state_dir=state_dir)
    p = healthcheck(slurm, again.d, UMD_HEALTHCHECK_BOOT_ID_FILE=str(w.boot), **RESUME_OWN)
    assert "resumed" in p.stdout and seen(slurm)[0] == "idle", (p.stdout, seen(slurm))


def test_slurmds_own_run_drains_with_the_action(slurm, umd, tmp_path):
    gpu = GpuState(tmp_path)
    gpu.set({"0": FAULTS["a pending remap"][0]})
    d = umd(fake_devices=2, args=gpu.args())
    slurm.check_against(d)
    state, reason = wait_state(slurm, "drain")
    assert reason.startswith("umd[quick gpus=0 action=reset_gpu]: GPU 0 FAIL: "), reason
