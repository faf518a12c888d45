"""umdctl, umd-healthcheck and the scheduler pieces (NHC check, Slurm prolog/epilog) driven
against the real umd with fake devices: what each command prints, which exit code it ends
with, and that a busy GPU is unknown, never failed. The real-Slurm drain tests are in
test_slurm.py.

Environment (set by tests/integration/meson.build): UMDCTL, plus conftest's UMD_BIN."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import UMD_BIN, clean_env, wait_for
from test_jobs import submit, wait_job

REPO = Path(__file__).resolve().parents[2]
UMDCTL = os.environ.get("UMDCTL", "")
HEALTHCHECK = REPO / "packaging" / "umd-healthcheck"
NHC = REPO / "packaging" / "nhc" / "umd.nhc"
PROLOG = REPO / "packaging" / "slurm" / "prolog"
EPILOG = REPO / "packaging" / "slurm" / "epilog"
SLOW = {"fake_delay_ms": 60000}


@pytest.fixture(autouse=True)
def need_umdctl():
    if not UMDCTL:
        pytest.fail("UMDCTL must point at the built umdctl")


def env(**extra):
    e = clean_env()
    for k in ("UMD_URL", "UMD_TOKEN_FILE"):
        e.pop(k, None)
    e["UMDCTL"] = UMDCTL
    e.update(extra)
    return e


def ctl(d, *args, timeout=60, **kw):
    url = ["--url", d.base_url] if d is not None else []
    return subprocess.run([UMDCTL, *url, *args], capture_output=True, text=True,
                          timeout=timeout, env=kw.pop("env", env()), **kw)


def hc(d, *args, timeout=90, **extra):
    url = ["--url", d.base_url] if d is not None else []
    return subprocess.run(["/bin/sh", str(HEALTHCHECK), *url, *args], capture_output=True,
                          text=True, timeout=timeout, env=env(**extra))


def occupy(d, device=0):
    """A long job on the device: the canonical check queues behind it (a busy GPU)."""
    return submit(d, {"benchmark": "copy", "device": device, "params": SLOW})["id"]


# -- umdctl --

def test_submit_wait_prints_the_text_table_and_exits_0(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "submit", "copy", "--param", "size=1GiB", "--wait")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^job [0-9a-f-]{36}  copy  succeeded", p.stdout, re.M)
    assert "GB/s" in p.stdout and "h2d" in p.stdout


def test_submit_wait_is_one_request(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "submit", "copy", "--param", "size=1MiB", "--param", "fake_delay_ms=2000",
            "--wait", "--timeout", "30s")
    assert p.returncode == 0, p.stderr
    text = d.get("/metrics").text
    m = re.search(r'^umd_http_requests_total\{route="/v1/jobs/\{id\}",method="GET",'
                  r'status="200"\} (\d+)$', text, re.M)
    # One ?wait= for the result (the text table is a second GET, with ?format=text).
    assert m and int(m.group(1)) <= 2, text


def test_submit_without_wait_prints_the_id_then_show_and_ls_find_it(umd):
    d = umd(fake_devices=2)
    p = ctl(d, "submit", "copy", "--devices", "all", "--label", "who=ops", "--param",
            "size=4MiB")
    assert p.returncode == 0, p.stderr
    jid = p.stdout.strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", jid)
    wait_job(d, jid)
    shown = ctl(d, "show", jid)
    assert shown.returncode == 0 and shown.stdout.startswith("job " + jid)
    doc = json.loads(ctl(d, "show", jid, "--json").stdout)
    assert doc["id"] == jid and doc["labels"] == {"who": "ops"} and len(doc["parts"]) == 2
    ls = ctl(d, "ls", "--label", "who=ops", "--status", "succeeded", "--benchmark", "copy")
    assert ls.returncode == 0, ls.stderr
    assert jid in ls.stdout and "0,1" in ls.stdout
    assert jid not in ctl(d, "ls", "--benchmark", "health").stdout
    page = json.loads(ctl(d, "ls", "--since", "10m", "--json").stdout)
    assert [j["id"] for j in page["jobs"]] == [jid]
    assert json.loads(ctl(d, "ls", "--until", "2000-01-01T00:00:00Z", "--json").stdout)["jobs"] == []


def test_ls_pages_with_a_cursor(umd):
    d = umd(fake_devices=1)
    ids = [submit(d, {"benchmark": "copy", "device": 0})["id"] for _ in range(3)]
    for j in ids:
        wait_job(d, j)
    p = ctl(d, "ls", "--limit", "2")
    assert p.returncode == 0
    assert ids[2] in p.stdout and ids[1] in p.stdout and ids[0] not in p.stdout
    cursor = re.search(r"--cursor (\S+)", p.stderr).group(1)
    assert ids[0] in ctl(d, "ls", "--cursor", cursor).stdout


def test_a_failed_job_exits_1_and_a_slow_one_4_after_timeout(umd):
    d = umd(fake_devices=2, args=["--max-crashes", "100"])
    p = ctl(d, "submit", "copy", "--device", "0", "--param", "fake_crash=true", "--wait")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "failed" in p.stdout
    p = ctl(d, "submit", "copy", "--device", "1", "--param", "fake_delay_ms=30000", "--wait",
            "--timeout", "1s")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "still" in p.stderr
    jid = p.stdout.strip()
    c = ctl(d, "cancel", jid)
    assert c.returncode == 0, c.stderr
    assert wait_job(d, jid)["state"] == "cancelled"


def test_devices_lists_link_state_and_verdict(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    p = ctl(d, "devices")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0].split()[:4] == ["INDEX", "UUID", "NAME", "STATE"]
    assert "Gen5 x16" in lines[1] and "Gen4 x8" in lines[2]
    assert len(json.loads(ctl(d, "devices", "--json").stdout)) == 2


def test_errors_are_one_line_with_their_exit_codes(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "show", "not-a-job")
    assert p.returncode == 3
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("umdctl: HTTP 400 ")
    p = ctl(d, "submit", "copy", "--param", "size=lots")
    assert p.returncode == 3 and "HTTP 400" in p.stderr and "size" in p.stderr
    p = ctl(None, "--url", "http://127.0.0.1:9", "devices")
    assert p.returncode == 3 and "cannot reach umd" in p.stderr
    p = ctl(d, "submit")
    assert p.returncode == 2 and "needs a BENCHMARK" in p.stderr
    assert ctl(d, "--help").returncode == 0


def test_bad_options_are_one_line_and_exit_2():
    for args, said in ((["ls", "--lim", "3"], "unknown option '--lim'"),
                       (["ls", "--json=1"], "--json takes no value"),
                       (["ls", "--status"], "--status needs a value"),
                       (["devices", "--wait"], "--wait does not apply to 'devices'"),
                       (["-hV"], "unknown command '-hV'"),
                       (["--bogus", "ls"], "unknown option '--bogus'")):
        p = ctl(None, "--url", "http://127.0.0.1:9", *args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and said in p.stderr, (args, p.stderr)
        assert p.stdout == "", (args, p.stdout)


def test_url_from_the_environment_and_the_unix_socket(umd, tmp_path):
    sock = tmp_path / "u.sock"
    if len(str(sock)) > 100:
        pytest.skip("tmp path too long for a unix socket")
    d = umd(fake_devices=1, args=["--unix-socket", str(sock)])
    assert ctl(None, "devices", env=env(UMD_URL=d.base_url)).returncode == 0
    p = ctl(None, "--url", "http://localhost", "--unix-socket", str(sock), "devices")
    assert p.returncode == 0 and "fake" in p.stdout


def test_token_file_sends_a_bearer_token(umd, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("alice submit alice-token-0123456789abcdef\n")
    os.chmod(tokens, 0o600)
    d = umd(fake_devices=1, args=["--tokens-file", str(tokens)])
    p = ctl(d, "submit", "copy")
    assert p.returncode == 3 and "401" in p.stderr
    tok = tmp_path / "alice"
    tok.write_text("alice-token-0123456789abcdef\n")
    p = ctl(d, "--token-file", str(tok), "submit", "copy", "--wait", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["client"] == "alice"
    p = ctl(d, "submit", "copy", env=env(UMD_TOKEN_FILE=str(tokens)))
    assert p.returncode == 2 and "alone on its first line" in p.stderr


def test_pause_and_resume_speak_the_device_api(umd):
    d = umd(fake_devices=1)
    for verb in ("pause", "resume"):
        p = ctl(d, verb, "0", *(["--reason", "maintenance"] if verb == "pause" else []))
        # until umd serves pause/resume this is a 404 problem, said in one line
        assert p.returncode in (0, 3), p.stdout + p.stderr
        if p.returncode == 3:
            assert p.stderr.startswith("umdctl: HTTP 404") and p.stderr.count("\n") == 1
        else:
            assert p.stdout.startswith(f"device 0 {verb}d")


# -- umdctl health --

def test_health_runs_the_canonical_check(umd):
    d = umd(fake_devices=2)
    p = ctl(d, "health")
    assert p.returncode == 0, p.stdout + p.stderr
    # each GPU, and (two GPUs) every pair of them on the node worker
    assert len([l for l in p.stdout.splitlines() if " PASS: " in l]) == 3
    assert "GPU pairs (every GPU) PASS: " in p.stdout
    job = d.get("/v1/jobs?benchmark=health").json()["jobs"][0]
    assert job["labels"] == {"source": "umdctl-health"} and job["priority"] == "high"
    assert json.loads(ctl(d, "health", "--json").stdout)["verdict"] == "pass"


def test_health_extended_runs_the_extended_tier_and_exits_0_on_pass(umd):
    d = umd(fake_devices=2)
    p = ctl(d, "health", "--extended")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len([l for l in p.stdout.splitlines() if " PASS: " in l]) == 3
    job = d.get("/v1/jobs?benchmark=health").json()["jobs"][0]
    assert job["labels"] == {"source": "umdctl-health-extended"} and job["tier"] == "extended"
    assert job["canonical"] is True
    assert all(p["verdict"]["tier"] == "extended" for p in job["parts"])


def test_health_extended_exits_1_on_a_failing_gpu(umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"1": {"bandwidth_pct": 30}}))
    d = umd(fake_devices=2, args=["--fake-gpu-state", str(state)])
    p = ctl(d, "health", "--extended")
    assert p.returncode == 1, p.stdout + p.stderr
    # a slow GPU's failing bandwidth check asks for a reset (the action after the verdict word)
    fails = [l for l in p.stdout.splitlines() if " FAIL action=reset_gpu: " in l]
    assert fails[0].startswith("GPU 1 "), p.stdout


def test_health_extended_of_a_busy_gpu_is_unknown_exit_4(umd):
    d = umd(fake_devices=1)
    occupy(d)
    p = ctl(d, "health", "--extended", "--timeout", "2s")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "UNKNOWN: no verdict within 2 s" in p.stdout


def test_health_extended_says_on_a_passing_line_what_its_budget_skipped(umd):
    d = umd(fake_devices=8, args=["--health-extended-budget-s", "1"])  # 56 pairs: 2 s at 1 GiB
    p = ctl(d, "health", "--extended")
    assert p.returncode == 0, p.stdout + p.stderr
    pairs = [l for l in p.stdout.splitlines() if l.startswith("GPU pairs")][0]
    assert pairs.startswith("GPU pairs (every GPU) PASS: skipped: every GPU pair at full size "
                            "would take about "), pairs


def test_health_extended_and_cached_together_is_a_usage_error(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "health", "--extended", "--cached")
    assert p.returncode == 2 and "--extended" in p.stderr


def test_health_warn_exits_1_unless_allowed(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "0=4x8"})
    p = ctl(d, "health")
    assert p.returncode == 1
    assert "WARN: the PCIe link runs at Gen4 x8, below its maximum Gen5 x16" in p.stdout
    assert ctl(d, "health", "--allow-warn").returncode == 0


def test_health_of_a_busy_gpu_is_unknown_not_failed(umd):
    d = umd(fake_devices=1)
    occupy(d)
    p = ctl(d, "health", "--timeout", "2s")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "UNKNOWN: no verdict within 2 s" in p.stdout
    # the check gave up and left nothing queued behind the busy GPU
    health = d.get("/v1/jobs?benchmark=health").json()["jobs"][0]
    assert wait_job(d, health["id"])["state"] == "cancelled"


def other_process_on_gpu0(umd, tmp_path, **kw):
    """umd whose fake GPU 0 is used by another (non-umd) process, as NVML would report it."""
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"0": {"other_processes": 1}}))
    return umd(args=["--fake-gpu-state", str(state), "--busy-poll-ms", "100"], **kw)


def test_health_of_a_gpu_used_by_another_process_is_unknown(umd, tmp_path):
    d = other_process_on_gpu0(umd, tmp_path, fake_devices=2)
    p = ctl(d, "health", "--timeout", "2s")
    assert p.returncode == 4, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("GPU 0 ") and " UNKNOWN: " in lines[0], p.stdout
    assert "GPU in use" in lines[0] or "still" in lines[0], p.stdout
    assert " PASS: " in lines[1]
    p = hc(d, "--mode", "nagios", "--timeout", "2s")
    assert p.returncode == 3 and p.stdout.startswith("UMD UNKNOWN - "), p.stdout


def test_cached_health_reads_the_last_verdict_within_max_age(umd):
    d = umd(fake_devices=1)
    p = ctl(d, "health", "--cached")
    assert p.returncode == 4 and "no health verdict yet" in p.stdout
    assert ctl(d, "health").returncode == 0
    p = ctl(d, "health", "--cached", "--max-age", "1h")
    assert p.returncode == 0 and " PASS: " in p.stdout
    p = ctl(d, "health", "--cached", "--max-age", "1ms")
    assert p.returncode == 4 and "old (max age" in p.stdout


# -- umd-healthcheck --

def test_healthcheck_plain_mode(umd):
    d = umd(fake_devices=2)
    p = hc(d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len([l for l in p.stdout.splitlines() if "PASS" in l]) == 3  # 2 GPUs and the pairs
    assert hc(None, "--url", "http://127.0.0.1:9").returncode == 3


def test_healthcheck_nagios_mode_follows_0_1_2_3(umd):
    d = umd(fake_devices=2)
    p = hc(d, "--mode", "nagios")
    assert p.returncode == 0 and p.stdout.startswith("UMD OK - "), p.stdout
    w = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    p = hc(w, "--mode", "nagios")
    assert p.returncode == 1 and p.stdout.startswith("UMD WARNING - GPU 1 WARN: "), p.stdout
    z = umd(fake_devices=0)
    p = hc(z, "--mode", "nagios")
    assert p.returncode == 2 and p.stdout.startswith("UMD CRITICAL - "), p.stdout
    p = hc(None, "--url", "http://127.0.0.1:9", "--mode", "nagios")
    assert p.returncode == 3 and p.stdout.startswith("UMD UNKNOWN - "), p.stdout
    b = umd(fake_devices=1)
    occupy(b)
    p = hc(b, "--mode", "nagios", "--timeout", "2s")
    assert p.returncode == 3 and p.stdout.startswith("UMD UNKNOWN - "), p.stdout


def fake_scontrol(tmp_path):
    """An scontrol whose node is idle; it logs what it is asked."""
    log = tmp_path / "scontrol.log"
    s = tmp_path / "scontrol"
    s.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n'
                 '[ "$1" = show ] && echo "NodeName=$3 Arch=x86_64 State=IDLE Partitions=umd"\n'
                 'exit 0\n')
    s.chmod(0o755)
    return s, log


def test_healthcheck_slurm_mode_drains_only_on_a_bad_verdict(umd, tmp_path):
    scontrol, log = fake_scontrol(tmp_path)
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    p = hc(d, "--mode", "slurm", SCONTROL=str(scontrol), SLURMD_NODENAME="node7")
    assert p.returncode == 1, p.stdout + p.stderr
    # it looks at the node's drain first (an administrator's reason is never overwritten)
    assert log.read_text() == ("show node node7 -o\n"
                               "update NodeName=node7 State=DRAIN Reason=umd[quick gpus=1]: "
                               "GPU 1 WARN: the PCIe link runs at Gen4 x8, below its maximum "
                               "Gen5 x16\n")
    log.unlink()
    ok = umd(fake_devices=1)
    assert hc(ok, "--mode", "slurm", SCONTROL=str(scontrol)).returncode == 0
    busy = umd(fake_devices=1)
    occupy(busy)
    p = hc(busy, "--mode", "slurm", "--timeout", "2s", SCONTROL=str(scontrol))
    assert p.returncode == 0 and "UNKNOWN" in p.stdout
    assert hc(None, "--url", "http://127.0.0.1:9", "--mode", "slurm",
              SCONTROL=str(scontrol)).returncode == 0
    assert not log.exists(), "no drain for a pass, a busy GPU or an unreachable umd"


def nhc(d, *args):
    """Source umd.nhc in bash with NHC's die/log stand-ins and run check_umd."""
    script = (f'die() {{ echo "DIE $1 $2"; exit 1; }}\nlog() {{ echo "LOG $*"; }}\n'
              f'. {NHC}\ncheck_umd -u {d.base_url if d else "http://127.0.0.1:9"} {" ".join(args)}'
              '\necho "RC $?"\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env=env(UMD_NHC_UMDCTL=UMDCTL))


def test_nhc_check_uses_the_cached_verdict(umd):
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    p = nhc(d)
    assert "RC 0" in p.stdout and "LOG check_umd: no verdict" in p.stdout, p.stdout + p.stderr
    ctl(d, "health")
    p = nhc(d)
    assert p.stdout.startswith("DIE 1 umd: GPU 1 ") and "Gen4 x8" in p.stdout, p.stdout
    assert "RC 0" in nhc(d, "-w").stdout
    assert "RC 0" in nhc(None).stdout  # umd unreachable: logged, not a node failure


def test_prolog_pauses_and_epilog_resumes_and_checks(umd, tmp_path):
    scontrol, log = fake_scontrol(tmp_path)
    d = umd(fake_devices=2, env={"UMD_FAKE_LINK": "1=4x8"})
    slurm = dict(SLURM_JOB_ID="42", SLURM_JOB_GPUS="1", UMD_URL=d.base_url,
                 UMD_HEALTHCHECK=str(HEALTHCHECK), SCONTROL=str(scontrol),
                 SLURMD_NODENAME="node7")
    p = subprocess.run(["/bin/sh", str(PROLOG)], capture_output=True, text=True, timeout=30,
                       env=env(**slurm))
    assert p.returncode == 0
    p = subprocess.run(["/bin/sh", str(EPILOG)], capture_output=True, text=True, timeout=90,
                       env=env(**slurm))
    assert p.returncode == 0
    assert "NodeName=node7 State=DRAIN Reason=umd[extended gpus=1]: GPU 1 WARN" in log.read_text()
    jobs = d.get("/v1/jobs?benchmark=health").json()["jobs"]
    assert [p["device"] for p in jobs[0]["parts"]] == [1]  # only the job's GPU was checked
    assert jobs[0]["tier"] == "extended"  # the epilog runs the extended tier


# -- umd itself --

def test_print_config_prints_the_effective_configuration(tmp_path):
    conf = tmp_path / "umd.conf"
    conf.write_text("[umd]\nmax_jobs = 7\n")
    p = subprocess.run([UMD_BIN, "--config", str(conf), "--print-config", "--listen",
                        "127.0.0.1:9999", "--queue-capacity", "5"], capture_output=True,
                       text=True, timeout=20, env=clean_env())
    assert p.returncode == 0, p.stderr
    for line in ("max_jobs = 7", "listen = 127.0.0.1:9999", "queue_capacity = 5",
                 "#max_body_bytes = 64KiB"):
        assert "\n" + line + "\n" in p.stdout


def test_bash_completion_offers_commands_and_each_commands_options():
    script = (f". {REPO}/client/umdctl.bash-completion\n"
              "COMP_WORDS=(umdctl he); COMP_CWORD=1; _umdctl; echo \"${COMPREPLY[*]}\"\n"
              "COMP_WORDS=(umdctl health --c); COMP_CWORD=2; _umdctl; echo \"${COMPREPLY[*]}\"\n"
              "COMP_WORDS=(umdctl ls --status f); COMP_CWORD=3; _umdctl; echo \"${COMPREPLY[*]}\"\n")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=20)
    assert p.stdout.splitlines() == ["health", "--cached", "failed"], p.stdout + p.stderr


