#pragma once
/// \file
/// The xtensor headers cohort uses, wherever the installed xtensor keeps them: 0.24/0.25 have a
/// flat layout (xtensor/xadapt.hpp), 0.26 moved them into subfolders.

#if __has_include(<xtensor/containers/xadapt.hpp>)
#include <xtensor/containers/xadapt.hpp>
#else
#include <xtensor/xadapt.hpp>
#endif
