"""umd's CPU a job and commits a job for two-part jobs whose parts last DELAY ms (fake GPUs):
where parts are longer than a commit, as a real benchmark's are. Usage: longparts.py UMD_DIR [ARGS...]"""
import os, sys, tempfile, time, pathlib
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests" / "integration"))
UMD = sys.argv[1]
os.environ["UMD_BIN"] = UMD + "/umd"
os.environ["UMD_WORKER"] = UMD + "/kernels/umd-worker"
import conftest
N, DELAY = int(os.environ.get("N", 150)), int(os.environ.get("DELAY", 30))
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1e6 / os.sysconf("SC_CLK_TCK")
def commits(d):
    for ln in d.get("/metrics").text.splitlines():
        if ln.startswith("umd_store_commits_total "):
            return float(ln.split()[1])
    return float("nan")
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    d = conftest.Daemon(tmp, fake_devices=2, args=sys.argv[2:], state_dir=tmp / "state")
    try:
        job = {"benchmark": "copy", "devices": [0, 1],
               "params": {"size": "4KiB", "iterations": 1, "fake_delay_ms": DELAY}}
        time.sleep(1)
        c0, k0, t0 = cpu(d.process.pid), commits(d), time.monotonic()
        ids = [d.post("/v1/jobs", json=job).json()["id"] for _ in range(N)]
        while d.get("/v1/jobs/" + ids[-1]).json()["state"] != "succeeded":
            time.sleep(0.2)
        c1, k1, t1 = cpu(d.process.pid), commits(d), time.monotonic()
        print(f"{UMD} {' '.join(sys.argv[2:])}: jobs={N} delay_ms={DELAY} cpu_us_per_job={(c1-c0)/N:.0f} "
              f"commits_per_job={(k1-k0)/N:.2f} wall_s={t1-t0:.1f}")
    finally:
        d.kill()
