"""systemd's watchdog: with WATCHDOG_USEC set, umd pets it (WATCHDOG=1) at least twice per
period while its workers answer; without it, never."""
import time


def watchdog_pets(d, seconds):
    before = sum(m.count("WATCHDOG=1") for m in d.notify)
    d.read_notify(seconds)
    return sum(m.count("WATCHDOG=1") for m in d.notify) - before


def test_watchdog_is_petted_within_each_period(umd):
    d = umd(env={"WATCHDOG_USEC": "600000"})
    pets = watchdog_pets(d, 2.0)
    assert pets >= 3, d.notify  # 600 ms period, petted every half period


def test_no_watchdog_pets_unless_asked(umd):
    d = umd()
    assert watchdog_pets(d, 1.0) == 0
