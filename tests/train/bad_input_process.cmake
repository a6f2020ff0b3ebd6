# The example trainer on bad input: a corrupted data file, a corrupted checkpoint and an unknown
# --precision (or --lr-schedule, --label-smoothing, --class-weights) each give a clear error naming what is wrong, a
# non-zero exit, and change nothing on disk.
#   cmake -DEXE=train_mnist -DWORK=dir -P bad_input_process.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/data)
# An MNIST-format directory whose training images are truncated.
file(WRITE ${WORK}/data/train-images-idx3-ubyte "")
file(WRITE ${WORK}/data/train-labels-idx1-ubyte "")
file(WRITE ${WORK}/data/t10k-images-idx3-ubyte "")
file(WRITE ${WORK}/data/t10k-labels-idx1-ubyte "")
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --epochs 1 RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "train_mnist: .*train-images-idx3-ubyte: ")
  message(FATAL_ERROR "a truncated data file was not reported clearly (exit ${rc}): ${err}")
endif()
message(STATUS "truncated data: ${err}")

# A checkpoint that is not one: --resume fails, names it, and leaves it (and --save's target) alone.
file(WRITE ${WORK}/ckpt.safetensors "not a checkpoint at all")
file(WRITE ${WORK}/out.safetensors "previous result")
execute_process(COMMAND ${EXE} --resume ${WORK}/ckpt.safetensors --save ${WORK}/out.safetensors --max-steps 1
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(READ ${WORK}/out.safetensors previous)
if(rc EQUAL 0 OR NOT err MATCHES "ckpt.safetensors: " OR NOT previous STREQUAL "previous result")
  message(FATAL_ERROR "a corrupt checkpoint was not reported cleanly (exit ${rc}, out file '${previous}'): ${err}")
endif()
message(STATUS "corrupt checkpoint: ${err}")

# A precision it does not have: a non-zero exit naming the flag, the value and the choices.
execute_process(COMMAND ${EXE} --precision fp8 --max-steps 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "--precision: fp8 not in {fp32,fp16,bf16}")
  message(FATAL_ERROR "an unknown --precision was not reported clearly (exit ${rc}): ${out}${err}")
endif()
message(STATUS "unknown precision: ${out}${err}")

# A learning-rate schedule with a misspelt key: a non-zero exit naming the spec and the key.
execute_process(COMMAND ${EXE} --lr-schedule "step,step_sise=2" --max-steps 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: learning-rate schedule \"step,step_sise=2\": unknown key \"step_sise\" for step")
  message(FATAL_ERROR "a bad --lr-schedule was not reported clearly (exit ${rc}): ${out}${err}")
endif()
message(STATUS "bad schedule: ${out}${err}")

# Bad loss options fail before the (corrupt) data is read, with the loss's message.
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --label-smoothing 1.5 --max-steps 1 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: CrossEntropyLoss: label_smoothing must be in \\[0, 1\\], found 1.5")
  message(FATAL_ERROR "a bad --label-smoothing was not reported clearly (exit ${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --class-weights 1,2,3 --max-steps 1 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: CrossEntropyLoss: expected 10 class weights \\(one per class of the scores\\), found 3")
  message(FATAL_ERROR "a wrong --class-weights count was not reported clearly (exit ${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --class-weights 1,2,x --max-steps 1 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: class weights \"1,2,x\": item 2 \\(\"x\"\\) is not a number")
  message(FATAL_ERROR "a bad --class-weights item was not reported clearly (exit ${rc}): ${out}${err}")
endif()
message(STATUS "bad loss options: ${out}${err}")

# Lookahead wraps only sgd or adam, and --tta names a known augmentation: both refused before the
# data is read, train_mnist's own message naming the flag and what it found.
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --optimizer adadelta --lookahead 5 --max-steps 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: --lookahead wraps sgd or adam, and --optimizer is adadelta")
  message(FATAL_ERROR "--lookahead around adadelta was not reported clearly (exit ${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --tta mirror --max-steps 1 RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "--tta: mirror not in {none,flip}")
  message(FATAL_ERROR "an unknown --tta was not reported clearly (exit ${rc}): ${out}${err}")
endif()
# A setting of Lookahead or EMA without the feature itself would be ignored: refused, naming both.
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --lookahead-alpha 0.8 --max-steps 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: --lookahead-alpha is Lookahead's step: it needs --lookahead K")
  message(FATAL_ERROR "--lookahead-alpha without --lookahead was not reported (exit ${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${EXE} --data-dir ${WORK}/data --model C --ema-every 4 --max-steps 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "train_mnist: --ema-every is the weight average's interval: it needs --ema DECAY")
  message(FATAL_ERROR "--ema-every without --ema was not reported (exit ${rc}): ${out}${err}")
endif()
message(STATUS "bad lookahead / tta / ema: ${out}${err}")
