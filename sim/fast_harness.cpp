// Generic C++ stream testbench used by sim/fast.py (see that module for the
// file formats and the meaning of every knob).  This is a template: each line
// holding only a "//@NAME@" marker is replaced by code that sim/fast.py
// generates for the ports of one component, "//@COMMON@" by sim/harness_common.h
// (sim/harness_build.py); everything else is shared.
//
// Per clock cycle (two eval() calls):
//   1. with clk low, drive every input stream's valid/payload (a source holds
//      valid and payload until the beat is accepted; before presenting a new
//      beat it idles with probability idle_prob) and every output stream's
//      ready (low with probability backpressure_prob); eval() settles the
//      combinational logic;
//   2. sample the handshakes: valid && ready now is the transfer that happens
//      at this rising edge (cycle number = this cycle);
//   3. clk high, eval(): the rising edge.
// Invocation: Vfast <work dir> key=value...   (written by sim/fast.py)

#include "Vtop.h"
#include "verilated.h"

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// port access (put/get by Verilator port type), from sim/harness_common.h
//@COMMON@

// ---------------------------------------------------------------------------

static uint64_t rng_state = 1;
static inline uint32_t rnd32() {  // xorshift64*
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

[[noreturn]] static void die(const char* what, const std::string& arg) {
    std::fprintf(stderr, "fast harness: %s %s\n", what, arg.c_str());
    std::exit(2);
}

static FILE* open_out(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) die("cannot write", path);
    return f;
}

// Append-only binary file with its own buffer (cheaper per record than fwrite).
struct Writer {
    FILE* f = nullptr;
    char* buf = nullptr;
    std::size_t used = 0, cap = 0;
    void open(const std::string& path, std::size_t size = 1 << 18) {
        f = open_out(path);
        cap = size;
        buf = (char*)std::malloc(cap);
        if (!buf) die("out of memory for", path);
    }
    void flush() {
        if (used && std::fwrite(buf, 1, used, f) != used) die("write failed", "");
        used = 0;
    }
    inline void put(const void* p, std::size_t n) {
        if (used + n > cap) flush();
        std::memcpy(buf + used, p, n);
        used += n;
    }
    void close() {
        flush();
        std::fclose(f);
        std::free(buf);
    }
};

static std::vector<uint32_t> read_words(const std::string& path) {
    std::vector<uint32_t> v;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return v;  // absent file: no beats
    std::fseek(f, 0, SEEK_END);
    long size = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    v.resize((std::size_t)size / 4);
    if (size && std::fread(v.data(), 4, v.size(), f) != v.size()) die("short read", path);
    std::fclose(f);
    return v;
}

struct InPort {
    std::vector<uint32_t> data;
    std::size_t n = 0, pos = 0;
    int group = 0;
    uint32_t idle_thr = 0;
    bool valid = false;
    Writer cyc;
};

struct OutPort {
    uint64_t count = 0;
    uint32_t bp_thr = 0;
    bool ready = false;
    Writer cyc, dat;
};

//@DECLS@

