// acspeed._probes: the step probes for Python (python/acspeed/probes.py is the API users call).
// Step profiles and summaries cross as plain dicts so they pickle (torch.distributed gathers them)
// and serialize to JSON unchanged. acspeed::InvalidArgument becomes ValueError, other
// acspeed::Error RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "acspeed/cpu_busy.h"
#include "acspeed/error.h"
#include "acspeed/kernel_overlap.h"
#include "acspeed/profile_summary.h"
#include "acspeed/step_recorder.h"

namespace py = pybind11;

namespace acspeed {
namespace {

template <typename T>
T field(const py::dict& d, const char* key) {
  if (!d.contains(key)) ACS_THROW(InvalidArgument, "step profile dict lacks the key '{}'", key);
  return d[key].cast<T>();
}

py::dict to_dict(const StepProfile& s) {
  py::list buckets;
  for (const auto& b : s.buckets) {
    py::dict bd;
    bd["index"] = b.index;
    bd["bytes"] = b.bytes;
    bd["comm_ns"] = b.comm_ns;
    buckets.append(bd);
  }
  py::dict d;
  d["wall_ns"] = s.wall_ns;
  d["compute_ns"] = s.compute_ns;
  d["comm_ns"] = s.comm_ns;
  d["exposed_comm_ns"] = s.exposed_comm_ns;
  d["overlap_ratio"] = s.overlap_ratio;
  d["buckets"] = buckets;
  return d;
}

StepProfile from_dict(const py::dict& d) {
  StepProfile s;
  s.wall_ns = field<int64_t>(d, "wall_ns");
  s.compute_ns = field<int64_t>(d, "compute_ns");
  s.comm_ns = field<int64_t>(d, "comm_ns");
  s.exposed_comm_ns = field<int64_t>(d, "exposed_comm_ns");
  s.overlap_ratio = field<double>(d, "overlap_ratio");
  for (const auto& item : field<py::list>(d, "buckets")) {
    const auto bd = item.cast<py::dict>();
    s.buckets.push_back(
        {field<int>(bd, "index"), field<int64_t>(bd, "bytes"), field<int64_t>(bd, "comm_ns")});
  }
  return s;
}

py::list to_list(const std::vector<StepProfile>& steps) {
  py::list out;
  for (const auto& s : steps) out.append(to_dict(s));
  return out;
}

std::vector<StepProfile> from_list(const py::list& steps) {
  std::vector<StepProfile> out;
  for (const auto& item : steps) out.push_back(from_dict(item.cast<py::dict>()));
  return out;
}

py::dict summary_to_dict(const ProfileSummary& s) {
  py::list rows;
  for (const auto& r : s.rows) {
    py::dict rd;
    rd["percentile"] = r.percentile;
    rd["wall_s"] = r.wall_s;
    rd["compute_s"] = r.compute_s;
    rd["comm_s"] = r.comm_s;
    rd["exposed_comm_s"] = r.exposed_comm_s;
    rd["overlap_ratio"] = r.overlap_ratio;
    rows.append(rd);
  }
  py::list buckets;
  for (const auto& b : s.buckets) {
    py::dict bd;
    bd["index"] = b.index;
    bd["bytes"] = b.bytes;
    bd["comm_s_p50"] = b.comm_s_p50;
    bd["steps"] = b.steps;
    buckets.append(bd);
  }
  py::dict d;
  d["steps"] = s.steps;
  d["ranks"] = s.ranks;
  d["backend"] = s.backend;
  d["combine"] =
      "per step: max over ranks of wall, compute, comm and exposed time and of each bucket's "
      "time; min over ranks of the overlap ratio";
  d["rows"] = rows;
  d["buckets"] = buckets;
  return d;
}

ProfileSummary summary_from_dict(const py::dict& d) {
  ProfileSummary s;
  s.steps = field<int64_t>(d, "steps");
  s.ranks = field<int>(d, "ranks");
  s.backend = field<std::string>(d, "backend");
  for (const auto& item : field<py::list>(d, "rows")) {
    const auto r = item.cast<py::dict>();
    s.rows.push_back({field<double>(r, "percentile"), field<double>(r, "wall_s"),
                      field<double>(r, "compute_s"), field<double>(r, "comm_s"),
                      field<double>(r, "exposed_comm_s"), field<double>(r, "overlap_ratio")});
  }
  for (const auto& item : field<py::list>(d, "buckets")) {
    const auto b = item.cast<py::dict>();
    s.buckets.push_back({field<int>(b, "index"), field<int64_t>(b, "bytes"),
                         field<double>(b, "comm_s_p50"), field<int64_t>(b, "steps")});
  }
  return s;
}

// The selected backend plus the notes on those skipped.
struct PyRecorder {
  PyRecorder(const std::string& device, const std::string& backend, bool profiler_active) {
    ProbeOptions options;
    options.device = device;
    options.backend = backend;
    options.external_profiler_active = profiler_active;
    auto selected = select_recorder(options);
    recorder = std::move(selected.recorder);
    notes = std::move(selected.notes);
  }
  StepRecorder* get() const {
    if (!recorder) ACS_THROW(Error, "the probe is closed");
    return recorder.get();
  }
  std::unique_ptr<StepRecorder> recorder;  // null once closed
  std::vector<std::string> notes;
};

}  // namespace
}  // namespace acspeed

