/* Tests of the C driver library against a mock MMIO (run by tests/firmware/test_firmware.py).
 *
 * Two mocks:
 *  - a plain array as the register window (rnic_init(dev, array)): checks volatile access,
 *    the magic/version check and the read-modify-write helpers;
 *  - access hooks emulating the register bank from the generated RNIC_REGISTERS table
 *    (RW storage, RO inputs, W1C, pulses logged, SLVERR on unmapped addresses) with a
 *    tiny "core" reacting to pulses: checks the sequences (context programming, errors,
 *    queues) and their write order.
 *
 * Prints one line per check group and "ALL OK"; exits 1 at the first failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnic.h"

static int checks;

#define CHECK(cond) do { \
    checks++; \
    if (!(cond)) { \
        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        exit(1); \
    } \
} while (0)

#define NWORDS (RNIC_REGS_SIZE / 4u)

/* ---- mock 1: plain memory ---------------------------------------------------------- */

static uint32_t mem[NWORDS];

static void test_probe_and_rmw(void)
{
    rnic_dev_t dev;

    memset(mem, 0, sizeof mem);
    rnic_init(&dev, mem);
    CHECK(rnic_probe(&dev) == RNIC_ERR_MAGIC);
    mem[RNIC_ID_ADDR / 4] = 0x69575251u;
    CHECK(rnic_probe(&dev) == RNIC_ERR_MAGIC);
    mem[RNIC_ID_ADDR / 4] = RNIC_MAGIC;
    mem[RNIC_VERSION_ADDR / 4] = RNIC_FIELD_PREP(RNIC_VERSION_MAJOR, RNIC_VERSION_MAJOR_RESET + 1u);
    CHECK(rnic_probe(&dev) == RNIC_ERR_VERSION);
    mem[RNIC_VERSION_ADDR / 4] = RNIC_FIELD_PREP(RNIC_VERSION_MAJOR, RNIC_VERSION_MAJOR_RESET) |
                                 RNIC_FIELD_PREP(RNIC_VERSION_MINOR, 8u) | RNIC_FIELD_PREP(RNIC_VERSION_WIDTH, 8u);
    mem[RNIC_CAPS_ADDR / 4] = RNIC_FIELD_PREP(RNIC_CAPS_CONNECTIONS, 16u) | RNIC_FIELD_PREP(RNIC_CAPS_STAGS, 64u);
    CHECK(rnic_probe(&dev) == RNIC_OK);
    CHECK(dev.minor == 8u && dev.width == 8u && dev.connections == 16u && dev.stags == 64u);
    CHECK(strcmp(rnic_strerror(RNIC_ERR_MAGIC), "no RNIC (bad ID magic)") == 0);

    /* field macros */
    CHECK(RNIC_FIELD_PREP(RNIC_CTX_TX_PHASE, 0x1FCu) == 0x1FC0u);
    CHECK(RNIC_FIELD_PREP(RNIC_CTX_TX_PHASE, 0x3FFu) == 0x1FF0u);   /* masked to the field */
    CHECK(RNIC_FIELD_GET(RNIC_CTX_TX_MULPDU, 0xBEEF0001u) == 0xBEEFu);
    CHECK(RNIC_ID_MAGIC_RESET == RNIC_MAGIC && RNIC_ID_RESET == RNIC_MAGIC);

    /* read-modify-write keeps RW bits and never writes back W1C/pulse bits */
    mem[RNIC_CTRL_ADDR / 4] = 0x7u;                       /* ENABLE + (stale) pulse bits */
    RNIC_SET_FIELD(&dev, CTRL, ENABLE, 0u);
    CHECK(mem[RNIC_CTRL_ADDR / 4] == 0u);
    RNIC_SET_FIELD(&dev, CTRL, ENABLE, 1u);
    CHECK(mem[RNIC_CTRL_ADDR / 4] == RNIC_CTRL_ENABLE_MASK);
    RNIC_PULSE(&dev, CTRL, SOFT_RESET);
    CHECK(mem[RNIC_CTRL_ADDR / 4] == (RNIC_CTRL_ENABLE_MASK | RNIC_CTRL_SOFT_RESET_MASK));
    mem[RNIC_CTX_TX_ADDR / 4] = RNIC_FIELD_PREP(RNIC_CTX_TX_MULPDU, 1400u) | RNIC_CTX_TX_CRC_MASK;
    RNIC_SET_FIELD(&dev, CTX_TX, PHASE, 508u);
    CHECK(RNIC_GET_FIELD(&dev, CTX_TX, PHASE) == 508u);
    CHECK(RNIC_GET_FIELD(&dev, CTX_TX, MULPDU) == 1400u);
    CHECK(RNIC_GET_FIELD(&dev, CTX_TX, CRC) == 1u && RNIC_GET_FIELD(&dev, CTX_TX, MARKERS) == 0u);
    mem[RNIC_CQ_STATUS_ADDR / 4] = 0x3u;                  /* RO VALID + W1C OVERFLOW */
    rnic_modify(&dev, RNIC_CQ_STATUS_ADDR, RNIC_CQ_STATUS_RW_MASK, 0u, 0u);
    CHECK(mem[RNIC_CQ_STATUS_ADDR / 4] == 0u);
    mem[RNIC_RX_OCTETS_LO_ADDR / 4] = 5u;
    mem[RNIC_RX_OCTETS_HI_ADDR / 4] = 3u;
    CHECK(rnic_read64(&dev, RNIC_RX_OCTETS_LO_ADDR, RNIC_RX_OCTETS_HI_ADDR) == ((uint64_t)3u << 32 | 5u));
    printf("probe and read-modify-write: ok\n");
}