int main(int argc, char** argv) {
    if (argc < 2) die("usage:", "Vfast <work dir> key=value...");
    const std::string dir = std::string(argv[1]) + "/";
    uint64_t seed = 0, max_cycles = 0, idle_cycles = 64, stall_cycles = 100000, reset_cycles = 4,
             drain_limit = 0;
    for (int a = 2; a < argc; ++a) {
        std::string s = argv[a];
        std::size_t eq = s.find('=');
        if (eq == std::string::npos) die("bad argument", s);
        std::string k = s.substr(0, eq);
        uint64_t v = std::strtoull(s.c_str() + eq + 1, nullptr, 0);
        if (k == "seed") seed = v;
        else if (k == "max_cycles") max_cycles = v;
        else if (k == "idle_cycles") idle_cycles = v;
        else if (k == "stall_cycles") stall_cycles = v;
        else if (k == "drain_limit") drain_limit = v;
        else if (k == "reset_cycles") reset_cycles = v;
        else if (k[0] == 'g' && k.size() > 1) { int i = std::atoi(k.c_str() + 1); if (i < 0 || i >= N_IN) die("bad port", k); in[i].group = (int)v; }
        else if (k[0] == 'i' && k.size() > 1) { int i = std::atoi(k.c_str() + 1); if (i < 0 || i >= N_IN) die("bad port", k); in[i].idle_thr = (uint32_t)v; }
        else if (k[0] == 'b' && k.size() > 1) { int i = std::atoi(k.c_str() + 1); if (i < 0 || i >= N_OUT) die("bad port", k); out[i].bp_thr = (uint32_t)v; }
        else die("unknown knob", k);
    }
    {   // splitmix64 of the seed, never 0
        uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        rng_state = (z ^ (z >> 31)) | 1;
    }

    // inputs: in<i>.bin = records of in_nw[i] little-endian u32 words
    int ngroups = 1;
    for (int i = 0; i < N_IN; ++i) {
        in[i].data = read_words(dir + "in" + std::to_string(i) + ".bin");
        in[i].n = in[i].data.size() / in_nw[i];
        in[i].cyc.open(dir + "in" + std::to_string(i) + ".cyc");
        if (in[i].group + 1 > ngroups) ngroups = in[i].group + 1;
    }
    std::vector<uint64_t> group_left(ngroups + 1, 0);
    for (int i = 0; i < N_IN; ++i) group_left[in[i].group] += in[i].n;
    uint64_t inputs_left = 0;
    for (int g = 0; g < ngroups; ++g) inputs_left += group_left[g];
    int group = 0;  // streams of groups <= group may be driven
    while (group < ngroups - 1 && group_left[group] == 0) ++group;

    for (int j = 0; j < N_OUT; ++j) {
        out[j].cyc.open(dir + "out" + std::to_string(j) + ".cyc");
        out[j].dat.open(dir + "out" + std::to_string(j) + ".bin");
    }

    VerilatedContext* ctx = new VerilatedContext;
    ctx->commandArgs(1, argv);
    Vtop* top = new Vtop{ctx, "top"};
    uint32_t obuf[OUT_MAX_NW + 2];
    std::vector<uint32_t> cwords = read_words(dir + "consts.bin");
    (void)obuf;
    (void)cwords;

    //@CONSTS@

    // reset: rst high for reset_cycles clocks, all valids and readies low
    //@IDLE@
    for (uint64_t r = 0; r < reset_cycles; ++r) {
        //@RST1@
        //@CLK0@
        top->eval();
        //@CLK1@
        top->eval();
    }
    //@RST0@

    uint64_t cycle = 0, quiet = 0, since_xfer = 0, drained = 0;
    const char* reason = "done";
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        if (max_cycles && cycle >= max_cycles) { reason = "max_cycles"; break; }
        //@DRIVE@
        //@CLK0@
        top->eval();
        bool xfer = false, busy = false, done_one = false;
        //@SAMPLE@
        //@CLK1@
        top->eval();
        ++cycle;
        if (done_one) {
            while (group < ngroups - 1 && group_left[group] == 0) ++group;
        }
        if (xfer) since_xfer = 0; else ++since_xfer;
        if (xfer || busy) quiet = 0; else ++quiet;
        if (inputs_left == 0) {
            if (quiet >= idle_cycles) break;
            if (drain_limit && ++drained >= drain_limit) { reason = "drain_limit"; break; }
        } else if (stall_cycles && since_xfer >= stall_cycles) {
            reason = "stall";
            break;
        }
    }
    auto t1 = std::chrono::steady_clock::now();

    // final values of the plain (non-stream) outputs
    {
        FILE* f = open_out(dir + "final.bin");
        //@FINAL@
        std::fclose(f);
    }
    top->final();
    for (int i = 0; i < N_IN; ++i) in[i].cyc.close();
    for (int j = 0; j < N_OUT; ++j) { out[j].cyc.close(); out[j].dat.close(); }

    FILE* r = open_out(dir + "result.txt");
    std::fprintf(r, "reason %s\ncycles %" PRIu64 "\nwall_ns %lld\n", reason, cycle,
                 (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    for (int i = 0; i < N_IN; ++i) std::fprintf(r, "in%d %zu\n", i, in[i].pos);
    for (int j = 0; j < N_OUT; ++j) std::fprintf(r, "out%d %" PRIu64 "\n", j, out[j].count);
    std::fclose(r);
    delete top;
    delete ctx;
    return 0;
}
