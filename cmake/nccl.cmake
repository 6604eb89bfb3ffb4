# dsinfer::nccl: NCCL for the GPU communicator (src/parallel/nccl_communicator.h), found without any
# download. Include this only where CUDA is enabled. Looks, in this order, for nccl.h and libnccl
# side by side in
#   1. DSINFER_NCCL_ROOT (include/ and lib/ under it), when set;
#   2. the CUDA toolkit's include and library directories (where a toolkit bundles NCCL);
#   3. the nvidia-nccl-cu13 (or -cu12) wheel of the python3 on PATH: nvidia/nccl/{include,lib}.
# A header and a library are taken from the same place, so that they are one NCCL version. When none
# has both, says so and defines no target: the build goes on without the NCCL communicator.
set(DSINFER_NCCL_ROOT "" CACHE PATH
    "NCCL prefix with include/nccl.h and lib/libnccl.so* (empty: look beside CUDA, then in the pip wheel)")

find_package(CUDAToolkit REQUIRED)

# Each place is "include dir|library dir".
set(dsinfer_nccl_places)
if(DSINFER_NCCL_ROOT)
  list(APPEND dsinfer_nccl_places "${DSINFER_NCCL_ROOT}/include|${DSINFER_NCCL_ROOT}/lib")
endif()
foreach(dsinfer_include_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  list(APPEND dsinfer_nccl_places "${dsinfer_include_dir}|${CUDAToolkit_LIBRARY_DIR}")
endforeach()
execute_process(
  COMMAND python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])"
  OUTPUT_VARIABLE dsinfer_nccl_wheel_dir
  RESULT_VARIABLE dsinfer_nccl_wheel_status
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(dsinfer_nccl_wheel_status EQUAL 0 AND dsinfer_nccl_wheel_dir)
  list(APPEND dsinfer_nccl_places "${dsinfer_nccl_wheel_dir}/include|${dsinfer_nccl_wheel_dir}/lib")
endif()

set(dsinfer_nccl_include_dir "")
set(dsinfer_nccl_library "")
foreach(dsinfer_place IN LISTS dsinfer_nccl_places)
  string(REPLACE "|" ";" dsinfer_place "${dsinfer_place}")
  list(GET dsinfer_place 0 dsinfer_include_dir)
  list(GET dsinfer_place 1 dsinfer_lib_dir)
  if(NOT EXISTS "${dsinfer_include_dir}/nccl.h")
    continue()
  endif()
  # The wheel ships libnccl.so.2 alone, without the unversioned link.
  foreach(dsinfer_name libnccl.so libnccl.so.2)
    if(EXISTS "${dsinfer_lib_dir}/${dsinfer_name}")
      set(dsinfer_nccl_include_dir "${dsinfer_include_dir}")
      set(dsinfer_nccl_library "${dsinfer_lib_dir}/${dsinfer_name}")
      break()
    endif()
  endforeach()
  if(dsinfer_nccl_library)
    break()
  endif()
endforeach()

if(dsinfer_nccl_library)
  file(STRINGS "${dsinfer_nccl_include_dir}/nccl.h" dsinfer_nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE "[^0-9;]" "" dsinfer_nccl_version "${dsinfer_nccl_version_lines}")
  string(REPLACE ";" "." dsinfer_nccl_version "${dsinfer_nccl_version}")
  add_library(dsinfer::nccl SHARED IMPORTED GLOBAL)
  set_target_properties(dsinfer::nccl PROPERTIES
    IMPORTED_LOCATION "${dsinfer_nccl_library}"
    INTERFACE_INCLUDE_DIRECTORIES "${dsinfer_nccl_include_dir}")
  message(STATUS "NCCL ${dsinfer_nccl_version}: ${dsinfer_nccl_library} (header in ${dsinfer_nccl_include_dir})")
else()
  string(REPLACE "|" " with " dsinfer_nccl_looked "${dsinfer_nccl_places}")
  string(REPLACE ";" "; " dsinfer_nccl_looked "${dsinfer_nccl_looked}")
  set(dsinfer_nccl_wheel_dir_shown "${dsinfer_nccl_wheel_dir}")
  if(NOT dsinfer_nccl_wheel_dir_shown)
    set(dsinfer_nccl_wheel_dir_shown "none")
  endif()
  message(STATUS "NCCL not found (looked for nccl.h and libnccl.so* in: ${dsinfer_nccl_looked}; python3's "
                 "nvidia.nccl wheel: ${dsinfer_nccl_wheel_dir_shown}): building without the NCCL communicator, "
                 "so several cuda ranks cannot run. Set DSINFER_NCCL_ROOT or pip install nvidia-nccl-cu13.")
endif()
