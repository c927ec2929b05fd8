// What the interactive C++ harnesses share (sim/device_harness.cpp, sim/nic_harness.cpp):
// hex text, command words, numbers, and the AXI4-Lite master on the top's s_axil port.
// sim/device.py (harness_text) puts this file where a harness has the line "//@COMMON@",
// after its "static Vtop* top;", so that each harness stays one translation unit.

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

// ---------------------------------------------------------------------------
// AXI4-Lite master: one access at a time. A harness sets ax_addr (and ax_wdata), then
// ax = AX_W or AX_R and clocks until ax == AX_DONE (ax_rdata, ax_resp hold the answer).

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

// The outcome of an access that ended (or not): "" when it succeeded.
static std::string axil_error(bool done) {
    if (!done) return "bus timeout";
    if (ax_resp != 0) return "SLVERR";
    return "";
}
