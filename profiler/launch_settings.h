// Kernels launched with settings chosen at profile time, beside operation.h's fixed ones.
//
// Some of a kernel's parameters need no recompile: a CUTLASS 3.x tile scheduler's raster order and
// swizzle, a stream-K scheduler's decomposition and K splits. A kernel that offers them is a
// SettingsAtLaunch as well as an Operation: settings() names each way it can be launched, as text
// ("raster=n swizzle=2", "decomposition=split_k splits=3"), and set_setting() picks one for the
// calls after it (can_implement, workspace_bytes, prepare and the runs it prepares). The profiler
// measures each setting and records the fastest in the result's row; the launcher launches the
// kernel with the setting recorded (found by its text, so that a reordered list changes nothing).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kernelgen {

class SettingsAtLaunch {
 public:
  virtual ~SettingsAtLaunch() = default;
  // The settings, each as text of no tab, newline or comma; the first is what a launch gets
  // before any set_setting().
  virtual std::vector<std::string> settings() const = 0;
  // The setting (an index into settings()) of the calls from now on.
  virtual void set_setting(size_t index) = 0;
};

// The index of `text` in `operation`'s settings, or -1.
inline long setting_index(const SettingsAtLaunch& operation, const std::string& text) {
  const std::vector<std::string> all = operation.settings();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == text) return long(i);
  }
  return -1;
}

}  // namespace kernelgen