def drained_scontrol(tmp_path, reason):
    """An scontrol whose node is drained with reason; it logs what it is asked."""
    log = tmp_path / "scontrol.log"
    s = tmp_path / "scontrol"
    s.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\n'
                 f'[ "$1" = show ] && echo "NodeName=node7 Arch=x86_64 State=IDLE+DRAIN '
                 f'Partitions=umd Reason={reason} [root@2026-12-01T10:00:00]"\nexit 0\n')
    s.chmod(0o755)
    return s, log


def test_the_slurm_wrapper_reads_the_sites_defaults_and_resumes_umds_own_drain(umd, tmp_path):
    d = umd(fake_devices=1)
    scontrol, log = drained_scontrol(tmp_path, "umd[quick gpus=0]: GPU 0 FAIL: slow")
    defaults = tmp_path / "umd-healthcheck.defaults"
    defaults.write_text(f"UMD_URL={d.base_url}\nUMD_HEALTHCHECK_RESUME_OWN=1\n"
                        f"SCONTROL={scontrol}\nSLURMD_NODENAME=node7\n")
    p = subprocess.run(["/bin/sh", str(REPO / "packaging/slurm/healthcheck")],
                       capture_output=True, text=True, timeout=90,
                       env=env(UMD_HEALTHCHECK=str(HEALTHCHECK),
                               UMD_HEALTHCHECK_DEFAULTS=str(defaults)))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resumed node7" in p.stdout, p.stdout
    assert log.read_text().splitlines()[-1] == "update NodeName=node7 State=RESUME"


