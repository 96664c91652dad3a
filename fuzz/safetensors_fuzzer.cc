// safetensors files are untrusted input: an 8-byte header length, a JSON
// header of dtypes, shapes and data offsets, then the data. Load arbitrary
// bytes and read the first and last byte of every tensor (ASan checks them).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "model/safetensors.h"
#include "model/weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = loom::fuzz::WriteScratchFile("model.safetensors", data, size);
  loom::WeightStore store;
  if (!loom::LoadSafetensorsFile(path, store).ok()) return 0;
  for (const std::string& name : store.Names()) {
    absl::StatusOr<const loom::Tensor*> t = store.Get(name);
    if (t.ok()) loom::fuzz::Touch((*t)->data);
  }
  return 0;
}
