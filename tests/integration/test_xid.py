"""The Xid watch (daemon/xid.c) with the real umd on fake devices, fed kernel lines through
xid_source=file:PATH: the lines are the real driver lines of tests/fixtures/xid/kernel-lines.txt,
their PCI address rewritten to a fake device's (device 0 is 0000:18:00.0, device 1 0000:19:00.0,
kernels/fake.c)."""
import os
import re
import subprocess
import time
from pathlib import Path

from conftest import REPO, wait_for, worker_argvs

FIXTURES = REPO / "tests" / "fixtures" / "xid" / "kernel-lines.txt"
BUS = {0: "0000:18:00", 1: "0000:19:00"}
UMDCTL = os.environ.get("UMDCTL", "")


def fixture(code, kind="xid"):
    """The first fixture line of kind and code (the line, as the driver wrote it)."""
    for raw in FIXTURES.read_text().splitlines():
        if raw.startswith("#") or "|" not in raw:
            continue
        expect, line = raw.split("|", 1)
        f = expect.split(",")
        if f[0] == kind and int(f[1]) == code:
            return line
    raise KeyError(code)


def on_device(line, index, pid=None):
    """line with its PCI address changed to fake device index's (and its pid, if given)."""
    line = re.sub(r"\((PCI:)?[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\)",
                  f"(PCI:{BUS[index]})", line)
    line = re.sub(r"GPU (at )?[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.0",
                  lambda m: f"GPU {m.group(1) or ''}{BUS[index]}.0", line)
    if pid is not None:
        line = re.sub(r"pid=\d+", f"pid={pid}", line)
    return line


class Watched:
    """A umd whose Xid source is a file in tmp, with its own boot id file."""

    def __init__(self, umd, tmp, state_dir=None, boot="boot-1", args=(), env=None):
        self.kmsg = tmp / "kernel.log"
        self.kmsg.touch()
        self.boot = tmp / "boot_id"
        if not self.boot.exists():
            self.boot.write_text(boot + "\n")
        self.d = umd(args=["--xid-source", f"file:{self.kmsg}",
                           "--xid-boot-id-file", str(self.boot), *args], state_dir=state_dir,
                      env=env)
        wait_for(lambda: self.d.get("/v1/health").json()["xid"]["source"] == "file",
                 what="the Xid watch to start")

    def append(self, *lines):
        with open(self.kmsg, "a") as f:
            for line in lines:
                f.write(line + "\n")

    def device_health(self, index):
        return self.d.get("/v1/health").json()["device_health"][index]["last_health"]

    def device(self, index):
        return self.d.get("/v1/devices").json()[index]

    def metric(self, index, xid, action):
        text = self.d.get("/metrics").text
        m = re.search(rf'umd_gpu_xid_total{{gpu="{index}",UUID="[^"]+",xid="{xid}",'
                      rf'action="{action}"}} (\d+)', text)
        return int(m.group(1)) if m else 0


def xid_check(verdict):
    return [c for c in verdict["checks"] if c["name"] == "xid"][0]


def test_xid_79_fails_the_gpu_with_reboot_node_within_2s(umd, tmp_path):
    w = Watched(umd, tmp_path)
    t0 = time.monotonic()
    w.append(on_device(fixture(79), 0))
    v = wait_for(lambda: w.device_health(0), timeout=2, what="device 0's verdict", step=0.02)
    assert time.monotonic() - t0 <= 2
    assert v["verdict"] == "fail" and v["action"] == "reboot_node"
    c = xid_check(v)
    assert c["verdict"] == "fail" and c["action"] == "reboot_node"
    assert "Xid catalog" in c["threshold_source"]
    h = w.d.get("/v1/health").json()
    assert h["devices"]["failing_health"] == 1
    assert any("action: reboot_node" in p for p in h["problems"])
    assert w.device_health(1) is None  # the other GPU is untouched
    dev = w.device(0)
    assert dev["xid"]["action"] == "reboot_node"
    assert dev["xid"]["events"][0]["xid"] == 79 and dev["xid"]["events"][0]["fails_gpu"]
    assert w.metric(0, 79, "reboot_node") == 1


def test_fallen_off_the_bus_line_after_xid_79_is_one_event(umd, tmp_path):
    w = Watched(umd, tmp_path)
    w.append(on_device(fixture(79), 0), on_device(fixture(79, "fallen_off_bus"), 0))
    wait_for(lambda: w.device_health(0), what="the failing verdict")
    time.sleep(0.3)
    assert len(w.device(0)["xid"]["events"]) == 1
    assert w.metric(0, 79, "reboot_node") == 1


