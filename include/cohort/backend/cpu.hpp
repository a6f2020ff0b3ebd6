#pragma once
/// \file
/// The CPU backend: every op family of backend/ops.hpp for host memory.
///
///     #include <cohort/backend/cpu.hpp>   // included by cohort/cohort.hpp

#include "cohort/backend/cpu/activation.hpp"
#include "cohort/backend/cpu/batch_norm.hpp"
#include "cohort/backend/cpu/compiled_kernels.hpp"
#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/conv2d.hpp"
#include "cohort/backend/cpu/conv_transpose2d.hpp"
#include "cohort/backend/cpu/depthwise_conv2d.hpp"
#include "cohort/backend/cpu/elementwise.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/group_norm.hpp"
#include "cohort/backend/cpu/linear.hpp"
#include "cohort/backend/cpu/pool.hpp"
#include "cohort/backend/cpu/softmax.hpp"
#include "cohort/backend/cpu/upsample.hpp"
