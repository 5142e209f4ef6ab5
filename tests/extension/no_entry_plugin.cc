// A plugin file that exports no entry of its own but links a library that does
// (the test plugin built as a shared library): dlsym on its handle would find
// the library's entry and load another extension under this one's name.
#include "core/extension/c_abi.h"

extern "C" const rcxl_region_extension_api_v1* rcxl_region_extension_v1();

// Uses the library, so the linker keeps it as a dependency.
extern "C" __attribute__((visibility("default"))) const void* rcxl_no_entry_plugin_links() {
  return reinterpret_cast<const void*>(&rcxl_region_extension_v1);
}
