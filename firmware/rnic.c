/* rnic.c: small C driver library for the open iWARP RNIC (see rnic.h). */
#include "rnic.h"

void rnic_init(rnic_dev_t *dev, volatile void *base)
{
    dev->base = (volatile uint32_t *)base;
    dev->read32 = NULL;
    dev->write32 = NULL;
    dev->ctx = NULL;
    dev->poll_limit = RNIC_DEFAULT_POLLS;
    dev->major = dev->minor = dev->width = dev->connections = dev->stags = 0;
}

uint32_t rnic_read(rnic_dev_t *dev, uint32_t addr)
{
    if (dev->read32)
        return dev->read32(dev, addr);
    return dev->base[addr / 4u];
}

void rnic_write(rnic_dev_t *dev, uint32_t addr, uint32_t value)
{
    if (dev->write32)
        dev->write32(dev, addr, value);
    else
        dev->base[addr / 4u] = value;
}

void rnic_modify(rnic_dev_t *dev, uint32_t addr, uint32_t rw_mask, uint32_t mask, uint32_t value)
{
    uint32_t old = rw_mask ? rnic_read(dev, addr) : 0u;
    rnic_write(dev, addr, (old & rw_mask & ~mask) | (value & mask));
}

/* HI, LO, HI; retried while HI changed (a carry between the reads), at most poll_limit times. */
uint64_t rnic_read64(rnic_dev_t *dev, uint32_t lo_addr, uint32_t hi_addr)
{
    uint32_t hi = rnic_read(dev, hi_addr), lo = 0, again, i;
    for (i = 0; i < dev->poll_limit; i++) {
        lo = rnic_read(dev, lo_addr);
        again = rnic_read(dev, hi_addr);
        if (again == hi)
            break;
        hi = again;
    }
    return ((uint64_t)hi << 32) | lo;
}

int rnic_wait(rnic_dev_t *dev, uint32_t addr, uint32_t mask, uint32_t want)
{
    uint32_t i;
    for (i = 0; i < dev->poll_limit; i++) {
        if ((rnic_read(dev, addr) & mask) == (want & mask))
            return RNIC_OK;
    }
    return RNIC_ERR_TIMEOUT;
}

int rnic_probe(rnic_dev_t *dev)
{
    uint32_t version, caps;

    if (rnic_read(dev, RNIC_ID_ADDR) != RNIC_MAGIC)
        return RNIC_ERR_MAGIC;
    version = rnic_read(dev, RNIC_VERSION_ADDR);
    dev->major = RNIC_FIELD_GET(RNIC_VERSION_MAJOR, version);
    dev->minor = RNIC_FIELD_GET(RNIC_VERSION_MINOR, version);
    if (dev->major != RNIC_VERSION_MAJOR_RESET)
        return RNIC_ERR_VERSION;
    dev->width = RNIC_FIELD_GET(RNIC_VERSION_WIDTH, version);
    caps = rnic_read(dev, RNIC_CAPS_ADDR);
    dev->connections = RNIC_FIELD_GET(RNIC_CAPS_CONNECTIONS, caps);
    dev->stags = RNIC_FIELD_GET(RNIC_CAPS_STAGS, caps);
    return RNIC_OK;
}

int rnic_soft_reset(rnic_dev_t *dev)
{
    RNIC_PULSE(dev, CTRL, SOFT_RESET);
    return rnic_wait(dev, RNIC_STATUS_ADDR, RNIC_STATUS_READY_MASK, RNIC_STATUS_READY_MASK);
}

void rnic_enable(rnic_dev_t *dev, int on)
{
    RNIC_SET_FIELD(dev, CTRL, ENABLE, on ? 1u : 0u);
}

/* Connection ids are checked against CAPS once rnic_probe() has run. */
static int conn_ok(const rnic_dev_t *dev, uint32_t conn)
{
    uint32_t limit = dev->connections ? dev->connections : (RNIC_CONN_SEL_CONN_MASK >> RNIC_CONN_SEL_CONN_SHIFT) + 1u;
    return conn < limit;
}

static int mpa_dir_ok(const rnic_mpa_dir_t *d)
{
    return d->phase < 512u && (d->phase & 3u) == 0u && d->markers <= 1u && d->crc <= 1u;
}

