// Interactive C++ harness of the Verilated RnicCore (sim/device.py builds it).
//
// A long-running process: it reads one command per line on stdin and answers
// on stdout (ASCII lines, numbers in hexadecimal without 0x unless noted).
// The design is clocked only while a command needs it; every clock cycle
// (step()) drives the queued input beats, takes every output beat (the
// output streams are always ready), advances the AXI4-Lite master and
// serves the core's AXI4 write master m_axi and read master m_axi_rd (host
// memory, below), so register accesses and traffic overlap like on a board.
//
// Host memory: a byte array of 2^MEM_BITS octets (the core is built with
// addr_width = MEM_BITS, so every address it can issue is inside). m_axi is
// served by a simple AXI4 write slave: AWREADY and WREADY are 1 while its
// queues have room (16 bursts, 64 beats), a burst (INCR or FIXED, any length
// and size) is applied when its beats are there (byte strobes honoured), and
// its B response (OKAY) is offered the cycle after; BVALID holds until BREADY.
// m_axi_rd (the transmit path's payload reads) is served by a simple AXI4 read
// slave: ARREADY is 1 while its queue has room (16 bursts); from the cycle after
// a burst was taken its beats (INCR or FIXED, any length and size; every beat
// carries the whole aligned W-octet word of host memory) are offered back to
// back, RRESP OKAY, RLAST on the last.
//
//   greeting             RNIC-SIM 2 width=<W> connections=<N> mem=<octets, decimal>
//   R <addr>             register read (AXI4-Lite)        -> OK <value> | ERR <text>
//   W <addr> <value>     register write (all byte strobes) -> OK | ERR <text>
//   S <conn> <hex>       queue a TCP segment of <conn> on rx_wire (cut into beats) -> OK
//   U <conn> <hex>       queue a ULPDU of <conn> on tx_ulpdu (length = its octets) -> OK
//   RUN [<max> [<idle>]] clock until the input queues are empty and nothing moved for
//                        <idle> cycles (default 32), at most <max> cycles (decimal;
//                        default 10^7); then print what came out since the last RUN:
//                          TX <conn> <hex>                 one run of tx_wire (first..last)
//                          RX <conn> <crc> <error> <hex|->  one ULPDU of rx_ulpdu (its last
//                                                           beat's CRC status and error; '-'
//                                                           for a status/abort beat without octets)
//                        and end with  OK <cycles run> <total cycles>
//   MW <addr> <hex>      write octets into host memory (no clock) -> OK | ERR <text>
//   MR <addr> <n>        read <n> (decimal, >= 1) octets of host memory (no clock) -> OK <hex> | ERR
//   C                    cycle count -> OK <total cycles>
//   Q                    exit
// A malformed command answers ERR <text> and changes nothing.
//
// The line "//@DECLS@" is replaced by sim/device.py with the constants of one build
// (datapath width, connections, payload layouts), "//@COMMON@" by sim/harness_common.h
// (port access, hex, the AXI4-Lite master, the reset sequence, the R and W commands).

#include "Vtop.h"
#include "verilated.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <map>
#include <string>
#include <vector>

//@DECLS@

#define HARNESS_INTERACTIVE
#define HARNESS_MEMORY
//@COMMON@

// octet k of a payload whose data field starts at bit 0
static inline uint8_t octet(const uint32_t* w, int k) { return (uint8_t)(w[k / 4] >> (8 * (k % 4))); }

typedef std::vector<uint32_t> Words;

struct InStream {
    std::deque<Words> queue;
    Words cur;
    bool valid = false;
};

static InStream rxw, txu;                       // rx_wire, tx_ulpdu
static std::map<int, std::string> txw_acc;      // tx_wire: octets of the open run, per conn
static std::map<int, std::string> rxu_acc;      // rx_ulpdu: octets of the open ULPDU, per conn
static std::vector<std::string> pending;        // output lines not yet printed

// One clock cycle; true if any beat or bus handshake moved.
static bool step() {
    bool act = false;
    if (!rxw.valid && !rxw.queue.empty()) { rxw.cur = rxw.queue.front(); rxw.queue.pop_front(); rxw.valid = true; }
    if (!txu.valid && !txu.queue.empty()) { txu.cur = txu.queue.front(); txu.queue.pop_front(); txu.valid = true; }
    if (rxw.valid) put(top->p_rx_wire_payload, rxw.cur.data());
    top->p_rx_wire_valid = rxw.valid;
    if (txu.valid) put(top->p_tx_ulpdu_payload, txu.cur.data());
    top->p_tx_ulpdu_valid = txu.valid;
    top->p_tx_wire_ready = 1;
    top->p_rx_ulpdu_ready = 1;
    axil_drive();
    mem_drive();
    top->clk = 0;
    top->eval();

    if (mem_sample()) act = true;

    if (rxw.valid && top->p_rx_wire_ready) { rxw.valid = false; act = true; }
    if (txu.valid && top->p_tx_ulpdu_ready) { txu.valid = false; act = true; }
    if (top->p_tx_wire_valid) {
        uint32_t w[TXW_NW + 2] = {0};
        get(top->p_tx_wire_payload, w);
        int conn = (int)get_bits(w, TXW_CONN_OFF, TXW_CONN_W);
        int n = (int)get_bits(w, TXW_N_OFF, TXW_N_W);
        std::string& acc = txw_acc[conn];
        if (get_bits(w, TXW_FIRST_OFF, 1)) acc.clear();
        for (int k = 0; k < n; ++k) acc.push_back((char)octet(w, k));
        if (get_bits(w, TXW_LAST_OFF, 1)) {
            pending.push_back("TX " + std::to_string(conn) + " " + to_hex(acc));
            acc.clear();
        }
        act = true;
    }
    if (top->p_rx_ulpdu_valid) {
        uint32_t w[RXU_NW + 2] = {0};
        get(top->p_rx_ulpdu_payload, w);
        int conn = (int)get_bits(w, RXU_CONN_OFF, RXU_CONN_W);
        int n = (int)get_bits(w, RXU_N_OFF, RXU_N_W);
        std::string& acc = rxu_acc[conn];
        if (get_bits(w, RXU_FIRST_OFF, 1)) acc.clear();
        for (int k = 0; k < n; ++k) acc.push_back((char)octet(w, k));
        if (get_bits(w, RXU_LAST_OFF, 1)) {
            int crc = (int)get_bits(w, RXU_CRC_OFF, RXU_CRC_W);
            int err = (int)get_bits(w, RXU_ERROR_OFF, RXU_ERROR_W);
            pending.push_back("RX " + std::to_string(conn) + " " + std::to_string(crc) + " " +
                              std::to_string(err) + " " + (acc.empty() ? std::string("-") : to_hex(acc)));
            acc.clear();
        }
        act = true;
    }
    if (axil_sample()) act = true;

    top->clk = 1;
    top->eval();
    ++cycle;
    if (mem_commit()) act = true;
    return act;
}

