"""The validator: every check of a segment, in the order of :class:`rnic.host.model.sink.Sink`."""

from amaranth.hdl import Assert, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..beat import conn_bits
from ..compare import wide_less
from ..mpa_config import RxError
from ..mpa_rx import RX_ABORTED
from ..rdma_layouts import Opcode
from .errors import (
    E_DDP_CATASTROPHIC, E_DDP_T_BOUNDS, E_DDP_T_INVALID_STAG, E_DDP_T_NOT_ASSOC, E_DDP_T_TO_WRAP,
    E_DDP_T_VERSION, E_DDP_U_MO, E_DDP_U_MSN_RANGE, E_DDP_U_NO_BUFFER, E_DDP_U_QN, E_DDP_U_TOO_LONG,
    E_DDP_U_VERSION, E_LLP_CRC, E_LLP_MARKER, E_RO_CANNOT_INV, E_RO_CATA_STREAM, E_RO_OPCODE,
    E_RO_UNSPECIFIED, E_RO_VERSION, E_RP_ACCESS, E_RP_BOUNDS, E_RP_CANNOT_INV, E_RP_INVALID_STAG,
    E_RP_NOT_ASSOC, E_RP_TO_WRAP,
)
from .header import SegmentView, big_endian
from .layouts import QN1_CAP, QN2_CAP, ConnContext, QueueState, RecvEntry, StagRow
from .sequencer import DecodeVerdict, Step, in_steps

__all__ = ["ErrorVerdict", "Validator"]


class ErrorVerdict(data.StructLayout):
    """The error a check state reports if it fails: ``code`` (an error id,
    :mod:`rnic.hdl.ddp_rx.errors`), and what its Terminate carries: ``md`` the segment
    length (M) and, with ``ed``, the DDP header (D); ``er`` the Read Request header (R)
    for the RDMAP errors of an inbound Read Request."""

    def __init__(self):
        super().__init__({"code": unsigned(16), "md": unsigned(1), "ed": unsigned(1),
                          "er": unsigned(1)})


def _first_code(m, name, cases):
    """The error code of the first (flag, code) case whose flag is set, else 0."""
    code = Signal(16, name=name)
    value = Const(0, 16)
    for flag, c in reversed(cases):
        value = Mux(flag, c, value)
    m.d.comb += code.eq(value)
    return code