def test_resume_own_leaves_a_drain_that_is_not_umds(umd, tmp_path):
    d = umd(fake_devices=1)
    scontrol, log = drained_scontrol(tmp_path, "admin: reseat GPU 3")
    p = hc(d, "--mode", "slurm", "--resume-own", SCONTROL=str(scontrol),
           SLURMD_NODENAME="node7")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "stays drained: its reason is not umd's (admin: reseat GPU 3)" in p.stdout
    assert log.read_text() == "show node node7 -o\n"


def test_health_cached_reads_the_gpu_pairs_verdict(umd):
    d = umd(fake_devices=2)
    p = ctl(d, "health", "--cached")
    assert "GPU pairs" not in p.stdout, p.stdout  # never checked: no line, not unknown
    assert ctl(d, "health").returncode == 0
    p = ctl(d, "health", "--cached")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^GPU pairs \(every GPU\) PASS: ", p.stdout, re.M), p.stdout
    p = ctl(d, "health", "--cached", "--json")
    doc = json.loads(p.stdout)
    assert [x["verdict"] for x in doc["devices"] if x["uuid"] == "node"] == ["pass"]


def test_health_cached_pairs_verdict_past_max_age_is_unknown(umd):
    d = umd(fake_devices=2)
    assert ctl(d, "health").returncode == 0

    def aged():  # polled, not slept through: the verdict passes 1 s a second or two from now
        p = ctl(d, "health", "--cached", "--max-age", "1s")
        return p if p.returncode == 4 else None

    p = wait_for(aged, timeout=10, what="the verdict to pass --max-age 1s")
    assert p.returncode == 4, p.stdout + p.stderr
    assert re.search(r"^GPU pairs \(every GPU\) UNKNOWN: the last verdict is \d+ s old",
                     p.stdout, re.M), p.stdout


