// Two copies of one leaf, built with matrix_trace_methods(PATCHABLE)'s flags
// (tracers/monitor/CMakeLists.txt): PatchableEntries::Patch() patches one
// with each mechanism and times them (Mechanism::kAuto). Each starts a
// 64-byte line, so that neither pays for its place.

namespace matrix::internal {

__attribute__((noinline, aligned(64))) int PatchCalibrationLeafA(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

__attribute__((noinline, aligned(64))) int PatchCalibrationLeafB(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

}  // namespace matrix::internal
