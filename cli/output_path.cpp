// -o paths checked and opened before the analysis (output_path.h).
#include "cli/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "cli/rank_traces.h"
#include "core/model/quote.h"
#include "export/export.h"

namespace memtl::cli {

namespace {

// What a printing command writes, given -o's suffix; empty when fine (and
// `args.format` set from the suffix). Writing text into x.html would hand
// the user a broken page, so such a suffix is refused, with what writes it.
std::string PrintedFormatError(Args& args, const std::string& out) {
  if (args.format != Format::kUnset) return {};
  const std::vector<Format> formats = FormatsOf(args.command);
  auto writes_format = [&](Format f) {
    return std::find(formats.begin(), formats.end(), f) != formats.end();
  };
  if (writes_format(Format::kHtml)) {  // a page, JSON, or text for any other suffix
    args.format = out.ends_with(".html")   ? Format::kHtml
                  : out.ends_with(".json") ? Format::kJson
                                           : Format::kText;
    return {};
  }
  const bool json = writes_format(Format::kJson);
  const bool tsv = writes_format(Format::kTsv);
  const std::string writes = tsv                              ? "text, TSV or JSON Lines"
                             : writes_format(Format::kFolded) ? "text, JSON or folded stacks"
                             : json                           ? "text or JSON"
                                                              : "text";
  auto refuse = [&](const std::string& what, const std::string& instead) {
    return QuotePath(out) + ": memtl " + std::string(NameOf(args.command)) + " writes " + writes +
           ", not " + what + "; " + instead;
  };
  if (out.ends_with(".html") || out.ends_with(".htm")) {
    return refuse("HTML", "memtl export TRACE -o " + QuotePath(out) +
                              " writes the HTML report (the chart, the peak and the memory "
                              "tables)");
  }
  if (out.ends_with(".gz")) return refuse("gzip", "name the file without .gz");
  if (out.ends_with(".json") || out.ends_with(".jsonl")) {
    if (!json)
      return refuse("JSON", "memtl events --format json writes the timeline as JSON Lines");
    args.format = Format::kJson;
  } else if (out.ends_with(".tsv")) {
    if (!tsv) return refuse("TSV", "memtl events --format tsv writes the timeline as TSV");
    args.format = Format::kTsv;
  } else if (out.ends_with(".folded") && writes_format(Format::kFolded)) {
    args.format = Format::kFolded;
  }
  return {};
}

}  // namespace

bool SameFile(const std::string& out, const std::string& input) {
  struct stat so {
  }, si{};
  if (stat(out.c_str(), &so) != 0) return false;
  const int rc = input == "-" ? fstat(STDIN_FILENO, &si) : stat(input.c_str(), &si);
  return rc == 0 && so.st_dev == si.st_dev && so.st_ino == si.st_ino;
}

std::vector<std::string> InputsOf(const Args& args) {
  std::vector<std::string> inputs;
  for (const std::string* p : {&args.trace, &args.trace_b, &args.et, &args.et_b}) {
    if (!p->empty()) inputs.push_back(*p);
  }
  if (args.command == Command::kRanks && !args.outputs.empty()) {
    // Only an output needs them here (RunRanks finds them again). A
    // pattern that names nothing fails later, with its own message.
    auto paths = RankTraces(args.traces);
    if (paths.ok()) inputs.insert(inputs.end(), paths.value().begin(), paths.value().end());
  }
  return inputs;
}

Expected<OpenedOutputs> OpenOutputs(Args& args, const std::vector<std::string>& inputs) {
  OpenedOutputs opened;
  const bool exporting = args.command == Command::kExport;
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    const std::string& o = args.outputs[i];
    for (size_t j = 0; j < i; ++j) {
      const std::string& earlier = args.outputs[j];
      if (o == earlier || (o != "-" && earlier != "-" && SameFile(o, earlier)))
        return Status::Error(QuotePath(o) + ": named twice by -o; name each output once");
    }
    for (const std::string& in : inputs) {
      if (o != "-" && SameFile(o, in))
        return Status::Error(QuotePath(o) + ": is " +
                             (in == "-" ? std::string("standard input, which is") : "a file") +
                             " being read; choose another output path");
    }
  }
  for (const std::string& o : args.outputs) {
    bool gzip = false;
    if (exporting) {
      if (o == "-" && args.format == Format::kUnset)
        return Status::Error(
            "-o - writes standard output: give its --format (json, json.gz, raw, html)");
      if (o != "-") {
        auto format = FormatForPath(o);
        if (!format.ok()) return format.status();
        gzip = ExportGzipped(format.value());
      } else {
        gzip = args.format == Format::kJsonGz || args.format == Format::kRaw;
      }
    } else if (o != "-") {
      if (std::string e = PrintedFormatError(args, o); !e.empty()) return Status::Error(e);
    }
    opened.paths.push_back(o);
    if (o == "-" && !exporting) {
      opened.files.emplace_back();
      continue;
    }
    auto f = AtomicFile::Create(o, gzip);
    if (!f.ok()) return f.status();
    opened.files.emplace_back(f.value());
  }
  return opened;
}

}  // namespace memtl::cli
