/* rnic.h: small C driver library for the open iWARP RNIC.
 *
 * Built on the generated register map header rnic_regs.h (from host/spec/regmap.py;
 * regenerate with `python -m rnic.host.tools.codegen --write`). C99, no libc beyond
 * <stdint.h>/<stddef.h>, usable on a soft CPU or a host that maps the
 * register window. The same sequences exist in Python in host/driver/regs.py.
 *
 * Register access goes through rnic_read()/rnic_write(): by default a
 * volatile 32-bit access at dev->base + addr; set dev->read32/dev->write32 to
 * route it elsewhere (a bus bridge, a simulator, a test mock).
 *
 * Read-modify-write: rnic_modify() keeps only the register's RW bits of the
 * value read (RNIC_<REG>_RW_MASK), so it never writes 1 back into a W1C bit
 * (which would clear it) or a PULSE bit (which would fire it).
 *
 * Functions return RNIC_OK (0) or a negative RNIC_ERR_* code; the pollers
 * (rnic_error_pop, rnic_cq_poll) return 1 when they took an entry, 0 when
 * there was none. Busy-waits are bounded by dev->poll_limit reads.
 */
#ifndef RNIC_H
#define RNIC_H

#include <stddef.h>
#include <stdint.h>

#include "rnic_regs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNIC_OK 0
#define RNIC_ERR_MAGIC (-1)    /* ID register is not RNIC_MAGIC: no RNIC at this address */
#define RNIC_ERR_VERSION (-2)  /* register map major version differs from this header's */
#define RNIC_ERR_TIMEOUT (-3)  /* a busy-wait exceeded dev->poll_limit reads */
#define RNIC_ERR_INVAL (-4)    /* invalid argument; nothing was written */
#define RNIC_ERR_FULL (-5)     /* queue full; nothing was posted */

#define RNIC_DEFAULT_POLLS 100000u

typedef struct rnic_dev rnic_dev_t;

struct rnic_dev {
    volatile uint32_t *base;  /* register window of RNIC_REGS_SIZE bytes */
    /* Optional access hooks (NULL: volatile access to base). addr is a byte offset. */
    uint32_t (*read32)(rnic_dev_t *dev, uint32_t addr);
    void (*write32)(rnic_dev_t *dev, uint32_t addr, uint32_t value);
    void *ctx;                /* free for the hooks */
    uint32_t poll_limit;      /* reads per busy-wait; rnic_init sets RNIC_DEFAULT_POLLS */
    /* Filled by rnic_probe(). */
    uint32_t major, minor, width, connections, stags;
};

/* MPA settings of one direction of a connection (CTX_TX / CTX_RX). */
typedef struct {
    uint8_t markers;   /* markers in this direction */
    uint8_t crc;       /* CRC generated / checked */
    uint16_t phase;    /* stream offset of the next octet minus the marker origin, mod 512; multiple of 4 */
    uint16_t mulpdu;   /* largest ULPDU_Length sent (TX) / accepted (RX) */
} rnic_mpa_dir_t;

typedef struct {
    uint32_t conn;
    rnic_mpa_dir_t tx, rx;
    uint16_t ird, ord;  /* 14-bit RFC 6581 values */
    uint8_t state;      /* RNIC_CTX_STATE_STATE_* */
} rnic_conn_cfg_t;

typedef struct {
    uint32_t conn;
    int tx;             /* found on the transmit path */
    uint8_t layer, etype, ecode;
    int overflow;       /* more errors happened while this one was pending */
} rnic_error_t;

typedef struct {
    uint32_t index;     /* table row */
    uint32_t stag;
    uint64_t base;      /* TO of the region's first octet */
    uint32_t length;
    uint64_t addr;      /* host memory address of that octet (VA-based regions: = base) */
    uint32_t conn;
    int valid, remote_read, remote_write, remote_inv;
} rnic_stag_t;

typedef struct {
    uint32_t conn;
    uint32_t opcode;    /* RNIC_SQ_WR_OPCODE_* */
    int signaled;
    uint64_t laddr;
    uint32_t length, lstag, rstag;
    uint64_t rto;
    uint32_t inv_stag, wr_id;
} rnic_wr_t;