PYBIND11_MODULE(_probes, m) {
  using namespace acspeed;
  m.doc() = "acspeed step probes (compute / communication / exposed communication per step)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<PyRecorder>(m, "Recorder")
      .def(py::init<const std::string&, const std::string&, bool>(), py::arg("device") = "cpu",
           py::arg("backend") = "auto", py::arg("external_profiler_active") = false,
           "Selects and starts the first enabled backend (or the one named).")
      .def_property_readonly("name", [](const PyRecorder& r) { return r.get()->name(); })
      .def_readonly("notes", &PyRecorder::notes)
      .def_property_readonly("needs_grad_marks",
                             [](const PyRecorder& r) { return r.get()->needs_grad_marks(); })
      .def("step_begin", [](PyRecorder& r) { r.get()->step_begin(); })
      .def("grad_ready", [](PyRecorder& r) { r.get()->grad_ready(); })
      .def("bucket_launched",
           [](PyRecorder& r, int index, int64_t nbytes) {
             // Never raises inside DDP's communication, not even once closed.
             if (r.recorder) r.recorder->bucket_launched(index, nbytes);
           },
           py::arg("index"), py::arg("nbytes"))
      .def("bucket_completed", [](PyRecorder& r, int index) {
             if (r.recorder) r.recorder->bucket_completed(index);
           },
           py::arg("index"))
      .def("backward_end", [](PyRecorder& r) { r.get()->backward_end(); })
      .def("step_end", [](PyRecorder& r) { r.get()->step_end(); })
      .def("profiles", [](PyRecorder& r) { return to_list(r.get()->profiles()); })
      .def("reset", [](PyRecorder& r) { r.get()->reset(); })
      .def_property_readonly("unmatched_events",
                             [](const PyRecorder& r) { return r.get()->unmatched_events(); })
      .def_property_readonly("warnings",
                             [](const PyRecorder& r) { return r.get()->warnings(); })
      .def("close", [](PyRecorder& r) { r.recorder.reset(); },
           "Stops the backend (CUPTI tracing ends here); later calls raise RuntimeError.");

  m.def("recorder_names", &recorder_names, "Backends built in, in selection order.");
  m.def(
      "combine_ranks",
      [](const py::list& per_rank) {
        std::vector<std::vector<StepProfile>> ranks;
        for (const auto& item : per_rank) ranks.push_back(from_list(item.cast<py::list>()));
        return to_list(combine_ranks(ranks));
      },
      py::arg("per_rank"), "per_rank[r] = rank r's step dicts -> combined step dicts");
  m.def(
      "summarize",
      [](const py::list& steps, const std::vector<double>& percentiles, int ranks,
         const std::string& backend) {
        SummaryOptions options;
        options.percentiles = percentiles;
        options.ranks = ranks;
        options.backend = backend;
        return summary_to_dict(summarize(from_list(steps), options));
      },
      py::arg("steps"), py::arg("percentiles") = std::vector<double>{50, 75, 90, 95},
      py::arg("ranks") = 1, py::arg("backend") = "");
  m.def(
      "kernel_overlap",
      [](const std::vector<std::tuple<std::string, int64_t, int64_t, int64_t>>& kernels) {
        std::vector<KernelRecord> records;
        records.reserve(kernels.size());
        for (const auto& [name, stream, begin_ns, end_ns] : kernels) records.push_back({name, stream, {begin_ns, end_ns}});
        const KernelOverlap o = kernel_overlap(records);
        py::dict d;
        d["compute_kernels"] = o.compute_kernels;
        d["comm_kernels"] = o.comm_kernels;
        d["comm_streams"] = o.comm_streams;
        d["compute_ns"] = o.compute_ns;
        d["comm_ns"] = o.comm_ns;
        d["comm_compute_overlap_ns"] = o.comm_compute_overlap_ns;
        d["comm_cross_stream_ns"] = o.comm_cross_stream_ns;
        return d;
      },
      py::arg("kernels"), "[(name, stream, begin_ns, end_ns)] -> overlap of NCCL and compute kernels (kernel_overlap.h)");
  m.def("cores_busy_seconds", &cores_busy_seconds, py::arg("cores"),
        "Busy CPU seconds so far of these cores (/proc/stat; cpu_busy.h); None where it cannot be read.");
  m.def(
      "format_summary", [](const py::dict& summary) { return format_summary(summary_from_dict(summary)); },
      py::arg("summary"));
}