def test_fallen_off_the_bus_without_xid_fails_the_gpu(umd, tmp_path):
    w = Watched(umd, tmp_path)
    w.append(on_device(fixture(79, "fallen_off_bus"), 1))
    v = wait_for(lambda: w.device_health(1), what="the failing verdict")
    assert v["verdict"] == "fail" and v["action"] == "reboot_node"
    assert w.device(1)["xid"]["events"][0]["kind"] == "fallen_off_bus"


def test_application_xids_fail_nothing_but_are_listed(umd, tmp_path):
    w = Watched(umd, tmp_path)
    lines = [on_device(fixture(13), 0), on_device(fixture(31), 0),
             on_device(fixture(31), 0).replace(": 31,", ": 43,"), on_device(fixture(45), 0)]
    w.append(*lines)
    events = wait_for(lambda: len(w.device(0)["xid"]["events"]) == 4 and
                      w.device(0)["xid"]["events"], what="four events")
    assert sorted(e["xid"] for e in events) == [13, 31, 43, 45]
    assert not any(e["fails_gpu"] for e in events)
    assert {e["action"] for e in events} <= {"none", "restart_job"}
    assert w.device(0)["xid"]["action"] == "none"
    assert w.device_health(0) is None  # no verdict was made, and none is invented
    h = w.d.get("/v1/health").json()
    assert h["devices"]["failing_health"] == 0 and h["status"] == "ok"
    e31 = [e for e in events if e["xid"] == 31][0]
    assert e31["pid"] == 13705 and e31["process"] == "UnrealEditor" and not e31["own_worker"]
    assert "channel 0x0000000c" in e31["text"]


def test_counter_counts_repeats(umd, tmp_path):
    w = Watched(umd, tmp_path)
    line = on_device(fixture(31), 1)
    w.append(line, line, line)
    wait_for(lambda: w.metric(1, 31, "restart_job") == 3, what="three Xid 31")
    w.append(line)
    wait_for(lambda: w.metric(1, 31, "restart_job") == 4, what="a fourth")


def test_own_worker_is_named(umd, tmp_path):
    w = Watched(umd, tmp_path)
    r = w.d.post("/v1/jobs", json={"benchmark": "health", "device": 0})
    assert r.status_code == 202
    pid = wait_for(lambda: next(iter(worker_argvs(w.d.process.pid)), None),
                   what="a worker process")
    w.append(on_device(fixture(31), 0, pid=pid))
    ev = wait_for(lambda: w.device(0)["xid"]["events"], what="the event")[0]
    assert ev["pid"] == pid and ev["own_worker"] is True


def test_restart_keeps_failing_state_until_boot_id_changes(umd, tmp_path):
    state = tmp_path / "state"
    w = Watched(umd, tmp_path, state_dir=state)
    w.append(on_device(fixture(79), 0))
    wait_for(lambda: w.device_health(0), what="the failing verdict")
    assert w.d.stop() == 0

    w2 = Watched(umd, tmp_path, state_dir=state)  # same boot
    v = w2.device_health(0)
    assert v["verdict"] == "fail" and v["action"] == "reboot_node"
    assert w2.device(0)["xid"]["action"] == "reboot_node"
    assert w2.d.stop() == 0

    (tmp_path / "boot_id").write_text("boot-2\n")
    w3 = Watched(umd, tmp_path, state_dir=state)
    assert w3.device_health(0) is None
    assert w3.device(0)["xid"]["action"] == "none"
    assert "booted since" in w3.d.log()


def test_override_makes_an_application_xid_fail(umd, tmp_path):
    w = Watched(umd, tmp_path, args=["--xid-actions", "31:reset_gpu"])
    w.append(on_device(fixture(31), 1))
    v = wait_for(lambda: w.device_health(1), what="the failing verdict")
    assert v["action"] == "reset_gpu"


def test_sxid_is_the_node_s_not_a_gpu_s(umd, tmp_path):
    w = Watched(umd, tmp_path)
    w.append(fixture(22013, "sxid"))
    ev = wait_for(lambda: w.d.get("/v1/health").json()["xid"]["events"], what="the SXid")[0]
    assert ev["kind"] == "sxid" and ev["xid"] == 22013 and ev["action"] == "none"
    assert w.device_health(0) is None and w.device_health(1) is None
    assert 'umd_xid_other_total{xid="22013",action="none"} 1' in w.d.get("/metrics").text


