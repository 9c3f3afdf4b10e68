// Runs HEM (Shi et al., DASFAA 2022; github.com/shiwanghua/HEM, class HEM5, its "HEM5DD"
// configuration) on a workload written by tools/bench/hem.py, to measure it beside bexdb.
// Ours: only this driver.  It is compiled against HEM's own sources (HEM5.cpp and the
// files they need) by tools/bench/hem.py; no HEM code is copied here.
//
// Input (text, whitespace separated):
//   subs file:   "<subs> <attributes> <domain>" then per subscription
//                "<k> <att> <lo> <hi> ... (k triples)"   (ranges inclusive)
//   events file: "<events> <attributes>" then per event one value per attribute
// Output: one JSON object on stdout (build seconds, per-event match seconds and counts,
// peak resident memory after the build and at the end).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "HEM5.h"

static long vm_kb(const char *field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::string(field).size()));
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        std::cerr << "usage: hem_driver SUBS_FILE EVENTS_FILE\n";
        return 2;
    }
    std::ifstream sf(argv[1]), ef(argv[2]);
    int n = 0, dims = 0, domain = 0;
    sf >> n >> dims >> domain;
    if (n > subs) {
        std::cerr << "built for " << subs << " subscriptions, given " << n << "\n";
        return 2;
    }
    atts = dims;  // HEM's globals: attributes, values, and one value per attribute an event
    m = dims;
    valDom = domain;
    std::vector<IntervalSub> list(n);
    for (int i = 0; i < n; i++) {
        int k;
        sf >> k;
        list[i].id = i;
        list[i].size = k;
        list[i].constraints.resize(k);
        for (auto &c : list[i].constraints) sf >> c.att >> c.lowValue >> c.highValue;
    }
    int events = 0, edims = 0;
    ef >> events >> edims;
    std::vector<Pub> pubs_(events);
    for (int e = 0; e < events; e++) {
        pubs_[e].id = e;
        pubs_[e].size = edims;
        pubs_[e].pairs.resize(edims);
        for (int a = 0; a < edims; a++) {
            pubs_[e].pairs[a].att = a;
            ef >> pubs_[e].pairs[a].value;
        }
    }
    long before = vm_kb("VmRSS:");
    auto t0 = std::chrono::steady_clock::now();
    HEM5 hem(HEM5_DD);
    for (auto &s : list) hem.insert(s);
    hem.initBits();
    double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    long built = vm_kb("VmRSS:");
    std::vector<double> secs(events);
    std::vector<int> counts(events);
    for (int e = 0; e < events; e++) {
        int found = 0;
        auto s = std::chrono::steady_clock::now();
        hem.match(pubs_[e], found);
        secs[e] = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
        counts[e] = found;
    }
    std::printf("{\"subscriptions\": %d, \"events\": %d, \"build_s\": %.6f, ", n, events, build);
    std::printf("\"rss_before_build_kb\": %ld, \"rss_built_kb\": %ld, \"hwm_kb\": %ld, ", before,
                built, vm_kb("VmHWM:"));
    std::printf("\"hem_memory_mb\": %d, \"match_s\": [", hem.calMemory());
    for (int e = 0; e < events; e++) std::printf(e ? ", %.9f" : "%.9f", secs[e]);
    std::printf("], \"matches\": [");
    for (int e = 0; e < events; e++) std::printf(e ? ", %d" : "%d", counts[e]);
    std::printf("]}\n");
    return 0;
}
