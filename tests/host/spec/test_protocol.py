"""The shared DDP/RDMAP constants agree with what the model builds and what the gateware uses."""

from rnic.host.model import ddp, rdmap
from rnic.host.spec import protocol as p


def test_header_lengths_are_what_the_model_builds():
    tagged = ddp.TaggedHeader(last=True, stag=1, to=2, rsvd_ulp=0x40)
    untagged = ddp.UntaggedHeader(last=True, qn=p.QN_SEND, msn=1, mo=0, rsvd_ulp=0x43 << 32)
    assert len(tagged.to_bytes()) == p.TAGGED_HEADER_LEN
    assert len(untagged.to_bytes()) == p.UNTAGGED_HEADER_LEN
    assert tagged.to_bytes()[0] == p.T_FLAG | p.L_FLAG | p.DDP_VERSION
    assert untagged.to_bytes()[0] == p.L_FLAG | p.DDP_VERSION


def test_longest_terminate_is_terminate_max_len():
    rr = rdmap.ReadRequest(sink_stag=1, sink_to=2, size=3, src_stag=4, src_to=5)
    assert len(rr.build()) == p.READ_REQUEST_LEN
    header = ddp.UntaggedHeader(last=True, qn=p.QN_READ_REQUEST, msn=1, mo=0,
                                rsvd_ulp=p.RdmapOpcode.RDMA_READ_REQUEST << 32 | 0x40 << 32)
    term = rdmap.Terminate(layer=1, etype=2, ecode=3, m=True, d=True, r=True,
                           ddp_segment_length=p.UNTAGGED_HEADER_LEN + p.READ_REQUEST_LEN,
                           ddp_header=header.to_bytes(), rdmap_header=rr.build())
    assert len(term.build()) == p.TERMINATE_MAX_LEN == 52


def test_model_and_gateware_opcodes_are_the_spec_opcodes():
    from rnic.hdl.rdma_layouts import TERM_BYTES, Opcode as HdlOpcode

    assert rdmap.Opcode is p.RdmapOpcode
    assert [(m.name, m.value) for m in HdlOpcode] == [(m.name, m.value) for m in p.RdmapOpcode]
    assert HdlOpcode.as_shape().width == 4
    assert TERM_BYTES == p.TERMINATE_MAX_LEN
    assert rdmap.queue_number(p.RdmapOpcode.TERMINATE) == p.QN_TERMINATE
