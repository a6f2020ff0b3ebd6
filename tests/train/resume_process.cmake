# Exact resume across processes with the example trainer: N steps straight must produce the same
# checkpoint, byte for byte, as N/2 steps, save, a new process that loads it, and N/2 more.
# --max-steps is absolute, so a resume that loaded nothing would train N steps from the same seed
# and match: the resuming process is given another --seed (the checkpoint restores it), and must
# report the checkpoint's position.
#   cmake -DEXE=train_mnist -DWORK=dir -DMODEL=A [-DEXTRA="--ema;0.9"] -P resume_process.cmake
# EXTRA: more train_mnist options for every run (a weight average: its tensors are in the file).
if(NOT EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  message("SKIP: Debian's dataset-fashion-mnist is not installed")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(common --model ${MODEL} --batch-size 32 --epochs 1 --log-interval 0 --eval-batch-size 2000 ${EXTRA})
function(run)
  execute_process(COMMAND ${EXE} ${common} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "train_mnist ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()
run(--max-steps 16 --seed 3 --save ${WORK}/straight.safetensors)
run(--max-steps 8 --seed 3 --save ${WORK}/half.safetensors)
run(--max-steps 16 --seed 4 --resume ${WORK}/half.safetensors --save ${WORK}/resumed.safetensors)
# 8 batches of 32 are the middle of the first epoch.
set(expected "resumed from ${WORK}/half.safetensors at epoch 0, step 8\n")
string(FIND "${run_output}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "model ${MODEL}: the resuming process did not report \"${expected}\":\n${run_output}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/straight.safetensors ${WORK}/resumed.safetensors
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(FATAL_ERROR "model ${MODEL}: the resumed run's checkpoint differs from the straight run's")
endif()
if(EXTRA MATCHES "--ema")
  # The JSON header (after the 8-byte length, which holds NUL bytes) names every tensor.
  file(STRINGS ${WORK}/resumed.safetensors named REGEX "\"ema\\.0\\.weight\"" LIMIT_INPUT 65536)
  if(NOT named)
    message(FATAL_ERROR "model ${MODEL}: --ema, but the checkpoint holds no ema.* tensor")
  endif()
endif()
message(STATUS "model ${MODEL}: straight and resumed checkpoints are identical")