static uint32_t mpa_dir_value(const rnic_mpa_dir_t *d)
{
    /* CTX_TX and CTX_RX share one layout. */
    return RNIC_FIELD_PREP(RNIC_CTX_TX_MARKERS, d->markers) | RNIC_FIELD_PREP(RNIC_CTX_TX_CRC, d->crc) |
           RNIC_FIELD_PREP(RNIC_CTX_TX_PHASE, d->phase) | RNIC_FIELD_PREP(RNIC_CTX_TX_MULPDU, d->mulpdu);
}

int rnic_conn_program(rnic_dev_t *dev, const rnic_conn_cfg_t *cfg)
{
    const uint32_t ird_max = RNIC_CTX_IRD_ORD_IRD_MASK >> RNIC_CTX_IRD_ORD_IRD_SHIFT;
    const uint32_t ord_max = RNIC_CTX_IRD_ORD_ORD_MASK >> RNIC_CTX_IRD_ORD_ORD_SHIFT;
    const uint32_t state_max = RNIC_CTX_STATE_STATE_MASK >> RNIC_CTX_STATE_STATE_SHIFT;

    if (!conn_ok(dev, cfg->conn) || !mpa_dir_ok(&cfg->tx) || !mpa_dir_ok(&cfg->rx) ||
        cfg->ird > ird_max || cfg->ord > ord_max || cfg->state > state_max)
        return RNIC_ERR_INVAL;
    rnic_write(dev, RNIC_CONN_SEL_ADDR, RNIC_FIELD_PREP(RNIC_CONN_SEL_CONN, cfg->conn));
    rnic_write(dev, RNIC_CTX_TX_ADDR, mpa_dir_value(&cfg->tx));
    rnic_write(dev, RNIC_CTX_RX_ADDR, mpa_dir_value(&cfg->rx));
    rnic_write(dev, RNIC_CTX_IRD_ORD_ADDR,
               RNIC_FIELD_PREP(RNIC_CTX_IRD_ORD_IRD, cfg->ird) | RNIC_FIELD_PREP(RNIC_CTX_IRD_ORD_ORD, cfg->ord));
    rnic_write(dev, RNIC_CTX_STATE_ADDR, RNIC_FIELD_PREP(RNIC_CTX_STATE_STATE, cfg->state));
    rnic_write(dev, RNIC_CTX_CMD_ADDR, RNIC_CTX_CMD_COMMIT_MASK);
    return rnic_wait(dev, RNIC_CTX_STATUS_ADDR, RNIC_CTX_STATUS_BUSY_MASK, 0u);
}

int rnic_conn_set_state(rnic_dev_t *dev, uint32_t conn, uint32_t state)
{
    if (!conn_ok(dev, conn) || state > (RNIC_CTX_STATE_STATE_MASK >> RNIC_CTX_STATE_STATE_SHIFT))
        return RNIC_ERR_INVAL;
    rnic_write(dev, RNIC_CONN_SEL_ADDR, RNIC_FIELD_PREP(RNIC_CONN_SEL_CONN, conn));
    rnic_write(dev, RNIC_CTX_STATE_ADDR, RNIC_FIELD_PREP(RNIC_CTX_STATE_STATE, state));
    rnic_write(dev, RNIC_CTX_CMD_ADDR, RNIC_CTX_CMD_SET_STATE_MASK);
    return rnic_wait(dev, RNIC_CTX_STATUS_ADDR, RNIC_CTX_STATUS_BUSY_MASK, 0u);
}

int rnic_conn_status(rnic_dev_t *dev, uint32_t conn, uint32_t *status, uint32_t *error)
{
    if (!conn_ok(dev, conn))
        return RNIC_ERR_INVAL;
    rnic_write(dev, RNIC_CONN_SEL_ADDR, RNIC_FIELD_PREP(RNIC_CONN_SEL_CONN, conn));
    if (status)
        *status = rnic_read(dev, RNIC_CTX_STATUS_ADDR);
    if (error)
        *error = rnic_read(dev, RNIC_CTX_ERROR_ADDR);
    return RNIC_OK;
}

