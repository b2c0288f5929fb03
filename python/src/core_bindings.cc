// acspeed._core: thin pybind11 layer over runtime/ and db/. Errors become ValueError (bad input)
// or RuntimeError (store problems); nothing else crosses into Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "acspeed/comm_methods.h"
#include "acspeed/config.h"
#include "acspeed/error.h"
#include "acspeed/fingerprint.h"
#include "acspeed/fp16_cast.h"
#include "acspeed/gpu_sharing.h"
#include "acspeed/model_signature.h"
#include "acspeed/node_count.h"
#include "acspeed/precision.h"
#include "acspeed/resolve.h"
#include "acspeed/settings.h"
#include "acspeed/store.h"
#include "acspeed/tuner/flows.h"
#include "acspeed/tuner/knobs.h"
#include "acspeed/tuner/online.h"

namespace py = pybind11;
using namespace acspeed;

namespace {

std::tuple<CommConfig, std::vector<std::string>> typed_config(const std::string& text) {
  std::vector<std::string> warnings;
  auto config = config_from_json(text, &warnings);
  return {std::move(config), std::move(warnings)};
}

// nnodes None: counted from this job's environment by the rule the tuner keys with (node_count.h).
py::dict resolve(const std::string& instance_type, const std::string& signature, const std::string& precision,
                 int64_t world_size, std::optional<int64_t> nnodes, const std::string& torch_version,
                 const std::string& nccl_version, bool gpus_shared) {
  ResolveRequest request;
  request.key = {instance_type, signature, precision, world_size, nnodes.value_or(0), gpus_shared};
  request.torch_version = torch_version;
  request.nccl_version = nccl_version;
  Resolution r;
  {
    py::gil_scoped_release release;
    r = resolve_config(request);
  }
  py::dict out;
  out["source"] = std::string(to_string(r.source));
  out["comm_config"] = r.config;
  out["applied"] = r.applied;
  out["message"] = r.message;
  out["decision_id"] = r.decision ? py::object(py::int_(r.decision->id)) : py::object(py::none());
  out["warnings"] = r.warnings;
  out["pinned"] = r.pinned;
  return out;
}

// nnodes None: counted from this job's environment (node_count.h), as resolve.
py::dict resolve_instance_knobs_dict(const std::string& instance_type, int64_t world_size, std::optional<int64_t> nnodes,
                                     bool gpus_shared, const std::string& torch_version,
                                     const std::string& nccl_version) {
  InstanceKnobsRequest request;
  request.instance_type = instance_type;
  request.world_size = world_size;
  request.nnodes = nnodes.value_or(0);
  request.gpus_shared = gpus_shared;
  request.torch_version = torch_version;
  request.nccl_version = nccl_version;
  InstanceKnobs k;
  {
    py::gil_scoped_release release;
    k = resolve_instance_knobs(request);
  }
  py::dict out;
  out["source"] = std::string(to_string(k.source));
  out["nccl_sockets"] = k.nccl_sockets ? py::object(py::str(to_string(k.nccl_sockets))) : py::object(py::none());
  out["environment"] = k.environment;
  out["message"] = k.message;
  out["decision_ids"] = k.decision_ids;
  return out;
}

py::dict fingerprint_dict(const std::string& torch_version) {
  auto fp = fingerprint();  // the key; the caller knows only torch's version of the details
  if (!torch_version.empty()) fp.details["torch"] = torch_version;
  py::dict out;
  out["instance_type"] = fp.instance_type;
  out["detected_key"] = fp.detected_key;
  out["explicit"] = fp.explicit_name;
  out["details"] = fp.details;
  return out;
}

// The online tuner for a job (tuner/include/acspeed/tuner/online.h): its space from the DDP arguments the user passed
// (JSON text, by the knob rows' ddp_argument names) and the ACSPEED_* pins; the step model of a
// stored session orders its candidates when `store_path` names a store that has one.
std::unique_ptr<tuner::OnlineTuner> make_online_tuner(const std::string& ddp_arguments, int nnodes, bool gpu,
                                                      int world_size, uint64_t seed, const std::string& store_path,
                                                      const std::string& instance_type,
                                                      const std::string& model_signature,
                                                      const std::string& precision, int window_steps,
                                                      int discard_steps, int lookahead, int max_windows,
                                                      bool rebuild_reducer, int warmup_steps) {
  const auto arguments = nlohmann::json::parse(ddp_arguments, nullptr, false);
  if (arguments.is_discarded()) ACS_THROW(InvalidArgument, "the DDP arguments '{}' are not JSON", ddp_arguments);
  tuner::OnlineOptions o;
  o.seed = seed;
  o.window_steps = window_steps;
  o.discard_steps = discard_steps;
  o.lookahead = lookahead;
  o.max_windows = max_windows;
  o.warmup_steps = warmup_steps;
  o.world_size = world_size;
  o.nnodes = nnodes;
  if (!store_path.empty()) {
    const auto store = Store::open({store_path, /*read_only=*/true});
    if (store->exists()) o.model = tuner::online_step_model(*store, instance_type, model_signature, precision, nnodes);
  }
  return std::make_unique<tuner::OnlineTuner>(tuner::online_space(arguments, world_size, nnodes, gpu, rebuild_reducer),
                                              std::move(o));
}

// Stores a settled online tuner in the store at `store_path` ("" = the default) as a session of kind
// online (tuner::store_online); the GIL is released while the store works (a writer thread calls it).
py::dict store_online_session(const tuner::OnlineTuner& tuner, const std::string& store_path,
                              const std::string& instance_type, const std::string& model_signature,
                              const std::string& precision, int64_t world_size, int64_t nnodes, bool gpus_shared,
                              const std::string& model_name, int64_t batch_size, const std::string& versions_json) {
  tuner::OnlineJob job;
  job.key = {instance_type, model_signature, precision, world_size, nnodes, gpus_shared};
  job.model_name = model_name;
  job.batch_size = batch_size;
  job.versions = nlohmann::json::parse(versions_json, nullptr, false);
  if (!job.versions.is_object()) ACS_THROW(InvalidArgument, "the job's versions '{}' are not a JSON object", versions_json);
  job.torch_version = job.versions.value("torch", "");
  job.nccl_version = job.versions.value("nccl", "");
  job.cuda_version = job.versions.value("cuda", "");
  tuner::StoredOnline stored;
  std::string path;
  {
    py::gil_scoped_release release;
    const auto store = Store::open({store_path, /*read_only=*/false});
    stored = tuner::store_online(*store, tuner, job);
    path = store->path();
  }
  py::dict out;
  out["session_id"] = stored.session_id;
  out["decision_id"] = stored.decision_id;
  out["active"] = stored.active;
  out["inactive_because"] = stored.inactive_because;
  out["store"] = path;
  return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "acspeed C++ runtime: config model, fingerprint, store lookup";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.attr("__version__") = ACSPEED_VERSION;
  m.attr("CONFIG_SCHEMA_VERSION") = kConfigSchemaVersion;
  m.attr("DDP_DEFAULT_BUCKET_MB") = kDdpDefaultBucketMb;
  py::class_<NcclRule>(m, "NcclRule", "One NCCL tuning rule of a CommConfig (read-only).")
      .def_readonly("collective", &NcclRule::collective)
      .def_readonly("min_bytes", &NcclRule::min_bytes)
      .def_readonly("max_bytes", &NcclRule::max_bytes)
      .def_readonly("algorithm", &NcclRule::algorithm)
      .def_readonly("protocol", &NcclRule::protocol)
      .def_readonly("channels", &NcclRule::channels)
      .def_readonly("chunk_bytes", &NcclRule::chunk_bytes, "bytes, or None: NCCL's chunk size");
  py::class_<AlgorithmInfo>(m, "AlgorithmInfo",
                            "An algorithm's row of runtime/include/acspeed/comm_methods.h (read-only).")
      .def_property_readonly("name", [](const AlgorithmInfo& a) { return std::string(a.name); })
      .def_readonly("by_node", &AlgorithmInfo::by_node)
      .def_readonly("crossing_phases", &AlgorithmInfo::crossing_phases);
  py::class_<CompressionInfo>(m, "CompressionInfo",
                              "A compression's row of runtime/include/acspeed/comm_methods.h (read-only); form is "
                              "as_is, cast or low_rank.")
      .def_property_readonly("name", [](const CompressionInfo& c) { return std::string(c.name); })
      .def_property_readonly("display_name", [](const CompressionInfo& c) { return std::string(c.display_name); })
      .def_property_readonly("form", [](const CompressionInfo& c) {
        switch (c.form) {
          case WireForm::kAsIs: return "as_is";
          case WireForm::kCast: return "cast";
          case WireForm::kLowRank: return "low_rank";
        }
        return "as_is";
      })
      .def_property_readonly("cast_dtype", [](const CompressionInfo& c) { return std::string(c.cast_dtype); })
      .def_readonly("cast_bytes", &CompressionInfo::cast_bytes)
      .def_readonly("changes_numerics", &CompressionInfo::changes_numerics)
      .def_readonly("own_compute", &CompressionInfo::own_compute)
      .def_readonly("collectives_per_bucket", &CompressionInfo::collectives_per_bucket)
      .def_readonly("ranked", &CompressionInfo::ranked);
  py::dict algorithm_table, compression_table;
  for (const auto& a : algorithms()) algorithm_table[py::str(std::string(a.name))] = py::cast(a, py::return_value_policy::reference);
  for (const auto& c : compressions()) compression_table[py::str(std::string(c.name))] = py::cast(c, py::return_value_policy::reference);
  m.attr("ALGORITHMS") = algorithm_table;
  m.attr("COMPRESSIONS") = compression_table;
  py::class_<CommConfig>(m, "CommConfig",
                         "The C++ communication config (runtime/include/acspeed/config.h), validated; read-only. "
                         "CommConfig() is DDP's defaults; CommConfig.from_json(text) -> (config, warnings).")
      .def(py::init<>())
      .def_static("from_json", &typed_config, py::arg("text"),
                  "Parses and validates config JSON (schema 1 or 2, runtime/CONFIG.md); returns (config, warnings). "
                  "ValueError names a bad value.")
      .def("to_json", [](const CommConfig& c, int indent) { return config_to_json(c, indent); },
           py::arg("indent") = -1)
      .def_property_readonly("bucket_cap_mb", [](const CommConfig& c) { return c.bucket_cap_mb; })
      .def_property_readonly("first_bucket_mb", [](const CommConfig& c) { return c.first_bucket_mb; })
      .def_property_readonly("gradient_as_bucket_view", [](const CommConfig& c) { return c.gradient_as_bucket_view; })
      .def_property_readonly("algorithm", [](const CommConfig& c) { return std::string(to_string(c.algorithm)); })
      .def_readonly("streams", &CommConfig::streams)
      .def_readonly("powersgd_rank", &CommConfig::powersgd_rank)
      .def_readonly("powersgd_start_step", &CommConfig::powersgd_start_step)
      .def_property_readonly("compression", [](const CommConfig& c) { return std::string(to_string(c.compression)); })
      .def_property_readonly("algorithm_info", [](const CommConfig& c) { return &info(c.algorithm); },
                             py::return_value_policy::reference)
      .def_property_readonly("compression_info", [](const CommConfig& c) { return &info(c.compression); },
                             py::return_value_policy::reference)
      .def_readonly("nccl_rules", &CommConfig::nccl_rules)
      .def_property_readonly(
          "nccl_sockets",
          [](const CommConfig& c) { return c.nccl_sockets ? py::object(py::str(to_string(c.nccl_sockets))) : py::none(); },
          "\"THREADSxSOCKETS\" (set at import, before any communicator), or None: NCCL's choice")
      .def("describe", &CommConfig::describe)
      .def("needs_comm_hook", &CommConfig::needs_comm_hook)
      .def("is_default", &CommConfig::is_default)
      .def("__eq__", [](const CommConfig& a, const CommConfig& b) { return a == b; })
      .def("__repr__", [](const CommConfig& c) { return "CommConfig(" + c.describe() + ")"; })
      .def(py::pickle([](const CommConfig& c) { return config_to_json(c); },
                      [](const std::string& text) { return config_from_json(text); }));
  m.attr("PRECISIONS") = py::tuple(py::cast(precision_names()));
  py::class_<tuner::Knob>(m, "Knob", "A search knob's row (tuner/include/acspeed/tuner/knobs.h), read-only.")
      .def_readonly("name", &tuner::Knob::name)
      .def_readonly("switchable", &tuner::Knob::switchable)
      .def_readonly("before_communicator", &tuner::Knob::before_communicator)
      .def_readonly("ddp_argument", &tuner::Knob::ddp_argument)
      .def_readonly("needs_gpu", &tuner::Knob::needs_gpu);
  py::tuple knob_table(tuner::knobs().size());
  for (size_t i = 0; i < tuner::knobs().size(); ++i) {
    knob_table[i] = py::cast(&tuner::knobs()[i], py::return_value_policy::reference);
  }
  m.attr("KNOBS") = knob_table;
  py::class_<tuner::WindowPlan>(m, "OnlineWindow", "What window k of online tuning runs (tuner/include/acspeed/tuner/online.h).")
      .def_readonly("index", &tuner::WindowPlan::index)
      .def_readonly("ordinal", &tuner::WindowPlan::ordinal)
      .def_readonly("config", &tuner::WindowPlan::config)
      .def_readonly("steps", &tuner::WindowPlan::steps)
      .def_readonly("discard", &tuner::WindowPlan::discard)
      .def_readonly("first_step", &tuner::WindowPlan::first_step)
      .def_property_readonly("role", [](const tuner::WindowPlan& w) {
        return w.role == tuner::WindowRole::kCandidate ? "candidate" : "baseline";
      })
      .def_readonly("settled", &tuner::WindowPlan::settled);
  py::class_<tuner::OnlineTuner>(m, "OnlineTuner",
                                 "The push-driven online tuner (tuner/include/acspeed/tuner/online.h): window(k) -> its plan; "
                                 "push(k, step_times_s) after it ran; settled; decision; evidence().")
      .def(py::init(&make_online_tuner), py::arg("ddp_arguments") = "{}", py::arg("nnodes") = 1,
           py::arg("gpu") = false, py::arg("world_size") = 0, py::arg("seed") = 0, py::arg("store_path") = "",
           py::arg("instance_type") = "", py::arg("model_signature") = "", py::arg("precision") = "",
           py::arg("window_steps") = tuner::OnlineOptions{}.window_steps,
           py::arg("discard_steps") = tuner::OnlineOptions{}.discard_steps,
           py::arg("lookahead") = tuner::OnlineOptions{}.lookahead,
           py::arg("max_windows") = tuner::OnlineOptions{}.max_windows, py::arg("rebuild_reducer") = true,
           py::arg("warmup_steps") = tuner::OnlineOptions{}.warmup_steps)
      .def("window", &tuner::OnlineTuner::window, py::arg("k"))
      .def("push", &tuner::OnlineTuner::push, py::arg("k"), py::arg("step_times_s"))
      .def_property_readonly("settled", &tuner::OnlineTuner::settled)
      .def_property_readonly("decision", &tuner::OnlineTuner::decision)
      .def_property_readonly("baseline", [](const tuner::OnlineTuner& t) { return t.space().baseline; })
      .def_property_readonly("pinned", [](const tuner::OnlineTuner& t) { return t.space().space.pinned; },
                             "The knobs held at one value, with why: \"streams (ACSPEED_STREAMS)\"")
      .def_property_readonly("note", &tuner::OnlineTuner::note)
      .def_property_readonly("speedup", &tuner::OnlineTuner::speedup)
      .def_property_readonly("ci_low", &tuner::OnlineTuner::ci_low)
      .def_property_readonly("ci_high", &tuner::OnlineTuner::ci_high)
      .def_property_readonly("max_exploration_steps", &tuner::OnlineTuner::max_exploration_steps)
      .def_property_readonly("max_window_steps", &tuner::OnlineTuner::max_window_steps)
      .def("evidence", [](const tuner::OnlineTuner& t) { return t.evidence().dump(); },
           "The decision's evidence as JSON text (the offline format, plus \"online\").")
      .def("windows", [](const tuner::OnlineTuner& t) { return nlohmann::json(t.windows()).dump(); },
           "Every window planned so far as JSON text (config, trial role, pair, used, measured step times).")
      .def("configs", [](const tuner::OnlineTuner& t) { return t.configs().dump(); },
           "Every point's config by ordinal as JSON text (what rank 0 broadcasts).");
  m.def("store_online_session", &store_online_session, py::arg("tuner"), py::arg("store_path"),
        py::arg("instance_type"), py::arg("model_signature"), py::arg("precision"), py::arg("world_size"),
        py::arg("nnodes"), py::arg("gpus_shared"), py::arg("model_name"), py::arg("batch_size"),
        py::arg("versions_json"),
        "Stores a settled OnlineTuner as a session of kind online with its decision (active unless an "
        "active decision of another kind holds the key): {session_id, decision_id, active, inactive_because, "
        "store}. RuntimeError for a store problem.");
  m.def("node_count", &node_count, py::arg("world_size"),
        "Machines in the job: NNODES, else GROUP_WORLD_SIZE, else world size / LOCAL_WORLD_SIZE, else 1; "
        "ValueError names a variable that is set but not a count of 1 to the world size.");
  m.def("model_signature", [](const std::vector<std::tuple<std::string, std::vector<int64_t>, std::string>>& params) {
    std::vector<ParamInfo> infos;
    infos.reserve(params.size());
    for (const auto& [name, shape, dtype] : params) infos.push_back({name, shape, dtype});
    return model_signature(infos);
  });
  m.def("fingerprint", &fingerprint_dict, py::arg("torch_version") = "");
  m.def("major_minor", &major_minor);
  m.def("setting_bool", [](const std::string& name) { return setting_bool(name); });
  m.def("setting_string", [](const std::string& name) { return setting_string(name); });
  m.def("default_store_path", &default_store_path);
  m.def("resolve", &resolve, py::arg("instance_type"), py::arg("model_signature"), py::arg("precision"),
        py::arg("world_size"), py::arg("nnodes") = py::none(), py::arg("torch_version") = "",
        py::arg("nccl_version") = "", py::arg("gpus_shared") = false);
  m.def("resolve_instance_knobs", &resolve_instance_knobs_dict, py::arg("instance_type") = "",
        py::arg("world_size") = 1, py::arg("nnodes") = py::none(), py::arg("gpus_shared") = false,
        py::arg("torch_version") = "", py::arg("nccl_version") = "",
        "The instance knobs `import acspeed` sets before any communicator (db/include/acspeed/resolve.h): "
        "{source, nccl_sockets, environment: [(variable, value)], message, decision_ids}; never raises.");
  m.def(
      "flows",
      [](const CommConfig& config, int world_size, int nnodes, const std::string& backend, const std::string& device) {
        return tuner::flows(config, {world_size, nnodes, tuner::groups_per_role(backend, device)});
      },
      py::arg("config"), py::arg("world_size"), py::arg("nnodes"), py::arg("backend"), py::arg("device"),
      "The config's flows between two nodes (tuner/include/acspeed/tuner/flows.h): streams, the hook's groups, "
      "and NCCL's sockets where NCCL carries the collectives.");
  m.def("gpus_shared", &gpus_shared, py::arg("asked"), py::arg("ranks_per_node"), py::arg("gpus"),
        "Whether a node's ranks share its GPUs: asked for (ACSPEED_SHARE_GPUS) and more ranks than GPUs.");
  // The fp16 compression's casts (runtime/include/acspeed/fp16_cast.h). Addresses, not tensors: this module
  // does not link torch. The hook engine (engine/cast.py, engine/fallback.py) passes two contiguous CPU
  // tensors' data_ptr() and their common numel, after checking their dtypes (fallback.fp16_of_fp32_on_cpu).
  m.def(
      "pack_fp16",
      [](uintptr_t src, uintptr_t dst, size_t count, float divisor) {
        py::gil_scoped_release release;
        pack_fp16(reinterpret_cast<const float*>(src), reinterpret_cast<uint16_t*>(dst), count, divisor);
      },
      py::arg("src"), py::arg("dst"), py::arg("count"), py::arg("divisor"),
      "Writes `count` fp32 values at address `src` as fp16 at `dst`, divided by `divisor` in fp16: torch's "
      "`src.to(torch.float16).div_(divisor)`, bit for bit, in one pass.");
  m.def(
      "unpack_fp16_if_finite",
      [](uintptr_t src, uintptr_t dst, size_t count) {
        py::gil_scoped_release release;
        return unpack_fp16_if_finite(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<float*>(dst), count);
      },
      py::arg("src"), py::arg("dst"), py::arg("count"),
      "Widens `count` fp16 values at address `src` into fp32 at `dst` unless one is NaN/Inf (then writes nothing); "
      "returns whether it widened.");
}
