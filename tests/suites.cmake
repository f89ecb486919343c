# suites.cmake - how a Criterion suite is built and run, for the whole
# project (tests/CMakeLists.txt) and for libdlock built alone
# (lock/CMakeLists.txt, the lock_* suites only). The includer has made
# PkgConfig::CRITERION and found REDIS_SERVER_BIN; tests/support/ gives the
# testsupport_base library every suite links.

# Paths the suites need, passed as environment variables: the repository
# (scripts/), the build (bin/) and whichever of the project's programs this
# build has (none when libdlock is built alone).
get_filename_component(_dlock_repo "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(DLOCK_SUITE_ENV
  "DLOCK_REDIS_SERVER=${REDIS_SERVER_BIN}"
  "DLOCK_SOURCE_DIR=${_dlock_repo}"
  "DLOCK_BINARY_DIR=${CMAKE_BINARY_DIR}")
foreach(_bin coupon-server coupon-loadtest dlock-bench dlockctl)
  if(TARGET ${_bin})
    string(TOUPPER "${_bin}" _var)
    string(REPLACE "-" "_" _var "${_var}")
    list(APPEND DLOCK_SUITE_ENV "${_var}_BIN=$<TARGET_FILE:${_bin}>")
  endif()
endforeach()

# dlock_add_suite(NAME SOURCES a.c b.c LIBS x y [TIMEOUT s] [JOBS n] [SERIAL])
# Links testsupport_base (processes, ports, temp dirs, redis-server); a suite
# that starts coupon-server or postgres, or speaks HTTP, names testsupport
# (or a helper library that links it) in LIBS.
function(dlock_add_suite name)
  cmake_parse_arguments(S "SERIAL" "TIMEOUT;JOBS" "SOURCES;LIBS" ${ARGN})
  if(NOT S_TIMEOUT)
    set(S_TIMEOUT 300)
  endif()
  if(NOT S_JOBS)
    set(S_JOBS 1)
  endif()
  add_executable(${name} ${S_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/bin)
  target_link_libraries(${name} PRIVATE testsupport_base PkgConfig::CRITERION Threads::Threads ${S_LIBS})
  dlock_strict(${name})
  # Criterion cannot start under ThreadSanitizer (Snaipe/Criterion#274: its
  # process arena fails to map), so the TSan build runs tests/stress instead.
  if(DLOCK_SANITIZE STREQUAL "thread")
    return()
  endif()
  # --jobs: suites that time things or kill servers run one test at a time.
  # --tap: a report per suite, from which scripts/test lists the skips.
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/tests/reports)
  add_test(NAME ${name} COMMAND ${name} --jobs ${S_JOBS} --verbose=0
                                 --tap=${CMAKE_BINARY_DIR}/tests/reports/${name}.tap)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${S_TIMEOUT} ENVIRONMENT "${DLOCK_SUITE_ENV}")
  # SERIAL: a suite that counts answers under load runs with nothing beside it.
  if(S_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
