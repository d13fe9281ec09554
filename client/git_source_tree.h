// File: client/git_source_tree.h
// -----------------------------------------------------------------------------
// .proto files as a git revision holds them, for `granary proto check
// --against=REV`: a protobuf SourceTree that reads ROOT/NAME at REV (`git
// cat-file blob REV:./ROOT/NAME`, git run in the current directory) for each
// of its roots in turn, then from a fallback tree (the files on disk).
//
//   absl::StatusOr<std::string> commit = ResolveGitRevision("v1.4.0");
//   GitSourceTree old(*commit, {"proto"}, &disk_tree);
//   ProtoLoader loader(&old, CompiledInDescriptors());
//
// Not thread-safe: one thread at a time. Runs git once a file opened.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/compiler/importer.h"

namespace granary::cli {

// The commit `revision` names in the git repository of the current
// directory; kInvalidArgument when git is missing, the directory is no
// repository or the revision names no commit.
absl::StatusOr<std::string> ResolveGitRevision(const std::string& revision);

class GitSourceTree final : public google::protobuf::compiler::SourceTree {
 public:
  // `roots`: directories as given (relative to the current directory or
  // absolute). `fallback` may be null; it is not owned.
  GitSourceTree(std::string commit, std::vector<std::string> roots,
                google::protobuf::compiler::SourceTree* fallback);

  // The text of `name` in the first root holding it at the commit, or
  // nullopt when none does.
  std::optional<std::string> ReadAtCommit(const std::string& name);

  google::protobuf::io::ZeroCopyInputStream* Open(
      const std::string& filename) override;

 private:
  std::string commit_;
  std::vector<std::string> roots_;
  google::protobuf::compiler::SourceTree* fallback_;
  // Texts handed out: they outlive the streams over them.
  std::vector<std::unique_ptr<std::string>> texts_;
};

}  // namespace granary::cli