int rnic_error_pop(rnic_dev_t *dev, rnic_error_t *err)
{
    uint32_t status = rnic_read(dev, RNIC_ERR_STATUS_ADDR), where, info;

    if (!(status & RNIC_ERR_STATUS_PENDING_MASK))
        return 0;
    where = rnic_read(dev, RNIC_ERR_CONN_ADDR);
    info = rnic_read(dev, RNIC_ERR_INFO_ADDR);
    err->conn = RNIC_FIELD_GET(RNIC_ERR_CONN_CONN, where);
    err->tx = (int)RNIC_FIELD_GET(RNIC_ERR_CONN_TX, where);
    err->layer = (uint8_t)RNIC_FIELD_GET(RNIC_ERR_INFO_LAYER, info);
    err->etype = (uint8_t)RNIC_FIELD_GET(RNIC_ERR_INFO_ETYPE, info);
    err->ecode = (uint8_t)RNIC_FIELD_GET(RNIC_ERR_INFO_ECODE, info);
    err->overflow = (int)RNIC_FIELD_GET(RNIC_ERR_STATUS_OVERFLOW, status);
    /* Clear what was seen (write 1 to clear): the next error can be captured. */
    rnic_write(dev, RNIC_ERR_STATUS_ADDR,
               status & (RNIC_ERR_STATUS_PENDING_MASK | RNIC_ERR_STATUS_OVERFLOW_MASK));
    return 1;
}

int rnic_stag_write(rnic_dev_t *dev, const rnic_stag_t *s)
{
    if (dev->stags && s->index >= dev->stags)
        return RNIC_ERR_INVAL;
    if (!conn_ok(dev, s->conn) || s->index > (RNIC_STAG_INDEX_INDEX_MASK >> RNIC_STAG_INDEX_INDEX_SHIFT))
        return RNIC_ERR_INVAL;
    rnic_write(dev, RNIC_STAG_INDEX_ADDR, RNIC_FIELD_PREP(RNIC_STAG_INDEX_INDEX, s->index));
    rnic_write(dev, RNIC_STAG_KEY_ADDR, s->stag);
    rnic_write(dev, RNIC_STAG_BASE_LO_ADDR, (uint32_t)s->base);
    rnic_write(dev, RNIC_STAG_BASE_HI_ADDR, (uint32_t)(s->base >> 32));
    rnic_write(dev, RNIC_STAG_LENGTH_ADDR, s->length);
    rnic_write(dev, RNIC_STAG_ADDR_LO_ADDR, (uint32_t)s->addr);
    rnic_write(dev, RNIC_STAG_ADDR_HI_ADDR, (uint32_t)(s->addr >> 32));
    rnic_write(dev, RNIC_STAG_ATTR_ADDR,
               RNIC_FIELD_PREP(RNIC_STAG_ATTR_VALID, s->valid ? 1u : 0u) |
               RNIC_FIELD_PREP(RNIC_STAG_ATTR_REMOTE_READ, s->remote_read ? 1u : 0u) |
               RNIC_FIELD_PREP(RNIC_STAG_ATTR_REMOTE_WRITE, s->remote_write ? 1u : 0u) |
               RNIC_FIELD_PREP(RNIC_STAG_ATTR_REMOTE_INV, s->remote_inv ? 1u : 0u) |
               RNIC_FIELD_PREP(RNIC_STAG_ATTR_CONN, s->conn));
    rnic_write(dev, RNIC_STAG_CMD_ADDR, RNIC_STAG_CMD_COMMIT_MASK);
    /* The receive path takes the row between segments: wait until it did. */
    return rnic_wait(dev, RNIC_STAG_STATUS_ADDR, RNIC_STAG_STATUS_BUSY_MASK, 0);
}

int rnic_rq_post(rnic_dev_t *dev, uint32_t conn, uint64_t addr, uint32_t length, uint32_t id)
{
    int rc;

    if (!conn_ok(dev, conn))
        return RNIC_ERR_INVAL;
    if (RNIC_GET_FIELD(dev, RQ_STATUS, FULL))
        return RNIC_ERR_FULL;
    rc = rnic_wait(dev, RNIC_RQ_STATUS_ADDR, RNIC_RQ_STATUS_BUSY_MASK, 0);
    if (rc != RNIC_OK)
        return rc;
    /* Forget an older drop: OVERFLOW after this post means this one was dropped. */
    rnic_write(dev, RNIC_RQ_STATUS_ADDR, RNIC_RQ_STATUS_OVERFLOW_MASK);
    rnic_write(dev, RNIC_RQ_CONN_ADDR, RNIC_FIELD_PREP(RNIC_RQ_CONN_CONN, conn));
    rnic_write(dev, RNIC_RQ_ADDR_LO_ADDR, (uint32_t)addr);
    rnic_write(dev, RNIC_RQ_ADDR_HI_ADDR, (uint32_t)(addr >> 32));
    rnic_write(dev, RNIC_RQ_LENGTH_ADDR, length);
    rnic_write(dev, RNIC_RQ_ID_ADDR, id);
    rnic_write(dev, RNIC_RQ_CMD_ADDR, RNIC_RQ_CMD_POST_MASK);
    rc = rnic_wait(dev, RNIC_RQ_STATUS_ADDR, RNIC_RQ_STATUS_BUSY_MASK, 0);
    if (rc != RNIC_OK)
        return rc;
    if (RNIC_GET_FIELD(dev, RQ_STATUS, OVERFLOW)) {
        rnic_write(dev, RNIC_RQ_STATUS_ADDR, RNIC_RQ_STATUS_OVERFLOW_MASK);
        return RNIC_ERR_FULL;
    }
    return RNIC_OK;
}

