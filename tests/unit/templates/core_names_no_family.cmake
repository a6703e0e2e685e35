# The core (population/, server/, cli/, worker/) handles a genome plus an opaque evo::Problem and
# never names a kernel family: no include of a family's folder, no family namespace, no attention
# field or type. Fails naming each file and line that does.
#
#   cmake -DROOT=<source dir> -P core_names_no_family.cmake
#   cmake -DPLANT=<path under a root> -DWORK_DIR=<dir> -P core_names_no_family.cmake
# The second form scans a tree of one file, PLANT, that includes "attention/problem.h": it must
# fail (the test of this scan).
cmake_minimum_required(VERSION 3.16)

set(_core_folders population server cli worker)
# What naming attention looks like in code: its folder and namespace, the fields of its problem
# and params, its types.
set(_patterns
    "#include \"attention/"
    "attention::"
    "head_dim"
    "seq_q"
    "seq_k"
    "FaParams"
    "ProblemShape"
    "DType::k")

if(DEFINED PLANT)
  set(ROOT ${WORK_DIR}/planted)
  file(REMOVE_RECURSE ${ROOT})
  file(WRITE ${ROOT}/${PLANT} "#include \"attention/problem.h\"\n")
endif()
if(NOT IS_DIRECTORY "${ROOT}")
  message(FATAL_ERROR "ROOT '${ROOT}' is not a folder")
endif()

set(_found "")
set(_scanned 0)
foreach(_folder ${_core_folders})
  file(GLOB_RECURSE _files RELATIVE ${ROOT} ${ROOT}/${_folder}/*.h ${ROOT}/${_folder}/*.cpp
       ${ROOT}/${_folder}/*.cu ${ROOT}/${_folder}/*.cuh)
  foreach(_file ${_files})
    math(EXPR _scanned "${_scanned} + 1")
    # One list element a line: ';' and brackets, which a CMake list would read, are masked first.
    file(READ ${ROOT}/${_file} _text)
    string(REPLACE ";" "<semicolon>" _text "${_text}")
    string(REPLACE "[" "<open>" _text "${_text}")
    string(REPLACE "]" "<close>" _text "${_text}")
    string(REPLACE "\n" ";" _lines "${_text}")
    set(_number 0)
    foreach(_line IN LISTS _lines)
      math(EXPR _number "${_number} + 1")
      foreach(_pattern ${_patterns})
        string(FIND "${_line}" "${_pattern}" _at)
        if(NOT _at EQUAL -1)
          string(APPEND _found "  ${_file}:${_number}: names '${_pattern}'\n")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(NOT _found STREQUAL "")
  message(FATAL_ERROR "core code names a kernel family (reach it through evo::Problem and KernelFamily, "
                      "kernel_templates/family.h):\n${_found}")
endif()
message(STATUS "${_scanned} core files name no kernel family")
