// Grouped convolution for the profiler and the launcher, beside operation.h's dense one.
//
// A grouped convolution of `groups` groups: channel c of the input belongs to group c / (C/groups),
// each group's K/groups filters of R x S x C/groups (KRS(C/groups), filter k of group
// k / (K/groups)) read its C/groups channels; groups = C = K is a depthwise convolution. The problem
// is operation.h's Conv2dProblem (C and K the totals) with the groups told apart: a kernel that
// computes grouped convolutions is a GroupedOperation, told the groups once with set_groups()
// before any other call; its can_implement, workspace_bytes, prepare and run then take the grouped
// problem. The profiler and the launcher give a grouped problem only to a GroupedOperation.
#pragma once

#include "operation.h"

namespace kernelgen {

class GroupedOperation : public Operation {
 public:
  // The groups of every problem this operation is given from now on (at least 2).
  virtual void set_groups(int groups) = 0;
};

}  // namespace kernelgen
