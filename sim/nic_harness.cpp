// Interactive C++ harness of the Verilated NicTop (sim/nic_device.py builds it).
//
// A long-running process, like sim/device_harness.cpp, but the simulation runs on its
// own: it clocks the design while there is something to simulate (a frame being sent
// into gmii_rx or waiting to, a frame coming out of gmii_tx, and IDLE_RUN cycles after
// the last of these or of a register access, so that replies come out) and otherwise
// blocks on stdin (no CPU while idle). Commands are read between chunks of CHUNK cycles.
//
// Time: the tick input of TCP's time base is pulsed once per millisecond of wall time
// (TCP's timers run in the peer's time, not in simulated cycles) while the design is
// clocked or a TCP connection is open (tcp_active); a tick that finds the design idle
// clocks TICK_RUN cycles, enough for the engine to handle its timers. With no connection
// open and nothing to simulate the time base stands still and the process sleeps.
//
// One clock: the design's sync, eth_rx and eth_tx domains all run on the one clk of
// the converted top (sim/nic_device.py ties them together), one GMII octet per cycle.
//
// gmii_rx: each queued frame (its octets from the destination MAC on, without FCS) is
// padded with zeros to 60 octets (as the sending MAC would), its FCS appended, and sent
// as preamble (7 x 0x55), SFD (0xd5), frame, FCS with rx_dv high and rx_er low, then
// IFG_OCTETS (12) cycles of rx_dv low before the next frame.
// gmii_tx: octets are collected while tx_en is high; when it falls the frame must start
// with 0x55 ... 0xd5 (a preamble of 1..7 octets and the SFD), end with its good FCS and
// never have tx_er: it is reported as a FRAME line without preamble, SFD and FCS;
// otherwise as a BAD line (what is wrong, the octets as seen).
//
// The other ports: rx_ulpdu always ready (its beats dropped); m_axi and m_axi_rd host memory
// of 2^MEM_BITS octets (sim/harness_common.h: HARNESS_MEMORY; the top's addresses wrap).
//
//   greeting     RNIC-NIC-SIM 1 width=<W>    once the core left its reset sweep (STATUS.READY)
//   F <hex>      queue one frame (1..16383 octets) for gmii_rx -> OK | ERR <text>
//   R <addr>     register read (AXI4-Lite)        -> OK <value> | ERR <text>
//   W <addr> <v> register write (all byte strobes) -> OK | ERR <text>
//   RUN <n>      clock n cycles (decimal) now -> OK <total cycles>
//   MANUAL <0|1> 1: clock only on RUN (no clocking on its own, no wall-time ticks: a
//                lock-step peer counts the cycles) -> OK
//   MW <addr> <hex>  write octets into host memory (no clock) -> OK | ERR <text>
//   MR <addr> <n>    read n (decimal) octets of host memory (no clock) -> OK <hex> | ERR <text>
//   C            -> OK <total cycles> <ns spent clocking> <frames in> <frames out> <bad out>
//   Q            exit (also at the end of stdin)
// and, whenever a frame has come out (between answers, never inside one):
//   FRAME <hex>          a good frame from gmii_tx
//   BAD <reason> <hex>   a bad one (reason: fcs | tx_er | preamble | short)
//
// The line "//@DECLS@" is replaced by sim/nic_device.py with the constants of one build
// (datapath width, register addresses, IDLE_RUN), "//@COMMON@" by sim/harness_common.h
// (hex, the AXI4-Lite master, the reset sequence, the R and W commands).

#include "Vtop.h"
#include "verilated.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

//@DECLS@

static const int CHUNK = 256;            // cycles between looks at stdin while busy
static const uint64_t TICK_NS = 1000000;  // wall time per tick of TCP's time base
static const uint64_t TICK_RUN = 512;     // cycles clocked for a tick of an idle design

static const int IFG_OCTETS = 12;
static const std::size_t MAX_FRAME = 16383;

static uint64_t run_left = 0, sim_ns = 0;
static uint64_t frames_in = 0, frames_out = 0, frames_bad = 0;

#define HARNESS_INTERACTIVE
#define HARNESS_MEMORY
//@COMMON@

// ---------------------------------------------------------------------------
// CRC

