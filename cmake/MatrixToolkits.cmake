# Optional toolkit adapters (docs/integration.md, "GLib and GTK 3").
#
#   MATRIX_WITH_GLIB  AUTO (default) | ON | OFF   matrix::glib (glib-2.0)
#   MATRIX_WITH_GTK   AUTO (default) | ON | OFF   matrix::gtk  (gtk+-3.0; needs GLib)
#
# AUTO builds an adapter when pkg-config finds its package; ON fails the
# configure when it is missing; OFF never builds it. Sets MATRIX_HAVE_GLIB and
# MATRIX_HAVE_GTK (ON/OFF) for the rest of the build and the package config.

include_guard(GLOBAL)

set(MATRIX_WITH_GLIB AUTO CACHE STRING "Build matrix::glib: AUTO, ON or OFF")
set(MATRIX_WITH_GTK AUTO CACHE STRING "Build matrix::gtk (GTK 3): AUTO, ON or OFF")
set_property(CACHE MATRIX_WITH_GLIB PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE MATRIX_WITH_GTK PROPERTY STRINGS AUTO ON OFF)

# _matrix_find_toolkit(<option> <prefix> <pkg-config module> <Debian package> <result var>)
function(_matrix_find_toolkit option prefix module deb result)
  string(TOUPPER "${${option}}" mode)
  if(NOT mode MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
    message(FATAL_ERROR "${option}=${${option}}: use AUTO, ON or OFF")
  endif()
  set(${result} OFF PARENT_SCOPE)
  if(mode MATCHES "^(OFF|FALSE|NO|0)$")
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  endif()
  if(${prefix}_FOUND)
    message(STATUS "matrix-cpp: ${module} ${${prefix}_VERSION} found: building the adapter")
    set(${result} ON PARENT_SCOPE)
  elseif(mode STREQUAL "AUTO")
    message(STATUS "matrix-cpp: ${module} not found: adapter not built (install ${deb})")
  else()
    message(FATAL_ERROR "${option}=ON but pkg-config cannot find ${module}. "
                        "Install it (Debian: apt-get install ${deb}) or set ${option}=OFF.")
  endif()
endfunction()

_matrix_find_toolkit(MATRIX_WITH_GLIB MATRIX_GLIB glib-2.0 libglib2.0-dev MATRIX_HAVE_GLIB)
if(MATRIX_HAVE_GLIB)
  _matrix_find_toolkit(MATRIX_WITH_GTK MATRIX_GTK gtk+-3.0 libgtk-3-dev MATRIX_HAVE_GTK)
else()
  string(TOUPPER "${MATRIX_WITH_GTK}" _matrix_gtk_mode)
  if(_matrix_gtk_mode STREQUAL "ON")
    message(FATAL_ERROR "MATRIX_WITH_GTK=ON needs matrix::glib, which is not built "
                        "(MATRIX_WITH_GLIB=${MATRIX_WITH_GLIB}, glib-2.0 found: ${MATRIX_GLIB_FOUND})")
  endif()
  set(MATRIX_HAVE_GTK OFF)
endif()

# libuv (docs/integration.md, "libuv").
#   MATRIX_WITH_UV    AUTO (default) | ON | OFF   matrix::uv   (libuv)
set(MATRIX_WITH_UV AUTO CACHE STRING "Build matrix::uv (libuv): AUTO, ON or OFF")
set_property(CACHE MATRIX_WITH_UV PROPERTY STRINGS AUTO ON OFF)
_matrix_find_toolkit(MATRIX_WITH_UV MATRIX_UV libuv libuv1-dev MATRIX_HAVE_UV)
# SDL2 (docs/integration.md, "Game and render loops"):
#   MATRIX_WITH_SDL   AUTO (default) | ON | OFF   matrix::sdl (sdl2)
# The toolkit-free matrix::render_loop is always built. Sets MATRIX_HAVE_SDL.
set(MATRIX_WITH_SDL AUTO CACHE STRING "Build matrix::sdl (SDL2): AUTO, ON or OFF")
set_property(CACHE MATRIX_WITH_SDL PROPERTY STRINGS AUTO ON OFF)
_matrix_find_toolkit(MATRIX_WITH_SDL MATRIX_SDL sdl2 libsdl2-dev MATRIX_HAVE_SDL)
# MATRIX_WITH_QT  AUTO (default) | ON | OFF   matrix::qt (Qt 6 Core, Gui, Widgets;
# Debian qt6-base-dev), found with find_package(Qt6). Sets MATRIX_HAVE_QT.
set(MATRIX_WITH_QT AUTO CACHE STRING "Build matrix::qt (Qt 6): AUTO, ON or OFF")
set_property(CACHE MATRIX_WITH_QT PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MATRIX_WITH_QT}" _matrix_qt_mode)
if(NOT _matrix_qt_mode MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "MATRIX_WITH_QT=${MATRIX_WITH_QT}: use AUTO, ON or OFF")
endif()
set(MATRIX_HAVE_QT OFF)
if(NOT _matrix_qt_mode MATCHES "^(OFF|FALSE|NO|0)$")
  find_package(Qt6 QUIET COMPONENTS Core Gui Widgets)
  if(Qt6_FOUND)
    message(STATUS "matrix-cpp: Qt ${Qt6_VERSION} found: building the adapter")
    set(MATRIX_HAVE_QT ON)
  elseif(_matrix_qt_mode STREQUAL "AUTO")
    message(STATUS "matrix-cpp: Qt 6 not found: adapter not built (install qt6-base-dev)")
  else()
    message(FATAL_ERROR "MATRIX_WITH_QT=ON but find_package(Qt6 COMPONENTS Core Gui Widgets) "
                        "failed. Install it (Debian: apt-get install qt6-base-dev) or set "
                        "MATRIX_WITH_QT=OFF.")
  endif()
endif()
