"""Linux siw's perftest against ``rnic perftest`` on the simulated NIC, whose TCP and core
move every payload octet: ``ib_send_bw`` / ``ib_write_bw -R`` / ``ib_read_bw -R`` in the
guest over its virtual cable to ``rnic perftest --device tcp:`` of ``rnic nic-sim``, and
the NIC as the client of the guest's ``ib_send_bw`` / ``ib_read_bw`` server (both
connections, perftest's exchange and the test QP, are the NIC's own;
tests/interop/test_nic_rping.py starts the NIC). Checked: both exit statuses, the numbers
perftest printed, the traffic our side saw, the NIC's counters. Prints the bandwidth
measured (the simulated NIC runs at about 1/370 of a 1 Gb/s NIC's speed). Skips, with the
reason, when the siw VM is not prepared.
"""

from __future__ import annotations

import pytest

from rnic.host.apps import perftest as pt
from tests.interop.test_nic_rping import check_nic, start_nic
from tests.interop.test_perftest import _attempts, _finish, _first_line, _guest_cmd, _ours

pytestmark = pytest.mark.slow


def _checked(rc, result, err, vm_rc, vm_out, test, size, iters):
    """Both sides ended well and perftest printed one result of ``size`` x ``iters``: that
    result and ours."""
    assert rc == 0, f"rnic perftest failed: {err}\nguest:\n{vm_out}"
    assert result["ok"] and result["test"] == test, result
    assert "PERFTEST_EXIT 0" in vm_out and vm_rc == 0, vm_out
    printed = pt.parse_report_lines(vm_out)
    assert [(r.size, r.iters) for r in printed] == [(size, iters)], vm_out
    return printed[0], result["results"][0]


def _stop_nic(res):
    nic = res[5]
    nic.kill()
    nic.communicate(timeout=30)


def _on_a_fresh_nic(run):
    """Run ``run`` against a new ``rnic nic-sim``, again on a new one (the failed attempt's
    stopped) while the guest's perftest could not calibrate its clock (``_attempts``):
    ``(rc, result, err, vm_rc, vm_out, nic, control)``."""
    def fresh(siw_vm, rnic, free_port, free_udp_port, *args):
        nic, control, device, wire = start_nic(siw_vm, rnic, free_port, free_udp_port)
        return (*run(siw_vm, device, wire, *args), nic, control)
    return _attempts(fresh, discard=_stop_nic)


@_on_a_fresh_nic
def _siw_client_to_the_nic(siw_vm, device, wire, test, size, iters):
    proc = _ours([test, "-p", 18515, "-s", size, "-n", iters, "--timeout", 120, "--json",
                  "--device", device])
    listening = _first_line(proc, timeout=60)
    assert listening["event"] == "listening" and listening["port"] == 18515
    vm = siw_vm.start("default", _guest_cmd(test, size, iters, "", "169.254.7.2")
                      .replace("-d siw0", "-d siw1").format(port=18515), wire=wire,
                      timeout=300)
    vm_rc, vm_out = vm.wait(timeout=330)
    # (siw counts a Write done once its socket took it: the simulated NIC may still be
    # draining that socket, at about 1/400 of a board's speed, 1/2000 on a loaded machine;
    # our server ends by itself within its --timeout of no progress)
    rc, result, err = _finish(proc, timeout=180)
    return rc, result, err, vm_rc, vm_out


@_on_a_fresh_nic
def _the_nic_to_a_siw_server(siw_vm, device, wire, test, size, iters):
    vm = siw_vm.start("default", _guest_cmd(test, size, iters, "")
                      .replace("-d siw0", "-d siw1").format(port=18515), wire=wire,
                      timeout=300)
    proc = _ours([test, "169.254.7.1", "-p", 18515, "-s", size, "-n", iters, "--retry", 120,
                  "--timeout", 120, "--json", "--device", device])
    rc, result, err = _finish(proc, timeout=300)
    vm_rc, vm_out = vm.wait(timeout=330)
    return rc, result, err, vm_rc, vm_out


@pytest.mark.parametrize("test,size,iters", [("send", 4096, 20), ("write", 16384, 20),
                                            ("read", 16384, 20), ("send", 1, 20),
                                            ("write", 1, 20), ("write", 65536, 10)])
def test_siw_perftest_client_to_the_nic(siw_vm, rnic, free_port, free_udp_port, test, size,
                                        iters):
    *run, nic, control = _siw_client_to_the_nic(siw_vm, rnic, free_port, free_udp_port,
                                                test, size, iters)
    rc, result, err, vm_rc, vm_out = run
    printed, ours = _checked(*run, test, size, iters)
    assert (ours["bytes"], ours["iterations"]) == (size, iters)
    if test == "send":
        assert result["traffic"]["messages"] == iters
        assert result["traffic"]["octets"] == iters * size
    else:
        assert result["remote_report"] == ours
    print(f"\nib_{test}_bw -s {size} -n {iters} from siw to the simulated NIC: "
          f"{printed.bw_avg:.2f} MB/s average")
    check_nic(nic, control)


@pytest.mark.parametrize("test,size,iters", [("send", 4096, 20), ("read", 16384, 20)])
def test_the_nic_to_a_siw_perftest_server(siw_vm, rnic, free_port, free_udp_port, test, size,
                                          iters):
    """``rnic perftest`` on the NIC as the client: the NIC opens both connections to siw's
    ``ib_send_bw`` / ``ib_read_bw -R`` server in the guest; the Reads' IRD is the NIC's
    (QUEUE_CAPS)."""
    *run, nic, control = _the_nic_to_a_siw_server(siw_vm, rnic, free_port, free_udp_port,
                                                  test, size, iters)
    result = run[1]
    _, ours = _checked(*run, test, size, iters)
    assert (ours["bytes"], ours["iterations"]) == (size, iters) and ours["bw_average"] > 0
    assert result["traffic"]["messages"] == iters
    assert result["traffic"]["octets"] == iters * size
    if test == "read":
        assert result["traffic"]["nonzero"]            # siw's (random) buffer, read
    print(f"\nib_{test}_bw -s {size} -n {iters} from the simulated NIC to siw: "
          f"{ours['bw_average']:.2f} MB/s average")
    check_nic(nic, control)
