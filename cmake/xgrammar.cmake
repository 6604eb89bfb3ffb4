# dsinfer::xgrammar: xgrammar's C++ core (structured output), built from its pinned PyPI sdist by
# tools/setup_xgrammar.sh into .deps/xgrammar-VERSION/install. The version is read from that
# script, so it is written in one place. DSINFER_XGRAMMAR_DIR points elsewhere (an install prefix
# with lib/libxgrammar.a and include/xgrammar).
file(STRINGS ${PROJECT_SOURCE_DIR}/tools/setup_xgrammar.sh dsinfer_xgrammar_version_line
     REGEX "^XGRAMMAR_VERSION=")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/setup_xgrammar.sh)
string(REGEX REPLACE "^XGRAMMAR_VERSION=" "" DSINFER_XGRAMMAR_VERSION "${dsinfer_xgrammar_version_line}")
set(DSINFER_XGRAMMAR_DIR "" CACHE PATH "xgrammar install prefix (empty: .deps/xgrammar-VERSION/install)")
set(dsinfer_xgrammar_dir ${DSINFER_XGRAMMAR_DIR})
if(NOT dsinfer_xgrammar_dir)  # follows a version bump in the script, unlike a cached default
  set(dsinfer_xgrammar_dir ${PROJECT_SOURCE_DIR}/.deps/xgrammar-${DSINFER_XGRAMMAR_VERSION}/install)
endif()

set(dsinfer_xgrammar_library ${dsinfer_xgrammar_dir}/lib/libxgrammar.a)
if(NOT EXISTS ${dsinfer_xgrammar_library} OR NOT EXISTS ${dsinfer_xgrammar_dir}/include/xgrammar/xgrammar.h)
  message(FATAL_ERROR "xgrammar ${DSINFER_XGRAMMAR_VERSION} is not built in ${dsinfer_xgrammar_dir}: "
                      "run tools/setup_xgrammar.sh (or make deps), then configure again")
endif()

add_library(dsinfer::xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(dsinfer::xgrammar PROPERTIES
  IMPORTED_LOCATION ${dsinfer_xgrammar_library}
  INTERFACE_INCLUDE_DIRECTORIES ${dsinfer_xgrammar_dir}/include  # xgrammar/ and dlpack/
  INTERFACE_LINK_LIBRARIES Threads::Threads)
message(STATUS "xgrammar ${DSINFER_XGRAMMAR_VERSION}: ${dsinfer_xgrammar_library}")
