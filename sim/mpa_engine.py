"""RTL engines of ``rnic decode``/``rnic encode``: the Verilated MPA blocks behind the model's API.

:class:`RxEngine` runs :class:`rnic.hdl.mpa_rx.MpaRxDeframer` and :class:`TxEngine`
runs :class:`rnic.hdl.mpa_tx.MpaTxFramer`, each compiled once per width by
:class:`rnic.sim.fast.FastSim` (C++ harness, cached under :func:`rnic.sim.runner.build_root`), on any
number of connections: TCP segments / ULPDUs in, ULPDUs with their verdicts /
FPDU runs out. Beats are packed into and parsed from the harness's record
files directly (no per-field dicts), so that benchmark-sized runs stay cheap.

:class:`DdpEngine` runs :class:`rnic.hdl.ddp_rx.DdpRx` for the header checks of
``rnic decode --engine rtl --strict`` (:func:`strict_checks`: DDP/RDMAP version,
opcode, queue number, ULPDU shorter than its header; the verdicts are the
hardware's, worded with the model's text, and must agree with the model's).

:func:`decode` and :func:`encode` are the single-connection front ends that
``rnic decode --engine rtl`` / ``rnic encode --engine rtl`` use; they return
exactly what :class:`rnic.host.model.fpdu.FpduDecoder` (``feed`` + ``close``) and
:class:`rnic.host.model.fpdu.FpduEncoder` give:

* The deframer reports per FPDU only the ULPDU octets, a CRC status and an
  error kind. Everything else of a :class:`~rnic.host.model.fpdu.FpduRecord` is
  reconstructed from the stream geometry: the FPDU starts where the previous
  one ended (offset 0 first), its layout follows from the ULPDU length the
  hardware delivered (:func:`rnic.host.model.fpdu.fpdu_layout`), and the FPDUPTRs "as
  received" are read from the input at the marker offsets of that layout.
  The verdicts (CRC ok/unchecked, which error) are the hardware's; for an
  error the host words it with the model's text functions
  (:func:`rnic.host.model.fpdu.too_long_error` ...), filling in the values the text
  names (ULPDU_Length, control octet, received/computed CRC, the first
  marker whose FPDUPTR disagrees) from the input. Hardware output that no
  input can explain (an abort beat, BAD without an error, an FPDU beyond
  the input, octets after an error ...) raises :class:`RtlEngineError`.
* End of stream. The hardware does not know that the stream ended; the host
  does (TCP FIN), and reports ``TCP_CLOSED`` for a stream that ends inside
  an FPDU, as the model's ``close()`` does. The deframer works on 4-octet
  words, so a stream that ends 2 or 3 octets into the word holding
  ULPDU_Length would leave that field unjudged, while the model judges the
  field (and, at 3 octets, the DDP control octet) as soon as it is in. The
  host therefore pads a stream that does not end on the 4-octet grid with
  zero octets up to it, and discards every verdict that depends on a padded
  octet: an FPDU that ends beyond the input, and TOO_SHORT when the control
  octet was padded (unless ULPDU_Length is 0, short of any header).
* The input is cut into TCP segments of random sizes (seeded: 1..1460
  octets, a third of them at most 2W + 3) so that segments end anywhere in
  markers, length fields, ULPDUs, pads and CRCs.
"""

import random
import resource
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["DEFAULT_CONNECTIONS", "RtlEngineError", "RxUnit", "RxRun", "TxRun", "RxEngine",
           "TxEngine", "rx_engine", "tx_engine", "random_cuts", "decode", "encode",
           "DdpEngine", "ddp_engine", "strict_checks", "HEADER_ERRORS", "DDP_CONNECTIONS"]

#: Connections of the engines' builds (one build per width serves the CLI, the tests and
#: ``rnic bench mpa``).
DEFAULT_CONNECTIONS = 16

#: Largest TCP segment of the random cuts (an Ethernet EMSS).
MAX_SEGMENT = 1460


class RtlEngineError(RuntimeError):
    """The simulated hardware produced output that no input explains (an RTL or harness bug)."""


