# granary_grain_library(): grain code generated from .proto files, in
# Granary's own build and, installed with granary-dev, in yours
# (find_package(granary CONFIG REQUIRED) includes this file):
#
#   granary_grain_library(NAME my_grains PROTOS my.proto [more.proto ...]
#                         [SRCS my_grain.cc ...] [DEPS target ...]
#                         [LOADABLE] [PROTO_ROOT dir] [BASELINE dir])
#
# runs protoc with the C++, gRPC and Granary generators over PROTOS (paths
# relative to the current source directory). Generated files mirror the
# protos' paths below PROTO_ROOT (default: the project's source directory),
# so my.proto at the project's root is included as "my.pb.h", "my.granary.h"
# (references) and "my.grain.h" (grain base classes). Protos may import
# "granary/options.proto".
#
# With BASELINE, a directory holding the previous release's protos at the
# same paths below it as below PROTO_ROOT (a copy, or a git worktree of the
# release), generation first checks each proto's grain interfaces against
# its previous release and fails the build naming each breaking change
# (protoc-gen-granary's baseline=DIR; docs/upgrades.md). A proto the
# baseline lacks is new, so compatible. The directory's path may hold no
# comma.
#
# Without LOADABLE, two static libraries:
#   my_grains       messages, gRPC stubs and grain references: what a client
#                   needs (links granary::core)
#   my_grains_impl  the grain base classes and SRCS: what a silo needs
#                   (links granary::silo)
# With LOADABLE, one shared module, libmy_grains.so, holding all of it and
# SRCS, for granary-silo --grain_library. It is compiled against the headers
# alone (granary::grain_library_api): the runtime it calls is the loading
# silo's. One of SRCS declares GRANARY_GRAIN_LIBRARY (silo/grain_library.h).
#
# Set before this file is included:
#   GRANARY_PROTOC_GEN_TARGET  the protoc-gen-granary executable target
#   GRANARY_PROTO_DIR          where granary/options.proto is
#   GRANARY_GEN_DIR            where generated files go

