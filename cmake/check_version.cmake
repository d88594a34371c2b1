# ctest version.consistent: the chart deploys the version this tree builds. Checks that
# helm/inspection-gateway/Chart.yaml's appVersion equals ${VERSION} (project(VERSION)),
# that values.yaml leaves image.tag empty (so the image is the appVersion), and that
# CHANGELOG.md's newest release section is "## [${VERSION}]".
cmake_minimum_required(VERSION 3.25)
file(READ "${SRC}/helm/inspection-gateway/Chart.yaml" chart)
string(REGEX MATCH "\nappVersion: \"?([^\"\n]+)\"?" _ "${chart}")
if(NOT "${CMAKE_MATCH_1}" STREQUAL "${VERSION}")
  message(FATAL_ERROR "Chart.yaml appVersion is '${CMAKE_MATCH_1}', project(VERSION) is '${VERSION}'")
endif()
file(READ "${SRC}/helm/inspection-gateway/values.yaml" values)
string(REGEX MATCH "\nimage:\n(  [^\n]*\n)*  tag: \"([^\"\n]*)\"" image "${values}")
if("${image}" STREQUAL "")
  message(FATAL_ERROR "values.yaml: no image.tag found")
endif()
if(NOT "${CMAKE_MATCH_2}" STREQUAL "")
  message(FATAL_ERROR "values.yaml image.tag is '${CMAKE_MATCH_2}': leave it empty (the appVersion)")
endif()
file(READ "${SRC}/CHANGELOG.md" changelog)
# The newest release section (the first "## [x.y.z]" after "## [Unreleased]") is this version.
string(REGEX MATCH "\n## \\[([0-9]+\\.[0-9]+\\.[0-9]+)\\]" _ "${changelog}")
if(NOT "${CMAKE_MATCH_1}" STREQUAL "${VERSION}")
  message(FATAL_ERROR "CHANGELOG.md's newest release is '${CMAKE_MATCH_1}', project(VERSION) is '${VERSION}'")
endif()
message(STATUS "version ${VERSION}: chart appVersion, image tag and CHANGELOG agree")
