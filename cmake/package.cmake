# The Debian packages (`make package`), one per CPack component:
#   granary_<version>_amd64.deb (runtime): the silo, the CLI and the load
#     generator, the systemd units, and /etc/granary/silo.conf as a
#     conffile. Its dependencies come from the binaries' shared libraries
#     (dpkg-shlibdeps), so they name Debian's runtime packages
#     (libgrpc++1.51, librocksdb7.8, ...), never -dev ones.
#   granary-dev_<version>_amd64.deb (dev): the SDK of cmake/sdk.cmake.
# deploy/debian/package_test.sh builds them and checks what they hold.

# One version: the one silos report (core/version.h).
file(STRINGS ${CMAKE_SOURCE_DIR}/core/version.h _granary_version_line
     REGEX "define GRANARY_VERSION_STRING \"[0-9.]+\"")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" GRANARY_VERSION
       "${_granary_version_line}")
if(NOT GRANARY_VERSION)
  message(FATAL_ERROR "no version in core/version.h")
endif()

install(TARGETS granary-silo granary granary-bench RUNTIME DESTINATION bin
        COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/granary-silo.service
              ${CMAKE_SOURCE_DIR}/deploy/systemd/granary-silo@.service
        DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/silo.conf
        DESTINATION /etc/granary COMPONENT runtime)
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/granary
        COMPONENT runtime)
# The docs the README links, beside it.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/granary/docs
        COMPONENT runtime FILES_MATCHING PATTERN "*.md")
include(sdk)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_PACKAGE_NAME granary)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME granary)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME granary-dev)
set(CPACK_PACKAGE_VERSION ${GRANARY_VERSION})
set(CPACK_PACKAGE_VENDOR "Granary")
set(CPACK_PACKAGE_CONTACT "Granary maintainers <granary@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed virtual-actor (grain) runtime: silo, CLI and load generator")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # granary_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# postinst creates the system user with adduser.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "postgresql")
# The SDK's static libraries link RocksDB, libpq, civetweb and OpenSSL, and
# granary_grain_library runs protoc and gRPC's plugin: their -dev packages.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "granary (= ${GRANARY_VERSION}), libgrpc++-dev, libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc, libabsl-dev, librocksdb-dev, libpq-dev, libcivetweb-dev, civetweb, libssl-dev, cmake (>= 3.25), g++")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Granary SDK: headers, static libraries, protoc-gen-granary, the \
granary protos and the CMake package for building grains, silos and \
clients against the installed Granary (find_package(granary)).")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/deploy/debian/conffiles
    ${CMAKE_SOURCE_DIR}/deploy/debian/postinst
    ${CMAKE_SOURCE_DIR}/deploy/debian/prerm
    ${CMAKE_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DESCRIPTION
    "Granary hosts grains (virtual actors) in silo processes that form a \
cluster on PostgreSQL. This package runs a silo under systemd \
(granary-silo.service, or granary-silo@NAME.service for several on one \
host), configured by /etc/granary/silo.conf.")
include(CPack)
