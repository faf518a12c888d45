"""The scheduler path against answers that are not umd's: umdctl, umd-healthcheck (slurm and
nagios modes) and the NHC check pointed at a hostile server (hostile.py) that answers as a
reverse proxy, a captive portal or a broken server would. None of it is a failure of the node:
a wrong shape, garbage or HTML is an error answer (umdctl exit 3), a server that hangs or
trickles is no answer in time (exit 4), and neither drains, fails NHC or goes CRITICAL. Only
umd's own problem+json (503 "no usable GPU") and its verdicts fail. Server strings are printed
without their control characters."""
import subprocess
import time

import pytest

from hostile import (CLOSE, HANG, TRICKLE, Hostile, accepted_then_hanging, device, job, job_id,
                     part, problem)
from test_umdctl import HEALTHCHECK, NHC, UMDCTL, env, fake_scontrol

HTML_503 = (503, "text/html", "<html><head><title>503 Service Unavailable</title></head>"
            "<body><h1>Service Unavailable</h1>nginx</body></html>")
HTML_200 = (200, "text/html", "<!DOCTYPE html><html><body>Please log in</body></html>")
JID = "01a233e6-4ca0-7760-a47b-375318ca1d3a"


def ctl(url, *args, timeout=30):
    return subprocess.run([UMDCTL, "--url", url, *args], capture_output=True, text=True,
                          timeout=timeout, env=env())


def hc(url, *args, timeout=90, **extra):
    return subprocess.run(["/bin/sh", str(HEALTHCHECK), "--url", url, *args],
                          capture_output=True, text=True, timeout=timeout, env=env(**extra))


def answer(what):
    return Hostile(lambda req: what)


def no_drain(url, tmp_path, *args):
    """Run the Slurm mode; assert it left the node alone. Returns the run."""
    scontrol, log = fake_scontrol(tmp_path)
    p = hc(url, "--mode", "slurm", *args, SCONTROL=str(scontrol), SLURMD_NODENAME="node7")
    assert p.returncode == 0, p.stdout + p.stderr
    assert not log.exists(), log.read_text()
    return p


# -- 503 --

def test_a_proxys_html_503_to_the_health_check_is_an_error_not_a_verdict(tmp_path):
    with answer(HTML_503) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 3, p.stdout + p.stderr
        assert "HTTP 503" in p.stderr and "no usable GPU" not in p.stdout + p.stderr
        no_drain(h.url, tmp_path, "--timeout", "5s")
        n = hc(h.url, "--mode", "nagios", "--timeout", "5s")
        assert n.returncode == 3 and n.stdout.startswith("UMD UNKNOWN - "), n.stdout


def test_umds_own_503_for_a_wait_is_not_a_failure(tmp_path):
    # umd's problem document, but about the waiters, not the GPUs
    with answer(problem(503, "too many waiters", field="wait")) as h:
        assert ctl(h.url, "health", "--timeout", "5s").returncode == 3
        no_drain(h.url, tmp_path, "--timeout", "5s")


def test_umds_own_503_no_usable_gpu_fails(tmp_path):
    with answer(problem(503, "this host has no usable GPU: none found", field="devices")) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 1, p.stdout + p.stderr


# -- wrong shapes --

WRONG = {
    "an object": (200, "application/json", {"error": "upstream said no"}),
    "an array of strings": (200, "application/json", ["a", "b"]),
    "garbage": (200, "text/plain", "\x00\x01garbage\xff"),
    "HTML": HTML_200,
    "an empty body": (200, None, b""),
}
COMMANDS = {
    "devices": ["devices"],
    "devices --json": ["devices", "--json"],
    "ls": ["ls"],
    "show": ["show", JID],
    "show --json": ["show", JID, "--json"],
    "cancel": ["cancel", JID],
    "pause": ["pause", "0"],
    "resume": ["resume", "0"],
    "health --cached": ["health", "--cached"],
    "health": ["health", "--timeout", "5s"],
    "submit": ["submit", "copy"],
}


