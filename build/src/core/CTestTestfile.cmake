# CMake generated Testfile for 
# Source directory: /work/main/src/core
# Build directory: /work/main/build/src/core
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[core_test]=] "/work/main/build/src/core/core_test")
set_tests_properties([=[core_test]=] PROPERTIES  ENVIRONMENT "DSINFER_SOURCE_DIR=/work/main" LABELS "unit;sanitize" _BACKTRACE_TRIPLES "/work/main/CMakeLists.txt;57;add_test;/work/main/src/core/CMakeLists.txt;6;dsinfer_test;/work/main/src/core/CMakeLists.txt;0;")