/* ---- mock 2: the register bank ----------------------------------------------------- */

struct reg_info { const char *name; uint32_t addr, reset, rw, w1c, pulse, ro; };

#define X(name, addr, reset, rw, w1c, pulse, ro) { #name, addr, reset, rw, w1c, pulse, ro },
static const struct reg_info reg_table[] = { RNIC_REGISTERS(X) };
#undef X
#define NREGS (sizeof reg_table / sizeof reg_table[0])

struct access { char op; uint32_t addr, value; };

struct bank {
    uint32_t storage[NWORDS];   /* RW and W1C bits */
    uint32_t inputs[NWORDS];    /* RO bits from the "core" (constants preloaded) */
    struct access log[512];
    unsigned nlog;
    unsigned slverr;
    /* core emulation */
    unsigned busy_reads;        /* CTX_STATUS reads that still report BUSY */
    int busy_forever;
    uint32_t ctx_tx[16], ctx_rx[16], ctx_ird_ord[16], ctx_state[16], committed;
    uint32_t hi_bumps;          /* RX_OCTETS_HI reads that see an increment */
    unsigned pops, doorbells, posts, stag_commits;
};

static const struct reg_info *find(uint32_t addr)
{
    size_t i;
    for (i = 0; i < NREGS; i++)
        if (reg_table[i].addr == (addr & ~3u))
            return &reg_table[i];
    return NULL;
}

static void note(struct bank *b, char op, uint32_t addr, uint32_t value)
{
    if (b->nlog < sizeof b->log / sizeof b->log[0]) {
        b->log[b->nlog].op = op;
        b->log[b->nlog].addr = addr;
        b->log[b->nlog].value = value;
        b->nlog++;
    }
}

static uint32_t bank_read(rnic_dev_t *dev, uint32_t addr)
{
    struct bank *b = dev->ctx;
    const struct reg_info *r = find(addr);
    uint32_t w = addr / 4u, v;

    if (!r) {
        b->slverr++;
        return 0;
    }
    if (addr == RNIC_CTX_STATUS_ADDR) {
        uint32_t conn = b->storage[RNIC_CONN_SEL_ADDR / 4] & RNIC_CONN_SEL_CONN_MASK;
        b->inputs[w] = RNIC_FIELD_PREP(RNIC_CTX_STATUS_STATE, b->ctx_state[conn % 16u]);
        if (b->busy_forever || b->busy_reads) {
            b->inputs[w] |= RNIC_CTX_STATUS_BUSY_MASK;
            if (b->busy_reads)
                b->busy_reads--;
        }
    }
    if (addr == RNIC_RX_OCTETS_HI_ADDR && b->hi_bumps) {
        b->hi_bumps--;
        b->inputs[w]++;
    }
    v = (b->storage[w] & (r->rw | r->w1c)) | (b->inputs[w] & r->ro);
    note(b, 'r', addr, v);
    return v;
}