@pytest.mark.parametrize("shape", WRONG)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_exits_3_on_an_answer_of_the_wrong_shape(command, shape):
    with answer(WRONG[shape]) as h:
        p = ctl(h.url, *COMMANDS[command])
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == "", p.stdout
    assert p.stderr.startswith("umdctl: ") and p.stderr.count("\n") == 1, p.stderr


def test_an_object_for_the_device_list_is_no_verdict_anywhere(tmp_path):
    with answer((200, "application/json", {"devices": "none"})) as h:
        p = ctl(h.url, "health", "--cached")
        assert p.returncode == 3 and "owns no GPU" not in p.stdout + p.stderr, p.stdout
        no_drain(h.url, tmp_path, "--cached")
        n = hc(h.url, "--mode", "nagios", "--cached")
        assert n.returncode == 3 and n.stdout.startswith("UMD UNKNOWN - "), n.stdout
        script = (f'die() {{ echo "DIE $1 $2"; exit 1; }}\nlog() {{ echo "LOG $*"; }}\n'
                  f'. {NHC}\ncheck_umd -u {h.url}\necho "RC $?"\n')
        nhc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                             env=env(UMD_NHC_UMDCTL=UMDCTL))
        assert "RC 0" in nhc.stdout and "DIE" not in nhc.stdout, nhc.stdout


def test_a_pause_the_answer_says_did_not_take_is_an_error():
    with answer((200, "application/json", device(paused=False))) as h:
        p = ctl(h.url, "pause", "0")
    assert p.returncode == 3 and "paused" in p.stderr, p.stdout + p.stderr


def test_a_cancel_answered_with_another_job_is_an_error():
    with answer((200, "application/json", job(job_id(), state="cancelled"))) as h:
        assert ctl(h.url, "cancel", JID).returncode == 3


def health_server(final):
    """Accept the health job like umd, then answer its wait with final (a job document)."""
    jid = job_id()

    def handler(req):
        if req.method == "POST":
            return (202, "application/json", job(jid, state="queued",
                                                  parts=[part(state="queued", verdict=None)]))
        return (200, "application/json", final(jid))
    return Hostile(handler)


@pytest.mark.parametrize("verdict", ["catastrophic", None, 7])
def test_a_verdict_that_is_not_umds_word_is_an_error_not_a_failure(verdict, tmp_path):
    def final(jid):
        p = part()
        p["verdict"]["verdict"] = verdict
        return job(jid, parts=[p])
    with health_server(final) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 3, p.stdout + p.stderr
        assert "FAIL" not in p.stdout, p.stdout
        no_drain(h.url, tmp_path, "--timeout", "5s")


def test_a_health_job_without_parts_is_an_error_not_no_gpu(tmp_path):
    with health_server(lambda jid: job(jid, parts=[])) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 3 and "owns no GPU" not in p.stdout, p.stdout + p.stderr
        no_drain(h.url, tmp_path, "--timeout", "5s")


def test_a_part_cancelled_without_a_reason_is_unknown(tmp_path):
    # an older umd said only "cancelled" when a pause cancelled the GPU pairs
    def final(jid):
        return job(jid, state="cancelled", parts=[
            part(0), part("all", state="cancelled", verdict=None, error="cancelled")])
    with health_server(final) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 4, p.stdout + p.stderr
        assert "GPU pairs (every GPU) UNKNOWN: the check could not run: cancelled" in p.stdout
        no_drain(h.url, tmp_path, "--timeout", "5s")


def test_a_contended_part_without_a_verdict_is_unknown(tmp_path):
    def final(jid):
        p = part(verdict=None)
        p["contended"] = {"other_processes": 1, "note": "measured while other processes used "
                          "the GPU: never judged, never part of a baseline"}
        return job(jid, parts=[p])
    with health_server(final) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 4, p.stdout + p.stderr
        assert "UNKNOWN: measured while other processes used the GPU" in p.stdout, p.stdout
        no_drain(h.url, tmp_path, "--timeout", "5s")


# -- time --

def timed(fn):
    t = time.monotonic()
    p = fn()
    return p, time.monotonic() - t


