// Replays a fuzz target on files (the seed corpus and every regression) as
// an ordinary test, in builds without libFuzzer: a crash fails the test.
// With --mutations=N (a target with a custom mutator: fuzz_structured) each
// file is also mutated N times in a row from fixed seeds, each mutant run,
// so the mutator and what it reaches are tested without clang too; with
// MEMTL_FUZZ_MUTANT=FILE each mutant is written there before it runs.
//   fuzz_X_replay [--mutations=N] FILE_OR_DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size,
                                                                size_t max_size, unsigned int seed);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  int first = 1;
  unsigned mutations = 0;
  if (argc > 1 && std::string(argv[1]).starts_with("--mutations=")) {
    mutations = static_cast<unsigned>(std::strtoul(argv[1] + 12, nullptr, 10));
    if (LLVMFuzzerCustomMutator == nullptr) {
      std::fprintf(stderr, "--mutations: this target has no custom mutator\n");
      return 2;
    }
    first = 2;
  }
  for (int i = first; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::exists(p)) {
      files.push_back(p);
    }
  }
  // The size libFuzzer's -max_len gives the mutator (scripts/fuzz.sh).
  constexpr size_t kMaxLen = 8 << 10;
  size_t runs = 0;
  const char* dump = std::getenv("MEMTL_FUZZ_MUTANT");
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string data = ss.str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    ++runs;
    std::vector<uint8_t> buf;
    size_t size = 0;
    for (unsigned k = 0; k < mutations; ++k) {
      if (k % 10 == 0) {  // chains of 10 mutations from the file
        buf.assign(data.begin(),
                   data.begin() + static_cast<ptrdiff_t>(std::min(data.size(), kMaxLen)));
        size = buf.size();
        buf.resize(kMaxLen);
      }
      size = LLVMFuzzerCustomMutator(buf.data(), size, kMaxLen, k);
      if (dump != nullptr) {  // the mutant about to run, for a crash to be kept
        std::ofstream(dump, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(size));
      }
      LLVMFuzzerTestOneInput(buf.data(), size);
      ++runs;
    }
  }
  std::printf("replayed %zu inputs (%zu runs)\n", files.size(), runs);
  return files.empty() ? 1 : 0;
}