def test_bad_xid_config_is_refused_with_what(umd_run):
    r = umd_run(["--xid-actions", "13:reboot", "--check-config"])
    assert r.returncode == 2 and "'reboot' is no action" in r.stderr
    r = umd_run(["--xid-source", "dmesg", "--check-config"])
    assert r.returncode == 2 and "xid_source" in r.stderr


def test_fake_devices_ignore_the_hosts_kernel_by_default(umd):
    d = umd()
    wait_for(lambda: d.get("/v1/health").json()["xid"]["source"] == "none", what="the source")
    assert "fake devices" in d.get("/v1/health").json()["xid"]["why"]


def test_umdctl_devices_shows_the_xid_line(umd, tmp_path):
    if not UMDCTL:
        return
    w = Watched(umd, tmp_path)
    w.append(on_device(fixture(79), 0))
    wait_for(lambda: w.device_health(0), what="the failing verdict")
    out = subprocess.run([UMDCTL, "--url", w.d.base_url, "devices"], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert re.search(r"xid: 1 event\(s\); newest Xid 79 \(reboot_node\).*failing "
                     r"action=reboot_node", out.stdout)


def test_canonical_verdict_carries_the_xid_check_without_a_rerun(umd, tmp_path):
    from conftest import run_job
    w = Watched(umd, tmp_path)
    w.append(on_device(fixture(79), 0))
    wait_for(lambda: w.device_health(0), what="the failing verdict")
    job = run_job(w.d, {"benchmark": "health", "device": 0})
    part = job["parts"][0] if "parts" in job else job
    v = part["verdict"]
    assert v["verdict"] == "fail" and v["action"] == "reboot_node"
    assert xid_check(v)["action"] == "reboot_node"
    assert "first_attempt" not in part  # the copies were not run again for an Xid
    ok = run_job(w.d, {"benchmark": "health", "device": 1})
    v1 = (ok["parts"][0] if "parts" in ok else ok)["verdict"]
    assert xid_check(v1)["verdict"] == "pass" and xid_check(v1)["action"] == "none"


def test_look_back_finds_this_boots_xids_and_a_restart_counts_none_twice(umd, tmp_path):
    """xid_source=kmsg:PATH reads /dev/kmsg records from the file's start, as the look back
    reads the kernel's ring; the watermark saved at stop keeps a restart from counting them
    again, while the failing state stays."""
    ring = tmp_path / "kmsg"
    ring.write_text(
        "6,10,1000000,-;NVRM: GPU at PCI:0000:18:00: GPU-4e391288-897c-ba5d-6944-dfbea55ebcfa\n"
        f"3,11,2000000,-;{on_device(fixture(79), 0)}\n"
        f"4,12,3000000,-;{on_device(fixture(31), 1)}\n")
    (tmp_path / "boot_id").write_text("boot-1\n")
    state = tmp_path / "state"
    args = ["--xid-source", f"kmsg:{ring}", "--xid-boot-id-file", str(tmp_path / "boot_id")]
    d = umd(args=args, state_dir=state)
    w = Watched.__new__(Watched)
    w.d = d
    v = wait_for(lambda: w.device_health(0), what="the look back's Xid 79")
    assert v["action"] == "reboot_node"
    wait_for(lambda: w.metric(1, 31, "restart_job") == 1, what="the look back's Xid 31")
    assert d.stop() == 0

    w.d = umd(args=args, state_dir=state)
    wait_for(lambda: w.d.get("/v1/health").json()["xid"]["source"] == "kmsg-file",
             what="the source")
    assert w.device_health(0)["action"] == "reboot_node"  # kept across the restart
    with open(ring, "a") as f:
        f.write(f"4,13,4000000,-;{on_device(fixture(13), 1)}\n")
    wait_for(lambda: w.metric(1, 13, "restart_job") == 1, what="the new record")
    assert w.metric(1, 31, "restart_job") == 0 and w.metric(0, 79, "reboot_node") == 0


JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"


def journal_entry(out, line, mono_us):
    """Appends a kernel-transport entry of this boot with line as its MESSAGE to the journal
    file out, through systemd-journal-remote (the journal's own writer)."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")
    export = (f"__REALTIME_TIMESTAMP={int(time.time() * 1e6)}\n__MONOTONIC_TIMESTAMP={mono_us}\n"
              f"_BOOT_ID={boot}\n_TRANSPORT=kernel\nMESSAGE={line}\n\n")
    subprocess.run([JOURNAL_REMOTE, "-o", str(out), "-"], input=export, text=True, check=True,
                   capture_output=True, timeout=30)


def test_journal_source_looks_back_and_follows(umd, tmp_path):
    """xid_source=journal:DIR: the journal's kernel transport of this boot, from its head (the
    look back), then as entries arrive; the unit's default reaches the same code."""
    import pytest
    if not os.access(JOURNAL_REMOTE, os.X_OK):
        pytest.skip("systemd-journal-remote not installed (packaging/install-deps --test)")
    jdir = tmp_path / "journal"
    jdir.mkdir()
    out = jdir / "kernel.journal"
    journal_entry(out, on_device(fixture(79), 0), 2_000_000)
    (tmp_path / "boot_id").write_text("boot-1\n")
    d = umd(args=["--xid-source", f"journal:{jdir}",
                  "--xid-boot-id-file", str(tmp_path / "boot_id")])
    w = Watched.__new__(Watched)
    w.d = d
    v = wait_for(lambda: w.device_health(0), what="the journal's Xid 79")
    assert v["action"] == "reboot_node"
    assert d.get("/v1/health").json()["xid"]["source"] == "journal"
    journal_entry(out, on_device(fixture(31), 1), 3_000_000)
    wait_for(lambda: w.metric(1, 31, "restart_job") == 1, what="the followed Xid 31")