@pytest.mark.parametrize("behaviour", [HANG, TRICKLE])
def test_health_timeout_bounds_a_server_that_never_answers(behaviour):
    with answer(behaviour) as h:
        p, took = timed(lambda: ctl(h.url, "health", "--timeout", "2s"))
    assert p.returncode == 4, p.stdout + p.stderr
    assert took < 3.0, took


def test_health_timeout_bounds_a_job_accepted_then_hanging():
    jid = job_id()

    def handler(req):
        if req.method == "POST":
            return (202, "application/json", job(jid, state="queued",
                                                  parts=[part(state="queued", verdict=None)]))
        return HANG  # the wait and the cancel
    with Hostile(handler) as h:
        p, took = timed(lambda: ctl(h.url, "health", "--timeout", "3s"))
        methods = [r.method for r in h.requests]
    assert p.returncode == 4, p.stdout + p.stderr
    assert took < 4.0, took
    assert "UNKNOWN: no verdict within 3 s (still queued" in p.stdout, p.stdout
    assert methods[:2] == ["POST", "GET"] and "DELETE" in methods, methods
    # Issue 57: one line, saying what happened (it was 3: the verdict, the wait's timeout and
    # the cancel's), none of it on stderr.
    assert (p.stdout + p.stderr).count("\n") == 1, p.stdout + p.stderr
    assert "umd stopped answering; could not cancel job " + jid in p.stdout, p.stdout


def test_submit_wait_against_a_job_accepted_then_hanging_says_one_line_beside_the_id():
    jid = job_id()
    with Hostile(accepted_then_hanging(jid)) as h:
        p, took = timed(lambda: ctl(h.url, "submit", "copy", "--wait", "--timeout", "2s"))
    assert p.returncode == 4, p.stdout + p.stderr
    assert took < 3.0, took
    assert p.stdout == jid + "\n", p.stdout
    assert p.stderr.count("\n") == 1 and "stopped answering" in p.stderr, p.stderr


def test_submit_wait_timeout_bounds_the_submit_too():
    with answer(HANG) as h:
        p, took = timed(lambda: ctl(h.url, "submit", "copy", "--wait", "--timeout", "2s"))
    assert p.returncode == 4, p.stdout + p.stderr
    assert took < 3.0, took


def test_nhc_check_bounds_a_server_that_never_answers():
    with answer(HANG) as h:
        script = (f'die() {{ echo "DIE $1 $2"; exit 1; }}\nlog() {{ echo "LOG $*"; }}\n'
                  f'. {NHC}\ncheck_umd -u {h.url} -T 1s\necho "RC $?"\n')
        p, took = timed(lambda: subprocess.run(["bash", "-c", script], capture_output=True,
                                               text=True, timeout=30,
                                               env=env(UMD_NHC_UMDCTL=UMDCTL)))
    assert "RC 0" in p.stdout and "LOG check_umd: no verdict (umdctl exit 4)" in p.stdout, \
        p.stdout
    assert took < 2.5, took


def test_a_connection_closed_without_an_answer_is_unreachable():
    with answer(CLOSE) as h:
        assert ctl(h.url, "devices").returncode == 3


@pytest.mark.system  # waits out the default timeout: 45 s
def test_slurm_mode_ends_inside_slurms_60_s_with_its_default_timeout(tmp_path):
    with Hostile(accepted_then_hanging(job_id())) as h:
        p, took = timed(lambda: no_drain(h.url, tmp_path))
    assert took < 50, took
    assert "UNKNOWN" in p.stdout, p.stdout


def test_slurm_mode_kills_a_umdctl_that_outlives_its_limit(tmp_path):
    stuck = tmp_path / "umdctl"
    stuck.write_text("#!/bin/sh\nexec sleep 600\n")
    stuck.chmod(0o755)
    scontrol, log = fake_scontrol(tmp_path)
    p, took = timed(lambda: subprocess.run(
        ["/bin/sh", str(HEALTHCHECK), "--mode", "slurm"], capture_output=True, text=True,
        timeout=60, env=env(UMDCTL=str(stuck), SCONTROL=str(scontrol),
                            UMD_HEALTHCHECK_LIMIT="2")))
    assert p.returncode == 0 and not log.exists(), p.stdout + p.stderr
    assert took < 10, took
    assert "did not finish within 2 s" in p.stdout + p.stderr, p.stdout + p.stderr


