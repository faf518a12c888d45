#!/usr/bin/env python3
"""Write fleet_test.yml, the promtool cases for fleet.yml: each case is a small fleet of GPUs
(one series of each kind a umd exports for a GPU) and the alerts expected. Run it after editing
a case or one of fleet.yml's knobs: `packaging/prometheus/fleet_test.py`."""
from pathlib import Path

H = "NVIDIA H200"


def gpu(node, uuid, model, h2d, fake="false", contended=None, link="gen5x16"):
    inst = f"{node}:8470"
    s = [f"      - series: 'umd_device_info{{job=\"umd\", instance=\"{inst}\", uuid=\"{uuid}\", "
         f"gpu=\"0\", UUID=\"{uuid}\", pci_bus_id=\"00000000:19:00.0\", modelName=\"{model}\", "
         f"Hostname=\"{node}\", fake=\"{fake}\"}}'\n        values: '1x40'",
         f"      - series: 'umd_health_bandwidth_bytes_per_second{{job=\"umd\", instance=\"{inst}\", "
         f"uuid=\"{uuid}\", figure=\"h2d\", link=\"{link}\"}}'\n        values: '{h2d}x40'"]
    if contended is not None:
        s.append(f"      - series: 'umd_health_check_contended{{job=\"umd\", instance=\"{inst}\", "
                 f"uuid=\"{uuid}\"}}'\n        values: '{contended}x40'")
    return "\n".join(s)


def alert_tests(alertname, alerts_at):
    """The alert_rule_test lines: at each time, the alerts expected (labels, annotations)."""
    out = ["    alert_rule_test:"]
    for t, exp in alerts_at:
        out.append(f"      - eval_time: {t}\n        alertname: {alertname}")
        if not exp:
            out.append("        exp_alerts: []")
            continue
        out.append("        exp_alerts:")
        for labels, annotations in exp:
            out.append("          - exp_labels:")
            out += [f"              {k}: \"{v}\"" for k, v in labels.items()]
            out.append("            exp_annotations:")
            out += [f"              {k}: \"{v}\"" for k, v in annotations.items()]
    return out


def case(title, gpus, alerts_at):
    out = [f"  # {title}", "  - interval: 1m", "    input_series:"]
    out += [gpu(*g[:4], **(g[4] if len(g) > 4 else {})) for g in gpus]
    return "\n".join(out + alert_tests("UmdGpuSlowerThanFleet", alerts_at))


fleet = [("node1", "GPU-1", H, 55e9), ("node2", "GPU-2", H, 55.2e9), ("node3", "GPU-3", H, 54.8e9),
         ("node4", "GPU-4", H, 55e9), ("node5", "GPU-5", H, 44e9)]
slow = {"severity": "warning", "job": "umd", "instance": "node5:8470", "uuid": "GPU-5",
        "figure": "h2d", "link": "gen5x16", "modelName": H, "Hostname": "node5", "fake": "false"}
why = {"summary": "GPU GPU-5 on node5 is 20% below its peers' h2d",
       "description": "GPU GPU-5 (NVIDIA H200, gen5x16) on node5 (node5:8470) has stayed more "
       "than 10% below the median h2d bandwidth of the NVIDIA H200 GPUs in slots like its own "
       "for 30 minutes: 20% slower. Its own check still passes, so compare it with its peers: "
       "its riser or slot, its PCIe settings, its clocks (GET /v1/jobs?benchmark=health on the "
       "node has the figures)."}
cases = [
    case("A GPU 20% below four peers of its model fires after 30 minutes, alone.", fleet,
         [("20m", []), ("35m", [(slow, why)])]),
    case("A fleet that is uniformly slow has no outlier.",
         [("node1", "GPU-1", H, 40e9), ("node2", "GPU-2", H, 40.5e9),
          ("node3", "GPU-3", H, 39.8e9), ("node4", "GPU-4", H, 40e9)], [("35m", [])]),
    case("A lone GPU of its model (a GH200 among H200s) is never judged, however slow.",
         fleet[:4] + [("node5", "GPU-5", "NVIDIA GH200 480GB", 20e9)], [("35m", [])]),
    case("A slow figure whose last canonical check was contended is not judged.",
         fleet[:4] + [("node5", "GPU-5", H, 44e9, {"contended": 1})], [("35m", [])]),
    case("A slot of another kind (gen4x16) is not compared with gen5x16 slots.",
         fleet[:4] + [("node5", "GPU-5", H, 27e9, {"link": "gen4x16"})], [("35m", [])]),
    case("Fake devices are a group of their own: four fakes do not move the real median.",
         fleet + [(f"fake{i}", f"GPU-f{i}", H, 10e9, {"fake": "true"}) for i in range(4)],
         [("35m", [(slow, why)])]),
]