def _children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _fields(layout):
    """{name: (offset, width)} of a StructLayout."""
    from amaranth.hdl import Shape
    return {name: (f.offset, Shape.cast(f.shape).width) for name, f in layout}


class _TailCodec:
    """Packs/unpacks the fields after ``data`` (8W bits at offset 0) of a beat record."""

    def __init__(self, layout, width, record_bytes):
        self.width = width
        self.record_bytes = record_bytes
        self.tail_bytes = record_bytes - width
        fields = _fields(layout)
        assert fields["data"] == (0, 8 * width), fields["data"]
        self.fields = {n: (off - 8 * width, w) for n, (off, w) in fields.items() if n != "data"}
        self._cache = {}

    def tail(self, **values):
        key = tuple(sorted(values.items()))
        hit = self._cache.get(key)
        if hit is None:
            word = 0
            for name, v in values.items():
                off, w = self.fields[name]
                if not 0 <= v < (1 << w):
                    raise ValueError(f"{name}={v} does not fit {w} bits")
                word |= v << off
            hit = word.to_bytes(self.tail_bytes, "little")
            if len(self._cache) < 4096:
                self._cache[key] = hit
        return hit

    def getter(self, name):
        off, w = self.fields[name]
        return off, (1 << w) - 1


def random_cuts(length, rng, *, width=8, max_segment=MAX_SEGMENT):
    """Segment sizes summing to ``length``: 1..max_segment, a third of them at most 2W + 3."""
    sizes = []
    left = length
    small = 2 * width + 3
    while left > 0:
        if rng.random() < 1 / 3:
            n = rng.randint(1, small)
        else:
            n = rng.randint(1, max_segment)
        n = min(n, left)
        sizes.append(n)
        left -= n
    return sizes


# ------------------------------------------------------------------------------------ RX

@dataclass
class RxUnit:
    """One ULPDU (or status/abort report) of one connection, as the deframer output it.

    ``kind``: "ulpdu" (``first`` .. ``last`` with octets), "status" (a status beat: a length
    error before any octet), "abort" (an abort beat) or "partial" (the octets output of a
    ULPDU whose ``last`` beat had not come when the run ended: the input ended inside it).
    ``crc`` is a :class:`rnic.hdl.mpa_config.CrcStatus`, ``error`` an
    :class:`rnic.hdl.mpa_config.RxError` (or :data:`rnic.hdl.mpa_rx.RX_ABORTED`), both from the
    ``last`` beat.
    """
    conn: int
    kind: str
    data: bytes
    crc: int
    error: int


@dataclass(kw_only=True)
class _Run:
    """What one run of a framing engine gave (beats, octets, cycles, the sim result)."""
    result: object
    in_beats: int
    out_beats: int
    in_octets: int
    out_octets: int
    first_cycle: int
    last_cycle: int
    harness_cpu_s: float = 0.0     #: CPU seconds of the harness process (whole run)

    @property
    def cycles(self):
        """Cycles from the first beat to the last (input or output), both included."""
        return self.last_cycle - self.first_cycle + 1


@dataclass(kw_only=True)
class RxRun(_Run):
    """What one :meth:`RxEngine.run` gave: ``units[conn]`` in order, and the sim result."""
    units: dict