def test_slurm_mode_stops_an_scontrol_that_hangs(tmp_path):
    stuck = tmp_path / "scontrol"
    stuck.write_text("#!/bin/sh\nexec sleep 600\n")
    stuck.chmod(0o755)
    with health_server(lambda jid: job(jid, parts=[part(verdict="fail", reasons=["slow"])])) as h:
        p, took = timed(lambda: hc(h.url, "--mode", "slurm", "--timeout", "5s",
                                   SCONTROL=str(stuck), UMD_HEALTHCHECK_SCONTROL_LIMIT="1"))
    # A look that does not answer in time is no answer: the node is left as it is (issue 57).
    assert p.returncode == 1 and "so its state is unknown" in p.stdout, p.stdout + p.stderr
    assert took < 6, took  # the look at the node (1 s), killed 1 s on


def test_slurm_mode_refuses_a_limit_that_is_not_seconds():
    p = hc("http://127.0.0.1:9", "--mode", "slurm", "--limit", "1m")
    assert p.returncode == 2 and "--limit '1m'" in p.stderr, p.stderr


# -- control characters --

def test_show_prints_the_text_view_without_control_characters():
    table = f"job {JID}  copy  succeeded\x1b[2J\r\n  GPU 0\tpinned\x07 \u009b31m55 GB/s\x7f\n"
    with answer((200, "text/plain; charset=utf-8", table)) as h:
        p = ctl(h.url, "show", JID)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"job {JID}  copy  succeeded[2J\n  GPU 0\tpinned 31m55 GB/s\n", \
        repr(p.stdout)


def test_devices_prints_one_line_per_device_whatever_its_name_holds():
    evil = device(name="H200\x1b]0;owned\x07\nGPU 9 X FAIL: forged\r")
    with answer((200, "application/json", [evil])) as h:
        p = ctl(h.url, "devices")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and "\x1b" not in p.stdout and "\r" not in p.stdout, repr(p.stdout)
    assert "H200]0;owned GPU 9 X FAIL: forged" in lines[1], lines


def test_health_reasons_cannot_forge_a_line_for_the_scripts(tmp_path):
    def final(jid):
        return job(jid, parts=[part(verdict="warn",
                                    reasons=["slow\nGPU 9 GPU-x FAIL: forged\x1b[1m"])])
    with health_server(final) as h:
        p = ctl(h.url, "health", "--timeout", "5s")
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stdout.count("\n") == 1 and "\x1b" not in p.stdout, repr(p.stdout)
        scontrol, log = fake_scontrol(tmp_path)
        s = hc(h.url, "--mode", "slurm", "--timeout", "5s", SCONTROL=str(scontrol),
               SLURMD_NODENAME="node7")
        assert "Reason=umd[quick gpus=0]: GPU 0 WARN: slow GPU 9" in log.read_text(), \
            log.read_text()
        assert s.returncode == 1


def test_a_reason_naming_a_failure_is_not_a_failed_verdict(tmp_path):
    # a warn allowed by --allow-warn whose reason reads like a verdict line
    def final(jid):
        return job(jid, parts=[part(verdict="warn", reasons=["x FAIL: y"])])
    with health_server(final) as h:
        no_drain(h.url, tmp_path, "--timeout", "5s", "--allow-warn")


def test_problem_details_are_printed_without_control_characters():
    with answer((400, "application/problem+json",
                 {"type": "https://umd.dev/problems/bad-request", "title": "Bad\x1b[31m Request",
                  "status": 400, "detail": "no\nsuch\x1b[0m job"})) as h:
        p = ctl(h.url, "show", JID)
    assert p.returncode == 3
    assert p.stderr == "umdctl: HTTP 400 Bad[31m Request: no such[0m job\n", repr(p.stderr)
