// Training progress: the bar's text, and what the Trainer writes in each style (a bar redrawn
// with '\r' on a terminal, the seed notebooks' lines elsewhere).

#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include <cohort/cohort.hpp>
#include <cohort/models/seed_models.hpp>
#include <cohort/train/progress.hpp>

#include "support/bands.hpp"

using namespace cohort;

TEST_CASE("progress: numbers and clocks as people read them") {
  CHECK(detail::grouped(0) == "0");
  CHECK(detail::grouped(999) == "999");
  CHECK(detail::grouped(1000) == "1,000");
  CHECK(detail::grouped(9812345) == "9,812,345");
  CHECK(detail::clock_text(0) == "0:00");
  CHECK(detail::clock_text(13.4) == "0:13");
  CHECK(detail::clock_text(61) == "1:01");
  CHECK(detail::clock_text(3723) == "1:02:03");
  CHECK(detail::clock_text(-1) == "?");
}

TEST_CASE("progress: the bar line shows epoch, fraction, steps, samples/s, loss and ETA within the width") {
  const detail::ProgressState p{
      .epoch = 0, .epochs = 2, .done = 225, .total = 469, .samples_per_s = 9812, .loss = 0.41234, .elapsed_s = 10};
  const std::string line = detail::progress_line(p, 100);
  CHECK(line.size() <= 100);
  CHECK(line.rfind("epoch 1/2 [", 0) == 0);
  CHECK(line.find(" 48%  225/469  9,812 samples/s  loss 0.4123  ETA 0:11") != std::string::npos);
  // 225 of 469 steps: 48% of the cells are '=', then the head '>'.
  const std::size_t open = line.find('['), close = line.find(']');
  const std::string cells = line.substr(open + 1, close - open - 1);
  CHECK(cells.find('>') == std::size_t(0.48 * double(cells.size())));
  // Resumed at step 200: the 25 steps of this run took the 10 s, so 244 more take 97.6 s.
  detail::ProgressState resumed = p;
  resumed.started = 200;
  CHECK(detail::progress_line(resumed, 100).find("ETA 1:38") != std::string::npos);
  // Too narrow for a bar: the text alone, cut to the width.
  CHECK(detail::progress_line(p, 40).size() == 40);
  CHECK(detail::progress_line(p, 40).find('[') == std::string::npos);
  // Done: full bar, no head.
  detail::ProgressState end = p;
  end.done = end.total;
  const std::string full = detail::progress_line(end, 100);
  CHECK(full.find('>') == std::string::npos);
  CHECK(full.find("100%") != std::string::npos);
  CHECK(full.find("ETA 0:00") != std::string::npos);
}

namespace {
std::string trained_log(ProgressStyle style, std::size_t log_interval = 2) {
  const test::Bands data(100, 1); // 4 batches of 32 (the last short)
  std::ostringstream log;
  TrainerOptions o{.batch_size = 32, .log_interval = log_interval, .progress = style, .log = &log};
  Trainer<models::ModelC, Sgd<>> t(Sgd({.lr = 0.05}), o);
  t.fit(data, 2);
  return log.str();
}
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
} // namespace

TEST_CASE("progress: the Trainer draws a bar, writes lines, or stays quiet, as asked") {
  SUBCASE("bar: redrawn in place, ended before each epoch's line") {
    const std::string log = trained_log(ProgressStyle::bar);
    CHECK(count(log, "\repoch 1/2 [") >= 1);
    CHECK(count(log, "\repoch 2/2 [") >= 1);
    CHECK(log.find("100%  4/4") != std::string::npos); // the last redraw is never skipped
    CHECK(count(log, "\nepoch 0: ") == 1);             // the bar's line ends before the summary
    CHECK(log.find("training loss:") == std::string::npos);
  }
  SUBCASE("lines: the seed notebooks' format, no carriage return") {
    const std::string log = trained_log(ProgressStyle::lines);
    CHECK(log.find('\r') == std::string::npos);
    CHECK(count(log, "epoch: 0 [") == 2); // steps 0 and 2 of 4, log_interval 2
    CHECK(count(log, "training loss:") == 4);
  }
  SUBCASE("automatic: an ostringstream is no terminal, so lines") {
    const std::string log = trained_log(ProgressStyle::automatic);
    CHECK(log.find('\r') == std::string::npos);
    CHECK(count(log, "training loss:") == 4);
  }
  SUBCASE("none: only the epoch lines") {
    const std::string log = trained_log(ProgressStyle::none);
    CHECK(log.find('\r') == std::string::npos);
    CHECK(log.find("training loss:") == std::string::npos);
    CHECK(count(log, "epoch 0: ") == 1);
    CHECK(count(log, "epoch 1: ") == 1);
  }
}
