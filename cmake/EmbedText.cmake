# cmake -DINPUT=<file> -DOUTPUT=<out.cpp> -DSYMBOL=<name> -P EmbedText.cmake
# Writes a .cpp that defines  extern const char <SYMBOL>[];  holding the file's text as a raw
# string. A line `#include "part"` (quotes, at the start of a line) is replaced by the text of that
# part, found beside the including file, the first time the part is named and by nothing after
# that; `#pragma once` lines of parts are dropped. So a source kept in several files becomes the
# one text NVRTC compiles and `evoctl export` writes out, as SQLite's amalgamation does; `<...>`
# includes are left for the compiler. Run at build time so that edits rebuild the binary.
cmake_minimum_required(VERSION 3.16)

set_property(GLOBAL PROPERTY _evo_inlined "")

# Sets <out> to the text of <path> with its local includes inlined.
function(_evo_inline path out)
  get_filename_component(dir "${path}" DIRECTORY)
  file(READ "${path}" text)
  string(REPLACE "\n#pragma once\n" "\n" text "\n${text}")
  set(done "")
  set(rest "${text}")  # starts with a newline, so that an include on line 1 is found too
  while(TRUE)
    string(FIND "${rest}" "\n#include \"" at)
    if(at EQUAL -1)
      string(APPEND done "${rest}")
      break()
    endif()
    math(EXPR line_start "${at} + 1")
    string(SUBSTRING "${rest}" 0 ${line_start} before)
    string(APPEND done "${before}")
    string(SUBSTRING "${rest}" ${line_start} -1 rest)
    string(FIND "${rest}" "\n" eol)
    if(eol EQUAL -1)
      set(line "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${eol} line)
      string(SUBSTRING "${rest}" ${eol} -1 rest)  # keeps the newline
    endif()
    if(NOT line MATCHES "^#include \"([^\"]+)\"")
      message(FATAL_ERROR "${path}: cannot read the include line: ${line}")
    endif()
    get_filename_component(part "${dir}/${CMAKE_MATCH_1}" ABSOLUTE)
    if(NOT EXISTS "${part}")
      message(FATAL_ERROR "${path}: ${line}: no such file ${part}")
    endif()
    get_property(inlined GLOBAL PROPERTY _evo_inlined)
    if(part IN_LIST inlined)
      string(APPEND done "// (${CMAKE_MATCH_1}: inlined above)")
    else()
      set_property(GLOBAL APPEND PROPERTY _evo_inlined "${part}")
      _evo_inline("${part}" part_text)
      string(APPEND done "// ---- ${CMAKE_MATCH_1}\n${part_text}// ---- end of ${CMAKE_MATCH_1}")
    endif()
  endwhile()
  # Drop the newline added in front.
  string(SUBSTRING "${done}" 1 -1 done)
  set(${out} "${done}" PARENT_SCOPE)
endfunction()

get_filename_component(_input "${INPUT}" ABSOLUTE)
set_property(GLOBAL APPEND PROPERTY _evo_inlined "${_input}")
_evo_inline("${_input}" _content)

string(FIND "${_content}" ")evo_embed\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )evo_embed\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = R\"evo_embed(${_content})evo_embed\";\n")
# Same text: the .cpp keeps its content (no recompile of what did not change) but takes a new
# time, else it stays older than the input that triggered this and the step reruns every build.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(TOUCH_NOCREATE "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
