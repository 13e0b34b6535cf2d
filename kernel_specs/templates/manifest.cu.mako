## The profiler's registry: every kernel linked into it, sorted by name.
## Inputs: banner, names.
${banner}
#include "operation.h"

namespace kernelgen {

% for name in names:
std::unique_ptr<Operation> make_${name}();
% endfor

const std::vector<Registration>& registry() {
  static const std::vector<Registration> kernels = {
% for name in names:
      {"${name}", &make_${name}},
% endfor
  };
  return kernels;
}

}  // namespace kernelgen