// The Ethernet FCS: CRC-32 (reflected, polynomial 0x04c11db7), sent least significant octet first.
static uint32_t crc_table[256];
static void crc_init() {
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}
static uint32_t crc32(const std::string& data, std::size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) c = crc_table[(c ^ (uint8_t)data[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

// ---------------------------------------------------------------------------
// GMII

static std::deque<std::string> rx_queue;     // wire octets (preamble .. FCS) of frames to send
static std::string rx_cur;
static std::size_t rx_pos = 0;
static bool rx_active = false;
static int rx_gap = 0;                        // idle cycles still owed after the last frame

static void queue_frame(const std::string& frame) {
    std::string f = frame;
    if (f.size() < 60) f.resize(60, '\0');
    uint32_t fcs = crc32(f, f.size());
    std::string wire(7, (char)0x55);
    wire.push_back((char)0xD5);
    wire += f;
    for (int k = 0; k < 4; ++k) wire.push_back((char)(fcs >> (8 * k)));
    rx_queue.push_back(wire);
    ++frames_in;
}

static std::string tx_buf;
static bool tx_er_seen = false;

static void finish_tx_frame() {
    const std::string& b = tx_buf;
    std::size_t p = 0;
    while (p < b.size() && p < 7 && (uint8_t)b[p] == 0x55) ++p;
    std::string reason;
    std::string frame;
    if (p == 0 || p >= b.size() || (uint8_t)b[p] != 0xD5) {
        reason = "preamble";
        frame = b;
    } else {
        frame = b.substr(p + 1);
        if (frame.size() < 4 + 14) reason = "short";
        else if (tx_er_seen) reason = "tx_er";
        else {
            std::size_t n = frame.size() - 4;
            uint32_t want = crc32(frame, n), got = 0;
            for (int k = 0; k < 4; ++k) got |= (uint32_t)(uint8_t)frame[n + k] << (8 * k);
            if (want != got) reason = "fcs";
            else frame.resize(n);
        }
    }
    if (reason.empty()) {
        out_line("FRAME " + to_hex(frame));
        ++frames_out;
    } else {
        out_line("BAD " + reason + " " + (frame.empty() ? std::string("-") : to_hex(frame)));
        ++frames_bad;
    }
    std::fflush(stdout);
    tx_buf.clear();
    tx_er_seen = false;
}

// ---------------------------------------------------------------------------
// one clock cycle

static uint64_t ticks_owed = 0;           // ticks of the time base not yet pulsed
static bool manual = false;               // clocked only by RUN

static bool step() {
    bool act = rx_active;                       // an octet into gmii_rx
    // gmii_rx
    if (!rx_active && rx_gap == 0 && !rx_queue.empty()) {
        rx_cur = rx_queue.front();
        rx_queue.pop_front();
        rx_pos = 0;
        rx_active = true;
    }
    if (rx_active) {
        top->p_gmii_rx_rxd = (uint8_t)rx_cur[rx_pos];
        top->p_gmii_rx_rx_dv = 1;
    } else {
        top->p_gmii_rx_rxd = 0;
        top->p_gmii_rx_rx_dv = 0;
    }
    top->p_gmii_rx_rx_er = 0;

    // the core's ULPDU output (DP_CTRL.BYPASS), dropped
    top->p_rx_ulpdu_ready = 1;
    top->p_tick = ticks_owed > 0;
    if (ticks_owed) --ticks_owed;

    axil_drive();

    mem_drive();

    top->clk = 0;
    top->eval();

    if (mem_sample()) act = true;
    if (ax != AX_IDLE) run_left = IDLE_RUN;     // a register access (a write may start ARP)
    if (axil_sample()) act = true;

    // gmii_tx (registered outputs: stable between the edges)
    bool tx_en = top->p_gmii_tx_tx_en;
    if (tx_en) {
        act = true;
        tx_buf.push_back((char)top->p_gmii_tx_txd);
        if (top->p_gmii_tx_tx_er) tx_er_seen = true;
        run_left = IDLE_RUN;
    } else if (!tx_buf.empty()) {
        finish_tx_frame();
        run_left = IDLE_RUN;
    }

    top->clk = 1;
    top->eval();
    ++cycle;

    if (rx_active) {
        if (++rx_pos == rx_cur.size()) {
            rx_active = false;
            rx_gap = IFG_OCTETS;
            run_left = IDLE_RUN;
        }
    } else if (rx_gap > 0) {
        --rx_gap;
    }
    if (mem_commit()) act = true;
    return act;
}

static bool busy() {
    if (manual) return false;
    return rx_active || rx_gap > 0 || !rx_queue.empty() || !tx_buf.empty() || run_left > 0 ||
           ticks_owed > 0 || mem_busy();
}

static uint64_t now_ns() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The wall time of the next tick (0: the time base stands still).
static uint64_t next_tick_ns = 0;

// Ticks due by the wall clock; milliseconds to wait for the next one (-1: none is due,
// the time base stands still until something is to be simulated).
static int tick_clock() {
    bool ticking = !manual && (busy() || top->p_tcp_active);
    if (!ticking) { next_tick_ns = 0; return -1; }
    uint64_t now = now_ns();
    if (next_tick_ns == 0) next_tick_ns = now + TICK_NS;
    while (now >= next_tick_ns) {
        ++ticks_owed;
        next_tick_ns += TICK_NS;
        // (only an open connection's timers need cycles after a tick: otherwise the ticks
        // would keep the design clocking for ever)
        if (top->p_tcp_active && run_left < TICK_RUN) run_left = TICK_RUN;
    }
    return (int)((next_tick_ns - now + 999999) / 1000000);
}

static void clock_for(uint64_t n) {
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < n; ++i) {
        step();
        if (run_left) --run_left;
    }
    sim_ns += now_ns() - t0;
}

// ---------------------------------------------------------------------------
// commands

// Execute one command line; false for Q.
static bool command(const std::string& raw) {
    std::vector<std::string> f = words(raw);
    uint64_t a = 0;
    if (f.empty()) {
        out_line("ERR empty command");
    } else if (f[0] == "Q") {
        return false;
    } else if (register_command(f)) {
        // R, W: answered
    } else if (memory_command(f)) {
        // MW, MR: answered
    } else if (f[0] == "F" && f.size() == 2) {
        std::string data;
        if (!from_hex(f[1], data) || data.empty()) out_line("ERR bad octets");
        else if (data.size() > MAX_FRAME) out_line("ERR frame longer than 16383 octets");
        else {
            queue_frame(data);
            run_left = IDLE_RUN;
            out_line("OK");
        }
    } else if (f[0] == "RUN" && f.size() == 2 && parse_u64(f[1], a, 10)) {
        clock_for(a);
        out_line("OK " + std::to_string(cycle));
    } else if (f[0] == "MANUAL" && f.size() == 2 && (f[1] == "0" || f[1] == "1")) {
        manual = f[1] == "1";
        out_line("OK");
    } else if (f[0] == "C" && f.size() == 1) {
        out_line("OK " + std::to_string(cycle) + " " + std::to_string(sim_ns) + " " +
                 std::to_string(frames_in) + " " + std::to_string(frames_out) + " " +
                 std::to_string(frames_bad));
    } else {
        out_line("ERR bad command (F HEX | R ADDR | W ADDR VALUE | MW ADDR HEX | MR ADDR N | RUN N | "
                 "MANUAL 0|1 | C | Q)");
    }
    std::fflush(stdout);
    return true;
}

int main(int argc, char** argv) {
    open_top(argc, argv);
    crc_init();
    reset_until_ready();
    run_left = 0;
    std::printf("RNIC-NIC-SIM 1 width=%d\n", W_OCTETS);
    std::fflush(stdout);

    std::string inbuf;
    char chunk[65536];
    bool running = true;
    while (running) {
        struct pollfd pfd = {0, POLLIN, 0};
        int wait_ms = tick_clock();
        int ready = poll(&pfd, 1, busy() ? 0 : wait_ms);
        if (ready > 0) {
            ssize_t n = read(0, chunk, sizeof chunk);
            if (n <= 0) break;                  // stdin closed: the caller went away
            inbuf.append(chunk, (std::size_t)n);
            std::size_t nl;
            while (running && (nl = inbuf.find('\n')) != std::string::npos) {
                running = command(inbuf.substr(0, nl));
                inbuf.erase(0, nl + 1);
            }
            continue;                           // answer everything waiting before clocking on
        }
        if (busy()) clock_for(CHUNK);
    }
    close_top();
    return 0;
}
