// Compiles the golden proto's generated grain code and implements its grain,
// so a generator change that emits uncompilable code fails the build.
#include "proto/codegen/testdata/golden.grain.h"

namespace golden::v1 {

class LibraryGrain final : public LibraryGrainBase {
 public:
  granary::Task<Answer> Lookup(const Query& q) override {
    Answer a;
    a.add_lines(q.text());
    co_return a;
  }
  granary::Task<void> Shelve(const Query::Nested&) override { co_return; }
  granary::Task<Answer> Poke(const Query&) override { co_return Answer(); }
};

const granary::GrainClassInfo& LibraryInfo() {
  LibraryRef ref("k");
  (void)ref;
  return LibraryGrain::ClassInfo();
}

}  // namespace golden::v1
