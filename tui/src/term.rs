//! Terminal setup and restore. The terminal is restored on a normal exit,
//! on an error, on Ctrl-C (a key in raw mode: the main loop quits) and on a
//! panic (the hook restores before the message is printed).
//!
//! A terminal that is gone (its tmux pane or SSH session closed) is not
//! restored: the process ends at once ([`lost`]), on SIGHUP (set up in
//! `main.rs`) and when the terminal's input or output fails
//! ([`exit_when_lost`], and the main loop's draw and key errors).

use std::fs::File;
use std::io::{self, IsTerminal, Stdout};
use std::os::fd::AsFd;

use crossterm::cursor::{Hide, Show};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Raw mode, alternate screen, hidden cursor, and the panic hook.
pub fn init() -> io::Result<Term> {
    install_panic_hook();
    enable_raw_mode()?;
    let mut out = io::stdout();
    if let Err(e) = execute!(out, EnterAlternateScreen, Hide) {
        restore();
        return Err(e);
    }
    Terminal::new(CrosstermBackend::new(out)).inspect_err(|_| restore())
}

/// Leaves raw mode and the alternate screen; safe to call twice.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// Restores the terminal when dropped (errors and early returns).
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Exit status when the terminal's input or output fails.
pub const LOST_STATUS: i32 = 1;

/// Exit status on SIGHUP (128 + the signal's number, as a shell reports it).
pub const HANGUP_STATUS: i32 = 129;

/// Ends the process at once, restoring nothing and running no exit hook:
/// the terminal is gone, and anything written to it (the restore, a buffered
/// frame) could only fail or block.
pub fn lost() -> ! {
    signal_hook::low_level::exit(LOST_STATUS)
}

/// Watches the terminal from a thread of its own and ends the process
/// ([`lost`]) when its input or output hangs up or fails. The main loop
/// cannot see this itself: on a hung-up terminal crossterm's key reader
/// reads 0 bytes and reads again without returning, which is a busy loop
/// that never looks at the stop flag. The watcher sleeps in `poll(2)` asking
/// for no event, so only a hang-up or an error wakes it.
///
/// It watches the input crossterm reads (standard input when it is a
/// terminal, else `/dev/tty`) and standard output.
pub fn exit_when_lost() -> io::Result<()> {
    let tty = if io::stdin().is_terminal() {
        None
    } else {
        Some(File::open("/dev/tty")?)
    };
    std::thread::Builder::new()
        .name("terminal-watch".into())
        .spawn(move || {
            let stdin = io::stdin();
            let stdout = io::stdout();
            let input = match &tty {
                Some(file) => file.as_fd(),
                None => stdin.as_fd(),
            };
            // Returns on a hang-up, or when poll(2) itself fails: a run that
            // can no longer notice the end of its terminal must not go on.
            let _ = wait_for_hangup(&[input, stdout.as_fd()]);
            lost()
        })?;
    Ok(())
}

/// Blocks until one of `fds` reports a hang-up, an error or a closed
/// descriptor; returns the error of `poll(2)` if that fails.
fn wait_for_hangup(fds: &[std::os::fd::BorrowedFd<'_>]) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    let gone = PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL;
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::empty()))
        .collect();
    loop {
        match poll(&mut polled, None) {
            Ok(_) if polled.iter().any(|p| p.revents().intersects(gone)) => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
