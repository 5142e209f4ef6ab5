/* rcxl region-extension C ABI, version 1 (SPEC R2.1).
 *
 * A shared object `librcxl_ext_<name>.so` exports
 *     const rcxl_region_extension_api_v1* rcxl_region_extension_v1(void);
 * returning a static table. The agent checks `abi_version` (must be
 * RCXL_REGION_EXTENSION_ABI_VERSION) and `struct_size` (at least version 1's
 * table; a table of a later version appends fields, an agent reads those it
 * knows and takes hooks past a shorter table as NULL), calls `create` once with
 * the config JSON text, then the hooks with the instance pointer, `close` once
 * and `destroy` last (also when the load fails after `create`, e.g. on a bad
 * `hint_actions`).
 *
 * Rules (SPEC R2.2/R2.3): hooks answer from local state within microseconds and
 * never block on the device; they may be called from several threads, but
 * never concurrently for one connection. Hooks are C: they must not throw.
 * Error text goes to `error` (NUL-terminated, at most `error_size` bytes); a
 * non-zero return is a failure (see validate_access and retire for theirs).
 * Optional hooks may be NULL. The argument structs below (rcxl_region_info,
 * rcxl_range, rcxl_hint, rcxl_write_wait) are fixed for version 1: changing
 * one is a new abi_version. Hints are advice: one may reach the plugin after
 * `retire` agreed to give its region back.
 */
#ifndef RCXL_CORE_EXTENSION_C_ABI_H_
#define RCXL_CORE_EXTENSION_C_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RCXL_REGION_EXTENSION_ABI_VERSION 1u
#define RCXL_REGION_EXTENSION_ENTRY "rcxl_region_extension_v1"
/* validate_access's "cannot tell now": -EAGAIN on Linux. */
#define RCXL_VALIDATE_RETRY (-11)

typedef struct rcxl_region_info {
  uint64_t region;
  uint64_t pool_offset;
  uint64_t size;
} rcxl_region_info;

typedef struct rcxl_range {
  uint64_t region;
  uint64_t offset;
  uint64_t length;
  uint64_t pool_offset; /* the range's place in the node's pool */
} rcxl_range;

/* read_hint, read_hint_end, write_hint, read_promote. */
typedef struct rcxl_hint {
  uint64_t conn;
  const char* action;
  const char* request; /* `request`, or `token` for write_hint */
  const rcxl_range* ranges;
  size_t range_count;
} rcxl_hint;

typedef struct rcxl_write_wait {
  uint64_t conn;
  const char* token;
  const rcxl_range* ranges;
  size_t range_count;
  uint32_t timeout_ms;
} rcxl_write_wait;

/* Called exactly once per write_wait, from any thread, at the latest after
 * timeout_ms. status 0 = answered: `answer_json` is a JSON object text of at
 * most 4096 bytes (longer is a failure), or NULL for null; non-zero = failed
 * (`answer_json` may hold a message). A second call is ignored. The `wait`
 * given to write_wait, and all it points to, stays valid until this call or
 * until `destroy` returns, whichever comes first: a plugin stops reading it
 * in `destroy` (every other hook's arguments live only during the hook). */
typedef void (*rcxl_write_wait_done)(void* done_context, int status, const char* answer_json);

typedef struct rcxl_region_extension_api_v1 {
  uint32_t abi_version; /* RCXL_REGION_EXTENSION_ABI_VERSION */
  uint32_t struct_size; /* sizeof(rcxl_region_extension_api_v1) */
  const char* name;

  /* NULL on failure, with the reason in `error`. */
  void* (*create)(const char* config_json, char* error, size_t error_size);
  void (*destroy)(void* self);

  /* 0 = may be mapped; RCXL_VALIDATE_RETRY (-EAGAIN) = cannot tell now, e.g.
   * the device link is down (`extension_failed`, which a client retries); any
   * other value = no (the map is answered `refused`, not retried). */
  int (*validate_access)(void* self, const rcxl_region_info* region, char* error,
                         size_t error_size);
  int (*mapped)(void* self, const rcxl_region_info* region, int fresh, char* error,
                size_t error_size);
  /* 1 = may go back to the pool, 0 (or any other value, e.g. -1) = not yet. */
  int (*retire)(void* self, const rcxl_region_info* region);
  int (*hint)(void* self, const rcxl_hint* hint, char* error, size_t error_size);
  void (*close)(void* self);

  /* Optional. 1 = told (NUL-terminated into `out`), 0 = cannot tell now. */
  int (*memory_generation)(void* self, char* out, size_t out_size);
  /* Optional. Without it, a closed connection's open requests are each sent
   * a read_hint_end (when the plugin takes read_hint_end). */
  int (*connection_closed)(void* self, uint64_t conn, char* error, size_t error_size);
  /* Optional: a JSON array of action names; NULL hook = read_hint, read_hint_end.
   * Anything else (not an array of strings, or NULL returned) fails the load.
   * The text is the plugin's; the agent reads it during the call only. */
  const char* (*hint_actions)(void* self);
  /* Optional: required when hint_actions lists write_wait. */
  void (*write_wait)(void* self, const rcxl_write_wait* wait, rcxl_write_wait_done done,
                     void* done_context);
} rcxl_region_extension_api_v1;

typedef const rcxl_region_extension_api_v1* (*rcxl_region_extension_v1_entry)(void);

#ifdef __cplusplus
}
#endif

#endif /* RCXL_CORE_EXTENSION_C_ABI_H_ */