# -- how umd-healthcheck reaches umd: its unix socket by default (issue 58) --

@pytest.fixture
def short_dir():  # as test_access.py's
    d = tempfile.mkdtemp(prefix="umd-", dir="/tmp")  # sun_path holds 108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_healthcheck_reaches_umd_on_its_unix_socket_by_default(umd, short_dir):
    sock = os.path.join(short_dir, "umd.sock")
    umd(fake_devices=2, listen=False, args=["--listen", "", "--unix-socket", sock])
    e = env(UMD_HEALTHCHECK_UNIX_SOCKET=sock)
    p = subprocess.run(["/bin/sh", str(HEALTHCHECK), "--timeout", "20s"], capture_output=True,
                       text=True, timeout=60, env=e)
    assert p.returncode == 0 and "GPU 1 " in p.stdout, p.stdout + p.stderr


def test_healthcheck_url_wins_over_the_unix_socket(umd, short_dir):
    sock = os.path.join(short_dir, "umd.sock")
    umd(fake_devices=2, args=["--unix-socket", sock], env={"UMD_FAKE_LINK": "0=4x8"})  # its GPU 0 warns
    ok = umd(fake_devices=2)
    e = env(UMD_HEALTHCHECK_UNIX_SOCKET=sock)
    for how in (["--url", ok.base_url], []):
        if not how:
            e["UMD_URL"] = ok.base_url
        p = subprocess.run(["/bin/sh", str(HEALTHCHECK), *how, "--timeout", "20s"],
                           capture_output=True, text=True, timeout=60, env=e)
        assert p.returncode == 0, (how, p.stdout + p.stderr)


