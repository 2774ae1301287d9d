# Steps over an ExecuTorch tree that ExecuTorch's own CMake build would do, but
# without its submodules or downloads: the tree's build variables, its schema
# headers (flatc), and its kernel registration codegen (run offline).

# This file's folder: the functions below run from other projects' folders too
# (kernels/codegen), where CMAKE_CURRENT_SOURCE_DIR is not kernels/.
set(_cortexm_cmake_dir "${CMAKE_CURRENT_LIST_DIR}")

# ExecuTorch's headers include <executorch/...>: give the tree that name in the
# build folder, whatever the folder it was checked out to is called.
set(_include_root "${CMAKE_BINARY_DIR}/include")
file(MAKE_DIRECTORY "${_include_root}")
file(CREATE_LINK "${EXECUTORCH_SRC}" "${_include_root}/executorch" SYMBOLIC)
set(_schema_root "${CMAKE_BINARY_DIR}/schema/include")
set(EXECUTORCH_INCLUDE_DIRS "${_include_root}" "${_schema_root}")

# Runs in the tree root, as ExecuTorch's CMake does, without writing __pycache__ there.
set(_python_in_tree ${CMAKE_COMMAND} -E env PYTHONDONTWRITEBYTECODE=1 "${Python3_EXECUTABLE}")

# Sets CORTEXM_CORE_SRCS, CORTEXM_PRIM_OPS_SRCS, CORTEXM_KERNEL_UTIL_SRCS,
# CORTEXM_PORTABLE_OP_SRCS and CORTEXM_ROOT_OPS for the operators `ops`.
function(executorch_select_kernels ops)
  set(_script "${_cortexm_cmake_dir}/select_kernels.py")
  set(_out "${CMAKE_BINARY_DIR}/selected_kernels.cmake")
  execute_process(
    COMMAND ${_python_in_tree} "${_script}" "${EXECUTORCH_SRC}" "${_out}" ${ops}
    RESULT_VARIABLE _result
    ERROR_VARIABLE _error
  )
  if(NOT _result EQUAL 0)
    message(FATAL_ERROR "${_error}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    "${_script}" "${EXECUTORCH_SRC}/shim_et/xplat/executorch/build/build_variables.bzl")
  include("${_out}")
  foreach(_name CORTEXM_CORE_SRCS CORTEXM_PRIM_OPS_SRCS CORTEXM_KERNEL_UTIL_SRCS CORTEXM_PORTABLE_OP_SRCS CORTEXM_ROOT_OPS)
    set(${_name} "${${_name}}" PARENT_SCOPE)
  endforeach()
endfunction()

# The program schema headers (executorch/schema/*_generated.h), made by flatc.
function(executorch_program_schema target)
  set(_out "${_schema_root}/executorch/schema")
  set(_schemas "${EXECUTORCH_SRC}/schema/program.fbs" "${EXECUTORCH_SRC}/schema/scalar_type.fbs")
  add_custom_command(
    OUTPUT "${_out}/program_generated.h" "${_out}/scalar_type_generated.h"
    COMMAND "${FLATC_EXECUTABLE}" --cpp --cpp-std c++11 --gen-mutable --scoped-enums -o "${_out}" ${_schemas}
    DEPENDS ${_schemas}
    COMMENT "Generating the program schema headers with flatc"
    VERBATIM
  )
  add_custom_target(${target} DEPENDS "${_out}/program_generated.h" "${_out}/scalar_type_generated.h")
endfunction()

# ExecuTorch's codegen (codegen.tools.gen_oplist, codegen.gen) registers exactly
# `root_ops` (comma-separated) from the portable and cortex_m schemas; sets
# CORTEXM_REGISTRATION_SRCS / _DIR and CORTEXM_KERNEL_NUM_INCLUDE_DIR.
function(executorch_kernel_registration root_ops)
  set(_out "${CMAKE_BINARY_DIR}/registration")
  set(_oplist "${_out}/selected_operators.yaml")
  set(_registration "${_out}/RegisterCodegenUnboxedKernelsEverything.cpp")
  set(_kernel_num_root "${CMAKE_BINARY_DIR}/kernel_num")
  set(_kernel_num "${_kernel_num_root}/executorch/runtime/kernel/selected_max_kernel_num.h")
  set(_portable_yaml "${EXECUTORCH_SRC}/kernels/portable/functions.yaml")
  set(_cortex_m_yaml "${EXECUTORCH_SRC}/backends/cortex_m/ops/operators.yaml")
  set(_prim_ops "${EXECUTORCH_SRC}/kernels/prim_ops/register_prim_ops.cpp")
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c "import os, torchgen; print(os.path.dirname(torchgen.__file__))"
    OUTPUT_VARIABLE _torchgen OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _result
  )
  if(NOT _result EQUAL 0)
    message(FATAL_ERROR "${Python3_EXECUTABLE} has no torchgen (install torch): ExecuTorch's codegen needs it")
  endif()
  file(MAKE_DIRECTORY "${_out}")
  add_custom_command(
    OUTPUT "${_oplist}"
    COMMAND ${_python_in_tree} -m codegen.tools.gen_oplist "--output_path=${_oplist}" "--root_ops=${root_ops}"
    WORKING_DIRECTORY "${EXECUTORCH_SRC}"
    COMMENT "Selecting the operators to register"
    VERBATIM
  )
  add_custom_command(
    OUTPUT "${_registration}" "${_out}/NativeFunctions.h"
    COMMAND ${_python_in_tree} -m codegen.gen
      "--source-path=${EXECUTORCH_SRC}/codegen"
      "--install-dir=${_out}"
      "--tags-path=${_torchgen}/packaged/ATen/native/tags.yaml"
      "--aten-yaml-path=${_torchgen}/packaged/ATen/native/native_functions.yaml"
      "--op-selection-yaml-path=${_oplist}"
      "--functions-yaml-path=${_portable_yaml}"
      "--custom-ops-yaml-path=${_cortex_m_yaml}"
    DEPENDS "${_oplist}" "${_portable_yaml}" "${_cortex_m_yaml}"
    WORKING_DIRECTORY "${EXECUTORCH_SRC}"
    COMMENT "Generating kernel registration (ExecuTorch codegen)"
    VERBATIM
  )
  set(_outputs "${_registration}")
  set(_kernel_num_dir "")
  # Older trees have no gen_max_kernel_num: the registry then keeps its default size.
  if(EXISTS "${EXECUTORCH_SRC}/codegen/tools/gen_max_kernel_num.py")
    add_custom_command(
      OUTPUT "${_kernel_num}"
      COMMAND ${_python_in_tree} -m codegen.tools.gen_max_kernel_num
        "--oplist-yaml=${_oplist}" "--prim-ops-source=${_prim_ops}" "--output-path=${_kernel_num}"
      DEPENDS "${_oplist}" "${_prim_ops}"
      WORKING_DIRECTORY "${EXECUTORCH_SRC}"
      COMMENT "Sizing the kernel registry"
      VERBATIM
    )
    list(APPEND _outputs "${_kernel_num}")
    set(_kernel_num_dir "${_kernel_num_root}")
  endif()
  add_custom_target(kernel_registration_sources DEPENDS ${_outputs})
  set(CORTEXM_REGISTRATION_SRCS "${_registration}" PARENT_SCOPE)
  set(CORTEXM_REGISTRATION_DIR "${_out}" PARENT_SCOPE)
  set(CORTEXM_KERNEL_NUM_INCLUDE_DIR "${_kernel_num_dir}" PARENT_SCOPE)
endfunction()
