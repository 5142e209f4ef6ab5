# Writes OUT: a C++ source with every profile and shipped scenario as a string,
# so `rcxl-sim reproduce` runs from any directory with nothing but the binary.
file(GLOB profiles ${SRC}/profiles/*.json)
file(GLOB scenarios ${SRC}/replays/*.json)
set(body "#include \"scenarios/embedded/embedded.h\"\n\nnamespace rcxl::scenarios {\n\n")
string(APPEND body "const std::vector<EmbeddedFile>& embedded_files() {\n  static const std::vector<EmbeddedFile> kFiles = {\n")
foreach(f ${profiles} ${scenarios})
  file(READ ${f} text)
  file(RELATIVE_PATH rel ${SRC} ${f})
  string(APPEND body "      {\"${rel}\", R\"rcxl_embed(${text})rcxl_embed\"},\n")
endforeach()
string(APPEND body "  };\n  return kFiles;\n}\n\n}  // namespace rcxl::scenarios\n")
file(WRITE ${OUT}.tmp "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