class Validator(wiring.Component):
    """Works out every check of a segment from registers, and registers it, so that a check
    state of the sequencer only acts on registered flags (timing).

    Ports
    -----
    state : In(Step)
    header_last : In(1)
        The last HEADER cycle (used by its formal properties only).
    seg : In(SegmentView)
    ctx : In(ConnContext)
        The segment's connection context.
    row : In(StagRow)
        The STag table row under check (registered in the table): the segment's STag field
        (tagged STag or Invalidate STag) from DECODE on, the Read Request's source STag in
        WAIT_SOURCE_CHECKS.
    rq_entry : In(RecvEntry)
        The receive-queue row read in DECODE (on the port in LOAD_RECV_BUFFER).
    message : In(8 * 64)
        The QN 1 / QN 2 message read back (from CHECK_MESSAGE on).
    decode, msn_in_range, qn_msn_mismatch, offsets_bad, offsets_invalidate, invalidate_bad,
    tagged_bad, message_bad, read_size_nz, source_bad : Out
        The verdicts the sequencer acts on (see :class:`~rnic.hdl.ddp_rx.sequencer.Sequencer`);
        ``offsets_invalidate``: a QN 0 segment that passes the offset checks goes on to
        CHECK_INVALIDATE (the last segment of a Send with Invalidate).
    error : Out(ErrorVerdict)
        The error of the last check state (registered in it).
    qn : Out(2)
        The segment's queue number (0, 1, 2), from the cycle after DECODE on.
    rq_read : Out(index), rq_index : Out(index)
        The receive-queue row of a QN 0 segment: to read in DECODE, and registered there.
    at_head : Out(1)
        That row is the queue's head (the segment's MSN is the head buffer's: a message
        it ends completes at once), registered in DECODE (valid for a QN 0 segment whose
        MSN is in range).
    recv_buffer : Out(RecvEntry)
        The receive buffer of a QN 0 segment, registered in LOAD_RECV_BUFFER.
    new_entry : Out(RecvEntry), new_queue : Out(QueueState), invalidate : Out(1)
        The message state after the segment (receive-queue entry for QN 0, queue state for
        QN 1 / QN 2) and whether it invalidates its STag: registered from CHECK_OFFSETS on,
        written in FINISH_UNTAGGED.

    The checks, in their groups (each registered every cycle from operands that are stable
    during a segment):

    * DECODE's: those on the entry and octets 0..1 (MPA verdict, length, versions,
      opcode) registered from the second-to-last HEADER cycle on, their priority (one error
      code) in the last HEADER cycle; the others (stopped, QN, the MSN difference) in the
      last HEADER cycle. The compares of a QN 0 segment's MSN difference with the receive
      queue's count are registered in DECODE and acted on in LOAD_RECV_BUFFER, a QN 1 /
      QN 2 segment's MSN check in CHECK_QN_MSN: the order of the checks is the model's, and
      a segment failing one of them reaches the error report one cycle later than in DECODE.
    * The tagged checks (segment against its STag row): registered in DECODE (the row is
      registered there, the end of the range a cycle earlier), acted on in CHECK_TAGGED;
      the first two and the row's REMOTE_INV right in CHECK_INVALIDATE (the Invalidate
      STag's row: an invalid row is RDMAP 2/9, another connection's or one without the
      right 1/9).
    * The untagged offset checks (seven compares against the message state loaded in DECODE
      or LOAD_RECV_BUFFER, and their verdict): registered in CHECK_QN_MSN, acted on in
      CHECK_OFFSETS.
    * A Read Request's or Terminate's message: registered in CHECK_MESSAGE, acted on in
      MESSAGE_VERDICT; the source STag's checks registered in WAIT_SOURCE_CHECKS (the sum
      a cycle earlier), acted on in CHECK_SOURCE_STAG.

    For checkers: with ``platform == "formal"`` it asserts that each registered check holds
    its operands' value in the state that acts on it (``lemma_dec_early``,
    ``lemma_dec_verdict``, ``lemma_dec_msn``, ``lemma_msn``, ``lemma_endt``,
    ``lemma_tchk_verdict``, ``lemma_uchk_verdict``, with the MO's copy ``lemma_mo_q``), and what DECODE's verdict implies in
    the states that follow it: the kind of segment (``lemma_tagged``, ``lemma_untagged``),
    a length that fits (``lemma_len``), a payload for CHECK_TAGGED (``lemma_tchk_read``),
    the receive-queue row of the segment's connection (``lemma_ridx``), its buffer's
    capacity (``lemma_mcap``) and the offset checks passed (``lemma_ichk``).
    """

    def __init__(self, *, connections, slots, slot_bytes, rq_depth, addr_width):
        self.slot_bytes = slot_bytes
        self.addr_width = addr_width
        self._db = exact_log2(rq_depth)
        self._cb = conn_bits(connections)
        super().__init__({
            "state": In(Step),
            "header_last": In(1),
            "seg": In(SegmentView(slots=slots, connections=connections)),
            "ctx": In(ConnContext(rq_depth=rq_depth)),
            "row": In(StagRow(connections=connections, addr_width=addr_width)),
            "rq_entry": In(RecvEntry()),
            "message": In(8 * 64),
            "decode": Out(DecodeVerdict()), "msn_in_range": Out(1), "qn_msn_mismatch": Out(1),
            "offsets_bad": Out(1), "offsets_invalidate": Out(1), "invalidate_bad": Out(1),
            "tagged_bad": Out(1),
            "message_bad": Out(1), "read_size_nz": Out(1), "source_bad": Out(1),
            "error": Out(ErrorVerdict()),
            "qn": Out(2),
            "rq_read": Out(self._db + self._cb), "rq_index": Out(self._db + self._cb),
            "at_head": Out(1),
            "recv_buffer": Out(RecvEntry()),
            "new_entry": Out(RecvEntry()), "new_queue": Out(QueueState()), "invalidate": Out(1),
        })

    def _registered(self, m, conds, prefix):
        """Each condition worked out every cycle and registered: ``{name: register}``; the
        ``(register, value)`` pairs are kept for the formal properties."""
        flags, pairs = {}, []
        for name, value in conds.items():
            comb = Signal(len(Value.cast(value)), name=f"{prefix}_{name}_c")
            reg = Signal(len(Value.cast(value)), name=f"{prefix}_{name}")
            m.d.comb += comb.eq(value)
            m.d.sync += reg.eq(comb)
            flags[name] = reg
            pairs.append((reg, comb))
        self._pairs.setdefault(prefix, []).extend(pairs)
        return flags

    def elaborate(self, platform):
        m = Module()
        self._pairs = {}
        errors = {}
        self._decode(m, errors)
        self._tagged(m, errors)
        self._untagged(m, errors)
        self._message(m, errors)
        self._source(m, errors)
        self._error(m, errors)
        if platform == "formal":
            self._formal(m)
        return m

    def _decode(self, m, errors):
        seg, c = self.seg, self.ctx
        ent, T, opcode = seg.entry, seg.tagged, seg.opcode
        DB = self._db
        rows_octets = self.slot_bytes
        aflag = self._registered(m, dict(
            crc=ent.err == RxError.CRC, marker=ent.err == RxError.MARKER, err=ent.err != 0,
            # (longer than a slot without ``ovf``: only with beats of more than W octets,
            # which the deframer never sends)
            len=ent.ovf | (ent.len < seg.header_len) | (ent.len > rows_octets),
            dv=seg.ddp_version != 1, rv=seg.rdmap_version != 1,
            opcode=opcode[3] | (((opcode == Opcode.RDMA_WRITE)
                                 | (opcode == Opcode.RDMA_READ_RESPONSE)) != T),
        ), "dec_early")
        pre_code_c = Signal(16)
        with m.If(aflag["crc"]):
            m.d.comb += pre_code_c.eq(E_LLP_CRC)
        with m.Elif(aflag["marker"]):
            m.d.comb += pre_code_c.eq(E_LLP_MARKER)
        with m.Elif(aflag["err"] | aflag["len"]):
            m.d.comb += pre_code_c.eq(E_DDP_CATASTROPHIC)
        with m.Elif(aflag["dv"]):
            m.d.comb += pre_code_c.eq(Mux(T, E_DDP_T_VERSION, E_DDP_U_VERSION))
        with m.Elif(aflag["rv"]):
            m.d.comb += pre_code_c.eq(E_RO_VERSION)
        with m.Else():
            m.d.comb += pre_code_c.eq(E_RO_OPCODE)
        pflag = self._registered(m, dict(
            bad=Cat(*aflag.values()).any(), code=pre_code_c,
            # M and D (the segment length and the DDP header) go with every error but the
            # MPA ones (CRC, marker, status); D not with a length error either
            md=~(aflag["crc"] | aflag["marker"] | aflag["err"]),
            ed=~(aflag["crc"] | aflag["marker"] | aflag["err"] | aflag["len"]),
        ), "dec_pre")
        d_msn_c = Signal(32)
        m.d.comb += d_msn_c.eq(seg.msn - c.rbase)
        h_qn = seg.qn
        dflag = self._registered(m, dict(
            done=c.stopped | (ent.err == RX_ABORTED),
            qn_gt2=h_qn > 2,
            qn_op=h_qn != Mux(opcode == Opcode.RDMA_READ_REQUEST, 1,
                              Mux(opcode == Opcode.TERMINATE, 2, 0)),
            qn0=h_qn == 0, q1=h_qn == 1,
        ), "dec")
        # (the MSN checks' operands: only untagged segments use them)
        dflag.update(self._registered(m, dict(
            q1_ne=seg.msn != c.q1.msn, q2_ne=seg.msn != c.q2.msn, d_msn=d_msn_c,
            # receive-queue entry of an untagged QN 0 segment (only the low bits of the sum)
            ridx=(Cat((c.head[:DB] + seg.msn[:DB] - c.rbase[:DB])[:DB], ent.conn) if DB
                  else ent.conn),
        ), "dec_msn"))
        # the MSN of a QN 0 segment against the receive queue (valid from the cycle after
        # DECODE)
        mflag = self._registered(m, dict(
            lt=dflag["d_msn"] < c.count, eq=dflag["d_msn"] == c.count), "msn")
        self._dflag = dflag

        # DECODE's verdict, from the registered flags
        go = self.decode
        with m.If(dflag["done"]):
            m.d.comb += go.done.eq(1)
        with m.Elif(pflag["bad"]):
            m.d.comb += go.fail.eq(1)
        with m.Elif(T):
            m.d.comb += [go.tagged.eq(seg.length_nz), go.tagged_empty.eq(~seg.length_nz)]
        with m.Elif(dflag["qn_gt2"] | dflag["qn_op"]):
            m.d.comb += go.fail.eq(1)
        with m.Elif(dflag["qn0"]):
            m.d.comb += go.recv_buffer.eq(1)
        with m.Else():
            m.d.comb += go.qn_message.eq(1)
        m.d.comb += [
            self.msn_in_range.eq(mflag["lt"]),
            self.qn_msn_mismatch.eq(Mux(dflag["q1"], dflag["q1_ne"], dflag["q2_ne"])),
            self.rq_read.eq(dflag["ridx"]),
        ]
        errors[Step.DECODE] = (Mux(pflag["bad"], pflag["code"],
                                Mux(dflag["qn_gt2"], E_DDP_U_QN, E_RO_OPCODE)), pflag["md"])
        errors[Step.LOAD_RECV_BUFFER] = (Mux(mflag["eq"], E_DDP_U_NO_BUFFER, E_DDP_U_MSN_RANGE), 1)
        errors[Step.CHECK_QN_MSN] = (E_DDP_U_MSN_RANGE, 1)
        self._pflag = pflag

    def _tagged(self, m, errors):
        """A tagged segment against its STag row: worked out every cycle from registers and
        registered: in DECODE the row register already holds the segment's row (the table
        is read from the second-to-last HEADER cycle on), ``length`` its payload length, and
        none of them changes until the segment ends, so CHECK_TAGGED acts on DECODE's
        verdict. The adder is a cycle ahead: ``endt_q`` (end of the tagged range) and a copy
        of the TO from the last HEADER cycle, where ``to`` and ``length`` are in place; the
        row holds the end of its region's TOs. So DECODE only compares (in the TO space: the
        placer maps the TO to its host address)."""
        seg, row = self.seg, self.row
        h_to = seg.to
        endt_q = Signal(65)
        # the TO as well, for the compare with the row's base: the header register's bits
        # fan out across the processor, a copy starts the carry chain next to its compare
        to_q = Signal(64)
        m.d.sync += [endt_q.eq(h_to + seg.length), to_q.eq(h_to)]
        self._endt = endt_q
        self._to_q = to_q
        tconds = dict(
            invalid=~row.valid | (row.stag != seg.stag), other_conn=row.conn != seg.entry.conn,
            no_write=~row.rw, wrap=endt_q[64],
            bounds=wide_less(to_q, row.base) | wide_less(row.end, endt_q),
            no_inv=~row.ri)
        placement = ("invalid", "other_conn", "no_write", "wrap", "bounds")
        # the verdicts registered as well (timing: CHECK_TAGGED's hand-over to the placer
        # and CHECK_INVALIDATE's next state see single registers)
        tconds.update(bad=Cat(*(tconds[k] for k in placement)).any(),
                      # the Invalidate STag's row (the same header field): valid, the
                      # connection's, and the peer may invalidate it
                      inv_bad=tconds["invalid"] | tconds["other_conn"] | tconds["no_inv"])
        tflag = self._registered(m, tconds, "tchk")
        tchk_code = _first_code(m, "tchk_code", (
            (tflag["invalid"], E_DDP_T_INVALID_STAG), (tflag["other_conn"], E_DDP_T_NOT_ASSOC),
            (tflag["no_write"], E_RP_ACCESS), (tflag["wrap"], E_DDP_T_TO_WRAP),
            (tflag["bounds"], E_DDP_T_BOUNDS)))
        m.d.comb += [self.tagged_bad.eq(tflag["bad"]), self.invalidate_bad.eq(tflag["inv_bad"])]
        errors[Step.CHECK_TAGGED] = (tchk_code, 1)
        errors[Step.CHECK_INVALIDATE] = (Mux(tflag["invalid"], E_RO_CANNOT_INV, E_RP_CANNOT_INV), 1)

    def _untagged(self, m, errors):
        """The untagged set-up (DECODE, LOAD_RECV_BUFFER), the offset checks, and the new
        message state."""
        state, seg, c = self.state, self.seg, self.ctx
        rd_e, e = self.rq_entry, self.recv_buffer
        dflag = self._dflag
        Lb, h_mo, endv, opcode = seg.last, seg.mo, seg.end, seg.opcode
        # uniform message state for the offset checks: the receive buffer (QN 0) or the
        # QN 1 / QN 2 state
        mcap = Signal(32)
        many = Signal()
        mmaxmo = Signal(32)
        mmaxend = Signal(33)
        mlv = Signal()
        mlmo = Signal(32)
        mlend = Signal(33)
        self._mcap = mcap
        with m.Switch(state):
            with m.Case(Step.DECODE):
                # done whatever the verdict (timing: the wide registers' enables do not wait
                # for it): the QN 1 / QN 2 message state, which LOAD_RECV_BUFFER replaces by
                # the receive buffer's for QN 0. A tagged or failed segment uses none of them.
                q = Signal(QueueState(), name="q_sel")
                m.d.comb += q.eq(Mux(dflag["q1"], c.q1.as_value(), c.q2.as_value()))
                m.d.sync += [
                    self.qn.eq(Mux(dflag["qn0"], 0, Mux(dflag["q1"], 1, 2))),
                    self.rq_index.eq(dflag["ridx"]),
                    # (an MSN in range is less than rq_depth past the head's: the low bits
                    # tell it)
                    self.at_head.eq(seg.msn[:self._db] == c.rbase[:self._db]),
                    mcap.eq(Mux(dflag["q1"], QN1_CAP, QN2_CAP)),
                    many.eq(q.any), mmaxmo.eq(q.max_mo), mmaxend.eq(q.max_end),
                    mlv.eq(q.lv), mlmo.eq(q.l_mo), mlend.eq(q.l_end),
                ]
            with m.Case(Step.LOAD_RECV_BUFFER):
                m.d.sync += [
                    e.eq(rd_e), mcap.eq(rd_e.length), many.eq(rd_e.any), mmaxmo.eq(rd_e.max_mo),
                    mmaxend.eq(rd_e.max_end), mlv.eq(rd_e.lv), mlmo.eq(rd_e.l_mo),
                    mlend.eq(rd_e.l_end),
                ]
        # the six compares, registered (so that in CHECK_OFFSETS only their priority is in
        # front of the next state); the operands stay put until the segment ends, so
        # FINISH_UNTAGGED uses two of the flags for the new message state too
        n_nz = seg.length_nz
        # a copy of the MO next to the compares (timing: the header register's bits fan out
        # across the processor); the MO holds from DECODE on, so the copy is the segment's
        # from the cycle after DECODE on (``lemma_mo_q``)
        mo_q = Signal(32, name="uchk_mo_q")
        m.d.sync += mo_q.eq(h_mo)
        self._mo_q = mo_q

        def offsets_bad(f):
            return ((f["when_nz"] & (f["mo_ge_cap"] | f["end_gt_cap"]))
                    | (f["when_z_l"] & f["mo_gt_cap"])
                    | (f["when_lv"] & (f["mo_gt_lmo"] | f["end_gt_lend"]))
                    | (f["when_l_many"] & f["maxmo_gt"])
                    | (f["when_l"] & f["maxend_gt"]))
        inv = (opcode == Opcode.SEND_INVALIDATE) | (opcode == Opcode.SEND_SE_INVALIDATE)
        uconds = dict(
            mo_ge_cap=mo_q >= mcap, end_gt_cap=endv > mcap, mo_gt_cap=mo_q > mcap,
            mo_gt_lmo=mo_q > mlmo, end_gt_lend=endv > mlend, maxmo_gt=mmaxmo > mo_q,
            maxend_gt=mmaxend > endv,
            # which compares count, registered too (timing: ``length_nz`` fans out far)
            when_nz=n_nz, when_z_l=~n_nz & Lb, when_lv=(n_nz | Lb) & mlv, when_l_many=Lb & many,
            when_l=Lb)
        # the verdict itself and the next state's other condition, registered as well
        # (timing: CHECK_OFFSETS's hand-over to the placer sees single registers, not the
        # compares' priority)
        uconds.update(bad=offsets_bad(uconds), to_invalidate=(self.qn == 0) & Lb & inv)
        uflag = self._registered(m, uconds, "uchk")
        uchk_bad = Signal(16)
        m.d.comb += [self.offsets_bad.eq(uflag["bad"]),
                     self.offsets_invalidate.eq(uflag["to_invalidate"])]
        with m.If(uflag["when_nz"] & uflag["mo_ge_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)
        with m.Elif(uflag["when_nz"] & uflag["end_gt_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_TOO_LONG)
        with m.Elif(uflag["when_z_l"] & uflag["mo_gt_cap"]):
            m.d.comb += uchk_bad.eq(E_DDP_U_TOO_LONG)
        with m.Elif(uflag["when_lv"] & (uflag["mo_gt_lmo"] | uflag["end_gt_lend"])):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)
        with m.Elif((uflag["when_l_many"] & uflag["maxmo_gt"])
                    | (uflag["when_l"] & uflag["maxend_gt"])):
            m.d.comb += uchk_bad.eq(E_DDP_U_MO)
        errors[Step.CHECK_OFFSETS] = (uchk_bad, 1)

        # the new message state, worked out every cycle and registered (timing: the block
        # RAM's write data and the context register see only registers): its operands are in
        # place from CHECK_OFFSETS on and FINISH_UNTAGGED comes at least a cycle later
        note = n_nz | Lb
        nmaxmo = Mux(many & uflag["maxmo_gt"], mmaxmo, h_mo)
        nmaxend = Mux(uflag["maxend_gt"], mmaxend, endv)
        new_e = Signal(RecvEntry())
        m.d.comb += new_e.eq(e)
        with m.If(note):
            m.d.comb += [new_e.any.eq(1), new_e.max_mo.eq(nmaxmo), new_e.max_end.eq(nmaxend)]
        with m.If(Lb):
            m.d.comb += [new_e.lv.eq(1), new_e.l_mo.eq(h_mo), new_e.l_end.eq(endv),
                         new_e.done.eq(1), new_e.opcode.eq(opcode), new_e.inval.eq(inv),
                         new_e.inval_stag.eq(Mux(inv, seg.stag, 0))]
        new_q = Signal(QueueState())
        m.d.comb += new_q.eq(Mux(self.qn == 1, c.q1.as_value(), c.q2.as_value()))
        with m.If(note):
            m.d.comb += [new_q.any.eq(1), new_q.max_mo.eq(nmaxmo), new_q.max_end.eq(nmaxend)]
        with m.If(Lb):
            m.d.comb += [new_q.lv.eq(1), new_q.l_mo.eq(h_mo), new_q.l_end.eq(endv)]
        m.d.sync += [self.new_entry.eq(new_e), self.new_queue.eq(new_q),
                     self.invalidate.eq(Lb & inv)]

    def _message(self, m, errors):
        """A Read Request's / Terminate's message read back, checked in CHECK_MESSAGE
        (registered for timing: the message's last row is written in the last READ_MESSAGE
        cycle); MESSAGE_VERDICT acts on it."""
        state, c, qn = self.state, self.ctx, self.qn
        mb = [self.message[8 * k:8 * k + 8] for k in range(64)]
        mlen = Signal(7, name="mlen")
        m.d.comb += mlen.eq(self.seg.end[:7])
        rb_code = Signal(16)
        with m.If(state == Step.CHECK_MESSAGE):
            tm, td, tr = mb[2][7], mb[2][6], mb[2][5]
            hl = Mux(mb[6][7], 14, 18)
            expect = Signal(7, name="term_expect")
            m.d.comb += expect.eq(4 + Mux(tm | td, 2, 0) + Mux(td, hl, 0) + Mux(tr, 28, 0))
            with m.If(qn == 1):
                m.d.sync += [rb_code.eq(Mux(mlen != QN1_CAP, E_RO_UNSPECIFIED, E_RO_CATA_STREAM)),
                             self.message_bad.eq((mlen != QN1_CAP) | (c.rrc >= c.ird))]
            with m.Else():
                m.d.sync += [rb_code.eq(E_RO_UNSPECIFIED),
                             self.message_bad.eq((td & (mlen <= 6)) | (mlen != expect))]
            m.d.sync += self.read_size_nz.eq(big_endian(mb[12:16]) != 0)
        errors[Step.MESSAGE_VERDICT] = (rb_code, 1)

    def _source(self, m, errors):
        """An inbound Read Request's source STag, TO and size (from the message read back)
        against the row in ``row``: worked out every cycle and registered one by one, valid
        in CHECK_SOURCE_STAG (the row is registered in WAIT_SOURCE_CHECKS). The message is
        in place from CHECK_MESSAGE on, so the sum ``ends`` and the TO's copy are valid from
        MESSAGE_VERDICT on."""
        row = self.row
        mb = [self.message[8 * k:8 * k + 8] for k in range(64)]
        src_to = big_endian(mb[20:28])
        src_stag = big_endian(mb[16:20])
        src_size = big_endian(mb[12:16])
        ends = Signal(65)
        # a copy of the TO too (timing: the compare with the row's base starts next to it,
        # not at the control buffer's read register)
        src_to_q = Signal(64)
        m.d.sync += [ends.eq(src_to + src_size), src_to_q.eq(src_to)]
        # TOs src_to .. ends - 1 inside the row's
        sflag = self._registered(m, dict(
            invalid=~row.valid | (row.stag != src_stag), other_conn=row.conn != self.seg.entry.conn,
            no_read=~row.rr, wrap=ends[64],
            bounds=wide_less(src_to_q, row.base) | wide_less(row.end, ends)), "schk")
        m.d.comb += self.source_bad.eq(Cat(*sflag.values()).any())
        errors[Step.CHECK_SOURCE_STAG] = (_first_code(m, "schk_code", (
            (sflag["invalid"], E_RP_INVALID_STAG), (sflag["other_conn"], E_RP_NOT_ASSOC),
            (sflag["no_read"], E_RP_ACCESS), (sflag["wrap"], E_RP_TO_WRAP),
            (sflag["bounds"], E_RP_BOUNDS))), 1)

    def _error(self, m, errors):
        """The error registers: assigned in every cycle of a check state, whatever its checks
        say (timing: their enables are the state only; the error report is the only reader
        and every way to it sets them)."""
        state, err = self.state, self.error
        with m.Switch(state):
            for step, (code, md) in errors.items():
                with m.Case(step):
                    m.d.sync += [err.code.eq(code), err.md.eq(md)]
                    if step == Step.DECODE:
                        m.d.sync += [err.ed.eq(self._pflag["ed"]), err.er.eq(0)]
                    if step == Step.MESSAGE_VERDICT:
                        with m.If(self.qn == 1):
                            # R (the Read Request header) goes with RDMAP errors from here on
                            m.d.sync += err.er.eq(self.seg.length == QN1_CAP)

    def _formal(self, m):
        state, seg, pairs = self.state, self.seg, self._pairs
        ent, T = seg.entry, seg.tagged
        n = Signal(17, name="formal_n")
        m.d.comb += n.eq(ent.len - seg.header_len)

        def holds(name, *groups):
            return [Assert(r == v, name) for g in groups for r, v in pairs[g]]
        endt_q = self._endt
        DB = self._db
        untagged_q0 = ~T & (self.qn == 0)
        with m.If((state == Step.HEADER) & self.header_last):
            m.d.comb += holds("lemma_dec_early", "dec_early")
        with m.Switch(state):
            with m.Case(Step.DECODE):
                m.d.comb += holds("lemma_dec_verdict", "dec_early", "dec_pre", "dec")
                # (the MSN checks' operands: only untagged segments use them)
                m.d.comb += holds("lemma_dec_msn", "dec_msn")
            with m.Case(Step.LOAD_RECV_BUFFER):
                m.d.comb += holds("lemma_msn", "msn")
            with m.Case(Step.CHECK_TAGGED):
                m.d.comb += holds("lemma_tchk_verdict", "tchk")
                m.d.comb += Assert(T & (n != 0), "lemma_tchk_read")
            with m.Case(Step.CHECK_OFFSETS):
                m.d.comb += holds("lemma_uchk_verdict", "uchk")
            with m.Case(Step.CHECK_INVALIDATE):
                # the offset checks passed
                m.d.comb += Assert((self.qn == 0)
                                   & ((n == 0) | ((seg.mo + n) <= self.recv_buffer.length)),
                                   "lemma_ichk")
        with m.If(in_steps(state, Step.DECODE, Step.CHECK_TAGGED)):
            m.d.comb += Assert((endt_q == seg.to + n) & (self._to_q == seg.to), "lemma_endt")
        with m.If(in_steps(state, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS)):
            m.d.comb += Assert(self._mo_q == seg.mo, "lemma_mo_q")
        # the segment's kind and length in the states of its kind (DECODE's verdict)
        with m.If(in_steps(state, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS,
                      Step.CHECK_INVALIDATE, Step.FINISH_UNTAGGED)):
            m.d.comb += Assert(~T, "lemma_untagged")
        with m.If(in_steps(state, Step.CHECK_TAGGED, Step.FINISH_TAGGED)):
            m.d.comb += Assert(T, "lemma_tagged")
        with m.If(in_steps(state, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS,
                      Step.CHECK_INVALIDATE, Step.CHECK_TAGGED, Step.PLACE)):
            m.d.comb += Assert(~ent.ovf & (ent.len >= seg.header_len) & (ent.len <= self.slot_bytes),
                               "lemma_len")
        with m.If(in_steps(state, Step.LOAD_RECV_BUFFER, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS,
                      Step.CHECK_INVALIDATE, Step.PLACE, Step.FINISH_UNTAGGED) & untagged_q0):
            m.d.comb += Assert(self.rq_index[DB:] == ent.conn, "lemma_ridx")
        with m.If(in_steps(state, Step.CHECK_QN_MSN, Step.CHECK_OFFSETS) & untagged_q0):
            m.d.comb += Assert(self._mcap == self.recv_buffer.length, "lemma_mcap")