def fake_nvml_dir():
    from conftest import UMD_BIN
    d = Path(UMD_BIN).resolve().parent / "tests" / "integration" / "fake_nvml"
    return d if (d / "libnvidia-ml.so.1").exists() else None


def test_nvml_events_are_a_source_typed_by_the_table_not_by_nvml(umd, tmp_path):
    """xid_source=nvml through the real common/nvml.c and a libnvidia-ml.so.1 that hands out
    Xid events (fake_nvml/): NVML types every Xid "critical"; umd's table decides."""
    import pytest
    lib = fake_nvml_dir()
    if not lib:
        pytest.skip("the fake NVML library was not built")
    events = tmp_path / "nvml-events"
    events.touch()
    (tmp_path / "boot_id").write_text("boot-1\n")
    d = umd(args=["--xid-source", "nvml", "--xid-boot-id-file", str(tmp_path / "boot_id")],
            env={"LD_LIBRARY_PATH": str(lib), "FAKE_NVML_XID_FILE": str(events)})
    w = Watched.__new__(Watched)
    w.d = d
    wait_for(lambda: d.get("/v1/health").json()["xid"]["source"] == "nvml", what="the source")
    events.write_text("1 31\n")
    ev = wait_for(lambda: w.device(1)["xid"]["events"], what="NVML's Xid 31")[0]
    assert ev["source"] == "nvml" and ev["xid"] == 31 and ev["pid"] is None
    assert ev["action"] == "restart_job" and not ev["fails_gpu"]
    assert w.device_health(1) is None
    with open(events, "a") as f:
        f.write("0 79\n")
    v = wait_for(lambda: w.device_health(0), what="NVML's Xid 79")
    assert v["action"] == "reboot_node"


def test_kernel_line_and_nvml_event_of_one_xid_are_one_event(umd, tmp_path):
    """The kernel's line (with its pid) and NVML's event (none) for the same GPU and code within
    xid_dedup_ms: one event, counted once, with the line's pid and words."""
    import pytest
    lib = fake_nvml_dir()
    if not lib:
        pytest.skip("the fake NVML library was not built")
    events = tmp_path / "nvml-events"
    events.touch()
    w = Watched(umd, tmp_path, env={"LD_LIBRARY_PATH": str(lib),
                                    "FAKE_NVML_XID_FILE": str(events)})
    events.write_text("1 31\n")  # NVML first, as it may be
    wait_for(lambda: w.device(1)["xid"]["events"], what="NVML's event")
    w.append(on_device(fixture(31), 1))
    ev = wait_for(lambda: (e := w.device(1)["xid"]["events"][0])["pid"] and e,
                  what="the line's pid on the one event")
    assert len(w.device(1)["xid"]["events"]) == 1
    assert ev["pid"] == 13705 and "channel 0x0000000c" in ev["text"]
    assert w.metric(1, 31, "restart_job") == 1
