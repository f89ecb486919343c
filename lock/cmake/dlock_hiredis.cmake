# dlock_hiredis.cmake - which hiredis libdlock is built with, and how.
#
#   -DDLOCK_HIREDIS=auto     (default) the system's when it is >= 1.0 with
#                            hiredis_ssl, else the bundled copy
#   -DDLOCK_HIREDIS=system   the system's, whatever it is (0.14: no TLS)
#   -DDLOCK_HIREDIS=bundled  third_party/hiredis (1.2.0), built with TLS
#
# dlock_hiredis_select() decides, says so, and sets in the caller's scope:
#   DLOCK_HIREDIS_USED  "system" or "bundled"
#   DLOCK_HAVE_TLS      ON when rediss:// works
#   DLOCK_PC_DEPS       the pkg-config modules libdlock links (dlock.pc's
#                       Requires.private, what dlockConfig.cmake finds)
# dlock_hiredis_use(<target>) gives a dlock target its hiredis: a
# target-wide setting, so every source of it, old or new (the async
# client's too), compiles against the same hiredis with the same names.
include_guard(GLOBAL)

set(DLOCK_HIREDIS "auto" CACHE STRING "hiredis for libdlock: auto, system or bundled (third_party/hiredis, with TLS)")
set_property(CACHE DLOCK_HIREDIS PROPERTY STRINGS auto system bundled)

set(_dlock_hiredis_dir ${CMAKE_CURRENT_LIST_DIR}/../../third_party/hiredis)
set(_dlock_hiredis_rename ${CMAKE_CURRENT_LIST_DIR}/dlock_hiredis_rename.h)

macro(dlock_hiredis_select)
  find_package(PkgConfig REQUIRED)
  if(NOT DLOCK_HIREDIS MATCHES "^(auto|system|bundled)$")
    message(FATAL_ERROR "DLOCK_HIREDIS must be auto, system or bundled (got '${DLOCK_HIREDIS}')")
  endif()
  if(NOT TARGET PkgConfig::HIREDIS)
    pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
  endif()
  # hiredis_ssl exists only from hiredis 1.0 on; 0.14 has no TLS at all.
  set(_sys_tls OFF)
  if(HIREDIS_FOUND AND HIREDIS_VERSION VERSION_GREATER_EQUAL 1.0)
    if(NOT TARGET PkgConfig::HIREDIS_SSL)
      pkg_check_modules(HIREDIS_SSL QUIET IMPORTED_TARGET GLOBAL hiredis_ssl)
    endif()
    if(HIREDIS_SSL_FOUND)
      set(_sys_tls ON)
    endif()
  endif()
  set(_have_bundled OFF)
  if(EXISTS ${_dlock_hiredis_dir}/ssl.c)
    set(_have_bundled ON)
  endif()

  if(DLOCK_HIREDIS STREQUAL "system" OR (DLOCK_HIREDIS STREQUAL "auto" AND (_sys_tls OR NOT _have_bundled)))
    if(NOT HIREDIS_FOUND)
      message(FATAL_ERROR "libdlock: DLOCK_HIREDIS=${DLOCK_HIREDIS} needs the system's hiredis (pkg-config hiredis; Debian: libhiredis-dev)")
    endif()
    set(DLOCK_HIREDIS_USED system)
    set(DLOCK_HAVE_TLS ${_sys_tls})
    if(_sys_tls)
      set(DLOCK_PC_DEPS hiredis hiredis_ssl)
      message(STATUS "libdlock: hiredis: the system's ${HIREDIS_VERSION}, with TLS (hiredis_ssl)")
    else()
      set(DLOCK_PC_DEPS hiredis)
      message(STATUS "libdlock: hiredis: the system's ${HIREDIS_VERSION}, WITHOUT TLS (rediss:// refused); "
                     "-DDLOCK_HIREDIS=bundled builds third_party/hiredis 1.2.0 with TLS")
    endif()
  else()
    if(NOT _have_bundled)
      message(FATAL_ERROR "libdlock: DLOCK_HIREDIS=bundled, but ${_dlock_hiredis_dir} has no hiredis source")
    endif()
    if(NOT TARGET PkgConfig::LIBSSL)
      pkg_check_modules(LIBSSL IMPORTED_TARGET GLOBAL libssl)
    endif()
    if(NOT TARGET PkgConfig::LIBCRYPTO)
      pkg_check_modules(LIBCRYPTO IMPORTED_TARGET GLOBAL libcrypto)
    endif()
    if(NOT LIBSSL_FOUND OR NOT LIBCRYPTO_FOUND)
      message(FATAL_ERROR "libdlock: the bundled hiredis is built with TLS and needs OpenSSL (pkg-config libssl libcrypto; Debian: libssl-dev)")
    endif()
    set(DLOCK_HIREDIS_USED bundled)
    set(DLOCK_HAVE_TLS ON)
    set(DLOCK_PC_DEPS libssl libcrypto)
    message(STATUS "libdlock: hiredis: bundled 1.2.0 (third_party/hiredis), with TLS, names renamed dlock__hi_*")
    if(NOT TARGET dlock_hiredis)
      # Its own objects, in both libraries: position-independent for the
      # shared one, hidden so the shared one exports none of them, renamed
      # (the header) so the static one clashes with no other hiredis.
      # dict.c is not listed: async.c includes it.
      add_library(dlock_hiredis OBJECT
        ${_dlock_hiredis_dir}/alloc.c
        ${_dlock_hiredis_dir}/async.c
        ${_dlock_hiredis_dir}/hiredis.c
        ${_dlock_hiredis_dir}/net.c
        ${_dlock_hiredis_dir}/read.c
        ${_dlock_hiredis_dir}/sds.c
        ${_dlock_hiredis_dir}/sockcompat.c
        ${_dlock_hiredis_dir}/ssl.c)
      set_target_properties(dlock_hiredis PROPERTIES
        C_STANDARD 99 C_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
      target_compile_options(dlock_hiredis PRIVATE "SHELL:-include ${_dlock_hiredis_rename}")
      target_link_libraries(dlock_hiredis PRIVATE PkgConfig::LIBSSL PkgConfig::LIBCRYPTO)
    endif()
  endif()
  set_property(GLOBAL PROPERTY DLOCK_HIREDIS_USED ${DLOCK_HIREDIS_USED})
  set_property(GLOBAL PROPERTY DLOCK_HAVE_TLS ${DLOCK_HAVE_TLS})
  set_property(GLOBAL PROPERTY DLOCK_HIREDIS_DIR ${_dlock_hiredis_dir})
  set_property(GLOBAL PROPERTY DLOCK_HIREDIS_RENAME ${_dlock_hiredis_rename})
endmacro()

function(dlock_hiredis_use target)
  # The bundled objects go into libdlock itself; the headers, names and
  # libraries are what every user of this hiredis gets (below).
  if(DLOCK_HIREDIS_USED STREQUAL "bundled")
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:dlock_hiredis>)
  endif()
  dlock_hiredis_client(${target})
