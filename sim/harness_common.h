// What the C++ harnesses share (sim/fast_harness.cpp, sim/device_harness.cpp,
// sim/nic_harness.cpp). sim/harness_build.py (harness_text) pastes this file where a harness
// has the line "//@COMMON@", so that each harness stays one translation unit.
//
// Every harness: port access by Verilator port type, bit fields of payload words.
// An interactive harness (a long-running process that takes commands on stdin) defines
// HARNESS_INTERACTIVE before the marker and, after it, the function
//     static bool step();    // one clock cycle of the design; true if anything moved
// and gets the design (top) and its cycle count, hex text, command words and numbers, the
// AXI4-Lite master on the top's s_axil port, the reset sequence and the register commands.
// Its build constants (//@DECLS@, before the marker) include STATUS_ADDR and
// STATUS_READY_MASK (sim/harness_build.py: interactive_decls). One that also defines
// HARNESS_MEMORY gets host memory behind the top's AXI4 masters (below).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------
// port access, chosen by overload on Verilator's port type (CData/SData/IData for
// <= 32 bits, QData for 33..64, VlWide<N> of 32-bit words above); payloads are arrays of
// 32-bit words, bit 0 = LSB of word 0

static inline void put(CData& p, const uint32_t* w) { p = (CData)w[0]; }
static inline void put(SData& p, const uint32_t* w) { p = (SData)w[0]; }
static inline void put(IData& p, const uint32_t* w) { p = (IData)w[0]; }
static inline void put(QData& p, const uint32_t* w) { p = (QData)w[0] | ((QData)w[1] << 32); }
template <std::size_t N>
static inline void put(VlWide<N>& p, const uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) p[i] = w[i];
}
static inline void get(const CData& p, uint32_t* w) { w[0] = p; }
static inline void get(const SData& p, uint32_t* w) { w[0] = p; }
static inline void get(const IData& p, uint32_t* w) { w[0] = p; }
static inline void get(const QData& p, uint32_t* w) { w[0] = (uint32_t)p; w[1] = (uint32_t)(p >> 32); }
template <std::size_t N>
static inline void get(const VlWide<N>& p, uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) w[i] = p[i];
}

// The field of `width` (<= 64) bits at bit `off` of a payload.
static inline void set_bits(uint32_t* w, int off, int width, uint64_t v) {
    for (int i = 0; i < width; ++i) {
        int b = off + i;
        uint32_t bit = (uint32_t)((v >> i) & 1u);
        w[b / 32] = (w[b / 32] & ~(1u << (b % 32))) | (bit << (b % 32));
    }
}

static inline uint64_t get_bits(const uint32_t* w, int off, int width) {
    uint64_t v = 0;
    for (int i = 0; i < width; ++i) {
        int b = off + i;
        v |= (uint64_t)((w[b / 32] >> (b % 32)) & 1u) << i;
    }
    return v;
}

#ifdef HARNESS_INTERACTIVE

// ---------------------------------------------------------------------------
// the design

static VerilatedContext* ctx;
static Vtop* top;
static uint64_t cycle = 0;          // clock cycles since the core left its reset sweep

static bool step();

static void open_top(int argc, char** argv) {
    ctx = new VerilatedContext;
    ctx->commandArgs(argc, argv);
    top = new Vtop{ctx, "top"};
}

static void close_top() {
    top->final();
    delete top;
    delete ctx;
}

// ---------------------------------------------------------------------------
// text

static const char HEX[] = "0123456789abcdef";

static std::string to_hex(const std::string& bytes) {
    std::string out;
    out.reserve(2 * bytes.size());
    for (unsigned char c : bytes) {
        out.push_back(HEX[c >> 4]);
        out.push_back(HEX[c & 15]);
    }
    return out;
}

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool from_hex(const std::string& text, std::string& out) {
    if (text.size() % 2) return false;
    out.resize(text.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
        int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = (char)(hi << 4 | lo);
    }
    return true;
}

static bool parse_u64(const std::string& text, uint64_t& v, int base) {
    if (text.empty()) return false;
    char* end = nullptr;
    v = std::strtoull(text.c_str(), &end, base);
    return end && *end == '\0';
}