static void queue_octets(InStream& s, int conn, const std::string& data, bool ulpdu) {
    const int W = W_OCTETS;
    std::size_t count = (data.size() + W - 1) / W;
    for (std::size_t i = 0; i < count; ++i) {
        Words w(ulpdu ? TXU_NW + 2 : RXW_NW + 2, 0);
        std::size_t base = i * W;
        int n = (int)std::min<std::size_t>(W, data.size() - base);
        for (int k = 0; k < n; ++k)
            w[k / 4] |= (uint32_t)(uint8_t)data[base + k] << (8 * (k % 4));
        if (ulpdu) {
            set_bits(w.data(), TXU_N_OFF, TXU_N_W, (uint64_t)n);
            set_bits(w.data(), TXU_FIRST_OFF, 1, i == 0);
            set_bits(w.data(), TXU_LAST_OFF, 1, i + 1 == count);
            set_bits(w.data(), TXU_CONN_OFF, TXU_CONN_W, (uint64_t)conn);
            set_bits(w.data(), TXU_LENGTH_OFF, TXU_LENGTH_W, (uint64_t)data.size());
        } else {
            set_bits(w.data(), RXW_N_OFF, RXW_N_W, (uint64_t)n);
            set_bits(w.data(), RXW_FIRST_OFF, 1, i == 0);
            set_bits(w.data(), RXW_LAST_OFF, 1, i + 1 == count);
            set_bits(w.data(), RXW_CONN_OFF, RXW_CONN_W, (uint64_t)conn);
        }
        s.queue.push_back(w);
    }
}

int main(int argc, char** argv) {
    open_top(argc, argv);
    reset_until_ready();
    pending.clear();
    std::printf("RNIC-SIM 2 width=%d connections=%d mem=%llu\n", W_OCTETS, CONNECTIONS,
                (unsigned long long)MEM_SIZE);
    std::fflush(stdout);

    std::string line;
    while (std::getline(std::cin, line)) {
        std::vector<std::string> f = words(line);
        if (f.empty()) { out_line("ERR empty command"); std::fflush(stdout); continue; }
        const std::string& cmd = f[0];
        uint64_t a = 0, b = 0;
        if (cmd == "Q") {
            break;
        } else if (register_command(f)) {
            // R, W: answered
        } else if ((cmd == "S" || cmd == "U") && f.size() == 3 && parse_u64(f[1], a, 10)) {
            std::string data;
            if (a >= (uint64_t)CONNECTIONS) out_line("ERR connection out of range");
            else if (!from_hex(f[2], data) || data.empty()) out_line("ERR bad octets");
            else if (cmd == "U" && data.size() > 65535) out_line("ERR ULPDU longer than 65535 octets");
            else {
                queue_octets(cmd == "S" ? rxw : txu, (int)a, data, cmd == "U");
                out_line("OK");
            }
        } else if (cmd == "RUN" && f.size() <= 3) {
            uint64_t max = 10000000, idle = 32;
            if ((f.size() > 1 && !parse_u64(f[1], max, 10)) || (f.size() > 2 && !parse_u64(f[2], idle, 10))) {
                out_line("ERR bad number");
            } else {
                uint64_t start = cycle, quiet = 0;
                while (cycle - start < max) {
                    bool busy = !rxw.queue.empty() || rxw.valid || !txu.queue.empty() || txu.valid
                                || mem_busy();
                    bool act = step();
                    quiet = (act || busy) ? 0 : quiet + 1;
                    if (quiet >= idle) break;
                }
                for (const std::string& p : pending) out_line(p);
                pending.clear();
                out_line("OK " + std::to_string(cycle - start) + " " + std::to_string(cycle));
            }
        } else if (memory_command(f)) {
            // MW, MR: answered
        } else if (cmd == "C" && f.size() == 1) {
            out_line("OK " + std::to_string(cycle));
        } else {
            out_line("ERR bad command (R ADDR | W ADDR VALUE | S CONN HEX | U CONN HEX | RUN [MAX [IDLE]] | "
                     "MW ADDR HEX | MR ADDR N | C | Q)");
        }
        std::fflush(stdout);
    }
    close_top();
    return 0;
}