static void core_pulse(struct bank *b, uint32_t addr, uint32_t bits)
{
    uint32_t conn = b->storage[RNIC_CONN_SEL_ADDR / 4] & RNIC_CONN_SEL_CONN_MASK;

    if (addr == RNIC_CTX_CMD_ADDR && (bits & RNIC_CTX_CMD_COMMIT_MASK)) {
        b->ctx_tx[conn % 16u] = b->storage[RNIC_CTX_TX_ADDR / 4];
        b->ctx_rx[conn % 16u] = b->storage[RNIC_CTX_RX_ADDR / 4];
        b->ctx_ird_ord[conn % 16u] = b->storage[RNIC_CTX_IRD_ORD_ADDR / 4];
        b->ctx_state[conn % 16u] = b->storage[RNIC_CTX_STATE_ADDR / 4] & RNIC_CTX_STATE_STATE_MASK;
        b->committed++;
        b->busy_reads = 2;
    }
    if (addr == RNIC_CTX_CMD_ADDR && (bits & RNIC_CTX_CMD_SET_STATE_MASK)) {
        b->ctx_state[conn % 16u] = b->storage[RNIC_CTX_STATE_ADDR / 4] & RNIC_CTX_STATE_STATE_MASK;
        b->busy_reads = 1;
    }
    if (addr == RNIC_CTRL_ADDR && (bits & RNIC_CTRL_SOFT_RESET_MASK))
        b->inputs[RNIC_STATUS_ADDR / 4] = RNIC_STATUS_READY_MASK;
    if (addr == RNIC_CQ_CMD_ADDR) {
        b->pops++;
        b->inputs[RNIC_CQ_STATUS_ADDR / 4] = 0;
    }
    if (addr == RNIC_SQ_CMD_ADDR)
        b->doorbells++;
    if (addr == RNIC_RQ_CMD_ADDR)
        b->posts++;
    if (addr == RNIC_STAG_CMD_ADDR)
        b->stag_commits++;
}

static void bank_write(rnic_dev_t *dev, uint32_t addr, uint32_t value)
{
    struct bank *b = dev->ctx;
    const struct reg_info *r = find(addr);
    uint32_t w = addr / 4u;

    if (!r) {
        b->slverr++;
        return;
    }
    note(b, 'w', addr, value);
    b->storage[w] = (b->storage[w] & ~r->rw) | (value & r->rw);
    b->storage[w] &= ~(value & r->w1c);
    if (value & r->pulse)
        core_pulse(b, addr, value & r->pulse);
}

static struct bank the_bank;

static void bank_setup(rnic_dev_t *dev)
{
    size_t i;
    memset(&the_bank, 0, sizeof the_bank);
    for (i = 0; i < NREGS; i++) {
        the_bank.storage[reg_table[i].addr / 4] = reg_table[i].reset & (reg_table[i].rw | reg_table[i].w1c);
        the_bank.inputs[reg_table[i].addr / 4] = reg_table[i].reset & reg_table[i].ro;
    }
    /* build parameters: W = 8, 16 connections, 64 STags */
    the_bank.inputs[RNIC_VERSION_ADDR / 4] |= RNIC_FIELD_PREP(RNIC_VERSION_WIDTH, 8u);
    the_bank.inputs[RNIC_CAPS_ADDR / 4] = RNIC_FIELD_PREP(RNIC_CAPS_CONNECTIONS, 16u) |
                                          RNIC_FIELD_PREP(RNIC_CAPS_STAGS, 64u);
    rnic_init(dev, NULL);
    dev->read32 = bank_read;
    dev->write32 = bank_write;
    dev->ctx = &the_bank;
    dev->poll_limit = 10;
}

static unsigned writes_in_log(struct access *out, unsigned max)
{
    unsigned i, n = 0;
    for (i = 0; i < the_bank.nlog && n < max; i++)
        if (the_bank.log[i].op == 'w')
            out[n++] = the_bank.log[i];
    return n;
}

