# Installation: libkolo (exported as kolo::kolo), the public headers, kolo-info, kolorun,
# a CMake package (find_package(kolo) -> kolo::kolo) and kolo.pc for pkg-config.
# Included at the end of the top-level CMakeLists.txt, after every target exists.
#
# Everything installed is relocatable: `cmake --install build --prefix /any/where`
# gives a tree whose koloConfig.cmake and kolo.pc find their files relative to
# themselves, whatever CMAKE_INSTALL_PREFIX was at configure time.
include(CMakePackageConfigHelpers)

set(KOLO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)
set(KOLO_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS kolo EXPORT koloTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/include/kolo/kolo.h
  ${PROJECT_SOURCE_DIR}/include/kolo/kolo.hpp
  ${PROJECT_SOURCE_DIR}/include/kolo/kolo_groups.hpp
  ${PROJECT_SOURCE_DIR}/include/kolo/kolo_sets.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)
if(TARGET kolo-info)
  install(TARGETS kolo-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/kolorun.py DESTINATION ${CMAKE_INSTALL_BINDIR}
        RENAME kolorun)
# kolorun's package, where kolorun looks for it: ../share/kolo from its own folder.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/kololaunch DESTINATION ${CMAKE_INSTALL_DATADIR}/kolo
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)

# The CMake package.
install(EXPORT koloTargets NAMESPACE kolo:: FILE koloTargets.cmake
        DESTINATION ${KOLO_INSTALL_CMAKEDIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/koloConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/koloConfig.cmake
  INSTALL_DESTINATION ${KOLO_INSTALL_CMAKEDIR})
# 0.x releases promise nothing across minor versions.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/package/koloConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/package/koloConfig.cmake
  ${PROJECT_BINARY_DIR}/package/koloConfigVersion.cmake
  DESTINATION ${KOLO_INSTALL_CMAKEDIR})

# pkg-config: the prefix is found from the .pc file's own directory.
file(RELATIVE_PATH KOLO_PC_TO_PREFIX "/p/${KOLO_INSTALL_PKGCONFIGDIR}" "/p")
string(REGEX REPLACE "/$" "" KOLO_PC_TO_PREFIX "${KOLO_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kolo.pc.in
               ${PROJECT_BINARY_DIR}/package/kolo.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/kolo.pc
        DESTINATION ${KOLO_INSTALL_PKGCONFIGDIR})
