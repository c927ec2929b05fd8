"""The processor's sequencer: one FSM over host requests and segments."""

from amaranth.hdl import Cat, Module, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from ..rdma_layouts import Opcode
from ..synth_hints import one_hot

__all__ = ["Step", "in_steps", "Take", "DecodeVerdict", "Sequencer"]

class Step(enum.Enum, shape=unsigned(6)):
    """The processor's states (the FSM's encoding), in the order a request or a segment
    passes them."""
    IDLE = 0                    # take the next request: restart, STag write, post, IRD
                                # release, else a segment
    # host requests
    STAG_END_SUM = 1            # STag table write: the region's end (a 64-bit sum) is registered
    STAG_WRITE = 2              # STag table write: the row is written
    RESTART = 3                 # connection restart: the context row is reset
    CLEAR_CONTROL = 4           # connection restart: the control-buffer rows are zeroed
    POST_READ_CONTEXT = 5       # receive-buffer post: the context row is read
    POST = 6                    # receive-buffer post: entry and count written (or dropped)
    RELEASE_READ_CONTEXT = 7    # IRD release: the context row is read
    RELEASE_COUNT = 8           # IRD release: the decremented count is registered
    RELEASE = 9                 # IRD release: the count is written
    # a segment: header and checks
    HEADER = 10                 # the header rows are read (the ingest's copy), the context taken
    DECODE = 11                 # acts on the registered header / context checks
    LOAD_RECV_BUFFER = 12       # QN 0: the receive buffer is loaded, its MSN acted on
    CHECK_QN_MSN = 13           # the offset checks are registered; a QN 1 / 2 MSN acted on
    CHECK_OFFSETS = 14          # acts on the untagged offset checks
    CHECK_INVALIDATE = 15       # Send with Invalidate: acts on the Invalidate STag's row
    CHECK_TAGGED = 16           # acts on the tagged segment's STag row checks
    # a segment: placement and completion
    PLACE = 17                  # waits for the placer to take the segment (and for a QN 1 /
                                # QN 2 message to be placed whole)
    FINISH_TAGGED = 18          # the Read Response totals are updated
    COMPLETE_READ_RESPONSE = 19  # its completion goes to the gate (which waits for the B's)
    FINISH_UNTAGGED = 20        # the message state is written (the head's completion built)
    DRAIN_READ = 21             # after a completion, with later_done: the new head entry is read
    DRAIN_LOAD = 22             # the head entry is registered
    DRAIN_DECIDE = 23           # the head entry completes, or the drain ends
    COMPLETE_SEND = 24          # the Send completion goes to the gate (which waits for the B's)
    READ_MESSAGE = 25           # the QN 1 / QN 2 message is read back from the control buffer
    CHECK_MESSAGE = 26          # the message's checks are registered
    MESSAGE_VERDICT = 27        # acts on them; a Read Request's source STag row is read
    WAIT_SOURCE_ROW = 28        # the source STag's row is registered
    WAIT_SOURCE_CHECKS = 29     # the source STag checks are registered
    CHECK_SOURCE_STAG = 30      # acts on them
    QUEUE_READ_REQUEST = 31     # the Read Request is offered on ``rrq``
    CLEAR_READ_REQUEST = 32     # the QN 1 message buffer is zeroed, one row per cycle
    BUILD_ERROR_REPORT = 33     # the error's Terminate report is built
    REPORT = 34                 # the report waits until every write issued has left on AW
    REPORT_SENT = 35            # the report is offered on ``term`` until taken
    DONE = 36                   # the context is written back and the slot released


def in_steps(state, *steps):
    """``state`` (the sequencer's) is one of ``steps``."""
    return Cat(*(state == step for step in steps)).any()


class Take(data.StructLayout):
    """The request IDLE takes this cycle (at most one flag): the ``ready`` of its stream."""

    def __init__(self):
        super().__init__({"ctl": 1, "stag_w": 1, "rq_post": 1, "rr_done": 1, "segment": 1})


class DecodeVerdict(data.StructLayout):
    """Where DECODE goes (exactly one flag): ``done`` (connection stopped, or an aborted
    ULPDU), ``fail`` (an error), ``tagged`` (a tagged segment with payload),
    ``tagged_empty`` (without), ``recv_buffer`` (QN 0), ``qn_message`` (QN 1 / QN 2)."""

    def __init__(self):
        super().__init__({"done": 1, "fail": 1, "tagged": 1, "tagged_empty": 1,
                          "recv_buffer": 1, "qn_message": 1})