static void test_table(void)
{
    size_t i, j;
    CHECK(NREGS > 40);
    for (i = 0; i < NREGS; i++) {
        const struct reg_info *r = &reg_table[i];
        CHECK(r->addr % 4u == 0u && r->addr < RNIC_REGS_SIZE);
        /* the access masks of a register are disjoint */
        CHECK((r->rw & r->w1c) == 0u && (r->rw & r->pulse) == 0u && (r->rw & r->ro) == 0u);
        CHECK((r->w1c & r->pulse) == 0u && (r->w1c & r->ro) == 0u && (r->pulse & r->ro) == 0u);
        for (j = i + 1; j < NREGS; j++)
            CHECK(reg_table[j].addr != r->addr);
    }
    CHECK(find(RNIC_ID_ADDR)->reset == RNIC_MAGIC);
    CHECK(find(RNIC_CTRL_ADDR)->rw == RNIC_CTRL_RW_MASK);
    printf("register table: %u registers ok\n", (unsigned)NREGS);
}

static void test_conn_program(void)
{
    rnic_dev_t dev;
    struct access w[16];
    unsigned n, i, status_reads = 0;
    uint32_t status, error;
    rnic_conn_cfg_t cfg;

    bank_setup(&dev);
    CHECK(rnic_probe(&dev) == RNIC_OK && dev.connections == 16u);
    CHECK(rnic_soft_reset(&dev) == RNIC_OK);
    rnic_enable(&dev, 1);
    CHECK((the_bank.storage[RNIC_CTRL_ADDR / 4] & RNIC_CTRL_ENABLE_MASK) != 0u);

    memset(&cfg, 0, sizeof cfg);
    cfg.conn = 5;
    cfg.tx.markers = 1; cfg.tx.crc = 1; cfg.tx.phase = 8; cfg.tx.mulpdu = 1400;
    cfg.rx.markers = 0; cfg.rx.crc = 1; cfg.rx.phase = 508; cfg.rx.mulpdu = 64768;
    cfg.ird = 4; cfg.ord = 0x3FFF;
    cfg.state = RNIC_CTX_STATE_STATE_RTS;
    the_bank.nlog = 0;
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_OK);
    n = writes_in_log(w, 16);
    /* the sequence: select, the context registers, then COMMIT last */
    CHECK(n == 6);
    CHECK(w[0].addr == RNIC_CONN_SEL_ADDR && w[0].value == 5u);
    CHECK(w[1].addr == RNIC_CTX_TX_ADDR &&
          w[1].value == (RNIC_CTX_TX_MARKERS_MASK | RNIC_CTX_TX_CRC_MASK |
                         RNIC_FIELD_PREP(RNIC_CTX_TX_PHASE, 8u) | RNIC_FIELD_PREP(RNIC_CTX_TX_MULPDU, 1400u)));
    CHECK(w[2].addr == RNIC_CTX_RX_ADDR &&
          w[2].value == (RNIC_CTX_RX_CRC_MASK | RNIC_FIELD_PREP(RNIC_CTX_RX_PHASE, 508u) |
                         RNIC_FIELD_PREP(RNIC_CTX_RX_MULPDU, 64768u)));
    CHECK(w[3].addr == RNIC_CTX_IRD_ORD_ADDR && w[3].value == (4u | 0x3FFFu << 16));
    CHECK(w[4].addr == RNIC_CTX_STATE_ADDR && w[4].value == RNIC_CTX_STATE_STATE_RTS);
    CHECK(w[5].addr == RNIC_CTX_CMD_ADDR && w[5].value == RNIC_CTX_CMD_COMMIT_MASK);
    /* it waited for BUSY to drop: 2 busy reads, then one idle */
    for (i = 0; i < the_bank.nlog; i++)
        status_reads += the_bank.log[i].op == 'r' && the_bank.log[i].addr == RNIC_CTX_STATUS_ADDR;
    CHECK(status_reads == 3u);
    CHECK(the_bank.committed == 1u);
    CHECK(the_bank.ctx_tx[5] == w[1].value && the_bank.ctx_rx[5] == w[2].value);
    CHECK(the_bank.ctx_ird_ord[5] == w[3].value && the_bank.ctx_state[5] == RNIC_CTX_STATE_STATE_RTS);
    CHECK(rnic_conn_status(&dev, 5, &status, &error) == RNIC_OK);
    CHECK(RNIC_FIELD_GET(RNIC_CTX_STATUS_STATE, status) == RNIC_CTX_STATE_STATE_RTS);
    CHECK(rnic_conn_set_state(&dev, 5, RNIC_CTX_STATE_STATE_CLOSING) == RNIC_OK);
    CHECK(the_bank.ctx_state[5] == RNIC_CTX_STATE_STATE_CLOSING);
    CHECK(the_bank.committed == 1u);

    /* invalid arguments: nothing written */
    the_bank.nlog = 0;
    cfg.conn = 16;                                  /* >= CAPS.CONNECTIONS */
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_INVAL);
    cfg.conn = 1; cfg.tx.phase = 6;                 /* not a multiple of 4 */
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_INVAL);
    cfg.tx.phase = 512;
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_INVAL);
    cfg.tx.phase = 0; cfg.ird = 0x4000;
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_INVAL);
    cfg.ird = 0; cfg.state = 8;
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_INVAL);
    CHECK(the_bank.nlog == 0u);

    /* a context that stays busy times out after poll_limit reads */
    cfg.state = RNIC_CTX_STATE_STATE_RTS;
    the_bank.busy_forever = 1;
    the_bank.nlog = 0;
    CHECK(rnic_conn_program(&dev, &cfg) == RNIC_ERR_TIMEOUT);
    CHECK(the_bank.nlog == 6u + dev.poll_limit);
    the_bank.busy_forever = 0;
    CHECK(the_bank.slverr == 0u);
    printf("connection context programming: ok\n");
}

