//! Process images (transparent checkpoint/restart, `steadfast-ckpt`): the ELF constructor
//! that restores an image before `main`, and the `MPIX_Steadfast_image_checkpoint` test call.

use std::ffi::{c_char, c_int, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::abi;
use crate::mpix_api;

/// Runs when the dynamic loader loads the library, before `main`: binds the process to its
/// CPUs under `STEADFAST_BIND_TO`; restores the image named
/// by `STEADFAST_RESTORE_IMAGE`, or re-executes the program with randomization off when
/// `STEADFAST_NORANDMAPS=1` (see `docs/checkpoint.md`); otherwise does nothing.
extern "C" fn restore_before_main(_argc: c_int, argv: *const *const c_char, envp: *const *const c_char) {
    // `--bind-to`: bound before any thread exists, so every thread started later inherits it.
    if let Err(msg) = steadfast_runtime::binding::apply_from_env() {
        eprintln!("steadfast: {msg}");
    }
    // A rank restored by `--ft coordinated` whose copy on this host is gone or damaged gets
    // the checkpoint server's first. Only a restored process takes this path; it runs
    // before any thread exists, and the restore replaces whatever memory it used.
    // Other restores (MPIX_Steadfast_image_checkpoint's images) have no record or server.
    let coordinated = std::env::var_os(steadfast_runtime::env::CKPT_DIR).is_some();
    if coordinated && steadfast_ckpt::personality::no_randomize_active() {
        if let Some(img) = std::env::var_os(steadfast_ckpt::ENV_RESTORE).filter(|v| !v.is_empty()) {
            match steadfast_runtime::ckpt_store::ensure_local_copy(Path::new(&img)) {
                Ok(Some(msg)) => eprintln!("steadfast: {msg}"),
                Ok(None) => {}
                Err(why) => {
                    eprintln!("steadfast: cannot restore process image: {why}");
                    std::process::exit(steadfast_ckpt::EXIT_RESTORE_REFUSED);
                }
            }
        }
    }
    // SAFETY: called by the loader as a constructor, with its argv/envp.
    unsafe { steadfast_ckpt::on_load(argv, envp) }
}

#[used]
#[link_section = ".init_array"]
static RESTORE_BEFORE_MAIN: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = restore_before_main;

fn error_class(e: &steadfast_ckpt::Error) -> c_int {
    use steadfast_ckpt::Error as E;
    match e {
        E::Io { .. } | E::Writer(_) | E::WriterDied(_) => abi::MPI_ERR_IO,
        _ => abi::MPI_ERR_OTHER,
    }
}

mpix_api! {
    /// Writes a process image of the calling process to `path` and waits until it is
    /// complete. `*restored` is 0 in the original process and 1 when a process restored
    /// from the image (started with `STEADFAST_RESTORE_IMAGE=path`) returns from this call.
    /// Today only for a process with no other thread (before `MPI_Init`); the message of a
    /// refusal is printed on stderr.
    fn Steadfast_image_checkpoint(path: *const c_char, restored: *mut c_int) -> c_int {
        if path.is_null() || restored.is_null() {
            return abi::MPI_ERR_ARG;
        }
        let path = Path::new(OsStr::from_bytes(CStr::from_ptr(path).to_bytes()));
        let result = match steadfast_ckpt::checkpoint(path, &steadfast_ckpt::Options::default()) {
            Ok(steadfast_ckpt::Outcome::Restored) => {
                *restored = 1;
                return abi::MPI_SUCCESS;
            }
            Ok(steadfast_ckpt::Outcome::Checkpointed(pending)) => pending.wait().map(|_| ()),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                *restored = 0;
                abi::MPI_SUCCESS
            }
            Err(e) => {
                eprintln!("MPIX_Steadfast_image_checkpoint: {e}");
                error_class(&e)
            }
        }
    }
}
