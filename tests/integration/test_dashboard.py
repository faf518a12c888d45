"""The dashboard page (GET /, api/dashboard.html) rendered by headless Chromium against the real
umd with fake devices: device cards with their fake badge, the sweep curves, the um_vs_explicit
bars and conclusion, the health history points, the jobs table, the empty states, the error
banner (umd down, 401), the 5 s refresh, and that the page loads nothing from off the host.

Needs the Debian package `chromium`; skipped where it is not installed."""
import json
import re
import shutil
import subprocess
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from test_jobs import submit, wait_job

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
SVG_NS = "http://www.w3.org/2000/svg"


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag = tag
        self.attrs = dict(attrs)
        self.parent = parent
        self.children = []
        self.texts = []

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def text(self):
        return "".join(t if isinstance(t, str) else t.text() for t in self.texts)

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def find_all(self, tag=None, cls=None, **attrs):
        return [n for n in self.walk()
                if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def by_id(self, ident):
        found = [n for n in self.walk() if n.attrs.get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id {ident}"
        return found[0]


class Tree(HTMLParser):
    """Just enough of a DOM to ask Chromium's serialised page questions."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.texts.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.texts.append(n)

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.texts.append(data)


def render(url, tmp_path, budget_ms=10000):
    """The page's DOM after its scripts ran for budget_ms of virtual time."""
    profile = tmp_path / "chromium-profile"
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "<html" in p.stdout, p.stderr
    return p.stdout


def banner(dom):
    b = dom.by_id("banner")
    return b.text() if "show" in b.classes else ""


# -- against the real daemon --

def test_dashboard_shows_devices_plots_health_and_jobs(umd, tmp_path):
    d = umd(fake_devices=2)
    modes = ["pinned_h2d", "pinned_d2h", "pageable_h2d", "managed_prefetch", "zero_copy"]
    sweep = submit(d, {"benchmark": "sweep", "device": 0,
                       "params": {"max_size": "1MiB", "modes": modes}})
    um = submit(d, {"benchmark": "um_vs_explicit", "device": 0, "params": {"size": "16MiB"}})
    healths = [submit(d, {"benchmark": "health", "devices": "all"}) for _ in range(3)]
    done = {j["id"]: wait_job(d, j["id"]) for j in [sweep, um, *healths]}
    assert all(j["state"] == "succeeded" for j in done.values()), done
    version = d.get("/v1/version").json()["version"]
    devices = d.get("/v1/devices").json()

    def job_gets():
        m = re.search(r'^umd_http_requests_total\{route="/v1/jobs/\{id\}",method="GET",'
                      r'status="200"\} (\d+)$', d.get("/metrics").text, re.M)
        return int(m.group(1)) if m else 0

    gets = job_gets()
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    # The health history is one list request with results, not a GET a job: only the latest
    # sweep and um_vs_explicit are fetched by id.
    assert job_gets() - gets <= 2
    assert banner(dom) == ""
    assert version in dom.by_id("version").text()
    assert dom.by_id("health-status").text() == "ok"

    # One card a device, each marked fake, each with its last verdict.
    cards = dom.by_id("devices").find_all("div", cls="device")
    assert [c.attrs["data-uuid"] for c in cards] == [x["uuid"] for x in devices]
    for card in cards:
        assert len(card.find_all("span", cls="badge-fake")) == 1
        assert "fake" in card.classes
        text = card.text()
        assert "Gen5 x16" in text and "idle" in text
        assert card.find_all("span", cls="pass"), text

    # The sweep: one curve a mode, named in the legend with its peak.
    svgs = dom.by_id("sweep").find_all("svg", cls="sweep-plot")
    assert len(svgs) == 1
    curves = svgs[0].find_all("path", cls="curve")
    assert sorted(c.attrs["data-mode"] for c in curves) == sorted(modes)
    assert all(c.attrs["d"].startswith("M") and c.attrs["d"].count("L") == 8 for c in curves)
    summary = done[sweep["id"]]["parts"][0]["result"]["summary"]
    legend = dom.by_id("sweep").find_all("ul", cls="legend")[0].text()
    for c in summary["curves"]:
        assert c["mode"] in legend
        peak = c["peak_gbps"]
        shown = f"{peak:.2f}" if peak < 10 else f"{peak:.1f}"
        assert f"peak {shown} GB/s" in legend
    assert "FAKE DATA" in svgs[0].text()

    # um_vs_explicit: a bar a mode, its ratio to pinned, and the conclusion under it.
    um_summary = done[um["id"]]["parts"][0]["result"]["summary"]
    bars = dom.by_id("um").find_all("rect", cls="bar")
    assert [b.attrs["data-mode"] for b in bars] == [m["mode"] for m in um_summary["modes"]
                                                     if not m["to_host"]] + \
        [m["mode"] for m in um_summary["modes"] if m["to_host"]]
    um_text = dom.by_id("um").text()
    assert "1.00× pinned" in um_text
    assert dom.by_id("um").find_all("p", cls="conclusion")[0].text() == um_summary["conclusion"]

    # Health history: per device, an H2D and a D2H point per health job, coloured by verdict.
    hist = dom.by_id("health-history").find_all("div", cls="health-history")
    assert [x.attrs["data-uuid"] for x in hist] == [x["uuid"] for x in devices]
    for x in hist:
        points = x.find_all(cls="hpoint")
        assert sorted(p.attrs["data-dir"] for p in points) == ["d2h"] * 3 + ["h2d"] * 3
        assert {p.attrs["data-verdict"] for p in points} == {"pass"}

    # The jobs table, newest first, each id linking to the text rendering.
    rows = dom.by_id("jobs").find_all("tr", cls="job")
    assert [r.attrs["data-id"] for r in rows] == [j["id"] for j in reversed([sweep, um,
                                                                              *healths])]
    for r in rows:
        links = r.find_all("a")
        assert links[0].attrs["href"] == f"/v1/jobs/{r.attrs['data-id']}?format=text"
        assert r.find_all("span", cls="badge-fake")
    assert "um_vs_explicit" in rows[3].text() and "0, 1" in rows[0].text()


def test_dashboard_shows_the_action_beside_the_verdict(umd, tmp_path):
    state = tmp_path / "gpu-state.json"
    state.write_text(json.dumps({"1": {"gpu_errors": {"remapped_rows": {"pending": True}}}}))
    d = umd(fake_devices=2, args=["--fake-gpu-state", str(state)])
    done = wait_job(d, submit(d, {"benchmark": "health", "devices": "all"})["id"])
    assert done["state"] == "succeeded", done
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    cards = {c.attrs["data-uuid"]: c for c in dom.by_id("devices").find_all("div", cls="device")}
    devices = d.get("/v1/devices").json()
    ok, bad = cards[devices[0]["uuid"]], cards[devices[1]["uuid"]]
    assert [a.attrs["data-action"] for a in ok.find_all("span", cls="action")] == ["none"]
    acts = bad.find_all("span", cls="action")
    assert [a.attrs["data-action"] for a in acts] == ["reset_gpu"], bad.text()
    assert acts[0].text() == "action: reset gpu"
    assert bad.find_all("span", cls="fail") and "row remap is pending" in bad.text()


def test_dashboard_says_what_to_do_when_there_is_nothing_yet(umd, tmp_path):
    d = umd(fake_devices=1)
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    assert banner(dom) == ""
    assert len(dom.by_id("devices").find_all("div", cls="device")) == 1
    assert 'no sweep yet: POST /v1/jobs {"benchmark":"sweep"' in dom.by_id("sweep").text()
    assert 'no um_vs_explicit yet: POST /v1/jobs {"benchmark":"um_vs_explicit"' in \
        dom.by_id("um").text()
    assert 'no health check yet: POST /v1/jobs {"benchmark":"health"' in \
        dom.by_id("health-history").text()
    assert 'no pipeline_sweep yet: POST /v1/jobs {"benchmark":"pipeline_sweep"}' in \
        dom.by_id("pipeline").text()
    assert "no jobs yet" in dom.by_id("jobs").text()
    assert not dom.find_all("svg")


def test_dashboard_draws_the_pipeline_sweep_against_the_limit(umd, tmp_path):
    d = umd(fake_devices=1)
    j = wait_job(d, submit(d, {"benchmark": "pipeline_sweep", "params": {"size": "256MiB"}})["id"])
    assert j["state"] == "succeeded", j
    summary = j["parts"][0]["result"]["summary"]
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    plot = dom.by_id("pipeline")
    svgs = plot.find_all("svg", cls="pipeline-plot")
    assert len(svgs) == 1
    # one curve a strategy, each with a point per intensity, and the limit drawn dashed
    curves = svgs[0].find_all("path", cls="curve")
    assert [c.attrs["data-strategy"] for c in curves] == [c["strategy"] for c in summary["curves"]]
    n = len(summary["limit"])
    for c, want in zip(curves, summary["curves"]):
        assert c.attrs["d"].startswith("M") and c.attrs["d"].count("L") == len(want["points"]) - 1
    limit = svgs[0].find_all("path", cls="limit")
    assert len(limit) == 1 and limit[0].attrs["d"].count("L") == n - 1
    assert limit[0].attrs["stroke-dasharray"]
    assert f"balanced: {summary['balanced_intensity']}" in svgs[0].text()
    legend = plot.find_all("ul", cls="legend")[0].text()
    assert "never within 10% of the limit" in legend  # managed memory on demand
    assert "within 10% of the limit from 2" in legend
    assert plot.find_all("p", cls="conclusion")[0].text() == summary["conclusion"]
    assert "FAKE DATA" in svgs[0].text()


def test_dashboard_loads_nothing_from_off_the_host(umd, tmp_path):
    d = umd(fake_devices=1)
    submit(d, {"benchmark": "health", "device": 0})
    page = d.get("/").text
    # The SVG namespace is a name, never fetched; any other absolute URL would be.
    urls = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"'<>)]*", page))
    assert urls <= {SVG_NS, "//www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(link|iframe|img|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert not re.search(r"@import|url\(", page, re.I)
    # What the scripts built links only to this host, by path.
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    refs = [n.attrs[a] for n in dom.walk() for a in ("src", "href") if a in n.attrs]
    assert refs, "expected links in the rendered page"
    assert all(r.startswith("/") and not r.startswith("//") for r in refs), refs


# -- against a stand-in, for what the real daemon will not do on request --

class StandIn:
    """Serves umd's own page at / and answers the API as `api(path, calls)` says:
    (status, body) to reply, or None to drop the connection as a dead daemon would."""

    def __init__(self, page, api):
        self.calls = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/":
                    body, status, ctype = page.encode(), 200, "text/html; charset=utf-8"
                else:
                    key = self.path
                    outer.calls[key] = outer.calls.get(key, 0) + 1
                    answer = api(self.path, outer.calls[key])
                    if answer is None:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    status, doc = answer
                    body = json.dumps(doc).encode()
                    ctype = ("application/json" if status < 400
                             else "application/problem+json")
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def page(umd):
    """The page as umd serves it (the compiled-in bytes, not the source file)."""
    r = umd(fake_devices=1).get("/")
    assert r.status_code == 200
    return r.text


def test_dashboard_banner_when_umd_does_not_answer(page, tmp_path):
    with StandIn(page, lambda path, n: None) as s:
        dom = Tree(render(s.url, tmp_path)).root
    text = banner(dom)
    assert "umd is not answering" in text, text
    assert dom.by_id("devices").text() == "loading…"


def test_dashboard_banner_asks_for_a_token_on_401(page, tmp_path):
    problem = {"type": "https://umd.dev/problems/unauthorized", "title": "Unauthorized",
               "status": 401, "detail": "this endpoint needs a bearer token"}
    with StandIn(page, lambda path, n: (401, problem)) as s:
        dom = Tree(render(s.url, tmp_path)).root
    text = banner(dom)
    assert "401" in text and "bearer token" in text and "auth_reads" in text, text
    assert dom.by_id("banner").find_all("input", type="password")


def test_dashboard_jobs_table_refreshes_without_reload(page, tmp_path):
    def job(i):
        return {"id": f"01a00000-0000-7000-8000-{i:012d}", "benchmark": "copy",
                "state": "succeeded", "created": "2026-01-01T00:00:00Z", "fake": True,
                "finished": "2026-01-01T00:00:01Z", "parts": [{"device": 0, "uuid": "GPU-x"}]}

    def api(path, n):
        if path == "/v1/jobs?limit=20":
            return 200, {"jobs": [job(i) for i in range(n, 0, -1)], "next": None}
        if path.startswith("/v1/jobs"):
            return 200, {"jobs": [], "next": None}
        if path == "/v1/health":
            return 200, {"status": "ok", "reason": None, "problems": []}
        if path == "/v1/devices":
            return 200, []
        if path == "/v1/version":
            return 200, {"version": "9.9.9", "build": "x"}
        return 404, {"type": "about:blank", "title": "Not Found", "status": 404, "detail": path}

    with StandIn(page, api) as s:
        dom = Tree(render(s.url, tmp_path, budget_ms=12000)).root
        fetched = s.calls["/v1/jobs?limit=20"]
    assert banner(dom) == ""
    rows = dom.by_id("jobs").find_all("tr", cls="job")
    # Loaded at 0 s, then every 5 s: the third list (three jobs) is the one shown.
    assert fetched >= 3
    assert len(rows) >= 3 and rows[0].attrs["data-id"] == job(len(rows))["id"]
    assert "no devices" in dom.by_id("devices").text()


def test_dashboard_draws_the_placement_matrix_and_the_embedding_factors(umd, tmp_path):
    d = umd(fake_devices=1)
    t = wait_job(d, submit(d, {"benchmark": "train_step",
                               "params": {"classes": ["weights", "all"]}})["id"])
    e = wait_job(d, submit(d, {"benchmark": "embedding_gather", "params": {"size": "64MiB"}})["id"])
    assert t["state"] == "succeeded" and e["state"] == "succeeded"
    pm = t["parts"][0]["result"]["placement_matrix"]
    dom = Tree(render(d.base_url + "/", tmp_path)).root
    table = dom.by_id("train").find_all("table", cls="placement-matrix")
    assert len(table) == 1
    rows = table[0].find_all("tr", cls="placement-row")
    assert [r.attrs["data-class"] for r in rows] == ["weights", "all"]
    cell = pm["rows"][0]["cells"]["host_mapped"]
    assert f"{cell['first_vs_device']:.2f}× / {cell['steady_vs_device']:.2f}×" in rows[0].text()
    assert dom.by_id("train").find_all("p", cls="conclusion")[0].text() == pm["conclusion"]
    bars = dom.by_id("embed").find_all("rect", cls="bar")
    factors = e["parts"][0]["result"]["embedding"]["factors"]
    assert [b.attrs["data-strategy"] for b in bars] == [f["strategy"] for f in factors]
    assert "TorchRec" in dom.by_id("embed").text()
