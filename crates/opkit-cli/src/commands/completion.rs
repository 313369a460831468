//! `opkit completion <shell>`: the shell completion script, from the clap definitions.

use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the completion script for `shell` on stdout.
pub(super) fn print(shell: clap_complete::Shell) {
    clap_complete::generate(shell, &mut Cli::command(), "opkit", &mut std::io::stdout());
}