// The space-separated words of a command line (a trailing CR dropped).
static std::vector<std::string> words(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> f;
    std::size_t pos = 0;
    while (pos < line.size()) {
        std::size_t sp = line.find(' ', pos);
        if (sp == std::string::npos) sp = line.size();
        if (sp > pos) f.push_back(line.substr(pos, sp - pos));
        pos = sp + 1;
    }
    return f;
}

// One line on stdout (flushed by the caller, once per command).
static void out_line(const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
}

// ---------------------------------------------------------------------------
// AXI4-Lite master: one access at a time. bus() sets ax and clocks until ax == AX_DONE
// (ax_rdata, ax_resp hold the answer); a harness's step() calls axil_drive() before its
// falling-edge eval and axil_sample() after it.

enum AxiState { AX_IDLE, AX_W, AX_WRESP, AX_R, AX_RDATA, AX_DONE };
static AxiState ax = AX_IDLE;
static uint32_t ax_addr = 0, ax_wdata = 0, ax_rdata = 0, ax_resp = 0;

// Drive s_axil for the coming clock edge (before the falling-edge eval).
static void axil_drive() {
    top->p_s_axil_awaddr = ax_addr;
    top->p_s_axil_araddr = ax_addr;
    top->p_s_axil_wdata = ax_wdata;
    top->p_s_axil_wstrb = 0xF;
    top->p_s_axil_awprot = 0;
    top->p_s_axil_arprot = 0;
    top->p_s_axil_awvalid = ax == AX_W;
    top->p_s_axil_wvalid = ax == AX_W;
    top->p_s_axil_bready = 1;
    top->p_s_axil_arvalid = ax == AX_R;
    top->p_s_axil_rready = 1;
}

// Take the handshakes of this cycle (after the falling-edge eval); true if one moved.
static bool axil_sample() {
    if (ax == AX_W && top->p_s_axil_awready && top->p_s_axil_wready) { ax = AX_WRESP; return true; }
    if (ax == AX_WRESP && top->p_s_axil_bvalid) { ax_resp = top->p_s_axil_bresp; ax = AX_DONE; return true; }
    if (ax == AX_R && top->p_s_axil_arready) { ax = AX_RDATA; return true; }
    if (ax == AX_RDATA && top->p_s_axil_rvalid) {
        ax_rdata = top->p_s_axil_rdata;
        ax_resp = top->p_s_axil_rresp;
        ax = AX_DONE;
        return true;
    }
    return false;
}

// One access (start: AX_W or AX_R, with ax_addr and ax_wdata set), then one idle cycle;
// true if it succeeded, else err says why (SLVERR, or no answer within 10000 cycles).
static bool bus(AxiState start, std::string& err) {
    ax = start;
    for (int i = 0; i < 10000 && ax != AX_DONE; ++i) step();
    bool done = ax == AX_DONE;
    ax = AX_IDLE;
    step();                                     // one idle cycle between accesses
    err = !done ? "bus timeout" : ax_resp != 0 ? "SLVERR" : "";
    return err.empty();
}

// Reset (rst high for 4 cycles), then clock the core through its reset sweep until
// STATUS.READY reads 1, as a board is long before anyone looks; cycle counts from there.
static void reset_until_ready() {
    ax = AX_IDLE;
    top->rst = 1;
    for (int i = 0; i < 4; ++i) step();
    top->rst = 0;
    for (int i = 0; i < 1000; ++i) {
        std::string err;
        ax_addr = STATUS_ADDR;
        if (bus(AX_R, err) && (ax_rdata & STATUS_READY_MASK)) break;
    }
    cycle = 0;
}

// The register commands of every interactive harness (numbers hexadecimal):
//   R <addr>            -> OK <value> | ERR <text>
//   W <addr> <value>    -> OK | ERR <text>     (all byte strobes)
// True if the words f are one of them (then answered), false to leave f to the harness.
static bool register_command(const std::vector<std::string>& f) {
    uint64_t a = 0, b = 0;
    std::string err;
    if (f.size() == 2 && f[0] == "R" && parse_u64(f[1], a, 16)) {
        ax_addr = (uint32_t)a;
        if (bus(AX_R, err)) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "OK %08x", ax_rdata);
            out_line(buf);
        } else {
            out_line("ERR " + err);
        }
        return true;
    }
    if (f.size() == 3 && f[0] == "W" && parse_u64(f[1], a, 16) && parse_u64(f[2], b, 16)
        && b <= 0xFFFFFFFFull) {
        ax_addr = (uint32_t)a;
        ax_wdata = (uint32_t)b;
        out_line(bus(AX_W, err) ? "OK" : "ERR " + err);
        return true;
    }
    return false;
}

