//! Starting opkit's background processes (a detached cluster, OLM's controllers) so that
//! nothing of their caller's stays open in them: stdin is `/dev/null`, stdout and stderr
//! go to the process's log file, it gets a process group of its own, and every other
//! descriptor it inherited (a pipe a shell passed down as `3>&1`, make's jobserver) is
//! closed on exec. Otherwise `$(opkit ...)` or `opkit ... | tee` would wait for the
//! background process to end, as it would still hold the pipe's write end.

use std::fs::File;
use std::process::{Child, Command, Stdio};

/// Spawns `command` in the background with its output in `log` (see the module).
pub(crate) fn spawn_background(command: &mut Command, log: File) -> std::io::Result<Child> {
    command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(command, 0);
    #[cfg(target_os = "linux")]
    close_inherited_on_exec(command);
    command.spawn()
}

/// Marks every descriptor above stderr close-on-exec in the child, after std has set up
/// its stdio (std's own descriptors are close-on-exec already, so this leaves its exec
/// error pipe working).
// One of the workspace's few exceptions to `unsafe_code = "deny"`: std has no way to
// keep a child from inheriting descriptors that were opened without O_CLOEXEC.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn close_inherited_on_exec(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec; it only makes raw system
    // calls (close_range, and fcntl on kernels before 5.11), which are async-signal-safe,
    // and touches no memory of the parent nor allocates.
    unsafe {
        command.pre_exec(|| {
            if libc::close_range(3, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int) == 0 {
                return Ok(());
            }
            let open_max = libc::sysconf(libc::_SC_OPEN_MAX);
            let last = if open_max > 0 { open_max.min(1 << 16) as libc::c_int } else { 1 << 16 };
            for fd in 3..last {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
}
