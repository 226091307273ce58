// JSON serializations of the timeline and the suffix dispatch.
#include <charconv>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "export/atomic_file.h"
#include "export/export.h"

namespace memtl {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string ExportSuffixesJson() {
  std::string s = "{\"export\": [";
  for (const ExportSuffix& e : kExportSuffixes) {
    if (s.back() != '[') s += ", ";
    s += "[\"" + std::string(e.suffix) + "\", \"" + std::string(e.name) + "\"]";
  }
  return s + "]}\n";
}

Expected<ExportFormat> FormatForPath(const std::string& path) {
  for (const ExportSuffix& s : kExportSuffixes) {
    if (EndsWith(path, std::string(s.suffix))) return s.format;
  }
  return Status::Error(path +
                       ": unknown output format (use .html, .json, .json.gz or .raw.json.gz)");
}

namespace {

// JSON text built with to_chars (number formatting dominated the export).
// With a sink it streams: every ~1 MiB goes to the sink, so a large export
// never holds its whole text in memory.
class JsonText {
 public:
  using Sink = std::function<Status(std::string_view)>;
  explicit JsonText(Sink sink = nullptr) : sink_(std::move(sink)) { out_.reserve(kFlushAt + 4096); }
  void Int(int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void Raw(std::string_view s) { out_.append(s); }
  // Called between rows.
  void MaybeFlush() {
    if (sink_ && out_.size() >= kFlushAt) Flush();
  }
  Status Finish() {
    if (sink_) Flush();
    return status_;
  }
  std::string Take() { return std::move(out_); }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  void Flush() {
    if (status_.ok()) status_ = sink_(out_);
    out_.clear();
  }
  Sink sink_;
  std::string out_;
  Status status_;
};

// Each of the two arrays is written as its rows are produced.
template <typename Times, typename Sizes>
void WriteSizesWith(JsonText& out, Times&& times, Sizes&& sizes) {
  out.Raw("[[");
  bool first = true;
  times([&](int64_t t) {
    if (!first) out.Raw(", ");
    first = false;
    out.Int(t);
    out.MaybeFlush();
  });
  out.Raw("], [");
  first = true;
  sizes([&](const std::array<int64_t, 9>& row) {
    out.Raw(first ? "[" : ", [");
    first = false;
    for (size_t j = 0; j < row.size(); ++j) {
      if (j) out.Raw(", ");
      out.Int(row[j]);
    }
    out.Raw("]");
    out.MaybeFlush();
  });
  out.Raw("]]");
}

void WriteSizes(const CoalescedTimeline& c, JsonText& out) {
  WriteSizesWith(
      out,
      [&](const auto& fn) {
        for (int64_t t : c.times) fn(t);
      },
      [&](const auto& fn) {
        for (const auto& row : c.sizes) fn(row);
      });
}

// The coalesced timeline straight from the events, never held in memory.
void WriteSizesStreamed(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                        DeviceIndex device, JsonText& out) {
  WriteSizesWith(
      out, [&](const auto& fn) { CoalescedTimes(timeline, device, fn); },
      [&](const auto& fn) { CoalescedSizes(timeline, cats, device, fn); });
}

void WriteRaw(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
              DeviceIndex device, JsonText& out) {
  out.Raw("[");
  bool first = true;
  auto row = [&](int64_t t, Action a, int64_t bytes, int category) {
    out.Raw(first ? "[" : ", [");
    first = false;
    out.Int(t);
    out.Raw(", ");
    out.Int(static_cast<int>(a));
    out.Raw(", ");
    out.Int(bytes);
    out.Raw(", ");
    out.Int(category);
    out.Raw("]");
  };
  for (const auto& e : timeline) {
    if (e.device != device) continue;
    switch (e.action) {
      case Action::kPreexisting:
      case Action::kCreate:
        row(e.time, e.action, e.bytes, CategoryIndexOf(cats, e, e.version()));
        break;
      case Action::kIncrementVersion:
        row(e.time, e.action, -e.bytes, CategoryIndexOf(cats, e, e.version()));
        row(e.time, e.action, e.bytes, CategoryIndexOf(cats, e, e.version().next()));
        break;
      case Action::kDestroy:
        row(e.time, e.action, -e.bytes, CategoryIndexOf(cats, e, e.version()));
        break;
    }
    out.MaybeFlush();
  }
  out.Raw("]");
}

// Writes (and for .gz compresses) chunks into a file on a second thread, so
// that formatting the next chunk overlaps writing the last one. Chunks are
// written in the order given: the bytes are those of a plain loop.
class BackgroundWriter {
 public:
  explicit BackgroundWriter(AtomicFile& file) : file_(file), thread_([this] { Run(); }) {}
  ~BackgroundWriter() { (void)Finish(); }

