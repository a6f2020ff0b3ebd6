#pragma once
/// \file
/// What Trainer shows while an epoch runs: a progress bar redrawn in place on a terminal, or the
/// seed notebooks' progress lines everywhere else (files, pipes, CI logs).
/// Example (not compiled: a line of the output, not code):
///
///     epoch 1/2 [=============>              ]  48%  225/469  9,812 samples/s  loss 0.4123  ETA 0:13
///
/// `TrainerOptions::progress` picks the style; `automatic` draws the bar only when the log stream
/// is std::cout or std::cerr and that stream is a terminal (isatty), so redirected output stays
/// line by line and free of carriage returns. No library: Debian 12 packages no C++ progress bar,
/// and one line of text does not need one.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/ioctl.h>
#include <unistd.h>
#endif

namespace cohort {

/// How training progress is shown (TrainerOptions::progress).
enum class ProgressStyle : std::uint8_t {
  automatic, // bar on a terminal, lines otherwise
  bar,       // a bar redrawn in place ('\r'), whatever the stream
  lines,     // a line every TrainerOptions::log_interval steps (the seed notebooks' format)
  none,      // only the end-of-epoch line
};

namespace detail {

/// The seed notebooks' progress line: "epoch: 0 [120/469 (26%)]\ttraining loss: 0.512345".
inline void print_step_line(std::ostream& out, std::uint64_t epoch, std::size_t shown, std::size_t batches,
                            double loss) {
  char line[160];
  std::snprintf(line, sizeof line, "epoch: %llu [%zu/%zu (%.0f%%)]\ttraining loss: %.6f\n",
                static_cast<unsigned long long>(epoch), shown, batches, 100.0 * double(shown) / double(batches), loss);
  out << line << std::flush;
}

/// `n` with thousands separators: 12345 -> "12,345".
inline std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// "m:ss" or "h:mm:ss"; "?" when not known yet.
inline std::string clock_text(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const auto s = static_cast<std::uint64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llu:%02llu", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  return buf;
}

/// Where an epoch stands, for one redraw of the bar.
struct ProgressState {
  std::uint64_t epoch = 0;  // 0-based, shown 1-based
  std::uint64_t epochs = 0; // in all (0: not known)
  std::size_t done = 0, total = 0;
  std::size_t started = 0; // steps already done when this run began (a resume mid-epoch)
  double samples_per_s = 0, loss = 0, elapsed_s = 0;
};

/// One line of the bar, at most `width` characters (no '\r', no newline).
inline std::string progress_line(const ProgressState& p, std::size_t width) {
  std::string head = "epoch " + std::to_string(p.epoch + 1);
  if (p.epochs) head += "/" + std::to_string(p.epochs);
  const double fraction = p.total ? double(p.done) / double(p.total) : 0;
  // The rate of this run's steps alone: after a resume, elapsed_s covers only those.
  const std::size_t ran = p.done > p.started ? p.done - p.started : 0;
  const double eta = ran ? p.elapsed_s * double(p.total - std::min(p.done, p.total)) / double(ran) : -1;
  char tail[160];
  std::snprintf(tail, sizeof tail, " %3.0f%%  %zu/%zu  %s samples/s  loss %.4f  ETA %s", 100 * fraction, p.done,
                p.total, grouped(static_cast<std::uint64_t>(p.samples_per_s + 0.5)).c_str(), p.loss,
                clock_text(eta).c_str());
  // The bar takes what the text leaves, between 10 and 40 cells; without room, text alone.
  const std::size_t text = head.size() + 3 + std::string_view(tail).size();
  if (width < text + 10) return (head + tail).substr(0, width);
  const std::size_t cells = std::min<std::size_t>(width - text, 40);
  const auto filled = static_cast<std::size_t>(fraction * double(cells));
  std::string bar(cells, ' ');
  std::fill_n(bar.begin(), filled, '=');
  if (filled < cells && p.done) bar[filled] = '>';
  return head + " [" + bar + "]" + tail;
}

/// The terminal's width, or 80 when it cannot be asked.
inline std::size_t terminal_width(const std::ostream& out) {
#if defined(TIOCGWINSZ)
  const int fd = &out == &std::cout ? STDOUT_FILENO : &out == &std::cerr ? STDERR_FILENO : -1;
  winsize w{};
  if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col >= 20) return w.ws_col;
#else
  (void)out;
#endif
  return 80;
}

/// Whether `out` is std::cout or std::cerr writing to a terminal.
inline bool is_terminal(const std::ostream& out) {
#if defined(__unix__) || defined(__APPLE__)
  if (&out == &std::cout) return isatty(STDOUT_FILENO) == 1;
  if (&out == &std::cerr) return isatty(STDERR_FILENO) == 1;
#else
  (void)out;
#endif
  return false;
}

/// Redraws the bar at most every `interval` (and always at the end), so a fast model does not
/// spend its time printing.
class ProgressBar {
 public:
  explicit ProgressBar(std::ostream& out, std::chrono::milliseconds interval = std::chrono::milliseconds(100))
      : out_(out), width_(terminal_width(out) - 1), interval_(interval) {}

  void update(const ProgressState& p) {
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && p.done < p.total && now - last_ < interval_) return;
    last_ = now;
    const std::string line = progress_line(p, width_);
    // Pad over a longer previous line rather than rely on an erase escape.
    out_ << '\r' << line << std::string(line.size() < shown_ ? shown_ - line.size() : 0, ' ') << std::flush;
    shown_ = line.size();
    drawn_ = true;
  }
  /// Ends the bar's line (before the epoch's summary line is written).
  void finish() {
    if (drawn_) out_ << '\n';
    drawn_ = false;
    shown_ = 0;
  }

 private:
  std::ostream& out_;
  std::size_t width_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  std::size_t shown_ = 0;
  bool drawn_ = false;
};

} // namespace detail
} // namespace cohort
