# evo_exporter: a winning genome -> one self-contained .cu exposing evo_attention_forward, plus its
# markdown report. Messages only (evo_proto), no gRPC. Included by server/CMakeLists.txt and,
# when the server is not configured, by the CLI tests.
if(NOT TARGET evo_exporter)
  add_library(evo_exporter STATIC
    ${CMAKE_CURRENT_LIST_DIR}/exporter.cpp
    ${CMAKE_CURRENT_LIST_DIR}/exporter_report.cpp)
  target_include_directories(evo_exporter
    PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/../population)
  target_link_libraries(evo_exporter PUBLIC evo_genome evo_templates evo_proto nlohmann_json::nlohmann_json)
endif()
