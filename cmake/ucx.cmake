# dsinfer::ucx: UCX's UCP (the KV transfer of prefill/decode disaggregation, src/transfer/), from the
# pinned PyPI wheel tools/setup_ucx.sh unpacks into .deps/ucx-VERSION. The version is read from that
# script, so it is written in one place. DSINFER_UCX_DIR points elsewhere (a prefix with
# include/ucp/api/ucp.h and lib/libucp.so, such as a system UCX built with verbs for RDMA).
file(STRINGS ${PROJECT_SOURCE_DIR}/tools/setup_ucx.sh dsinfer_ucx_version_line REGEX "^UCX_VERSION=")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/setup_ucx.sh)
string(REGEX REPLACE "^UCX_VERSION=" "" DSINFER_UCX_VERSION "${dsinfer_ucx_version_line}")
set(DSINFER_UCX_DIR "" CACHE PATH "UCX prefix (empty: .deps/ucx-VERSION)")
set(dsinfer_ucx_dir ${DSINFER_UCX_DIR})
if(NOT dsinfer_ucx_dir)  # follows a version bump in the script, unlike a cached default
  set(dsinfer_ucx_dir ${PROJECT_SOURCE_DIR}/.deps/ucx-${DSINFER_UCX_VERSION})
endif()
if(NOT EXISTS ${dsinfer_ucx_dir}/include/ucp/api/ucp.h OR NOT EXISTS ${dsinfer_ucx_dir}/lib/libucp.so)
  message(FATAL_ERROR "UCX ${DSINFER_UCX_VERSION} is not in ${dsinfer_ucx_dir}: "
                      "run tools/setup_ucx.sh (or make deps), then configure again")
endif()
foreach(lib ucp ucs)
  add_library(dsinfer::ucx_${lib} SHARED IMPORTED GLOBAL)
  set_target_properties(dsinfer::ucx_${lib} PROPERTIES
    IMPORTED_LOCATION ${dsinfer_ucx_dir}/lib/lib${lib}.so
    INTERFACE_INCLUDE_DIRECTORIES ${dsinfer_ucx_dir}/include)
endforeach()
add_library(dsinfer::ucx INTERFACE IMPORTED GLOBAL)
# The binaries find the libraries where they were built against (an rpath of the build tree).
set_target_properties(dsinfer::ucx PROPERTIES
  INTERFACE_LINK_LIBRARIES "dsinfer::ucx_ucp;dsinfer::ucx_ucs"
  INTERFACE_LINK_OPTIONS "-Wl,-rpath,${dsinfer_ucx_dir}/lib")
message(STATUS "UCX ${DSINFER_UCX_VERSION}: ${dsinfer_ucx_dir}")
