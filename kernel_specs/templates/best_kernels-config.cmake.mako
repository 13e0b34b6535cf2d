## The CMake package of one set's header and library: find_package(best_kernels PATHS <this folder>)
## defines the imported target best_kernels::best_kernels. Inputs: banner, set_name, gpu.
${banner}
#
# Set ${set_name}, measured on GPU ${gpu}. find_package(best_kernels REQUIRED PATHS <this folder>), then
# target_link_libraries(<your target> PRIVATE best_kernels::best_kernels): best_kernels.h on the
# include path, libbest_kernels.a (the launcher and the chosen kernels) and the CUDA runtime linked.
# A consumer compiles with any C++17 compiler; nothing of CUTLASS is needed.
if(TARGET best_kernels::best_kernels)
  return()
endif()
find_package(CUDAToolkit REQUIRED)
add_library(best_kernels::best_kernels STATIC IMPORTED)
set_target_properties(best_kernels::best_kernels PROPERTIES
  IMPORTED_LOCATION "${"${"}CMAKE_CURRENT_LIST_DIR}/libbest_kernels.a"
  IMPORTED_LINK_INTERFACE_LANGUAGES CXX
  INTERFACE_INCLUDE_DIRECTORIES "${"${"}CMAKE_CURRENT_LIST_DIR}"
  INTERFACE_COMPILE_FEATURES cxx_std_17
  INTERFACE_LINK_LIBRARIES CUDA::cudart)
if(NOT EXISTS "${"${"}CMAKE_CURRENT_LIST_DIR}/libbest_kernels.a")
  set(best_kernels_FOUND FALSE)
  set(best_kernels_NOT_FOUND_MESSAGE "${"${"}CMAKE_CURRENT_LIST_DIR} holds no libbest_kernels.a: build it with scons library WORKLOADS=${set_name}")
endif()