endfunction()

# dlock_hiredis_client(<target>): a program of this tree that links
# dlock_static and talks to Redis with hiredis itself (dlockctl) uses the
# very hiredis libdlock was built with: with the bundled one, its headers
# and names (the objects come with libdlock.a), so that it gets TLS too and
# two hiredis never meet in one program; otherwise the system's.
function(dlock_hiredis_client target)
  # Called from other directories (ctl/): the choice is read back from the
  # global properties dlock_hiredis_select left, not from lock/'s variables.
  get_property(DLOCK_HIREDIS_USED GLOBAL PROPERTY DLOCK_HIREDIS_USED)
  get_property(DLOCK_HAVE_TLS GLOBAL PROPERTY DLOCK_HAVE_TLS)
  get_property(_dlock_hiredis_dir GLOBAL PROPERTY DLOCK_HIREDIS_DIR)
  get_property(_dlock_hiredis_rename GLOBAL PROPERTY DLOCK_HIREDIS_RENAME)
  if(DLOCK_HIREDIS_USED STREQUAL "bundled")
    # BEFORE: <hiredis/hiredis.h> must find the bundled 1.2.0 headers, not
    # the system's (0.14 on Debian 12) in /usr/include.
    target_include_directories(${target} BEFORE PRIVATE ${_dlock_hiredis_dir}/..)
    target_compile_options(${target} PRIVATE "SHELL:-include ${_dlock_hiredis_rename}")
    target_link_libraries(${target} PRIVATE PkgConfig::LIBSSL PkgConfig::LIBCRYPTO)
  elseif(DLOCK_HAVE_TLS)
    target_link_libraries(${target} PRIVATE PkgConfig::HIREDIS_SSL PkgConfig::HIREDIS)
  else()
    target_link_libraries(${target} PRIVATE PkgConfig::HIREDIS)
  endif()
  if(DLOCK_HAVE_TLS)
    target_compile_definitions(${target} PRIVATE DLOCK_HAVE_TLS=1)
  endif()
endfunction()
