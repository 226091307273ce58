// The stage timer's counters and its --timings lines (phase_timer.h).
#include "core/pipeline/phase_timer.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memtl {

namespace {

// A "Vm...:" field of /proc/self/status (kB there), in bytes; 0 if unknown.
int64_t StatusBytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  const size_t len = std::strlen(field);
  char line[256];
  int64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0) {
      kb = std::strtoll(line + len, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace

int64_t PeakRssBytes() { return StatusBytes("VmHWM:"); }

int64_t RssBytes() { return StatusBytes("VmRSS:"); }

int64_t MinorFaults() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return u.ru_minflt;
}

double CpuSeconds() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

std::string FormatTimings(const PhaseTimer& timer) {
  std::string out;
  double total = 0, total_cpu = 0;
  int64_t peak = 0, faults = 0;
  char buf[240];
  for (const auto& p : timer.phases()) {
    std::snprintf(buf, sizeof buf,
                  "memtl: timing: %-10s %.3f s  cpu %.3f s  peak RSS %.1f MiB  page faults %lld  "
                  "resident after %.1f MiB\n",
                  p.name, p.seconds, p.cpu_seconds, static_cast<double>(p.peak_rss) / (1 << 20),
                  static_cast<long long>(p.minor_faults), static_cast<double>(p.rss) / (1 << 20));
    out += buf;
    total += p.seconds;
    total_cpu += p.cpu_seconds;
    peak = std::max(peak, p.peak_rss);
    faults += p.minor_faults;
  }
  std::snprintf(buf, sizeof buf,
                "memtl: timing: %-10s %.3f s  cpu %.3f s  peak RSS %.1f MiB  page faults %lld\n",
                "total", total, total_cpu, static_cast<double>(peak) / (1 << 20),
                static_cast<long long>(faults));
  return out + buf;
}

}  // namespace memtl
