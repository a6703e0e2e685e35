# embed_text(<out.cpp> <symbol> <file>): writes a .cpp that defines
#   extern const char <symbol>[];  holding the file's bytes as a raw string.
# Run at build time (cmake -P) so edits to the embedded file rebuild the binary.
file(READ "${INPUT}" _content)
string(FIND "${_content}" ")evo_embed\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )evo_embed\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = R\"evo_embed(${_content})evo_embed\";\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
