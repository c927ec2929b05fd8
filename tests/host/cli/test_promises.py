"""What the ``rnic`` command line promises, everywhere: exit 0 ok, 1 failure, 2 usage with
one line on stderr, 3 protocol error; a closed stdout ends quietly (0); undecodable input
is a usage error; ``-o FILE`` is renamed into place only on success; ``--device`` help
comes from the driver's one list of kinds; ``model`` says it is fresh, ``tcp:`` registers
live on; the encode line format has a complete sample; ``rnic demo --json`` has one schema.
(The build progress has its own module, test_progress.py.)
"""

import json
import os
import re
import select
import subprocess
import sys
from pathlib import Path

import click
import pytest

from rnic.host import cli
from rnic.host.apps.demo_model import MOVED_KEYS, NEGOTIATED_KEYS, RESULT_KEYS, TRAFFIC_KEYS
from rnic.host.cli.codec import SAMPLE_INPUT
from rnic.host.cli.progress import PLAIN_LINE
from rnic.host.driver.device import device_kinds

TIMEOUT = 60
#: A command that may build a simulation first (a fresh cache: minutes on a busy machine).
BUILD_TIMEOUT = 900
README = Path(__file__).resolve().parents[3] / "README.md"
SEND = {"ddp": {"t": 0, "l": 1, "dv": 1, "qn": 0, "msn": 1, "mo": 0},
        "rdmap": {"rv": 1, "opcode": 3}, "payload": "ab" * 1000}


def argv(*args):
    return [sys.executable, "-m", "rnic.host.cli", *map(str, args)]


def run(*args, stdin=b"", env=None, timeout=TIMEOUT):
    proc = subprocess.run(argv(*args), input=stdin, capture_output=True, timeout=timeout,
                          env=env)
    return proc.returncode, proc.stdout, proc.stderr.decode()


