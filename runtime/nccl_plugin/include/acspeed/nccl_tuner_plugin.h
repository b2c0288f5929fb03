/* libnccl-tuner-acspeed.so: acspeed's NCCL tuner plugin. The public C interface and the contract
 * with its users (NCCL and acspeed's Python side).
 *
 * Where it is
 *   Built next to the Python package (python/acspeed/libnccl-tuner-acspeed.so in a checkout) and
 *   installed to <prefix>/lib. It depends on nothing but glibc (>= 2.34 when built on Debian 12) and
 *   libgcc_s (libstdc++ is linked in, hidden), so a copy built on one x86-64 Linux machine runs on
 *   another: tests/gpu carries the one built here to the GPU machine.
 *
 * Exported symbols (nothing else is exported)
 *   ncclTunerPlugin_v6, ncclTunerPlugin_v5, ncclTunerPlugin_v4, ncclTunerPlugin_v3
 *       NCCL's versioned tuner structs; NCCL 2.30 picks v6 (it adds getChunkSize), 2.28 and 2.29
 *       pick v5. There is no version 2 struct: its getCollInfo picks an algorithm outright instead
 *       of passing the cost table this plugin edits. The plugin's name is "acspeed", so NCCL logs
 *       "TUNER/Plugin: Using acspeed (v6)" (or v5) at NCCL_DEBUG=INFO.
 *   acspeed_nccl_tuner_set_rules (below)
 *
 * How the Python side uses it (`import acspeed`)
 *   1. Before any NCCL communicator exists, write the active config (the versioned JSON of
 *      runtime/include/acspeed/config.h, config_to_json) to a file and set
 *        NCCL_TUNER_PLUGIN=<absolute path of libnccl-tuner-acspeed.so>   (NCCL limit: < 255 bytes)
 *        ACSPEED_NCCL_RULES=<absolute path of that config file>          (relative paths are refused)
 *      The plugin reads the file once, when the first communicator is initialised, and uses its
 *      `nccl_rules` for every communicator. Other fields of the config are ignored here.
 *   2. To change the rules later (a trial worker switching configs, or communicators created before
 *      `import acspeed`), load the SAME file with ctypes.CDLL(<the path given to NCCL_TUNER_PLUGIN>)
 *      (the dynamic loader then hands back the instance NCCL loaded) and call
 *        acspeed_nccl_tuner_set_rules(config_json_bytes)
 *      The new rules apply at once to every communicator, existing and future; the rules file is
 *      not read again afterwards. Keeping the ctypes handle also keeps the library loaded when NCCL
 *      destroys its last communicator and closes its own handle (otherwise a later communicator
 *      loads the library afresh and reads ACSPEED_NCCL_RULES again).
 *   To clear the rules pass a config without them, e.g. {"version": 1}.
 *
 * What a rule does (first matching rule wins; a collective matches when its type is the rule's
 * `collective` or the rule says "any", and min_bytes <= message bytes < max_bytes)
 *   - algorithm and/or protocol not "any": among the cost-table entries NCCL has not ruled out
 *     (entries at -1.0 are never touched), the cheapest one with that algorithm/protocol gets cost
 *     0.0, so NCCL picks it. If NCCL ruled out every such entry for this call, the table is left
 *     alone (NCCL's choice stands) and this is logged once per rule.
 *   - channels > 0 sets NCCL's channel count for the call; 0 leaves it to NCCL.
 *   - chunk_bytes (optional; absent leaves it to NCCL) replaces the chunk size NCCL computed, in
 *     getChunkSize (ABI v6, NCCL >= 2.30), when NCCL runs an algorithm and protocol the rule
 *     allows; NCCL then clamps it to its buffer and aligns it to the protocol. Under an older ABI
 *     (NCCL <= 2.29 loads v5) NCCL never asks: the chunk size is ignored, said once per rule set
 *     ("TUNER/acspeed: ... no getChunkSize"), and the rest of the rule applies.
 *   - No matching rule: the table is untouched, the channel count output is 0 (NCCL decides) and
 *     the chunk size stays NCCL's.
 *
 * Failure model
 *   The plugin never makes NCCL fail: every NCCL entry point returns success, no exception leaves
 *   the library, and an internal problem or a bad rules file is logged once through NCCL's logger
 *   ("TUNER/acspeed: ...", visible with NCCL_DEBUG=WARN or INFO) and leaves NCCL's own choices. */
#ifndef ACSPEED_NCCL_TUNER_PLUGIN_H_
#define ACSPEED_NCCL_TUNER_PLUGIN_H_

#ifdef __cplusplus
extern "C" {
#endif

#define ACSPEED_NCCL_TUNER_NAME "acspeed"
#define ACSPEED_NCCL_TUNER_LIBRARY "libnccl-tuner-acspeed.so"

/* Return values of acspeed_nccl_tuner_set_rules. */
#define ACSPEED_NCCL_TUNER_OK 0
#define ACSPEED_NCCL_TUNER_INVALID_CONFIG 1 /* null, not JSON, wrong schema or bad rule: rules kept */
#define ACSPEED_NCCL_TUNER_INTERNAL_ERROR 2 /* e.g. out of memory: rules kept */

/* Replaces the rules of every communicator, existing and future, with the `nccl_rules` of
 * `config_json` (a config as config_to_json writes it, NUL-terminated UTF-8). Thread-safe; never throws. On an error
 * the previous rules stay in force and the reason is logged once (through NCCL's logger when a
 * communicator has been initialised, else to stderr as acspeed's own warning). */
__attribute__((visibility("default"))) int acspeed_nccl_tuner_set_rules(const char* config_json);

#ifdef __cplusplus
}
#endif

#endif /* ACSPEED_NCCL_TUNER_PLUGIN_H_ */
