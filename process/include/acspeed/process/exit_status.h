// Exit statuses as acspeed reports them: the exit code, or 128 + the signal that ended the process
// (the shell's convention), and a text for messages.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

namespace acspeed::process {

// Exit code of a waitpid() status: the exit status, or 128 + the terminating signal.
int exit_code_of_status(int wait_status);
// "exit code 3", or "signal 9 (SIGKILL: Killed)" for codes above 128.
std::string describe_exit_code(int exit_code);

// The exit code of child `pid` if it has ended (reaping it), nullopt while it runs.
std::optional<int> poll_exit(pid_t pid);
// Waits for child `pid` to end (retrying on EINTR) and returns its exit code.
int wait_exit(pid_t pid);

}  // namespace acspeed::process
