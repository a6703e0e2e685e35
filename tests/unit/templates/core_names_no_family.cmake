# The core (population/, server/, cli/, worker/) handles a genome plus an opaque evo::Problem and
# never names a kernel family: no include of a family's folder, no family namespace, no attention
# field or type. Fails naming each file and line that does, except the files of the allow-list below.
#
#   cmake -DROOT=<source dir> -P core_names_no_family.cmake
#   cmake -DPLANT=<path under a root> -DWORK_DIR=<dir> -P core_names_no_family.cmake
# The second form scans a tree of one file, PLANT, that includes "attention/problem.h": it fails
# unless PLANT is allow-listed (the tests of this scan).
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

# Files still being moved into the family; each entry says why it may name attention for now. The
# lead removes an entry when its move lands.
set(_allowed
    # The exporter reads the space's served head dims and dtypes (ExportSpace) for the family's
    # entry text; they move into the family with search_space's, the next step.
    "server/exporter[a-z_]*\\.(cpp|h)"
    # The dispatch file is the attention bench's format of the export's buckets; it is the next to move
    # behind the family's export entry.
    "cli/dispatch_file\\.(cpp|h)"
    # The physical floor's bytes moved per problem (Q, K, V read, O written) is attention's; it
    # becomes a family operation beside flops().
    "server/device_floors\\.cpp"
    # The space's served head dims and dtypes ("head_dims", "dtypes", require_serves) move into
    # the family (the next step of this design),
    # and the header's comments with them.
    "population/search_space\\.(cpp|h)")

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
    set(_skip FALSE)
    foreach(_allow ${_allowed})
      if(_file MATCHES "^${_allow}$")
        set(_skip TRUE)
      endif()
    endforeach()
    if(_skip)
      continue()
    endif()
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
