# Build helpers, in the manner of Abseil's absl_cc_library:
#
#   granary_cc_library(NAME core SRCS a.cc HDRS a.h DEPS absl::status)
#     -> target granary_core, alias granary::core
#   granary_cc_test(NAME task_test SRCS task_test.cc DEPS granary::core)
#     -> gtest binary registered with ctest (granary_add_test)
#   granary_add_test(NAME t COMMAND /usr/bin/python3 t.py [TIMEOUT s] [LABELS l])
#     -> any other test, run by scripts/test-launcher.sh
#   granary_cc_binary(NAME granary-bench SRCS main.cc DEPS ...)
#   granary_grain_library(NAME counter_grains PROTOS counter.proto [DEPS ...])
#     -> cmake/granary_grain_library.cmake

set(GRANARY_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)

function(granary_cc_library)
  cmake_parse_arguments(G "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  set(target granary_${G_NAME})
  # Installed (cmake/sdk.cmake), the headers are under include/granary.
  set(includes $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}> $<INSTALL_INTERFACE:include/granary>)
  if(G_SRCS)
    add_library(${target} STATIC ${G_SRCS} ${G_HDRS})
    target_compile_options(${target} PRIVATE ${GRANARY_WARNINGS})
    target_include_directories(${target} PUBLIC ${includes})
    target_link_libraries(${target} PUBLIC ${G_DEPS})
    # Its users (installed: a user's project) compile as C++20 too.
    target_compile_features(${target} PUBLIC cxx_std_20)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${includes})
    target_link_libraries(${target} INTERFACE ${G_DEPS})
    target_compile_features(${target} INTERFACE cxx_std_20)
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${G_NAME})
  add_library(granary::${G_NAME} ALIAS ${target})
endfunction()

function(granary_cc_test)
  cmake_parse_arguments(G "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${G_NAME} ${G_SRCS})
  target_compile_options(${G_NAME} PRIVATE ${GRANARY_WARNINGS})
  target_include_directories(${G_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${G_NAME} PRIVATE ${G_DEPS} GTest::gmock GTest::gtest_main)
  set_target_properties(${G_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 300)
  endif()
  granary_add_test(NAME ${G_NAME} COMMAND $<TARGET_FILE:${G_NAME}>
    TIMEOUT ${G_TIMEOUT} LABELS ${G_LABELS})
endfunction()

# Registers a test with CTest through scripts/test-launcher.sh, which gives
# it a temporary directory of its own (removed afterwards), reaps whatever
# it left running, and reports a GoogleTest binary that skipped every test
# as skipped (exit 77):
#   granary_add_test(NAME t COMMAND /usr/bin/python3 t.py ARGS...
#                    [TIMEOUT s] [LABELS a b])
# (The command passes through a CMake list: an argument with an unbalanced
# square bracket would merge with its neighbours.)
function(granary_add_test)
  cmake_parse_arguments(G "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${G_NAME}
    COMMAND /bin/bash ${CMAKE_SOURCE_DIR}/scripts/test-launcher.sh ${G_COMMAND})
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 300)
  endif()
  set_tests_properties(${G_NAME} PROPERTIES TIMEOUT ${G_TIMEOUT}
    SKIP_RETURN_CODE 77)
  if(G_LABELS)
    set_tests_properties(${G_NAME} PROPERTIES LABELS "${G_LABELS}")
  endif()
endfunction()

function(granary_cc_binary)
  cmake_parse_arguments(G "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${G_NAME} ${G_SRCS})
  target_compile_options(${G_NAME} PRIVATE ${GRANARY_WARNINGS})
  target_include_directories(${G_NAME} PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(${G_NAME} PRIVATE ${G_DEPS} ${GRANARY_MALLOC_LIBS})
endfunction()

# granary_grain_library(): cmake/granary_grain_library.cmake, the same file
# the installed package gives its users.
set(GRANARY_PROTOC_GEN_TARGET protoc-gen-granary)
set(GRANARY_PROTO_DIR ${CMAKE_SOURCE_DIR}/proto)
set(GRANARY_GEN_DIR ${CMAKE_BINARY_DIR}/gen)
include(${CMAKE_CURRENT_LIST_DIR}/granary_grain_library.cmake)

# Generates the C++ messages (and, with GRPC, the gRPC stubs) of one plain
# protobuf file into the build tree and builds them as library NAME.
#   granary_proto_library(NAME granary_v1_proto PROTO granary/v1/gateway.proto
#                         ROOT ${CMAKE_CURRENT_SOURCE_DIR} GRPC)
# PROTO is relative to ROOT (the protoc -I directory, default the source
# root), and so is the generated header: "granary/v1/gateway.pb.h".
function(granary_proto_library)
  cmake_parse_arguments(G "GRPC" "NAME;PROTO;ROOT" "DEPS" ${ARGN})
  if(NOT G_ROOT)
    set(G_ROOT ${CMAKE_SOURCE_DIR})
  endif()
  set(gen ${CMAKE_BINARY_DIR}/gen)
  string(REGEX REPLACE "\\.proto$" "" stem ${G_PROTO})
  set(outs ${gen}/${stem}.pb.cc ${gen}/${stem}.pb.h)
  set(srcs ${gen}/${stem}.pb.cc)
  set(grpc_args)
  if(G_GRPC)
    list(APPEND outs ${gen}/${stem}.grpc.pb.cc ${gen}/${stem}.grpc.pb.h)
    list(APPEND srcs ${gen}/${stem}.grpc.pb.cc)
    set(grpc_args --grpc_out=${gen} --plugin=protoc-gen-grpc=${GRANARY_GRPC_CPP_PLUGIN})
  endif()
  add_custom_command(
    OUTPUT ${outs}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}
    COMMAND protobuf::protoc -I ${G_ROOT} --cpp_out=${gen} ${grpc_args}
            ${G_ROOT}/${G_PROTO}
    DEPENDS ${G_ROOT}/${G_PROTO}
    COMMENT "Generating ${stem}.pb.cc"
    VERBATIM)
  add_library(${G_NAME} STATIC ${srcs})
  target_include_directories(${G_NAME} PUBLIC $<BUILD_INTERFACE:${gen}>
                             $<INSTALL_INTERFACE:include/granary>)
  string(REGEX REPLACE "^granary_" "" export_name ${G_NAME})
  set_target_properties(${G_NAME} PROPERTIES EXPORT_NAME ${export_name})
  target_compile_options(${G_NAME} PRIVATE -w)
  target_link_libraries(${G_NAME} PUBLIC protobuf::libprotobuf ${G_DEPS})
  if(G_GRPC)
    target_link_libraries(${G_NAME} PUBLIC gRPC::grpc++)
  endif()
endfunction()

# Adds LABEL (unit, integration or process) to tests defined in the calling
# directory:
#   granary_label_tests(unit core_test)
# unit: one component, no server; integration: components together in one
# process (in-process gRPC servers on port 0); process: real binaries.
# `make test-unit` runs the first kind alone.
function(granary_label_tests label)
  foreach(test ${ARGN})
    set_property(TEST ${test} APPEND PROPERTY LABELS ${label})
  endforeach()
endfunction()