def test_nhc_check_reaches_umd_on_its_unix_socket_by_default(umd, short_dir):
    sock = os.path.join(short_dir, "umd.sock")
    umd(fake_devices=2, listen=False, args=["--listen", "", "--unix-socket", sock],
        env={"UMD_FAKE_LINK": "1=4x8"})
    e = env(UMD_HEALTHCHECK_UNIX_SOCKET=sock)
    assert subprocess.run(["/bin/sh", str(HEALTHCHECK), "--timeout", "20s"], env=e,
                          capture_output=True, timeout=60).returncode == 1
    script = (f'die() {{ echo "DIE $1 $2"; exit 1; }}\nlog() {{ echo "LOG $*"; }}\n'
              f'. {NHC}\ncheck_umd\necho "RC $?"\n')
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env=env(UMD_NHC_UMDCTL=UMDCTL, UMD_NHC_UNIX_SOCKET=sock))
    assert p.stdout.startswith("DIE 1 umd: GPU 1 ") and "Gen4 x8" in p.stdout, p.stdout + p.stderr


def test_healthcheck_passes_over_a_unix_socket_it_may_not_use(umd, short_dir):
    """umd-healthcheck.service's DynamicUser is not in the socket's group: it goes on asking
    umd's URL rather than failing on the socket (run here as nobody, the socket 0600 root's)."""
    os.chmod(short_dir, 0o755)
    sock = os.path.join(short_dir, "umd.sock")
    umd(fake_devices=1, args=["--unix-socket", sock, "--unix-socket-mode", "0600"])
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "/bin/sh", str(HEALTHCHECK), "--timeout", "5s"], capture_output=True,
                       text=True, timeout=60, env=env(UMD_HEALTHCHECK_UNIX_SOCKET=sock))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "127.0.0.1:8470" in p.stdout and "unix socket" not in p.stdout, p.stdout