int rnic_sq_post(rnic_dev_t *dev, const rnic_wr_t *wr)
{
    if (!conn_ok(dev, wr->conn) || wr->opcode > (RNIC_SQ_WR_OPCODE_MASK >> RNIC_SQ_WR_OPCODE_SHIFT))
        return RNIC_ERR_INVAL;
    if (RNIC_GET_FIELD(dev, SQ_STATUS, FULL))
        return RNIC_ERR_FULL;
    rnic_write(dev, RNIC_SQ_WR_ADDR,
               RNIC_FIELD_PREP(RNIC_SQ_WR_OPCODE, wr->opcode) |
               RNIC_FIELD_PREP(RNIC_SQ_WR_SIGNALED, wr->signaled ? 1u : 0u) |
               RNIC_FIELD_PREP(RNIC_SQ_WR_CONN, wr->conn));
    rnic_write(dev, RNIC_SQ_LADDR_LO_ADDR, (uint32_t)wr->laddr);
    rnic_write(dev, RNIC_SQ_LADDR_HI_ADDR, (uint32_t)(wr->laddr >> 32));
    rnic_write(dev, RNIC_SQ_LENGTH_ADDR, wr->length);
    rnic_write(dev, RNIC_SQ_LSTAG_ADDR, wr->lstag);
    rnic_write(dev, RNIC_SQ_RSTAG_ADDR, wr->rstag);
    rnic_write(dev, RNIC_SQ_RTO_LO_ADDR, (uint32_t)wr->rto);
    rnic_write(dev, RNIC_SQ_RTO_HI_ADDR, (uint32_t)(wr->rto >> 32));
    rnic_write(dev, RNIC_SQ_INV_STAG_ADDR, wr->inv_stag);
    rnic_write(dev, RNIC_SQ_ID_ADDR, wr->wr_id);
    rnic_write(dev, RNIC_SQ_CMD_ADDR, RNIC_SQ_CMD_DOORBELL_MASK);
    return RNIC_OK;
}

int rnic_cq_poll(rnic_dev_t *dev, rnic_cqe_t *cqe)
{
    uint32_t info;

    if (!RNIC_GET_FIELD(dev, CQ_STATUS, VALID))
        return 0;
    info = rnic_read(dev, RNIC_CQ_INFO_ADDR);
    cqe->wr_id = rnic_read(dev, RNIC_CQ_WR_ID_ADDR);
    cqe->opcode = RNIC_FIELD_GET(RNIC_CQ_INFO_OPCODE, info);
    cqe->queue = RNIC_FIELD_GET(RNIC_CQ_INFO_QUEUE, info);
    cqe->status = RNIC_FIELD_GET(RNIC_CQ_INFO_STATUS, info);
    cqe->conn = RNIC_FIELD_GET(RNIC_CQ_INFO_CONN, info);
    cqe->invalidated = (int)RNIC_FIELD_GET(RNIC_CQ_INFO_INVALIDATED, info);
    cqe->solicited = (int)RNIC_FIELD_GET(RNIC_CQ_INFO_SOLICITED, info);
    cqe->length = rnic_read(dev, RNIC_CQ_LENGTH_ADDR);
    cqe->inv_stag = rnic_read(dev, RNIC_CQ_INV_STAG_ADDR);
    cqe->msn = rnic_read(dev, RNIC_CQ_MSN_ADDR);
    cqe->stag = rnic_read(dev, RNIC_CQ_STAG_ADDR);
    cqe->to = rnic_read64(dev, RNIC_CQ_TO_LO_ADDR, RNIC_CQ_TO_HI_ADDR);
    rnic_write(dev, RNIC_CQ_CMD_ADDR, RNIC_CQ_CMD_POP_MASK);
    return 1;
}