#ifdef HARNESS_MEMORY
// ---------------------------------------------------------------------------
// Host memory behind the top's AXI4 masters m_axi (writes) and m_axi_rd (reads), for a
// harness that defines HARNESS_MEMORY and MEM_BITS (and W_OCTETS) before the marker: a
// byte array of 2^MEM_BITS octets (addresses wrap). m_axi: AWREADY and WREADY are 1 while
// the queues have room (16 bursts, 64 beats), a burst (INCR or FIXED, any length and
// size) is applied when its beats are there (byte strobes honoured), and its B response
// (OKAY) is offered the cycle after; BVALID holds until BREADY. m_axi_rd: ARREADY is 1
// while its queue has room (16 bursts); from the cycle after a burst was taken its beats
// (every beat carries the whole aligned W-octet word of memory) are offered back to back,
// RRESP OKAY, RLAST on the last. Each clock cycle: mem_drive() before the falling-edge
// eval, mem_sample() after it, mem_commit() after the rising edge.

#include <cstring>
#include <deque>

static const uint64_t MEM_SIZE = 1ull << MEM_BITS;
static std::vector<uint8_t> mem(MEM_SIZE, 0);
struct AwReq { uint64_t addr; unsigned len, size, burst; };
struct WBeat { uint32_t data[W_OCTETS / 4 + 2]; uint32_t strb[2]; };
static std::deque<AwReq> aw_q;
static std::deque<WBeat> w_q;
static unsigned w_done = 0;                     // beats of aw_q.front() already applied
static uint64_t b_pending = 0;                  // B responses owed
static uint64_t mem_writes = 0;
struct ArReq { uint64_t addr; unsigned len, size, burst; };
static std::deque<ArReq> ar_q;
static unsigned r_done = 0;                     // beats of ar_q.front() already given
static uint64_t mem_reads = 0;
static bool mem_b_taken = false, mem_r_taken = false, mem_ar_taken = false;
static ArReq mem_ar;

// Apply what can be applied; true if a burst completed.
static bool mem_apply() {
    bool any = false;
    while (!aw_q.empty() && !w_q.empty()) {
        AwReq& a = aw_q.front();
        WBeat& b = w_q.front();
        uint64_t bytes = 1ull << a.size;
        uint64_t addr = a.addr;
        if (a.burst == 1) addr = (a.addr & ~(bytes - 1)) + (uint64_t)w_done * bytes;
        uint64_t lane0 = addr % W_OCTETS;
        lane0 -= lane0 % bytes;
        for (uint64_t k = 0; k < bytes; ++k) {
            uint64_t lane = lane0 + k;
            if ((b.strb[lane / 32] >> (lane % 32)) & 1u)
                mem[((addr & ~(bytes - 1)) + k) & (MEM_SIZE - 1)] = (uint8_t)(b.data[lane / 4] >> (8 * (lane % 4)));
        }
        w_q.pop_front();
        if (++w_done > a.len) {
            aw_q.pop_front();
            w_done = 0;
            ++b_pending;
            ++mem_writes;
            any = true;
        }
    }
    return any;
}

// The address of the next R beat of ar_q.front().
static uint64_t r_addr() {
    const ArReq& a = ar_q.front();
    uint64_t bytes = 1ull << a.size;
    return a.burst == 1 ? (a.addr & ~(bytes - 1)) + (uint64_t)r_done * bytes : a.addr;
}