  // Queues a copy of `chunk`; returns the first write error so far.
  Status Push(std::string_view chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return queue_.size() < kMaxQueued; });
    if (!status_.ok()) return status_;
    std::string buffer;
    if (!spare_.empty()) {
      buffer = std::move(spare_.back());
      spare_.pop_back();
    }
    buffer.assign(chunk);
    queue_.push_back(std::move(buffer));
    ready_.notify_one();
    return Status();
  }
  // Waits until everything queued is written; returns the first error.
  Status Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      ready_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  static constexpr size_t kMaxQueued = 4;
  void Run() {
    for (;;) {
      std::string chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;
        chunk = std::move(queue_.front());
        queue_.pop_front();
      }
      Status s = status_.ok() ? file_.Write(chunk) : Status();
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok() && !s.ok()) status_ = std::move(s);
      spare_.push_back(std::move(chunk));
      room_.notify_one();
    }
  }
  AtomicFile& file_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<std::string> queue_;
  std::vector<std::string> spare_;
  bool closed_ = false;
  Status status_;
  std::thread thread_;  // last: starts after the members it uses exist
};

// Streams JSON written by `write` into `file` and finishes it.
template <typename Write>
Status StreamJson(AtomicFile& file, bool threaded, Write&& write) {
  std::optional<BackgroundWriter> writer;
  if (threaded) {
    try {
      writer.emplace(file);
    } catch (const std::system_error&) {
      // No second thread to be had (a thread or memory limit): the same
      // bytes, written on this one.
    }
  }
  JsonText out(
      [&](std::string_view chunk) { return writer ? writer->Push(chunk) : file.Write(chunk); });
  write(out);
  Status formatted = out.Finish();
  Status written = writer ? writer->Finish() : Status();
  if (!formatted.ok()) return formatted;
  if (!written.ok()) return written;
  return file.Finish();
}

}  // namespace

std::string SizesJson(const CoalescedTimeline& c) {
  JsonText out;
  WriteSizes(c, out);
  return out.Take();
}

std::string RawJson(const std::vector<TimelineEvent>& timeline, const CategoryDict& cats,
                    DeviceIndex device) {
  JsonText out;
  WriteRaw(timeline, cats, device, out);
  return out.Take();
}

Expected<std::string> HtmlReport(const ExportInput& in, DeviceIndex device);  // html_export.cpp

Status WriteExport(const ExportInput& in, AtomicFile& file, DeviceIndex device,
                   ExportFormat format) {
  switch (format) {
    case ExportFormat::kHtml: {
      auto html = HtmlReport(in, device);
      if (!html.ok()) return html.status().Prefixed(file.path() + ": ");
      if (Status s = file.Write(html.value()); !s.ok()) return s;
      return file.Finish();
    }
    case ExportFormat::kRawJsonGz:
      return StreamJson(file, in.threaded,
                        [&](JsonText& out) { WriteRaw(in.timeline, in.categories, device, out); });
    case ExportFormat::kSizesJsonGz:
    case ExportFormat::kSizesJson:
      return StreamJson(file, in.threaded, [&](JsonText& out) {
        WriteSizesStreamed(in.timeline, in.categories, device, out);
      });
  }
  return Status::Error(file.path() + ": unknown output format");
}

Status ExportMemoryTimeline(const ExportInput& in, const std::string& path, DeviceIndex device,
                            std::optional<ExportFormat> chosen) {
  auto format = chosen ? Expected<ExportFormat>(*chosen) : FormatForPath(path);
  if (!format.ok()) return format.status();
  auto f = AtomicFile::Create(path, ExportGzipped(format.value()));
  if (!f.ok()) return f.status();
  std::unique_ptr<AtomicFile> file(f.value());
  if (Status s = WriteExport(in, *file, device, format.value()); !s.ok()) return s;
  return file->Publish();
}

}  // namespace memtl
