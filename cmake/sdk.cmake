# The SDK (CPack component `dev`, the granary-dev package): what a team
# needs to build grains, silos and clients of its own against an installed
# Granary (docs/sdk.md):
#
#   include/granary/...            the public headers and those they include
#   lib/granary/libgranary_*.a     static libraries
#   bin/protoc-gen-granary         the protoc plugin behind granary_grain_library
#   share/granary/proto/granary/   options.proto and the granary.v1 protos
#   lib/cmake/granary/             the CMake package: find_package(granary)
#
# Static libraries: a silo or client built on them is one binary that needs
# only Debian's shared libraries (the runtime package's own Depends), and
# Granary's hot paths keep their calls direct. A grain library for the
# packaged silo (granary_grain_library(... LOADABLE)) links none of them: it
# calls the runtime of the silo that loads it, which exports its symbols.

# The public API: what a user's code includes. Nothing else is promised.
set(GRANARY_PUBLIC_HEADERS
  client/client.h
  core/call.h core/cancel.h core/clock.h core/grain_id.h core/grain_interface.h
  core/request_context.h core/status.h core/stream.h core/task.h core/version.h
  silo/grain_library.h silo/silo_flags.h silo/silo_host.h
  silo/silo_host_option_table.h silo/silo_host_options.h
  silo/gateway/grpc_bridge.h
  silo/runtime/call_filter.h silo/runtime/grain.h silo/runtime/runtime.h
  silo/runtime/runtime_option_table.h
  testing/in_process_cluster.h testing/wait.h)
# Installed only because public headers include them: internals that may
# change in any release. sdk_headers_test checks that the two lists are
# exactly what the public headers include, no more and no less.
set(GRANARY_SUPPORT_HEADERS
  core/frame_pool.h core/labels.h core/member.h core/memory_budget.h core/metrics.h
  core/mpsc_queue.h core/sleeper.h core/sync.h core/timer_queue.h
  directory/directory_transport.h directory/grain_directory.h
  directory/hash_ring.h directory/local_grain_directory.h
  directory/lookup_cache.h directory/partition.h
  rpc/gateway_options.h rpc/limits.h rpc/security.h
  silo/cluster/membership_agent.h silo/cluster/routing/cluster_router.h
  silo/cluster/routing/placement.h silo/cluster/transport.h
  silo/runtime/activation.h silo/runtime/catalog.h silo/runtime/mailbox.h
  silo/runtime/runtime_internals.h silo/runtime/scheduler.h
  silo/runtime/silo_metrics.h silo/silo_environment.h
  storage/grain_storage.h storage/membership_table.h storage/reminder_table.h
  testing/loopback_transport.h)
# Generated from proto/ (build tree: gen/).
set(GRANARY_GENERATED_HEADERS
  granary/options.pb.h granary/v1/cluster.pb.h granary/v1/cluster.grpc.pb.h)
set(GRANARY_PROTOS
  granary/options.proto granary/v1/admin.proto granary/v1/cluster.proto
  granary/v1/gateway.proto granary/v1/reminders.proto)

foreach(h ${GRANARY_PUBLIC_HEADERS} ${GRANARY_SUPPORT_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/${h} DESTINATION include/granary/${dir}
          COMPONENT dev)
endforeach()
foreach(h ${GRANARY_GENERATED_HEADERS})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${CMAKE_BINARY_DIR}/gen/${h} DESTINATION include/granary/${dir}
          COMPONENT dev)
endforeach()
foreach(p ${GRANARY_PROTOS})
  get_filename_component(dir ${p} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/proto/${p}
          DESTINATION share/granary/proto/${dir} COMPONENT dev)
endforeach()

set(_granary_sdk_libs)
foreach(lib core rpc directory storage storage_postgres silo_runtime silo_gateway
            silo_cluster silo_admin silo silo_flags client testing
            options_proto v1_proto cluster_proto reminders_proto admin_proto
            grain_library_api)
  list(APPEND _granary_sdk_libs granary_${lib})
endforeach()
install(TARGETS ${_granary_sdk_libs} EXPORT granaryTargets
        ARCHIVE DESTINATION lib/granary COMPONENT dev
        INCLUDES DESTINATION include/granary)
install(TARGETS protoc-gen-granary EXPORT granaryTargets
        RUNTIME DESTINATION bin COMPONENT dev)
install(EXPORT granaryTargets NAMESPACE granary:: DESTINATION lib/cmake/granary
        COMPONENT dev)

include(CMakePackageConfigHelpers)
set(GRANARY_INSTALL_PROTO_DIR share/granary/proto)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/granaryConfig.cmake.in
  ${CMAKE_BINARY_DIR}/sdk/granaryConfig.cmake
  INSTALL_DESTINATION lib/cmake/granary
  PATH_VARS GRANARY_INSTALL_PROTO_DIR)
# A package of another version is refused: grain code and the runtime must
# come from one release (a grain library's version is checked at load).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sdk/granaryConfigVersion.cmake
  VERSION ${GRANARY_VERSION} COMPATIBILITY ExactVersion)
install(FILES ${CMAKE_BINARY_DIR}/sdk/granaryConfig.cmake
              ${CMAKE_BINARY_DIR}/sdk/granaryConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/granary_grain_library.cmake
        DESTINATION lib/cmake/granary COMPONENT dev)

# For sdk_headers_test: the lists, one header per line, by kind.
set(_granary_header_lists "")
foreach(kind PUBLIC SUPPORT GENERATED)
  foreach(h ${GRANARY_${kind}_HEADERS})
    string(APPEND _granary_header_lists "${kind} ${h}\n")
  endforeach()
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/sdk/headers.txt "${_granary_header_lists}")