class _FramingEngine:
    """A Verilated MPA block (ports ``cfg``, ``i`` -> ``o``) at ``width``, ``connections``
    contexts: the build, the record codecs, and one run (configs first, then beats)."""

    #: what the block is called in errors
    what = ""

    def __init__(self, block, name, width, *, connections, build_dir):
        from rnic.hdl.mpa_config import MpaConfig
        from rnic.sim.fast import FastSim
        self.width = width
        self.connections = connections
        self.sim = FastSim(block, name=f"{name}_w{width}_c{connections}",
                           params={"width": width, "connections": connections},
                           inputs=["cfg", "i"], outputs=["o"], build_dir=build_dir)
        self.build_s = self.sim.build_s
        self.built = self.sim.built
        self.cfg_layout = MpaConfig(connections=connections)
        self._in = _TailCodec(self.sim.layouts["i"], width, self.sim.record_bytes["i"])
        self._out = _TailCodec(self.sim.layouts["o"], width, self.sim.record_bytes["o"])

    def _run(self, configs, blob, *, idle_prob, backpressure_prob, seed, timeout_s):
        """``(result, harness CPU seconds, first cycle, last cycle)`` of one checked run."""
        from rnic.sim.fast import FastSimError
        cfgs = [dict(c) for c in configs]
        cpu0 = _children_cpu_s()
        res = self.sim.run({"cfg": cfgs, "i": blob}, idle_prob=idle_prob,
                           backpressure_prob=backpressure_prob, seed=seed,
                           order=[["cfg"], ["i"]], decode=False, timeout_s=timeout_s)
        cpu = _children_cpu_s() - cpu0
        try:
            res.check()
        except FastSimError as exc:
            raise RtlEngineError(f"{self.what} W={self.width}: {exc}") from None
        in_cyc, out_cyc, cfg_cyc = res.input_cycles["i"], res.output_cycles["o"], \
            res.input_cycles["cfg"]
        starts = [c[0] for c in (in_cyc, out_cyc) if len(c)]
        ends = [c[-1] for c in (in_cyc, out_cyc) if len(c)]
        first = min(starts) if starts else (cfg_cyc[-1] if len(cfg_cyc) else 0)
        last = max(ends) if ends else first
        return res, cpu, first, last


