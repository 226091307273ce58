// -o paths checked before the analysis (output_path.h).
#include "cli/output_path.h"

#include <sys/stat.h>

#include "core/model/quote.h"

namespace memtl::cli {

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

std::string PrintedOutputError(Args& args) {
  if (args.outputs.empty() || args.outputs.front() == "-") return {};
  const std::string& out = args.outputs.front();
  if (SameFile(out, args.trace) || (!args.et.empty() && SameFile(out, args.et)))
    return memtl::QuotePath(out) + ": is a trace being read; choose another output path";
  if (!args.format.empty()) return {};
  const std::string& cmd = args.command;
  const bool json = cmd == "peak" || cmd == "explain" || cmd == "summary" || cmd == "events";
  const bool tsv = cmd == "events";
  const std::string writes = tsv ? "text, TSV or JSON Lines" : json ? "text or JSON" : "text";
  auto refuse = [&](const std::string& what, const std::string& instead) {
    return memtl::QuotePath(out) + ": memtl " + cmd + " writes " + writes + ", not " + what + "; " +
           instead;
  };
  if (out.ends_with(".html") || out.ends_with(".htm")) {
    return refuse("HTML", "memtl export TRACE -o " + memtl::QuotePath(out) +
                              " writes the HTML report (the chart, the peak and the memory "
                              "tables)");
  }
  if (out.ends_with(".gz")) return refuse("gzip", "name the file without .gz");
  if (out.ends_with(".json") || out.ends_with(".jsonl")) {
    if (!json)
      return refuse("JSON", "memtl events --format json writes the timeline as JSON Lines");
    args.format = "json";
  } else if (out.ends_with(".tsv")) {
    if (!tsv) return refuse("TSV", "memtl events --format tsv writes the timeline as TSV");
    args.format = "tsv";
  }
  return {};
}

}  // namespace memtl::cli