// The slaves' outputs for the coming edge.
static void mem_drive() {
    top->p_m_axi_awready = aw_q.size() < 16;
    top->p_m_axi_wready = w_q.size() < 64;
    top->p_m_axi_bvalid = b_pending > 0;
    top->p_m_axi_bresp = 0;
    top->p_m_axi_bid = 0;
    top->p_m_axi_rd_arready = ar_q.size() < 16;
    bool r_valid = !ar_q.empty();
    top->p_m_axi_rd_rvalid = r_valid;
    top->p_m_axi_rd_rid = 0;
    top->p_m_axi_rd_rresp = 0;
    top->p_m_axi_rd_rlast = r_valid && r_done >= ar_q.front().len;
    uint32_t rw[W_OCTETS / 4 + 2] = {0};
    if (r_valid) {
        uint64_t word = r_addr() & ~(uint64_t)(W_OCTETS - 1);
        for (int k = 0; k < W_OCTETS; ++k)
            rw[k / 4] |= (uint32_t)mem[(word + k) & (MEM_SIZE - 1)] << (8 * (k % 4));
    }
    put(top->p_m_axi_rd_rdata, rw);
}

// The handshakes of this cycle (after the falling-edge eval); true if any moved.
static bool mem_sample() {
    bool act = false;
    mem_ar_taken = top->p_m_axi_rd_arvalid && top->p_m_axi_rd_arready;
    mem_ar = ArReq{(uint64_t)top->p_m_axi_rd_araddr, (unsigned)top->p_m_axi_rd_arlen,
                   (unsigned)top->p_m_axi_rd_arsize, (unsigned)top->p_m_axi_rd_arburst};
    mem_r_taken = !ar_q.empty() && top->p_m_axi_rd_rready;
    if (top->p_m_axi_awvalid && top->p_m_axi_awready) {
        aw_q.push_back(AwReq{(uint64_t)top->p_m_axi_awaddr, (unsigned)top->p_m_axi_awlen,
                             (unsigned)top->p_m_axi_awsize, (unsigned)top->p_m_axi_awburst});
        act = true;
    }
    if (top->p_m_axi_wvalid && top->p_m_axi_wready) {
        WBeat b;
        std::memset(&b, 0, sizeof b);
        get(top->p_m_axi_wdata, b.data);
        get(top->p_m_axi_wstrb, b.strb);
        w_q.push_back(b);
        act = true;
    }
    mem_b_taken = b_pending > 0 && top->p_m_axi_bready;
    return act || mem_ar_taken || mem_r_taken || mem_b_taken;
}

// The cycle's handshakes applied (after the rising edge); true if a burst completed.
static bool mem_commit() {
    if (mem_b_taken) --b_pending;
    if (mem_r_taken && ++r_done > ar_q.front().len) { ar_q.pop_front(); r_done = 0; ++mem_reads; }
    if (mem_ar_taken) ar_q.push_back(mem_ar);
    return mem_apply();
}

// Bus work still owed (a write not applied or not answered).
static bool mem_busy() { return !aw_q.empty() || !w_q.empty() || b_pending; }

// The memory commands (no clock; addresses hexadecimal, lengths decimal):
//   MW <addr> <hex>     write octets         -> OK | ERR <text>
//   MR <addr> <n>       read n >= 1 octets   -> OK <hex> | ERR <text>
// True if the words f are one of them (then answered).
static bool memory_command(const std::vector<std::string>& f) {
    uint64_t a = 0, b = 0;
    if (f.size() == 3 && f[0] == "MW" && parse_u64(f[1], a, 16)) {
        std::string data;
        if (!from_hex(f[2], data) || data.empty()) out_line("ERR bad octets");
        else if (a >= MEM_SIZE || data.size() > MEM_SIZE - a) out_line("ERR outside host memory");
        else {
            std::memcpy(&mem[a], data.data(), data.size());
            out_line("OK");
        }
        return true;
    }
    if (f.size() == 3 && f[0] == "MR" && parse_u64(f[1], a, 16) && parse_u64(f[2], b, 10)) {
        if (b == 0 || a >= MEM_SIZE || b > MEM_SIZE - a) out_line("ERR outside host memory");
        else out_line("OK " + to_hex(std::string((const char*)&mem[a], (std::size_t)b)));
        return true;
    }
    return false;
}
#endif  // HARNESS_MEMORY

#endif  // HARNESS_INTERACTIVE
