## The C++ type of one grouped tensor-core kernel (profiler/grouped_mma.h): 3x3 filters, K = C.
## Inputs: name (the procedural name), v (element, channels_per_group, stride, rows, columns, parity,
## slice: the most channels a CTA computes, None for all C: profiler/grouped_mma_sliced.h;
## pipelined: persistent CTAs of a slice, two windows: profiler/grouped_mma_pipelined.h; units: a
## spread kernel's units of output channels a CTA, None for the others: profiler/grouped_mma_spread.h,
## with pipelined: on persistent CTAs, profiler/grouped_mma_spread_pipelined.h; pdl: those launched as
## programmatic dependents, profiler/dependent_kernel.h; listed: those with each thread's window
## copies listed once, profiler/grouped_mma_listed.h).
% if v["listed"]:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}, persistent CTAs of ${v["units"]} units of output channels, two windows, each thread's window copies listed once${", a programmatic dependent launch" if v["pdl"] else ""}: ${name}
using ${name} = kernelgen::GroupedMmaSpreadListed<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}, ${"true" if v["parity"] else "false"}, ${v["units"]}${", true" if v["pdl"] else ""}>;
% elif v["units"] is not None and v["pipelined"]:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}, persistent CTAs of ${v["units"]} units of output channels, two windows${", a programmatic dependent launch" if v["pdl"] else ""}: ${name}
using ${name} = kernelgen::GroupedMmaSpreadPipelined<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}, ${"true" if v["parity"] else "false"}, ${v["units"]}${", true" if v["pdl"] else ""}>;
% elif v["units"] is not None:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}, ${v["units"]} units of output channels a CTA: ${name}
using ${name} = kernelgen::GroupedMmaSpread<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}, ${"true" if v["parity"] else "false"}, ${v["units"]}>;
% elif v["slice"] is None:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}: ${name}
using ${name} = kernelgen::GroupedMma<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}${", true" if v["parity"] else ""}>;
% elif v["pipelined"]:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}, persistent CTAs of ${v["slice"]} channels, two windows: ${name}
using ${name} = kernelgen::GroupedMmaPipelined<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}, ${"true" if v["parity"] else "false"}, ${v["slice"]}>;
% else:
// Grouped 3x3 stride ${v["stride"]}, ${v["channels_per_group"]} channels a group, tiles of ${v["rows"]} output rows by ${v["columns"]} columns${", the window split by column parity" if v["parity"] else ""}, at most ${v["slice"]} channels a CTA: ${name}
using ${name} = kernelgen::GroupedMmaSliced<${v["element"]}, ${v["channels_per_group"]}, ${v["stride"]}, ${v["rows"]}, ${v["columns"]}, ${"true" if v["parity"] else "false"}, ${v["slice"]}>;
% endif