int rnic_term_pop(rnic_dev_t *dev, rnic_term_t *t)
{
    uint32_t status, info, k;

    status = rnic_read(dev, RNIC_TERM_STATUS_ADDR);
    if (!RNIC_FIELD_GET(RNIC_TERM_STATUS_VALID, status))
        return 0;
    info = rnic_read(dev, RNIC_TERM_INFO_ADDR);
    t->conn = RNIC_FIELD_GET(RNIC_TERM_STATUS_CONN, status);
    t->received = (int)RNIC_FIELD_GET(RNIC_TERM_STATUS_RECEIVED, status);
    t->len = RNIC_FIELD_GET(RNIC_TERM_STATUS_LEN, status);
    t->layer = (uint8_t)RNIC_FIELD_GET(RNIC_TERM_INFO_LAYER, info);
    t->etype = (uint8_t)RNIC_FIELD_GET(RNIC_TERM_INFO_ETYPE, info);
    t->ecode = (uint8_t)RNIC_FIELD_GET(RNIC_TERM_INFO_ECODE, info);
    if (t->len > sizeof t->payload)
        t->len = sizeof t->payload;
    for (k = 0; k < sizeof t->payload / 4; k++) {
        uint32_t w = k * 4 < t->len ? rnic_read(dev, RNIC_TERM_DATA0_ADDR + 4u * k) : 0u;
        t->payload[4 * k] = (uint8_t)w;
        t->payload[4 * k + 1] = (uint8_t)(w >> 8);
        t->payload[4 * k + 2] = (uint8_t)(w >> 16);
        t->payload[4 * k + 3] = (uint8_t)(w >> 24);
    }
    rnic_write(dev, RNIC_TERM_CMD_ADDR, RNIC_TERM_CMD_POP_MASK);
    return 1;
}

int rnic_rrq_pop(rnic_dev_t *dev, rnic_read_req_t *q)
{
    uint32_t status = rnic_read(dev, RNIC_RRQ_STATUS_ADDR);

    if (!RNIC_FIELD_GET(RNIC_RRQ_STATUS_VALID, status))
        return 0;
    q->conn = RNIC_FIELD_GET(RNIC_RRQ_STATUS_CONN, status);
    q->msn = rnic_read(dev, RNIC_RRQ_MSN_ADDR);
    q->sink_stag = rnic_read(dev, RNIC_RRQ_SINK_STAG_ADDR);
    q->sink_to = rnic_read64(dev, RNIC_RRQ_SINK_TO_LO_ADDR, RNIC_RRQ_SINK_TO_HI_ADDR);
    q->size = rnic_read(dev, RNIC_RRQ_SIZE_ADDR);
    q->src_stag = rnic_read(dev, RNIC_RRQ_SRC_STAG_ADDR);
    q->src_to = rnic_read64(dev, RNIC_RRQ_SRC_TO_LO_ADDR, RNIC_RRQ_SRC_TO_HI_ADDR);
    rnic_write(dev, RNIC_RRQ_CMD_ADDR, RNIC_RRQ_CMD_POP_MASK);
    return 1;
}

int rnic_rrq_done(rnic_dev_t *dev, uint32_t conn)
{
    int rc;

    if (!conn_ok(dev, conn))
        return RNIC_ERR_INVAL;
    rc = rnic_wait(dev, RNIC_RRQ_STATUS_ADDR, RNIC_RRQ_STATUS_DONE_BUSY_MASK, 0);
    if (rc != RNIC_OK)
        return rc;
    rnic_write(dev, RNIC_RRQ_DONE_CONN_ADDR, RNIC_FIELD_PREP(RNIC_RRQ_DONE_CONN_CONN, conn));
    rnic_write(dev, RNIC_RRQ_CMD_ADDR, RNIC_RRQ_CMD_DONE_MASK);
    return rnic_wait(dev, RNIC_RRQ_STATUS_ADDR, RNIC_RRQ_STATUS_DONE_BUSY_MASK, 0);
}

const char *rnic_strerror(int code)
{
    switch (code) {
    case RNIC_OK: return "ok";
    case RNIC_ERR_MAGIC: return "no RNIC (bad ID magic)";
    case RNIC_ERR_VERSION: return "unsupported register map major version";
    case RNIC_ERR_TIMEOUT: return "timed out waiting for the device";
    case RNIC_ERR_INVAL: return "invalid argument";
    case RNIC_ERR_FULL: return "queue full";
    default: return "unknown error";
    }
}
