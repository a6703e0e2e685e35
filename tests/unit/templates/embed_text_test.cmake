# cmake -DEMBED_SCRIPT=<EmbedText.cmake> -DWORK_DIR=<scratch dir> -P embed_text_test.cmake
# Writes fixture sources, runs EmbedText on them, and fails with the first check that does not hold.
cmake_minimum_required(VERSION 3.16)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/parts/sub")

# Runs EmbedText on <input>; sets <rc>, <err> and (on success) <text>, the embedded string.
function(embed input rc err text)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${WORK_DIR}/out.cpp -DSYMBOL=kTest
            -P ${EMBED_SCRIPT}
    RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_QUIET)
  set(${rc} "${_rc}" PARENT_SCOPE)
  set(${err} "${_err}" PARENT_SCOPE)
  set(_text "")
  if(_rc EQUAL 0)
    file(READ "${WORK_DIR}/out.cpp" _cpp)
    string(FIND "${_cpp}" "R\"evo_embed(" _open)
    string(FIND "${_cpp}" ")evo_embed\"" _close)
    math(EXPR _start "${_open} + 12")
    math(EXPR _len "${_close} - ${_start}")
    string(SUBSTRING "${_cpp}" ${_start} ${_len} _text)
  endif()
  set(${text} "${_text}" PARENT_SCOPE)
endfunction()

# Fails the test with "expected <what>" unless the condition (the remaining arguments) holds.
function(expect what)
  if(${ARGN})
  else()
    message(FATAL_ERROR "embed_text_test: expected ${what}")
  endif()
endfunction()

# A main file naming two parts, one of which names the other again from a subfolder: each part's
# text appears once, in the order first named, without its #pragma once; <...> includes and
# semicolons, brackets and backslashes pass through untouched.
file(WRITE "${WORK_DIR}/parts/sub/a.cuh" "#pragma once\nint a[2] = {1; 2};  // A-BODY\n")
file(WRITE "${WORK_DIR}/parts/b.cuh"
     "#pragma once\n#include \"sub/a.cuh\"\nconst char* b = \"x\\\\n\";  // B-BODY\n")
file(WRITE "${WORK_DIR}/main.cuh" "#include \"parts/sub/a.cuh\"\n#include <cuda_fp16.h>\n"
     "#include \"parts/b.cuh\"\nint main_body;\n")
embed("${WORK_DIR}/main.cuh" rc err text)
expect("a main file with parts to embed (${err})" rc EQUAL 0)
string(REGEX MATCHALL "A-BODY" a_copies "${text}")
list(LENGTH a_copies a_count)
expect("part a inlined exactly once, got ${a_count} in:\n${text}" a_count EQUAL 1)
string(FIND "${text}" "A-BODY" a_at)
string(FIND "${text}" "B-BODY" b_at)
string(FIND "${text}" "int main_body;" main_at)
expect("a, then b, then the main file's own text in:\n${text}"
       a_at GREATER -1 AND a_at LESS b_at AND b_at LESS main_at)
string(FIND "${text}" "#pragma once" pragma_at)
expect("no #pragma once left in:\n${text}" pragma_at EQUAL -1)
string(FIND "${text}" "#include \"" local_at)
expect("no local include left in:\n${text}" local_at EQUAL -1)
string(FIND "${text}" "#include <cuda_fp16.h>" system_at)
expect("the <...> include kept in:\n${text}" system_at GREATER -1)
string(FIND "${text}" "int a[2] = {1; 2};" literal_at)
expect("semicolons and brackets kept in:\n${text}" literal_at GREATER -1)
string(FIND "${text}" "\"x\\\\n\"" backslash_at)
expect("backslashes kept in:\n${text}" backslash_at GREATER -1)

# A file without local includes is embedded byte for byte.
set(plain "// no parts\n#include <cuda.h>\nint x;  // \"#include \\\"y\\\"\" in a comment\n")
file(WRITE "${WORK_DIR}/plain.h" "${plain}")
embed("${WORK_DIR}/plain.h" rc err text)
expect("a plain file to embed (${err})" rc EQUAL 0)
expect("a plain file unchanged, got:\n${text}" text STREQUAL plain)

# A part that does not exist: one error that names the including file and the missing part.
file(WRITE "${WORK_DIR}/missing.cuh" "int x;\n#include \"parts/nope.cuh\"\n")
embed("${WORK_DIR}/missing.cuh" rc err text)
expect("a missing part to fail the build" NOT rc EQUAL 0)
expect("the error to name missing.cuh and nope.cuh, got: ${err}"
       err MATCHES "missing\\.cuh" AND err MATCHES "nope\\.cuh")

# The raw string's delimiter inside a part would end the embedded string early.
file(WRITE "${WORK_DIR}/parts/clash.cuh" "// )evo_embed\"\n")
file(WRITE "${WORK_DIR}/clash_main.cuh" "#include \"parts/clash.cuh\"\n")
embed("${WORK_DIR}/clash_main.cuh" rc err text)
expect("a part holding the delimiter to fail the build" NOT rc EQUAL 0)
expect("the error to name the delimiter, got: ${err}" err MATCHES "raw-string delimiter")

message(STATUS "embed_text_test: all checks passed")
