## One profiler translation unit: a kernel's type and the factory the profiler calls.
## Inputs: banner, kernel (descriptor), defines (macros set before any header: the kernel's
## launch needs them), type_definition (its family template, rendered).
${banner}
% for define in defines:
#define ${define}
% endfor
% for header in kernel.includes:
#include "${header}"
% endfor
#include "${kernel.adapter_header}"

${type_definition}
namespace kernelgen {

std::unique_ptr<Operation> make_${kernel.name}() {
  return std::make_unique<${kernel.adapter}<::${kernel.name}>>();
}

}  // namespace kernelgen