find_program(GRANARY_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(granary_grain_library)
  cmake_parse_arguments(G "LOADABLE" "NAME;PROTO_ROOT;BASELINE" "PROTOS;SRCS;DEPS" ${ARGN})
  if(NOT G_NAME OR NOT G_PROTOS)
    message(FATAL_ERROR "granary_grain_library: NAME and PROTOS are required")
  endif()
  if(NOT G_PROTO_ROOT)
    set(G_PROTO_ROOT ${PROJECT_SOURCE_DIR})
  endif()
  get_filename_component(G_PROTO_ROOT ${G_PROTO_ROOT} ABSOLUTE)
  set(baseline_args)
  if(G_BASELINE)
    get_filename_component(G_BASELINE ${G_BASELINE} ABSOLUTE)
    if(NOT IS_DIRECTORY ${G_BASELINE})
      message(FATAL_ERROR "granary_grain_library: BASELINE ${G_BASELINE} is not a directory")
    endif()
    if(G_BASELINE MATCHES ",")
      message(FATAL_ERROR "granary_grain_library: BASELINE ${G_BASELINE} holds a comma")
    endif()
    set(baseline_args --granary_opt=baseline=${G_BASELINE})
  endif()
  set(out_root ${GRANARY_GEN_DIR})
  set(plugin $<TARGET_FILE:${GRANARY_PROTOC_GEN_TARGET}>)
  set(msg_srcs)
  set(impl_srcs)
  foreach(proto ${G_PROTOS})
    get_filename_component(abs ${proto} ABSOLUTE)
    file(RELATIVE_PATH rel ${G_PROTO_ROOT} ${abs})
    if(rel MATCHES "^\\.\\./")
      message(FATAL_ERROR "granary_grain_library: ${proto} is not under PROTO_ROOT ${G_PROTO_ROOT}")
    endif()
    string(REGEX REPLACE "\\.proto$" "" base ${out_root}/${rel})
    set(outs ${base}.pb.cc ${base}.pb.h ${base}.grpc.pb.cc ${base}.grpc.pb.h
             ${base}.granary.cc ${base}.granary.h ${base}.grain.cc ${base}.grain.h)
    # A proto in two libraries (a static one and a LOADABLE one) is
    # generated once.
    string(MAKE_C_IDENTIFIER "${base}" generated_key)
    get_property(generated GLOBAL PROPERTY _granary_generated_${generated_key})
    set_property(GLOBAL PROPERTY _granary_generated_${generated_key} TRUE)
    if(generated)
      list(APPEND msg_srcs ${base}.pb.cc ${base}.grpc.pb.cc ${base}.granary.cc)
      list(APPEND impl_srcs ${base}.grain.cc)
      continue()
    endif()
    set(baseline_deps)
    if(G_BASELINE AND EXISTS ${G_BASELINE}/${rel})
      set(baseline_deps ${G_BASELINE}/${rel})
    endif()
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out_root}
      COMMAND protobuf::protoc
        -I ${G_PROTO_ROOT} -I ${GRANARY_PROTO_DIR}
        --cpp_out=${out_root}
        --grpc_out=${out_root} --plugin=protoc-gen-grpc=${GRANARY_GRPC_CPP_PLUGIN}
        --granary_out=${out_root} --plugin=protoc-gen-granary=${plugin}
        ${baseline_args}
        ${abs}
      DEPENDS ${abs} ${plugin} ${GRANARY_PROTO_DIR}/granary/options.proto
              ${baseline_deps}
      COMMENT "Generating grain code for ${rel}"
      VERBATIM)
    list(APPEND msg_srcs ${base}.pb.cc ${base}.grpc.pb.cc ${base}.granary.cc)
    list(APPEND impl_srcs ${base}.grain.cc)
  endforeach()
  set_source_files_properties(${msg_srcs} ${impl_srcs} PROPERTIES COMPILE_OPTIONS -w)
  if(G_LOADABLE)
    add_library(${G_NAME} MODULE ${msg_srcs} ${impl_srcs} ${G_SRCS})
    target_include_directories(${G_NAME} PRIVATE ${out_root})
    target_link_libraries(${G_NAME} PRIVATE granary::grain_library_api ${G_DEPS})
    if(TARGET granary_options_proto)  # in Granary's own build
      add_dependencies(${G_NAME} granary_options_proto granary_cluster_proto)
    endif()
    return()
  endif()
  add_library(${G_NAME} STATIC ${msg_srcs})
  target_include_directories(${G_NAME} PUBLIC $<BUILD_INTERFACE:${out_root}>)
  target_link_libraries(${G_NAME} PUBLIC granary::core granary::options_proto
                        protobuf::libprotobuf gRPC::grpc++ ${G_DEPS})
  add_library(${G_NAME}_impl STATIC ${impl_srcs} ${G_SRCS})
  target_link_libraries(${G_NAME}_impl PUBLIC ${G_NAME} granary::silo)
endfunction()

# granary_silo_loads_grain_libraries(TARGET): a silo executable (linking
# granary::silo) that can load grain libraries (--grain_library). It exports
# its symbols and holds Granary's archives whole, not only what its own code
# uses, so a library finds every runtime symbol it calls. granary-silo is
# linked so; a silo without it refuses --grain_library at start.
function(granary_silo_loads_grain_libraries target)
  set_target_properties(${target} PROPERTIES ENABLE_EXPORTS ON)
  set(archives)
  foreach(lib core rpc directory storage storage_postgres silo_runtime silo_gateway
              silo_cluster silo_admin silo options_proto v1_proto cluster_proto
              reminders_proto admin_proto)
    list(APPEND archives $<TARGET_FILE:granary::${lib}>)
  endforeach()
  target_link_options(${target} PRIVATE
    "LINKER:--whole-archive" ${archives} "LINKER:--no-whole-archive")
endfunction()