class Sequencer(wiring.Component):
    """The processor's FSM: which request it serves, and which step of a segment it is in.

    It holds no data: each state's work is done by the datapath components, which see the
    state on ``state``; the sequencer only picks the next state from their verdicts, and
    does the handshakes of the request and output streams.

    Ports
    -----
    state : Out(Step)
        The current state (the FSM's, encoded one-hot by the synthesis). The datapaths act
        on it in ``m.Switch(state)`` cases, so that their multiplexers are those of the FSM's
        own case statement.
    ctl_valid, stag_w_valid, rq_post_valid, rr_done_valid, segment_valid : In(1)
        A request of each kind is waiting (``segment``: a complete ULPDU).
    take : Out(Take)
        The request taken in IDLE (its stream's ``ready``). Priority: restart, STag write,
        post (those two only while ``writes_idle``), IRD release, segment.
    writes_idle, aw_quiet : In(1)
        No write in flight / every write issued has left on AW (registered, never early).
    cq_valid, rrq_valid, term_valid : Out(1); cq_ready, rrq_ready, term_ready : In(1)
        The output streams' handshakes (payloads come from the reporter). A completion
        goes to the completion gate (which holds it until its writes are acknowledged), a
        report out once ``aw_quiet`` (``term_valid`` is a register: REPORT sets it,
        the handshake clears it, and REPORT_SENT waits for that).
    tagged, last, opcode, length_nz, qn : In
        Of the segment: T and L bits, RDMAP opcode, payload not empty, queue number.
    The verdicts (In(1) each): ``clear_last`` (last control-buffer row to zero),
    ``header_last`` (last HEADER cycle), ``decode`` (DECODE's, :class:`DecodeVerdict`),
    ``msn_in_range`` (QN 0 MSN inside the posted buffers), ``qn_msn_mismatch`` (QN 1 / 2
    MSN), ``offsets_bad``, ``offsets_invalidate`` (a QN 0 Send with Invalidate's last
    segment goes on to CHECK_INVALIDATE), ``invalidate_bad``, ``tagged_bad``, ``placed``
    (the placer's last word went), ``drain_go`` (the head receive buffer completes),
    ``read_back_last``, ``message_bad``, ``read_size_nz``, ``source_bad``.
    at_head, later_done : In(1)
        The QN 0 segment's buffer is the queue's head (a message it ends completes at
        once, else it waits, and no drain runs: the head is not done); a message may have
        ended in a buffer behind the head (the connection context's flag: after a Send
        completion the next buffers are drained only then).

    Per segment: IDLE, HEADER (at least three cycles, see
    :class:`~rnic.hdl.ddp_rx.header.HeaderReader`), DECODE, the checks (one state for a
    tagged segment, three for an untagged one, one more for a Send with Invalidate), then
    the finish (FINISH_TAGGED or FINISH_UNTAGGED, DONE; a Send that ends the head buffer's
    message adds COMPLETE_SEND, and the drain of the buffers behind it, three states each,
    only when a message may have ended behind the head: ``later_done``); the placement of
    its payload overlaps the next segment's states, so a stream of segments goes at the
    slower of the placer (its words + 1 cycles per segment) and these states (8 cycles per
    Write segment, 11 per single-segment Send at W = 8). An inbound Read Request or
    Terminate waits in PLACE for its message to be in the control buffer. Host requests: a
    STag table write takes three cycles, a post three, an IRD release four, a restart two
    plus the control buffer's rows.
    """

    def __init__(self):
        super().__init__({
            "state": Out(Step),
            "ctl_valid": In(1), "stag_w_valid": In(1), "rq_post_valid": In(1),
            "rr_done_valid": In(1), "segment_valid": In(1),
            "take": Out(Take()),
            "writes_idle": In(1), "aw_quiet": In(1),
            "cq_valid": Out(1), "cq_ready": In(1),
            "rrq_valid": Out(1), "rrq_ready": In(1),
            "term_valid": Out(1), "term_ready": In(1),
            "tagged": In(1), "last": In(1), "opcode": In(Opcode), "length_nz": In(1), "qn": In(2),
            "clear_last": In(1), "header_last": In(1), "decode": In(DecodeVerdict()),
            "msn_in_range": In(1), "qn_msn_mismatch": In(1), "offsets_bad": In(1),
            "offsets_invalidate": In(1), "invalidate_bad": In(1), "tagged_bad": In(1),
            "placed": In(1), "drain_go": In(1),
            "read_back_last": In(1), "message_bad": In(1), "read_size_nz": In(1),
            "source_bad": In(1),
            "place_go": Out(1), "place_free": In(1),
            "at_head": In(1), "later_done": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        with m.FSM(init="IDLE", name="proc") as fsm:
            for step in Step:           # (the FSM encodes its states in this order)
                fsm.ongoing(step.name)
            self._host_requests(m)
            self._segment_checks(m)
            self._segment_finish(m)
        assert fsm.encoding == {step.name: step.value for step in Step}
        # ``term_valid`` is a register, set on leaving REPORT and cleared by the handshake;
        # REPORT_SENT waits on it (timing: ``term_ready`` comes from the Terminate queue
        # across the die, and reaches only this flag, not the state register)
        with m.If(self.term_valid & self.term_ready):
            m.d.sync += self.term_valid.eq(0)
        # (``^ 0``: a net of its own for Amaranth, which glues the attributes of a net onto
        # every signal aliasing it: the one-hot hint must stay on the state register alone,
        # as the synthesis extracts an FSM once per wire that carries it; Yosys folds the
        # XOR away)
        m.d.comb += self.state.eq(one_hot(fsm) ^ 0)
        return m

    def _host_requests(self, m):
        take = self.take
        with m.State("IDLE"):
            with m.If(self.ctl_valid):
                m.d.comb += take.ctl.eq(1)
                m.next = "RESTART"
            with m.Elif(self.stag_w_valid & self.writes_idle):
                m.d.comb += take.stag_w.eq(1)
                m.next = "STAG_END_SUM"
            with m.Elif(self.rq_post_valid & self.writes_idle):
                m.d.comb += take.rq_post.eq(1)
                m.next = "POST_READ_CONTEXT"
            with m.Elif(self.rr_done_valid):
                m.d.comb += take.rr_done.eq(1)
                m.next = "RELEASE_READ_CONTEXT"
            with m.Elif(self.segment_valid):
                m.d.comb += take.segment.eq(1)
                m.next = "HEADER"
        for state, then in ((Step.STAG_END_SUM, Step.STAG_WRITE), (Step.STAG_WRITE, Step.IDLE),
                            (Step.RESTART, Step.CLEAR_CONTROL), (Step.POST_READ_CONTEXT, Step.POST),
                            (Step.POST, Step.IDLE), (Step.RELEASE_READ_CONTEXT, Step.RELEASE_COUNT),
                            (Step.RELEASE_COUNT, Step.RELEASE), (Step.RELEASE, Step.IDLE)):
            with m.State(state.name):
                m.next = then.name
        with m.State("CLEAR_CONTROL"):
            with m.If(self.clear_last):
                m.next = "IDLE"

    def _segment_checks(self, m):
        with m.State("HEADER"):
            with m.If(self.header_last):
                m.next = "DECODE"
        with m.State("DECODE"):
            for kind, state in (("done", Step.DONE), ("fail", Step.BUILD_ERROR_REPORT),
                                ("tagged", Step.CHECK_TAGGED), ("tagged_empty", Step.FINISH_TAGGED),
                                ("recv_buffer", Step.LOAD_RECV_BUFFER),
                                ("qn_message", Step.CHECK_QN_MSN)):
                with m.If(self.decode[kind]):
                    m.next = state.name
        with m.State("LOAD_RECV_BUFFER"):
            with m.If(self.msn_in_range):
                m.next = "CHECK_QN_MSN"
            with m.Else():
                m.next = "BUILD_ERROR_REPORT"
        with m.State("CHECK_QN_MSN"):
            with m.If((self.qn != 0) & self.qn_msn_mismatch):
                m.next = "BUILD_ERROR_REPORT"
            with m.Else():
                m.next = "CHECK_OFFSETS"
        with m.State("CHECK_OFFSETS"):
            with m.If(self.offsets_bad):
                m.next = "BUILD_ERROR_REPORT"
            with m.Elif(self.offsets_invalidate):
                m.next = "CHECK_INVALIDATE"
            with m.Elif(self.length_nz):
                self._place(m, memory=self.qn == 0, finish="FINISH_UNTAGGED")
            with m.Else():
                m.next = "FINISH_UNTAGGED"
        with m.State("CHECK_INVALIDATE"):
            with m.If(self.invalidate_bad):
                m.next = "BUILD_ERROR_REPORT"
            with m.Elif(self.length_nz):
                self._place(m, memory=1, finish="FINISH_UNTAGGED")
            with m.Else():
                m.next = "FINISH_UNTAGGED"
        with m.State("CHECK_TAGGED"):
            with m.If(self.tagged_bad):
                m.next = "BUILD_ERROR_REPORT"
            with m.Else():
                self._place(m, memory=1, finish="FINISH_TAGGED")

    def _place(self, m, *, memory, finish):
        """A check state passes the segment on to the placer: a placement to host memory
        that the placer takes at once is left to it (the segment is finished meanwhile);
        else PLACE waits (for the placer, and for a placement to the control buffer until
        its last word)."""
        m.d.comb += self.place_go.eq(1)
        with m.If(self.place_free & memory):
            m.next = finish
        with m.Else():
            m.next = "PLACE"

    def _segment_finish(self, m):
        with m.State("PLACE"):
            with m.If(self.placed):      # (the placer's verdict: handed over, or gone whole)
                with m.If(self.tagged):
                    m.next = "FINISH_TAGGED"
                with m.Else():
                    m.next = "FINISH_UNTAGGED"
        with m.State("FINISH_TAGGED"):
            with m.If(self.last & (self.opcode == Opcode.RDMA_READ_RESPONSE)):
                m.next = "COMPLETE_READ_RESPONSE"
            with m.Else():
                m.next = "DONE"
        # (a completion goes to the completion gate, which holds it until its writes have
        # their B; after a Send's, the next buffer completes too if its message is done,
        # which only a message that ended behind the head can be)
        with m.State("COMPLETE_READ_RESPONSE"):
            m.d.comb += self.cq_valid.eq(1)
            with m.If(self.cq_ready):
                m.next = "DONE"
        with m.State("COMPLETE_SEND"):
            m.d.comb += self.cq_valid.eq(1)
            with m.If(self.cq_ready & self.later_done):
                m.next = "DRAIN_READ"
            with m.Elif(self.cq_ready):
                m.next = "DONE"
        with m.State("FINISH_UNTAGGED"):
            with m.If(self.last):
                with m.If(self.qn != 0):
                    m.next = "READ_MESSAGE"
                with m.Elif(self.at_head):
                    m.next = "COMPLETE_SEND"        # (the reporter has its completion)
                with m.Else():
                    m.next = "DONE"                 # (the head is not done: no completion)
            with m.Else():
                m.next = "DONE"
        for state, then in ((Step.DRAIN_READ, Step.DRAIN_LOAD), (Step.DRAIN_LOAD, Step.DRAIN_DECIDE),
                            (Step.CHECK_MESSAGE, Step.MESSAGE_VERDICT),
                            (Step.WAIT_SOURCE_ROW, Step.WAIT_SOURCE_CHECKS),
                            (Step.WAIT_SOURCE_CHECKS, Step.CHECK_SOURCE_STAG),
                            (Step.BUILD_ERROR_REPORT, Step.REPORT), (Step.DONE, Step.IDLE)):
            with m.State(state.name):
                m.next = then.name
        with m.State("DRAIN_DECIDE"):
            with m.If(self.drain_go):
                m.next = "COMPLETE_SEND"
            with m.Else():
                m.next = "DONE"
        with m.State("READ_MESSAGE"):
            with m.If(self.read_back_last):
                m.next = "CHECK_MESSAGE"
        with m.State("MESSAGE_VERDICT"):
            with m.If(self.message_bad):
                m.next = "BUILD_ERROR_REPORT"
            with m.Elif((self.qn == 1) & self.read_size_nz):
                m.next = "WAIT_SOURCE_ROW"
            with m.Elif(self.qn == 1):
                m.next = "QUEUE_READ_REQUEST"
            with m.Else():
                m.next = "REPORT"
        with m.State("CHECK_SOURCE_STAG"):
            with m.If(self.source_bad):
                m.next = "BUILD_ERROR_REPORT"
            with m.Else():
                m.next = "QUEUE_READ_REQUEST"
        with m.State("QUEUE_READ_REQUEST"):
            m.d.comb += self.rrq_valid.eq(1)
            with m.If(self.rrq_ready):
                m.next = "CLEAR_READ_REQUEST"
        with m.State("CLEAR_READ_REQUEST"):
            with m.If(self.clear_last):
                m.next = "DONE"
        with m.State("REPORT"):
            with m.If(self.aw_quiet):
                m.d.sync += self.term_valid.eq(1)
                m.next = "REPORT_SENT"
        with m.State("REPORT_SENT"):
            with m.If(~self.term_valid):
                m.next = "DONE"
