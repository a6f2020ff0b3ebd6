// The one doctest main shared by every test file.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // A Trainer sizes the CPU pool to every core by default (TrainerOptions::threads = 0), and
  // ctest runs test processes side by side: each keeps one thread unless a case asks for more
  // or the environment already says otherwise. (Cases that test the default unset it.)
  setenv("COHORT_NUM_THREADS", "1", /*overwrite=*/0);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