# -- error rates against the fleet (group umd-fleet-errors) --

def err_gpu(node, uuid, model, ecc, replays):
    """One GPU's counters: ecc and replays are promtool value strings ('0+300x80': +300 a
    minute)."""
    inst = f"{node}:8470"
    return "\n".join([
        f"      - series: 'umd_device_info{{job=\"umd\", instance=\"{inst}\", uuid=\"{uuid}\", "
        f"gpu=\"0\", UUID=\"{uuid}\", pci_bus_id=\"00000000:19:00.0\", modelName=\"{model}\", "
        f"Hostname=\"{node}\", fake=\"false\"}}'\n        values: '1x80'",
        f"      - series: 'umd_gpu_ecc_errors_total{{job=\"umd\", instance=\"{inst}\", gpu=\"0\", "
        f"UUID=\"{uuid}\", location=\"dram\", type=\"corrected\"}}'\n        values: '{ecc}'",
        f"      - series: 'umd_gpu_ecc_errors_total{{job=\"umd\", instance=\"{inst}\", gpu=\"0\", "
        f"UUID=\"{uuid}\", location=\"dram\", type=\"uncorrected\"}}'\n        values: '0x80'",
        f"      - series: 'umd_gpu_pcie_replays_total{{job=\"umd\", instance=\"{inst}\", gpu=\"0\", "
        f"UUID=\"{uuid}\"}}'\n        values: '{replays}'"])


def err_case(title, gpus, alerts_at):
    out = [f"  # {title}", "  - interval: 1m", "    input_series:"]
    out += [err_gpu(*g) for g in gpus]
    return "\n".join(out + alert_tests("UmdGpuErrorRateAboveFleet", alerts_at))


def err_alert(kind, value):
    labels = {"severity": "warning", "job": "umd", "instance": "node5:8470", "UUID": "GPU-5",
              "kind": kind, "modelName": H, "Hostname": "node5", "fake": "false"}
    why = {"summary": f"GPU GPU-5 on node5: {value} {kind}, over ten times its peers' median",
           "description": f"GPU GPU-5 (NVIDIA H200) on node5 (node5:8470) has run at {value} "
           f"{kind} for 15 minutes, more than ten times the median of the NVIDIA H200 GPUs. Each "
           "absolute rule may still call it healthy: look at its ECC and link counters (umdctl "
           "health; nvidia-smi -q -d ECC,PCIE) before its errors turn uncorrectable."}
    return labels, why


quiet = [(f"node{i}", f"GPU-{i}", H, "0x80", "0x80") for i in range(1, 5)]
cases += [
    err_case("An ECC storm (300 corrected a minute) among quiet peers fires, at 18k an hour once the hour is full.",
             quiet + [("node5", "GPU-5", H, "0+300x80", "0x80")],
             [("10m", []), ("75m", [err_alert("ecc_corrected_per_hour", "18k")])]),
    err_case("A few corrected errors an hour on every GPU is no storm.",
             [(f"node{i}", f"GPU-{i}", H, "0+1x80", "0x80") for i in range(1, 5)]
             + [("node5", "GPU-5", H, "0+1.5x80", "0x80")], [("30m", [])]),
    err_case("PCIe replays at 5 a minute, under the link's own limit, stand out among quiet peers.",
             quiet + [("node5", "GPU-5", H, "0x80", "0+5x80")],
             [("30m", [err_alert("pcie_replays_per_minute", "5")])]),
    err_case("One replay never fires.",
             quiet + [("node5", "GPU-5", H, "0x80", "0x20 1x60")], [("30m", []), ("70m", [])]),
    err_case("Three GPUs of a model are too few to judge.",
             quiet[:2] + [("node5", "GPU-5", H, "0+300x80", "0x80")], [("30m", [])]),
]
head = ("# Unit tests for fleet.yml: `promtool test rules fleet_test.yml`. Written by fleet_test.py\n"
        "# (edit that and run it); it follows fleet.yml's knobs.\n"
        "rule_files:\n  - fleet.yml\n\nevaluation_interval: 1m\n\ntests:\n")
Path(__file__).with_name("fleet_test.yml").write_text(head + "\n\n".join(cases) + "\n")
