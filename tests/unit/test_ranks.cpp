// memtl ranks' rows compared (core/explain/ranks.h): the rank a file name
// gives, one run's checks, the median, skew and outliers.
#include <doctest/doctest.h>

#include "core/explain/ranks.h"

using namespace memtl;

namespace {

RankRow Row(int64_t rank, int64_t peak, const char* path, int64_t world = 4,
            const char* run = "j") {
  RankRow r;
  r.rank = rank;
  r.peak_bytes = peak;
  r.path = path;
  r.world_size = world;
  r.run = run;
  return r;
}

}  // namespace

TEST_CASE("ranks: the rank a file name gives") {
  CHECK(RankFromName("run/step.rank3.trace.jsonl.gz") == 3);
  CHECK(RankFromName("rank_012.json") == 12);
  CHECK(RankFromName("/a/rank7/rank-2.pt.trace.json") == 2);  // the name, not the folder
  CHECK(RankFromName("/ranks/worker.trace.jsonl") == -1);
  CHECK(RankFromName("prankster.json") == -1);
}

TEST_CASE("ranks: median, skew and outliers; rows by rank, failures last") {
  std::vector<RankRow> rows = {Row(2, 100, "c"), Row(0, 100, "a"), Row(3, 150, "d"),
                               Row(1, 95, "b")};
  RankRow failed = Row(-1, 0, "e", -1, "");
  failed.error = "e: cannot open";
  rows.push_back(failed);
  auto r = CompareRanks(rows);
  REQUIRE(r.ok());
  const RanksReport& rep = r.value();
  REQUIRE(rep.rows.size() == 5);
  CHECK(rep.rows[0].rank == 0);
  CHECK(rep.rows[3].rank == 3);
  CHECK(rep.rows[4].path == "e");
  CHECK(rep.median_peak == 100);
  CHECK(rep.skew == doctest::Approx(1.5));
  REQUIRE(rep.outliers.size() == 1);  // 95 is within 10%, 150 is not
  CHECK(rep.rows[rep.outliers[0]].rank == 3);
}

TEST_CASE("ranks: one run's distinct ranks, or one line naming the files") {
  CHECK(CompareRanks({Row(1, 1, "a"), Row(1, 1, "b")}).status().message() == "rank 1 twice: a, b");
  CHECK(CompareRanks({Row(0, 1, "a", 2), Row(1, 1, "b", 4)}).status().message() ==
        "traces of different world sizes (world size 2: a; world size 4: b)");
  CHECK(CompareRanks({Row(0, 1, "a", 2, "x"), Row(1, 1, "b", 2, "y")}).status().message() ==
        "traces of different runs (run \"x\": a; run \"y\": b)");
  CHECK(CompareRanks({Row(0, 1, "a", 2), Row(2, 1, "b", 2)}).status().message() ==
        "rank 2 of a world of 2: b");
  CHECK(CompareRanks({Row(-1, 1, "a", -1, ""), Row(-1, 1, "b", -1, "")}).ok());  // nothing said
}