def in_process(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def one_error_line(err):
    """``err`` is one error line (after the build progress of a fresh simulation cache, one
    line per phase)."""
    err = "".join(line for line in err.splitlines(keepends=True)
                  if not PLAIN_LINE.match(line.rstrip("\n")))
    return err.count("\n") == 1 and err.startswith("rnic") and ": error: " in err


# -- a closed stdout ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_stream(tmp_path_factory):
    """About 3 MB of FPDUs: far more than a pipe holds."""
    path = tmp_path_factory.mktemp("big") / "big.bin"
    code, out, err = run("encode", "-o", path, stdin=(json.dumps(SEND) + "\n").encode() * 3000)
    assert code == 0, err
    return path


def test_decode_into_head_ends_quietly_with_0(big_stream):
    """``rnic decode big.bin | head -1``: no "Broken pipe" message, status 0."""
    command = " ".join(argv("decode", big_stream))
    proc = subprocess.run(f"{command} | head -1; echo status ${{PIPESTATUS[0]}}", shell=True,
                          capture_output=True, timeout=TIMEOUT, executable="/bin/bash")
    first, status = proc.stdout.decode().splitlines()
    assert json.loads(first)["offset"] == 0
    assert (status, proc.stderr) == ("status 0", b"")


@pytest.mark.parametrize("args", [("decode", "BIG"), ("regs", "dump"), ("demo", "--device", "model"),
                                  ("encode", "BIG_JSON")])
def test_a_closed_stdout_ends_any_command_quietly(big_stream, tmp_path, args):
    """The reader is gone before the command writes: every write fails with EPIPE."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(SEND) + "\n")
    args = [{"BIG": big_stream, "BIG_JSON": src}.get(a, a) for a in args]
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.run(argv(*args), stdout=write_end, stderr=subprocess.PIPE,
                          timeout=TIMEOUT)
    os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, b"")


# -- undecodable input, output files ------------------------------------------------------------

@pytest.mark.parametrize("engine", ["model", "rtl"])
def test_encode_non_utf8_input_is_one_line_and_status_2(engine):
    good = json.dumps(SEND).encode() + b"\n"
    code, out, err = run("encode", "--engine", engine, stdin=good + b"\xff\xfe{}\n")
    assert code == 2 and one_error_line(err), err
    assert "line 2" in err and "not UTF-8" in err and "Traceback" not in err


def test_a_failed_encode_leaves_the_output_file_as_it_was(tmp_path):
    out = tmp_path / "out.bin"
    out.write_bytes(b"before")
    lines = (json.dumps(SEND) + "\n").encode() * 50 + b"not json\n"
    code, _, err = run("encode", "-o", out, stdin=lines)
    assert code == 2 and "line 51" in err and one_error_line(err)
    assert out.read_bytes() == b"before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]    # no temporary left


def test_a_new_output_file_appears_only_when_done(tmp_path):
    out = tmp_path / "new.bin"
    code, _, _ = run("encode", "-o", out, stdin=b"\xff\n")
    assert code == 2 and not out.exists() and list(tmp_path.iterdir()) == []
    code, stream, err = run("encode", stdin=(json.dumps(SEND) + "\n").encode())
    assert code == 0, err
    code, _, err = run("encode", "-o", out, stdin=(json.dumps(SEND) + "\n").encode())
    assert code == 0 and out.read_bytes() == stream
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask
    code, _, err = run("encode", "-o", tmp_path / "no" / "dir.bin")
    assert code == 2 and one_error_line(err) and "--output" in err


# -- device specs and numbers: usage errors at option parsing -----------------------------------

DEVICE_COMMANDS = [
    ("regs", "dump"), ("regs", "read", "ID"), ("regs", "write", "SCRATCH", "1"), ("status",),
    ("serve", "--port", "0"), ("listen", "--port", "0", "--once"), ("connect", "127.0.0.1:9"),
    ("rping", "-c", "-a", "127.0.0.1", "-p", "9"), ("perftest", "write", "127.0.0.1", "-p", "9"),
]
BAD_SPECS = ["uart", "uart:", "uart:/dev/ttyS0@fast", "uart:/no/such/port", "model:width=3",
             "model:depth=3", "tcp:nowhere", "pci"]


@pytest.mark.parametrize("cmd", DEVICE_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_malformed_device_is_a_usage_error_everywhere(capsys, cmd):
    for spec in BAD_SPECS:
        code, out, err = in_process(capsys, *cmd, "--device", spec)
        assert code == 2 and out == "" and one_error_line(err), (spec, err)
        assert "'--device'" in err, (spec, err)


PCAP_COMMANDS = [("listen", "--port", "0", "--once"), ("connect", "127.0.0.1:9"),
                 ("rping", "-s", "-a", "127.0.0.1", "-p", "0")]


@pytest.mark.parametrize("cmd", PCAP_COMMANDS, ids=lambda c: c[0])
def test_a_pcap_file_that_cannot_be_written_is_a_usage_error_before_any_connection(
        capsys, tmp_path, cmd):
    for bad, why in [(tmp_path / "missing" / "x.pcap", "does not exist"),
                     (tmp_path, "is a directory")]:
        code, out, err = in_process(capsys, *cmd, "--pcap", bad)
        assert code == 2 and out == "" and one_error_line(err), (bad, err)
        assert "'--pcap'" in err and why in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["-1", "-0x5", "-12_000"])
def test_a_negative_register_value_is_named_not_taken_for_an_option(capsys, value):
    code, out, err = in_process(capsys, "regs", "write", "SCRATCH", value)
    assert code == 2 and out == "" and one_error_line(err)
    assert "No such option" not in err
    assert f"'VALUE': value {value} does not fit 32 bits (0..0xffffffff)" in err


def test_an_unforeseen_error_is_one_line_and_status_1(capsys, monkeypatch):
    from rnic.host.driver import device as driver

    def opener(arg, **kw):
        raise RuntimeError("the plug-in broke")

    monkeypatch.setitem(driver.device_kinds(), "broken",
                        driver.DeviceKind("broken", "broken", "a plug-in that breaks", open=opener))
    code, out, err = in_process(capsys, "status", "--device", "broken")
    assert code == 1 and out == "" and one_error_line(err)
    assert "the plug-in broke (RuntimeError" in err


# -- --device help: one list, from the driver ---------------------------------------------------

def _device_params():
    """(command path, its --device Parameter) of every command of rnic."""
    def walk(cmd, path, ctx):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                yield from walk(sub, f"{path} {name}", click.Context(sub, parent=ctx,
                                                                      info_name=name))
        for p in cmd.params:
            if p.name == "device":
                yield path, p, ctx
    root = click.Context(cli.cli, info_name="rnic")
    return list(walk(cli.cli, "rnic", root))


#: A spec of each kind that parses (what the --device callback of a command takes).
SPECS = {"tcp": "tcp:127.0.0.1:7100", "uart": "uart:/dev/null"}


def test_every_device_help_lists_the_kinds_from_the_driver():
    kinds = device_kinds()
    assert "sim" in kinds                        # the entry point, not a name the CLI knows
    found = _device_params()
    assert {path for path, _, _ in found} >= {
        "rnic demo", "rnic listen", "rnic connect", "rnic rping", "rnic perftest",
        "rnic regs dump", "rnic regs read", "rnic regs write", "rnic status", "rnic serve"}
    for path, param, ctx in found:
        text = param.get_help_record(ctx)[1]
        if path == "rnic demo":      # B's data path: two kinds, and the demo's own "model"
            assert param.type.choices == ("sim", "none", "model")
            assert "model: (the demo only)" in text
            taken = ["sim", "none"]
        else:
            taken = []
            for k in kinds:
                try:
                    param.callback(ctx, param, SPECS.get(k, k))
                except click.BadParameter:
                    continue
                taken.append(k)
            assert len(taken) >= len(kinds) - 1, path           # all, or all but none
        assert taken, path
        for name in taken:
            assert f"{kinds[name].usage}: {kinds[name].help}" in text, (path, name)


def test_regs_and_status_say_model_is_fresh_and_how_to_keep_registers(capsys):
    for cmd in (["regs"], ["status"]):
        code, out, _ = in_process(capsys, *cmd, "--help")
        flat = " ".join(out.split())
        assert code == 0 and "fresh in-process model made for this one command" in flat
        assert "rnic serve --port 7100 &" in flat and "--device tcp:127.0.0.1:7100" in flat
        assert "uart:" in flat
    code, out, err = in_process(capsys, "regs", "write", "SCRATCH", "0x5a")
    assert code == 0 and "note: model ends with this command" in err
    code, out, _ = in_process(capsys, "regs", "read", "SCRATCH")
    assert out == "SCRATCH = 0x00000000  VALUE=0x0\n"        # a fresh model: from reset


def test_registers_live_on_behind_rnic_serve():
    """``rnic serve --device model``: a write by one command is read by the next."""
    serve = subprocess.Popen(argv("serve", "--port", "0", "--device", "model", "--json"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        r, _, _ = select.select([serve.stdout], [], [], TIMEOUT)
        assert r, "rnic serve printed nothing"
        address = json.loads(serve.stdout.readline())["address"]
        assert address.startswith("tcp:127.0.0.1:")
        code, out, err = run("regs", "write", "SCRATCH", "0x5a", "--device", address)
        assert code == 0 and err == "", err                    # lasting: no note
        code, out, err = run("regs", "read", "SCRATCH", "--device", address)
        assert (code, out.decode()) == (0, "SCRATCH = 0x0000005a  VALUE=0x5a\n"), err
        code, out, err = run("regs", "write", "CTRL.ENABLE", "1", "--device", address)
        assert code == 0, err
        code, out, err = run("status", "--device", address, "--json")
        assert code == 0 and json.loads(out)["enabled"] is True, err
    finally:
        serve.kill()
        serve.communicate()


def test_uart_and_tcp_devices_outlive_the_command_model_and_sim_do_not():
    kinds = device_kinds()
    assert kinds["tcp"].lasting and kinds["uart"].lasting
    assert not kinds["model"].lasting and not kinds["sim"].lasting


# -- the encode input format --------------------------------------------------------------------

def test_encode_help_and_readme_show_complete_sample_lines(capsys):
    code, out, _ = in_process(capsys, "encode", "--help")
    assert code == 0
    readme = README.read_text()
    for line in SAMPLE_INPUT:
        assert any(x.strip() == line for x in out.splitlines())   # whole, not wrapped
        assert line in readme
    code, stream, err = run("encode", stdin="\n".join(SAMPLE_INPUT).encode() + b"\n")
    assert code == 0 and stream, err
    code, out, err = run("decode", "--strict", stdin=stream)
    assert code == 0, err
    recs = [json.loads(x) for x in out.splitlines()]
    assert [r["payload"] for r in recs] == ["68656c6c6f", "0badcafe"]
    assert [r["rdmap"]["name"] for r in recs] == ["send", "write"]


# -- rnic demo --json: one schema ---------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_results():
    out = {}
    for device in ("model", "none", "sim"):
        code, stdout, err = run("demo", "--device", device, "--json",
                                timeout=BUILD_TIMEOUT if device == "sim" else TIMEOUT)
        assert code == 0, err
        out[device] = json.loads(stdout)
    return out


def test_demo_json_has_the_same_keys_for_every_device(demo_results):
    for device, res in demo_results.items():
        assert list(res) == list(RESULT_KEYS), device
        assert res["device"] == device and res["ok"] is True
        assert list(res["negotiated"]) == list(NEGOTIATED_KEYS), device
        assert list(res["traffic"]) == list(TRAFFIC_KEYS), device
        assert set(res["moved"]) == {"A->B", "B->A"}, device
        assert all(list(m) == list(MOVED_KEYS) for m in res["moved"].values()), device
        assert set(res["seconds"]) == {"device_start", "total"}, device
        assert re.fullmatch(r"[0-9a-f]*", res["negotiated"]["peer_private_data"])
    assert demo_results["sim"]["hardware_counters"]["tx_fpdus"] > 0
    assert demo_results["none"]["hardware_counters"] is None
    assert demo_results["model"]["stats"] is None and demo_results["none"]["stats"]["a"]
    assert demo_results["model"]["terminate"]["layer"] == 1
    assert demo_results["none"]["terminate"] is None


def test_demo_help_documents_every_key(capsys):
    code, out, _ = in_process(capsys, "demo", "--help")
    assert code == 0
    for key in RESULT_KEYS:
        assert re.search(rf"^\s+{key}\s", out, re.M), key
