#include "client/git_source_tree.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

extern char** environ;

namespace granary::cli {
namespace {

namespace fs = std::filesystem;

struct GitResult {
  int exit_code = -1;  // -1: git did not run
  std::string out;
};

// Runs `git ARGS...` in the current directory: its stdout, stderr dropped.
GitResult Git(const std::vector<std::string>& args) {
  GitResult result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  std::vector<std::string> words = {"git"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid;
  int spawned =
      posix_spawnp(&pid, "git", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return result;
  }
  char buf[8192];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    result.out.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // 127: the shell's "command not found", which posix_spawnp may report
  // through the child.
  if (WIFEXITED(status) && WEXITSTATUS(status) != 127) {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

// ROOT/NAME as a git path relative to the current directory: git reads a
// path that starts with ./ or ../ so, any other from the repository's top.
std::string GitPath(const std::string& root, const std::string& name) {
  std::error_code ec;
  fs::path dir = root;
  if (dir.is_absolute()) {
    fs::path relative = fs::relative(dir, fs::current_path(ec), ec);
    if (!ec && !relative.empty()) dir = relative;
  }
  std::string path = (dir / name).lexically_normal().generic_string();
  return path.rfind("../", 0) == 0 ? path : "./" + path;
}

}  // namespace

absl::StatusOr<std::string> ResolveGitRevision(const std::string& revision) {
  if (revision.empty() || revision[0] == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", revision, "' is not a git revision"));
  }
  GitResult git =
      Git({"rev-parse", "--verify", "--quiet", revision + "^{commit}"});
  if (git.exit_code == -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", revision,
                     "' is not a directory, and git, to read it as a git "
                     "revision, did not run"));
  }
  if (git.exit_code != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", revision,
        "' is neither a directory nor a git revision of the repository here"));
  }
  return std::string(absl::StripAsciiWhitespace(git.out));
}

GitSourceTree::GitSourceTree(std::string commit, std::vector<std::string> roots,
                             google::protobuf::compiler::SourceTree* fallback)
    : commit_(std::move(commit)),
      roots_(std::move(roots)),
      fallback_(fallback) {}

std::optional<std::string> GitSourceTree::ReadAtCommit(
    const std::string& name) {
  for (const std::string& root : roots_) {
    // A root outside the repository: git fails, the next root is tried.
    GitResult git = Git(
        {"cat-file", "blob", absl::StrCat(commit_, ":", GitPath(root, name))});
    if (git.exit_code == 0) return std::move(git.out);
  }
  return std::nullopt;
}

google::protobuf::io::ZeroCopyInputStream* GitSourceTree::Open(
    const std::string& filename) {
  std::optional<std::string> text = ReadAtCommit(filename);
  if (!text.has_value()) {
    return fallback_ != nullptr ? fallback_->Open(filename) : nullptr;
  }
  texts_.push_back(std::make_unique<std::string>(*std::move(text)));
  return new google::protobuf::io::ArrayInputStream(
      texts_.back()->data(), static_cast<int>(texts_.back()->size()));
}

}  // namespace granary::cli
