# dlock_build.cmake - how this tree builds its own targets, written once for
# the two ways in: the whole project (the top CMakeLists.txt) and libdlock on
# its own (`cmake -S lock`). It lives in lock/ so that lock/ carries
# everything it needs to build alone.
#
#   dlock_read_version(<dlock.h>)  DLOCK_VERSION_MAJOR/MINOR/PATCH and
#                                  DLOCK_VERSION from the header's macros
#   dlock_build_settings()         C17, the default build type, sanitizers;
#                                  once, by whichever project is top-level
#   dlock_strict(<target>)         warnings (errors with DLOCK_WERROR) and
#                                  the POSIX feature level, per target
include_guard(GLOBAL)

# -Werror is for this project's own CI and scripts (scripts/setup.sh turns it
# on), never a plain `cmake`: a newer compiler's new warning must not break
# a user's build.
option(DLOCK_WERROR "Treat compiler warnings as errors on this project's targets" OFF)
# Sanitizer builds: -DDLOCK_SANITIZE=address (ASan + UBSan) or =thread (TSan).
set(DLOCK_SANITIZE "" CACHE STRING "Sanitizer build: '', 'address' (ASan+UBSan) or 'thread' (TSan)")

# The project's one line, for project() and dlock.pc.
set(DLOCK_DESCRIPTION "Redis distributed locks done right (single instance and Redlock, fencing, renewal)")

# One source of truth for the version: the DLOCK_VERSION_* macros in dlock.h.
function(dlock_read_version header)
  file(STRINGS "${header}" _lines REGEX "^#define DLOCK_VERSION_(MAJOR|MINOR|PATCH) [0-9]+$")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "DLOCK_VERSION_${_part} ([0-9]+)" _m "${_lines}")
    if(NOT _m)
      message(FATAL_ERROR "${header} has no '#define DLOCK_VERSION_${_part} <n>'")
    endif()
    set(DLOCK_VERSION_${_part} ${CMAKE_MATCH_1} PARENT_SCOPE)
    set(_v_${_part} ${CMAKE_MATCH_1})
  endforeach()
  set(DLOCK_VERSION "${_v_MAJOR}.${_v_MINOR}.${_v_PATCH}" PARENT_SCOPE)
endfunction()

# A macro, not a function: the compile options belong to the calling
# directory (and so to everything below it).
macro(dlock_build_settings)
  set(CMAKE_C_STANDARD 17)
  set(CMAKE_C_STANDARD_REQUIRED ON)
  set(CMAKE_C_EXTENSIONS OFF)
  if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
    set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
  endif()
  if(DLOCK_SANITIZE STREQUAL "address")
    add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
    add_link_options(-fsanitize=address,undefined)
  elseif(DLOCK_SANITIZE STREQUAL "thread")
    add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
    add_link_options(-fsanitize=thread)
  elseif(NOT DLOCK_SANITIZE STREQUAL "")
    message(FATAL_ERROR "DLOCK_SANITIZE must be '', 'address' or 'thread' (got '${DLOCK_SANITIZE}')")
  endif()
endmacro()

# Our own targets only: strict warnings and the POSIX feature level we use.
# C17 per target too, so libdlock added from someone else's project (which
# may not ask for C17) still builds as written.
function(dlock_strict target)
  set_target_properties(${target} PROPERTIES C_STANDARD 17 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(DLOCK_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_compile_definitions(${target} PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
endfunction()
