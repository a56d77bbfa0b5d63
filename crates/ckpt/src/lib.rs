//! Process images for transparent checkpoint/restart (x86-64 Linux only).
//!
//! [`checkpoint`] saves the calling thread's context (registers, stack pointer, thread
//! pointer) and forks; the child writes the process's memory into an image file while the
//! parent goes on. A later process of the same executable, started with
//! `ADDR_NO_RANDOMIZE` and [`ENV_RESTORE`] naming the image, replaces its memory with the
//! image before `main` (from the library's ELF constructor, [`on_load`]) and comes back out
//! of the same [`checkpoint`] call with [`Outcome::Restored`]. This is the process-image layer
//! of rollback recovery (MPICH-V's use of the Condor checkpoint library); the file format is
//! in [`format`], what is saved and what not yet in `docs/checkpoint.md`.

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("steadfast-ckpt supports x86-64 Linux only");

pub mod arch;
mod checkpoint;
mod error;
pub mod format;
pub mod maps;
pub mod personality;
mod restore;

pub use checkpoint::{checkpoint, other_threads, ImageStats, Options, Outcome, Pending};
pub use error::Error;
pub use personality::{command_no_randomize, no_randomize_active, set_no_randomize};
pub use restore::{on_load, restart_environment, restore, verify, ENV_NORANDMAPS, ENV_RESTORE, EXIT_RESTORE_FAILED, EXIT_RESTORE_REFUSED};

/// Replace `path` with `bytes` so that it holds the old or the new content whole, never a
/// part: written to `PATH.partial`, `fsync`ed, renamed, and the directory synced (what the
/// image writer does for images; for the small files kept next to them).
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}