typedef struct {
    uint32_t wr_id, opcode, queue, status, conn, length, inv_stag;
    int invalidated;
    int solicited;       /* RQ: a Send with Solicited Event */
    uint32_t msn;        /* RQ: the received Send's MSN */
    uint32_t stag;       /* RDMA Read Response (SQ, RDMA_READ): Data Sink STag */
    uint64_t to;         /* ... and the TO of its first segment */
} rnic_cqe_t;

/* A report of the receive path (TERM_*): an error found here (received 0; payload is the
 * Terminate to send) or a Terminate received from the peer (received 1). */
typedef struct {
    uint32_t conn, len;
    int received;
    uint8_t layer, etype, ecode;
    uint8_t payload[52];
} rnic_term_t;

/* An inbound RDMA Read Request (RRQ_*); its IRD slot is freed by rnic_rrq_done(). */
typedef struct {
    uint32_t conn, msn, sink_stag, size, src_stag;
    uint64_t sink_to, src_to;
} rnic_read_req_t;

/* Access. */
void rnic_init(rnic_dev_t *dev, volatile void *base);
uint32_t rnic_read(rnic_dev_t *dev, uint32_t addr);
void rnic_write(rnic_dev_t *dev, uint32_t addr, uint32_t value);
void rnic_modify(rnic_dev_t *dev, uint32_t addr, uint32_t rw_mask, uint32_t mask, uint32_t value);
uint64_t rnic_read64(rnic_dev_t *dev, uint32_t lo_addr, uint32_t hi_addr);
int rnic_wait(rnic_dev_t *dev, uint32_t addr, uint32_t mask, uint32_t want);

/* Field helpers by register and field name, e.g. RNIC_SET_FIELD(dev, CTRL, ENABLE, 1). */
#define RNIC_GET_FIELD(dev, REG, FIELD) \
    RNIC_FIELD_GET(RNIC_##REG##_##FIELD, rnic_read((dev), RNIC_##REG##_ADDR))
#define RNIC_SET_FIELD(dev, REG, FIELD, val) \
    rnic_modify((dev), RNIC_##REG##_ADDR, RNIC_##REG##_RW_MASK, RNIC_##REG##_##FIELD##_MASK, \
                RNIC_FIELD_PREP(RNIC_##REG##_##FIELD, (val)))
/* Fire a PULSE field (RW fields of the register are written back unchanged). */
#define RNIC_PULSE(dev, REG, FIELD) \
    rnic_modify((dev), RNIC_##REG##_ADDR, RNIC_##REG##_RW_MASK, RNIC_##REG##_##FIELD##_MASK, \
                RNIC_##REG##_##FIELD##_MASK)

/* Device. */
int rnic_probe(rnic_dev_t *dev);
int rnic_soft_reset(rnic_dev_t *dev);
void rnic_enable(rnic_dev_t *dev, int on);

/* Connection contexts. */
int rnic_conn_program(rnic_dev_t *dev, const rnic_conn_cfg_t *cfg);
int rnic_conn_set_state(rnic_dev_t *dev, uint32_t conn, uint32_t state);
int rnic_conn_status(rnic_dev_t *dev, uint32_t conn, uint32_t *status, uint32_t *error);

/* Errors, STags, queues. */
int rnic_error_pop(rnic_dev_t *dev, rnic_error_t *err);
int rnic_stag_write(rnic_dev_t *dev, const rnic_stag_t *stag);
int rnic_rq_post(rnic_dev_t *dev, uint32_t conn, uint64_t addr, uint32_t length, uint32_t id);
int rnic_sq_post(rnic_dev_t *dev, const rnic_wr_t *wr);
int rnic_cq_poll(rnic_dev_t *dev, rnic_cqe_t *cqe);
/* 1 and the head report / Read Request popped, or 0 when the queue is empty. */
int rnic_term_pop(rnic_dev_t *dev, rnic_term_t *t);
int rnic_rrq_pop(rnic_dev_t *dev, rnic_read_req_t *q);
/* One inbound Read Request of conn was answered: free its IRD slot. */
int rnic_rrq_done(rnic_dev_t *dev, uint32_t conn);

const char *rnic_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif /* RNIC_H */