static void test_errors_counters_queues(void)
{
    rnic_dev_t dev;
    rnic_error_t err;
    rnic_cqe_t cqe;
    rnic_wr_t wr;
    rnic_stag_t stag;
    struct access w[16];
    unsigned n;

    bank_setup(&dev);
    CHECK(rnic_probe(&dev) == RNIC_OK);

    /* errors: pop clears exactly what it saw (W1C) */
    CHECK(rnic_error_pop(&dev, &err) == 0);
    the_bank.storage[RNIC_ERR_STATUS_ADDR / 4] = RNIC_ERR_STATUS_PENDING_MASK | RNIC_ERR_STATUS_OVERFLOW_MASK;
    the_bank.inputs[RNIC_ERR_CONN_ADDR / 4] = 9u | RNIC_ERR_CONN_TX_MASK;
    the_bank.inputs[RNIC_ERR_INFO_ADDR / 4] = RNIC_FIELD_PREP(RNIC_ERR_INFO_LAYER, RNIC_ERR_INFO_LAYER_LLP) |
                                              RNIC_FIELD_PREP(RNIC_ERR_INFO_ECODE, 2u);
    CHECK(rnic_error_pop(&dev, &err) == 1);
    CHECK(err.conn == 9u && err.tx == 1 && err.layer == RNIC_ERR_INFO_LAYER_LLP && err.etype == 0u);
    CHECK(err.ecode == 2u && err.overflow == 1);
    CHECK(the_bank.storage[RNIC_ERR_STATUS_ADDR / 4] == 0u);
    CHECK(rnic_error_pop(&dev, &err) == 0);

    /* 64-bit counter whose HI changes between reads: retried, consistent */
    the_bank.inputs[RNIC_RX_OCTETS_LO_ADDR / 4] = 0x10u;
    the_bank.inputs[RNIC_RX_OCTETS_HI_ADDR / 4] = 1u;
    the_bank.hi_bumps = 2;
    CHECK(rnic_read64(&dev, RNIC_RX_OCTETS_LO_ADDR, RNIC_RX_OCTETS_HI_ADDR) == ((uint64_t)3u << 32 | 0x10u));

    /* STag write */
    memset(&stag, 0, sizeof stag);
    stag.index = 3; stag.stag = 0x1234AB00u; stag.base = 0x100002000ull; stag.length = 8192;
    stag.addr = 0x300004000ull; stag.conn = 5; stag.valid = 1; stag.remote_write = 1;
    the_bank.nlog = 0;
    CHECK(rnic_stag_write(&dev, &stag) == RNIC_OK);
    n = writes_in_log(w, 16);
    CHECK(n == 9u && w[8].addr == RNIC_STAG_CMD_ADDR && the_bank.stag_commits == 1u);
    CHECK(the_bank.storage[RNIC_STAG_BASE_HI_ADDR / 4] == 1u && the_bank.storage[RNIC_STAG_BASE_LO_ADDR / 4] == 0x2000u);
    CHECK(the_bank.storage[RNIC_STAG_ADDR_HI_ADDR / 4] == 3u && the_bank.storage[RNIC_STAG_ADDR_LO_ADDR / 4] == 0x4000u);
    CHECK(the_bank.storage[RNIC_STAG_ATTR_ADDR / 4] ==
          (RNIC_STAG_ATTR_VALID_MASK | RNIC_STAG_ATTR_REMOTE_WRITE_MASK | RNIC_FIELD_PREP(RNIC_STAG_ATTR_CONN, 5u)));
    stag.index = 64;                                       /* >= CAPS.STAGS */
    CHECK(rnic_stag_write(&dev, &stag) == RNIC_ERR_INVAL);

    /* receive and send queues */
    CHECK(rnic_rq_post(&dev, 5, 0x200001000ull, 4096, 77) == RNIC_OK && the_bank.posts == 1u);
    CHECK(the_bank.storage[RNIC_RQ_ADDR_HI_ADDR / 4] == 2u && the_bank.storage[RNIC_RQ_ID_ADDR / 4] == 77u);
    the_bank.inputs[RNIC_RQ_STATUS_ADDR / 4] = RNIC_RQ_STATUS_FULL_MASK;
    CHECK(rnic_rq_post(&dev, 5, 0, 1, 1) == RNIC_ERR_FULL && the_bank.posts == 1u);
    memset(&wr, 0, sizeof wr);
    wr.conn = 5; wr.opcode = RNIC_SQ_WR_OPCODE_RDMA_READ; wr.signaled = 1; wr.laddr = 0x300000040ull;
    wr.length = 100; wr.lstag = 0x11u; wr.rstag = 0x22u; wr.rto = 0x400000080ull; wr.wr_id = 0xABCDu;
    the_bank.nlog = 0;
    CHECK(rnic_sq_post(&dev, &wr) == RNIC_OK && the_bank.doorbells == 1u);
    n = writes_in_log(w, 16);
    CHECK(n == 11u && w[n - 1].addr == RNIC_SQ_CMD_ADDR && w[0].addr == RNIC_SQ_WR_ADDR);
    CHECK(w[0].value == (RNIC_SQ_WR_OPCODE_RDMA_READ | RNIC_SQ_WR_SIGNALED_MASK | 5u << 16));
    CHECK(the_bank.storage[RNIC_SQ_RTO_HI_ADDR / 4] == 4u && the_bank.storage[RNIC_SQ_RTO_LO_ADDR / 4] == 0x80u);
    wr.opcode = 16;
    CHECK(rnic_sq_post(&dev, &wr) == RNIC_ERR_INVAL);

    /* completion queue */
    CHECK(rnic_cq_poll(&dev, &cqe) == 0 && the_bank.pops == 0u);
    the_bank.inputs[RNIC_CQ_STATUS_ADDR / 4] = RNIC_CQ_STATUS_VALID_MASK;
    the_bank.inputs[RNIC_CQ_WR_ID_ADDR / 4] = 0xABCDu;
    the_bank.inputs[RNIC_CQ_INFO_ADDR / 4] = RNIC_SQ_WR_OPCODE_RDMA_READ |
        RNIC_FIELD_PREP(RNIC_CQ_INFO_STATUS, RNIC_CQ_INFO_STATUS_SUCCESS) | RNIC_FIELD_PREP(RNIC_CQ_INFO_CONN, 5u);
    the_bank.inputs[RNIC_CQ_LENGTH_ADDR / 4] = 100u;
    CHECK(rnic_cq_poll(&dev, &cqe) == 1 && the_bank.pops == 1u);
    CHECK(cqe.wr_id == 0xABCDu && cqe.opcode == RNIC_SQ_WR_OPCODE_RDMA_READ && cqe.conn == 5u);
    CHECK(cqe.length == 100u && cqe.queue == RNIC_CQ_INFO_QUEUE_SQ && cqe.status == 0u && !cqe.invalidated);
    CHECK(rnic_cq_poll(&dev, &cqe) == 0);

    /* a received Send: MSN and SOLICITED; RQ overflow after a post is RNIC_ERR_FULL */
    the_bank.inputs[RNIC_CQ_STATUS_ADDR / 4] = RNIC_CQ_STATUS_VALID_MASK;
    the_bank.inputs[RNIC_CQ_INFO_ADDR / 4] = RNIC_SQ_WR_OPCODE_SEND_SE | RNIC_CQ_INFO_SOLICITED_MASK |
        RNIC_FIELD_PREP(RNIC_CQ_INFO_QUEUE, RNIC_CQ_INFO_QUEUE_RQ);
    the_bank.inputs[RNIC_CQ_MSN_ADDR / 4] = 42u;
    CHECK(rnic_cq_poll(&dev, &cqe) == 1 && cqe.msn == 42u && cqe.solicited == 1);
    CHECK(cqe.queue == RNIC_CQ_INFO_QUEUE_RQ && cqe.opcode == RNIC_SQ_WR_OPCODE_SEND_SE);
    the_bank.inputs[RNIC_CQ_STATUS_ADDR / 4] = 0u;
    the_bank.inputs[RNIC_RQ_STATUS_ADDR / 4] = 0u;
    the_bank.storage[RNIC_RQ_STATUS_ADDR / 4] = RNIC_RQ_STATUS_OVERFLOW_MASK;   /* an older drop */
    CHECK(rnic_rq_post(&dev, 5, 0x1000, 64, 2) == RNIC_OK && the_bank.posts == 2u);

    /* Terminate reports and inbound Read Requests */
    {
        rnic_term_t t;
        rnic_read_req_t q;
        CHECK(rnic_term_pop(&dev, &t) == 0);
        the_bank.inputs[RNIC_TERM_STATUS_ADDR / 4] = RNIC_TERM_STATUS_VALID_MASK |
            RNIC_FIELD_PREP(RNIC_TERM_STATUS_LEN, 6u) | RNIC_FIELD_PREP(RNIC_TERM_STATUS_CONN, 3u);
        the_bank.inputs[RNIC_TERM_INFO_ADDR / 4] = RNIC_FIELD_PREP(RNIC_TERM_INFO_LAYER, 1u) |
            RNIC_FIELD_PREP(RNIC_TERM_INFO_ETYPE, 1u);
        the_bank.inputs[RNIC_TERM_DATA0_ADDR / 4] = 0x00001011u;
        the_bank.inputs[RNIC_TERM_DATA1_ADDR / 4] = 0x00000064u;
        CHECK(rnic_term_pop(&dev, &t) == 1 && t.conn == 3u && t.len == 6u && !t.received);
        CHECK(t.layer == 1u && t.etype == 1u && t.ecode == 0u && t.payload[0] == 0x11u && t.payload[1] == 0x10u);
        CHECK(t.payload[4] == 0x64u && t.payload[8] == 0u);
        the_bank.inputs[RNIC_TERM_STATUS_ADDR / 4] = 0u;
        CHECK(rnic_rrq_pop(&dev, &q) == 0);
        the_bank.inputs[RNIC_RRQ_STATUS_ADDR / 4] = RNIC_RRQ_STATUS_VALID_MASK |
            RNIC_FIELD_PREP(RNIC_RRQ_STATUS_CONN, 4u);
        the_bank.inputs[RNIC_RRQ_SIZE_ADDR / 4] = 100u;
        the_bank.inputs[RNIC_RRQ_SRC_TO_HI_ADDR / 4] = 7u;
        CHECK(rnic_rrq_pop(&dev, &q) == 1 && q.conn == 4u && q.size == 100u && q.src_to == (uint64_t)7u << 32);
        the_bank.inputs[RNIC_RRQ_STATUS_ADDR / 4] = 0u;
        CHECK(rnic_rrq_done(&dev, 4) == RNIC_OK && the_bank.storage[RNIC_RRQ_DONE_CONN_ADDR / 4] == 4u);
        CHECK(rnic_rrq_done(&dev, 1000) == RNIC_ERR_INVAL);
    }
    CHECK(the_bank.slverr == 0u);
    printf("errors, counters, STags, queues: ok\n");
}

int main(void)
{
    test_probe_and_rmw();
    test_table();
    test_conn_program();
    test_errors_counters_queues();
    printf("ALL OK (%d checks)\n", checks);
    return 0;
}