class RxEngine(_FramingEngine):
    """The Verilated :class:`~rnic.hdl.mpa_rx.MpaRxDeframer` at ``width``, ``connections`` contexts."""

    what = "RX deframer"

    def __init__(self, width, *, connections=DEFAULT_CONNECTIONS, build_dir=None):
        from rnic.hdl.mpa_rx import MpaRxDeframer
        super().__init__(MpaRxDeframer, "mpa_engine_rx", width, connections=connections,
                         build_dir=build_dir)

    def pack_segments(self, segments):
        """Record bytes of the input beats of ``segments`` (``(conn, octets)`` pairs)."""
        W = self.width
        tail = self._in.tail
        out = bytearray()
        beats = 0
        for conn, seg in segments:
            seg = bytes(seg)
            n = len(seg)
            if n == 0:
                continue
            nb = -(-n // W)
            mid = tail(n=W, first=0, last=0, conn=conn)
            for k in range(nb):
                chunk = seg[k * W:(k + 1) * W]
                c = len(chunk)
                out += chunk
                if c < W:
                    out += bytes(W - c)
                if 0 < k < nb - 1:
                    out += mid
                else:
                    out += tail(n=c, first=int(k == 0), last=int(k == nb - 1), conn=conn)
            beats += nb
        return bytes(out), beats

    def run(self, configs, segments, *, idle_prob=0.0, backpressure_prob=0.0, seed=0,
            timeout_s=None):
        """Write ``configs`` (dicts: conn, markers, crc, phase, mulpdu), then feed ``segments``.

        Returns an :class:`RxRun`. Raises :class:`RtlEngineError` if the run does not
        complete or the output breaks the beat rules of :class:`rnic.hdl.mpa_rx.MpaRxBeat`.
        """
        blob, in_beats = self.pack_segments(segments)
        in_octets = sum(len(s) for _, s in segments)
        res, cpu, first, last = self._run(configs, blob, idle_prob=idle_prob,
                                          backpressure_prob=backpressure_prob, seed=seed,
                                          timeout_s=timeout_s)
        units, out_octets = self._parse(res.outputs["o"])
        return RxRun(units=units, result=res, in_beats=in_beats,
                     out_beats=len(res.output_cycles["o"]), in_octets=in_octets,
                     out_octets=out_octets, first_cycle=first, last_cycle=last, harness_cpu_s=cpu)

    def _parse(self, blob):
        from rnic.hdl.mpa_config import CrcStatus, RxError
        from rnic.hdl.mpa_rx import RX_ABORTED
        W = self.width
        rb = self._out.record_bytes
        n_off, n_mask = self._out.getter("n")
        f_off, _ = self._out.getter("first")
        l_off, _ = self._out.getter("last")
        c_off, c_mask = self._out.getter("conn")
        s_off, s_mask = self._out.getter("crc")
        e_off, e_mask = self._out.getter("error")
        fb = int.from_bytes
        mv = memoryview(blob)
        units = {}
        open_ = {}          # conn -> bytearray of the open ULPDU
        done = set()        # connections that reported an error
        octets = 0
        for k, at in enumerate(range(0, len(blob), rb)):
            t = fb(mv[at + W:at + rb], "little")
            n = (t >> n_off) & n_mask
            first = (t >> f_off) & 1
            last = (t >> l_off) & 1
            conn = (t >> c_off) & c_mask
            crc = (t >> s_off) & s_mask
            err = (t >> e_off) & e_mask

            def bad(why):
                raise RtlEngineError(f"RX deframer W={W}, output beat {k} (conn {conn}, n {n}, "
                                     f"first {first}, last {last}, crc {crc}, error {err}): {why}")
            if conn in done:
                bad("a beat after the connection reported an error")
            if n > W:
                bad("n above W")
            if not last and (crc or err):
                bad("crc/error set on a beat that is not last")
            if n == 0:
                if not last or not err:
                    bad("n = 0 on a beat that is not an error report")
                if first:
                    if conn in open_:
                        bad("status beat inside an open ULPDU")
                    kind = "status"
                else:
                    if err != RX_ABORTED:
                        bad("first = 0, n = 0 but error is not ABORTED")
                    if conn not in open_:
                        bad("abort beat with no open ULPDU")
                    del open_[conn]
                    kind = "abort"
                if crc != CrcStatus.UNCHECKED:
                    bad("status/abort beat with a CRC status")
                units.setdefault(conn, []).append(RxUnit(conn, kind, b"", crc, err))
                done.add(conn)
                continue
            if first:
                if conn in open_:
                    bad("first beat while a ULPDU of the connection is open")
                buf = open_[conn] = bytearray()
            else:
                buf = open_.get(conn)
                if buf is None:
                    bad("beat without a first beat")
            if not last and n != W:
                bad("a beat other than the last is not full")
            buf += mv[at:at + n]
            octets += n
            if last:
                del open_[conn]
                if err in (RxError.TOO_LONG, RxError.TOO_SHORT):
                    bad("length error on a ULPDU with octets (must be a status beat)")
                units.setdefault(conn, []).append(RxUnit(conn, "ulpdu", bytes(buf), crc, err))
                if err:
                    done.add(conn)
        for conn, buf in open_.items():     # the input ended inside these ULPDUs
            units.setdefault(conn, []).append(RxUnit(conn, "partial", bytes(buf), 0, 0))
        return units, octets


# ------------------------------------------------------------------------------------ TX

@dataclass(kw_only=True)
class TxRun(_Run):
    """What one :meth:`TxEngine.run` gave."""
    streams: dict          #: conn -> output octets, in order
    runs: list             #: (conn, octets) per output run (first .. last)


class TxEngine(_FramingEngine):
    """The Verilated :class:`~rnic.hdl.mpa_tx.MpaTxFramer` at ``width``, ``connections`` contexts."""

    what = "TX framer"

    def __init__(self, width, *, connections=DEFAULT_CONNECTIONS, build_dir=None):
        from rnic.hdl.mpa_tx import MpaTxFramer
        super().__init__(MpaTxFramer, "mpa_engine_tx", width, connections=connections,
                         build_dir=build_dir)

    def pack_ulpdus(self, ulpdus):
        """Record bytes of the input beats of ``ulpdus`` (``(conn, octets)`` pairs)."""
        W = self.width
        tail = self._in.tail
        out = bytearray()
        beats = 0
        for conn, u in ulpdus:
            u = bytes(u)
            n = len(u)
            if not 1 <= n <= 0xFFFF:
                raise ValueError(f"the TX framer takes ULPDUs of 1..65535 octets, not {n}")
            nb = -(-n // W)
            mid = tail(n=W, first=0, last=0, conn=conn, length=0)
            for k in range(nb):
                chunk = u[k * W:(k + 1) * W]
                c = len(chunk)
                out += chunk
                if c < W:
                    out += bytes(W - c)
                if 0 < k < nb - 1:
                    out += mid
                elif k == 0:
                    out += tail(n=c, first=1, last=int(nb == 1), conn=conn, length=n)
                else:
                    out += tail(n=c, first=0, last=1, conn=conn, length=0)
            beats += nb
        return bytes(out), beats

    def run(self, configs, ulpdus, *, idle_prob=0.0, backpressure_prob=0.0, seed=0,
            timeout_s=None):
        """Write ``configs`` (dicts: conn, markers, crc, phase), then frame ``ulpdus``."""
        blob, in_beats = self.pack_ulpdus(ulpdus)
        in_octets = sum(len(u) for _, u in ulpdus)
        res, cpu, first, last = self._run(configs, blob, idle_prob=idle_prob,
                                          backpressure_prob=backpressure_prob, seed=seed,
                                          timeout_s=timeout_s)
        runs, streams, octets = self._parse(res.outputs["o"])
        return TxRun(streams=streams, runs=runs, result=res, in_beats=in_beats,
                     out_beats=len(res.output_cycles["o"]), in_octets=in_octets, out_octets=octets,
                     first_cycle=first, last_cycle=last, harness_cpu_s=cpu)

    def _parse(self, blob):
        W = self.width
        rb = self._out.record_bytes
        n_off, n_mask = self._out.getter("n")
        f_off, _ = self._out.getter("first")
        l_off, _ = self._out.getter("last")
        c_off, c_mask = self._out.getter("conn")
        fb = int.from_bytes
        mv = memoryview(blob)
        runs, streams = [], {}
        cur = None          # (conn, bytearray) of the open run
        octets = 0
        for k, at in enumerate(range(0, len(blob), rb)):
            t = fb(mv[at + W:at + rb], "little")
            n = (t >> n_off) & n_mask
            first = (t >> f_off) & 1
            last = (t >> l_off) & 1
            conn = (t >> c_off) & c_mask

            def bad(why):
                raise RtlEngineError(f"TX framer W={W}, output beat {k} (conn {conn}, n {n}, "
                                     f"first {first}, last {last}): {why}")
            if n == 0 or n > W or n % 4:
                bad("n is not a multiple of 4 in 4..W")
            if first:
                if cur is not None:
                    bad("first beat inside an open run")
                cur = (conn, bytearray())
            elif cur is None:
                bad("beat outside a run")
            elif cur[0] != conn:
                bad(f"connection changed inside a run of connection {cur[0]}")
            if not last and n != W:
                bad("a beat other than the last of a run is not full")
            cur[1].extend(mv[at:at + n])
            octets += n
            if last:
                runs.append((conn, bytes(cur[1])))
                streams.setdefault(conn, bytearray()).extend(cur[1])
                cur = None
        if cur is not None:
            raise RtlEngineError(f"TX framer W={W}: a run of connection {cur[0]} left open")
        return runs, {c: bytes(s) for c, s in streams.items()}, octets


# ------------------------------------------------------------------------------------ cache

@lru_cache(maxsize=None)
def rx_engine(width, connections=DEFAULT_CONNECTIONS):
    """The :class:`RxEngine` of this width (built once per process, and on disk)."""
    return RxEngine(width, connections=connections)


@lru_cache(maxsize=None)
def tx_engine(width, connections=DEFAULT_CONNECTIONS):
    """The :class:`TxEngine` of this width (built once per process, and on disk)."""
    return TxEngine(width, connections=connections)


# ------------------------------------------------------------------------------------ decode

def _phase(marker_origin):
    return (-marker_origin) % 512


def decode(data, *, markers, crc, marker_origin=0, mulpdu=None, width=8, seed=0,
           idle_prob=0.0, backpressure_prob=0.0, engine=None):
    """Decode one direction's stream on the RTL deframer (connection 0).

    Returns the list that ``FpduDecoder(...).feed(data) + [close()]`` gives (records, then
    an :class:`~rnic.host.model.fpdu.FpduError` if any), built as the module docstring says.
    """
    from rnic.hdl.mpa_config import CrcStatus, RxError
    from rnic.host.model.crc import CRC_FIELD_LEN, crc32c, crc_from_field
    from rnic.host.spec.errors import ErrorInfo, MpaError
    from rnic.host.model.fpdu import (LENGTH_FIELD_LEN, MARKER_LEN, MAX_MULPDU, FpduError, FpduRecord,
        crc_error, fpdu_layout, is_marker_offset, marker_error, too_long_error, too_short_error,
        truncated_error)

    data = bytes(data)
    mulpdu = MAX_MULPDU if mulpdu is None else mulpdu
    origin = marker_origin % 512
    if marker_origin % 4:
        raise ValueError(f"marker_origin {marker_origin} is not a multiple of 4")
    total = len(data)
    eng = engine if engine is not None else rx_engine(width)
    rng = random.Random(seed)
    fed = data + bytes(-total % 4)          # pad to the word grid (see the module docstring)
    segs, at = [], 0
    for size in random_cuts(len(fed), rng, width=eng.width):
        segs.append((0, fed[at:at + size]))
        at += size
    cfg = {"conn": 0, "markers": int(markers), "crc": int(crc), "phase": _phase(origin),
           "mulpdu": mulpdu}
    run = eng.run([cfg], segs, idle_prob=idle_prob, backpressure_prob=backpressure_prob,
                  seed=seed)
    units = run.units.get(0, [])
    extra = set(run.units) - {0}
    if extra:
        raise RtlEngineError(f"RX deframer output on connections {sorted(extra)}, fed only 0")

    def field16(at):
        return int.from_bytes(data[at:at + 2], "big")

    items = []
    pos = 0
    for k, u in enumerate(units):
        def bad(why):
            raise RtlEngineError(f"RX deframer W={eng.width}: unit {k} ({u.kind}, "
                                 f"{len(u.data)} octets, crc {u.crc}, error {u.error}) "
                                 f"for the FPDU at offset {pos}: {why}")
        if pos >= total:
            bad(f"output beyond the end of the {total}-octet input")
        len_pos = pos + (MARKER_LEN if markers and is_marker_offset(pos, origin) else 0)
        if u.kind == "abort":
            bad("abort beat (no cfg was rewritten)")
        if u.kind == "partial":
            if k != len(units) - 1:
                bad("units after an unfinished ULPDU")
            break               # the stream ended inside this FPDU
        if u.kind == "status":
            if len_pos + LENGTH_FIELD_LEN > total:
                break           # judged on padded octets: the stream ended first
            n = field16(len_pos)
            if u.error == RxError.TOO_LONG:
                info = too_long_error(n, mulpdu)
            elif u.error == RxError.TOO_SHORT:
                if n != 0 and len_pos + LENGTH_FIELD_LEN >= total:
                    break       # judged on a padded control octet: the stream ended first
                info = too_short_error(n, data[len_pos + LENGTH_FIELD_LEN] if n else None)
            else:
                bad("status beat with an error other than TOO_LONG/TOO_SHORT")
            items.append(FpduError(pos, info))
            pos = None
            break
        n = len(u.data)
        lay = fpdu_layout(n, offset=pos, markers=markers, marker_origin=origin)
        if lay.end > total:
            if lay.end <= len(fed):
                break           # completed by the padding: the stream ended inside it
            bad(f"an FPDU of ULPDU_Length {n} would end at {lay.end}, beyond the input")
        if u.error == RxError.NONE:
            if u.crc == CrcStatus.OK:
                crc_text = "ok"
            elif u.crc == CrcStatus.UNCHECKED:
                crc_text = "unchecked"
            else:
                bad("CRC BAD without an error")
            items.append(FpduRecord(
                offset=pos, length=lay.length, ulpdu_length=n, crc=crc_text,
                markers=[(m, field16(m + 2)) for m, _ in lay.markers], ulpdu=u.data))
            pos = lay.end
            continue
        if u.error == RxError.CRC:
            got = crc_from_field(data[lay.crc_offset:lay.crc_offset + CRC_FIELD_LEN])
            want = crc32c(data[pos:lay.crc_offset])
            info = crc_error(got, want, lay.crc_offset - pos, pos)
        elif u.error == RxError.MARKER:
            info = None
            for m, expected in lay.markers:
                ptr = field16(m + 2)
                if (ptr & ~3) != expected:
                    info = marker_error(m, ptr, lay.length_offset, expected)
                    break
            if info is None:    # the hardware saw a bad marker that the input does not have
                info = ErrorInfo.mpa(MpaError.MARKER, f"the RTL deframer reported a marker "
                                     f"error in the FPDU at offset {pos}, but every FPDUPTR of "
                                     "its layout is right")
        else:
            bad("unknown error kind")
        items.append(FpduError(pos, info))
        pos = None
        break
    if pos is not None and pos < total:
        len_pos = pos + (MARKER_LEN if markers and is_marker_offset(pos, origin) else 0)
        whole = None
        if len_pos + LENGTH_FIELD_LEN <= total:
            whole = fpdu_layout(field16(len_pos), offset=pos, markers=markers,
                                marker_origin=origin).length
        items.append(FpduError(pos, truncated_error(total - pos, whole, pos)))
    return items


# ------------------------------------------------------------------------------------ encode

def encode(ulpdus, *, markers, crc, marker_origin=0, width=8, seed=0, idle_prob=0.0,
           backpressure_prob=0.0, engine=None):
    """Frame ``ulpdus`` (1..65535 octets each) on the RTL framer (connection 0).

    Returns the octets ``FpduEncoder(...).encode`` gives, concatenated. ULPDUs whose
    markers would need an FPDUPTR above 0xFFFF raise ``ValueError`` up front (the model
    refuses them; the hardware would truncate the pointer).
    """
    from rnic.host.model.fpdu import check_fpduptrs, fpdu_layout
    if marker_origin % 4:
        raise ValueError(f"marker_origin {marker_origin} is not a multiple of 4")
    origin = marker_origin % 512
    ulpdus = [bytes(u) for u in ulpdus]
    pos = 0
    for u in ulpdus:
        lay = fpdu_layout(len(u), offset=pos, markers=markers, marker_origin=origin)
        check_fpduptrs(lay)
        pos = lay.end
    if not ulpdus:
        return b""
    eng = engine if engine is not None else tx_engine(width)
    cfg = {"conn": 0, "markers": int(markers), "crc": int(crc), "phase": _phase(origin),
           "mulpdu": 0}
    run = eng.run([cfg], [(0, u) for u in ulpdus], idle_prob=idle_prob,
                  backpressure_prob=backpressure_prob, seed=seed)
    extra = set(run.streams) - {0}
    if extra:
        raise RtlEngineError(f"TX framer output on connections {sorted(extra)}, fed only 0")
    out = run.streams.get(0, b"")
    if len(out) != pos:
        raise RtlEngineError(f"TX framer W={eng.width}: {len(out)} octets out for "
                             f"{len(ulpdus)} ULPDUs, whose FPDUs take {pos}")
    return out


# ------------------------------------------------------------------------------------ DDP/RDMAP

#: Error ids (layer, etype, ecode) of the DDP/RDMAP receive path's stateless header checks:
#: DDP version (tagged 1/4, untagged 2/6), RDMAP version (2/5), opcode and its kind or queue
#: (2/6), queue number (DDP 2/1), ULPDU shorter than its header (DDP 0/0). Every other error
#: depends on state that ``rnic decode`` does not have (registered STags, posted buffers, IRD).
HEADER_ERRORS = frozenset({(1, 1, 4), (1, 2, 6), (0, 2, 5), (0, 2, 6), (1, 2, 1), (1, 0, 0)})

#: Connections of the DDP engine's build: ULPDUs are checked in batches of this many, each on
#: a connection of its own (so that every verdict is the ULPDU's own first error).
DDP_CONNECTIONS = 64


class DdpEngine:
    """The Verilated :class:`~rnic.hdl.ddp_rx.DdpRx` for ``rnic decode --engine rtl --strict``.

    :meth:`header_checks` feeds ULPDUs (as the deframer would deliver them, CRC good) into a
    DdpRx with no STag registered, no receive buffer posted and IRD 0, one ULPDU per
    connection, and returns per ULPDU the error of its header checks (one of
    :data:`HEADER_ERRORS`) or None. A ULPDU whose headers pass meets a state check instead
    (invalid STag, no buffer, IRD ...) or completes; that verdict is ignored. Segment buffers
    of 64 KiB hold every legal ULPDU.
    """

    def __init__(self, width, *, connections=DDP_CONNECTIONS, build_dir=None):
        from rnic.hdl.ddp_rx import DdpRx
        from rnic.sim.fast import FastSim
        self.width = width
        self.connections = connections
        self.sim = FastSim(DdpRx, name=f"ddp_engine_w{width}_c{connections}",
                           params={"width": width, "connections": connections, "stags": 2, "slots": 4,
                                   "slot_bytes": 1 << 16, "rq_depth": 2, "addr_width": 16},
                           inputs=["i"], outputs=["cq", "rrq", "term"], build_dir=build_dir)
        self.build_s = self.sim.build_s

    def header_checks(self, ulpdus, *, timeout_s=None):
        """``[(layer, etype, ecode) or None]``, one per ULPDU of ``ulpdus`` (see the class)."""
        from rnic.hdl.mpa_config import CrcStatus
        from rnic.sim.fast import FastSimError
        W, C = self.width, self.connections
        ulpdus = [bytes(u) for u in ulpdus]
        out = []
        for start in range(0, len(ulpdus), C):
            batch = ulpdus[start:start + C]
            beats = []
            for conn, u in enumerate(batch):
                if not u:
                    raise ValueError("a ULPDU of 0 octets")
                nb = -(-len(u) // W)
                for k in range(nb):
                    chunk = u[k * W:(k + 1) * W]
                    beats.append({"data": int.from_bytes(chunk, "little"), "n": len(chunk),
                                  "first": int(k == 0), "last": int(k == nb - 1), "conn": conn,
                                  "crc": int(CrcStatus.OK) if k == nb - 1 else 0, "error": 0})
            res = self.sim.run({"i": beats}, timeout_s=timeout_s)
            try:
                res.check()
            except FastSimError as exc:
                raise RtlEngineError(f"DDP/RDMAP receive path W={W}: {exc}") from None
            verdict = [None] * len(batch)
            for t in res.unpacked("term"):
                conn = t["conn"]
                if conn >= len(batch) or t["received"]:
                    continue
                code = (t["layer"], t["etype"], t["ecode"])
                if code in HEADER_ERRORS:
                    verdict[conn] = code
            out += verdict
        return out


@lru_cache(maxsize=None)
def ddp_engine(width, connections=DDP_CONNECTIONS):
    """The :class:`DdpEngine` of this width (built once per process, and on disk)."""
    return DdpEngine(width, connections=connections)


def strict_checks(records, strict_check, *, width=8, engine=None):
    """``rnic decode --engine rtl --strict``: the header verdicts of the Verilated receive path.

    ``records``: what :func:`decode` returned; ``strict_check(ulpdu)``: the model's check
    (:class:`~rnic.host.spec.errors.ErrorInfo` or None). Returns ``[ErrorInfo or None]`` per record
    (None for an :class:`~rnic.host.model.fpdu.FpduError`): the hardware decides, the model's
    ErrorInfo words it (text); a disagreement between the two raises :class:`RtlEngineError`.
    """
    from rnic.host.model.fpdu import FpduError
    ulpdus = [r.ulpdu for r in records if not isinstance(r, FpduError)]
    eng = engine if engine is not None else ddp_engine(width)
    hw = iter(eng.header_checks(ulpdus)) if ulpdus else iter(())
    out = []
    for r in records:
        if isinstance(r, FpduError):
            out.append(None)
            continue
        got = next(hw)
        info = strict_check(r.ulpdu)
        want = None if info is None else (int(info.layer), int(info.etype), int(info.ecode))
        if got != want:
            raise RtlEngineError(f"DDP/RDMAP receive path W={eng.width}: the FPDU at offset {r.offset} "
                                 f"gives {got} in the RTL, {want} in the model")
        out.append(info)
    return out
