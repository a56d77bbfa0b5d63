//! The machine layer (x86-64 Linux), written in C with inline assembly in `arch/x86_64.c`:
//! the thread context, the fork at a checkpoint and the restorer's plan. The structures here
//! are shared with that file field by field.

use std::ffi::{c_int, c_long, c_void};

/// The calling thread's context at a checkpoint: the callee-saved registers, the stack
/// pointer and return address of the save point, the thread pointer (fs base) and the
/// floating-point control words. What `setjmp` keeps, without pointer mangling.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    pub rbx: u64,
    pub rbp: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rsp: u64,
    pub rip: u64,
    pub fsbase: u64,
    pub mxcsr: u32,
    pub fpucw: u16,
    pub pad: u16,
}

/// Size of [`Context`] in the image.
pub const CONTEXT_LEN: usize = 80;
const _: () = assert!(std::mem::size_of::<Context>() == CONTEXT_LEN);

impl Context {
    /// Little-endian bytes, as stored in the image header.
    pub fn encode(&self, out: &mut [u8; CONTEXT_LEN]) {
        let words = [
            self.rbx, self.rbp, self.r12, self.r13, self.r14, self.r15, self.rsp, self.rip,
            self.fsbase,
        ];
        for (i, w) in words.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        out[72..76].copy_from_slice(&self.mxcsr.to_le_bytes());
        out[76..78].copy_from_slice(&self.fpucw.to_le_bytes());
        out[78..80].copy_from_slice(&self.pad.to_le_bytes());
    }

    /// Inverse of [`Context::encode`].
    pub fn decode(b: &[u8; CONTEXT_LEN]) -> Context {
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Context {
            rbx: w(0),
            rbp: w(1),
            r12: w(2),
            r13: w(3),
            r14: w(4),
            r15: w(5),
            rsp: w(6),
            rip: w(7),
            fsbase: w(8),
            mxcsr: u32::from_le_bytes(b[72..76].try_into().expect("4 bytes")),
            fpucw: u16::from_le_bytes(b[76..78].try_into().expect("2 bytes")),
            pad: u16::from_le_bytes(b[78..80].try_into().expect("2 bytes")),
        }
    }
}

/// One step of the restorer's plan (`struct sf_op`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Op {
    pub op: u32,
    pub prot: u32,
    pub addr: u64,
    pub len: u64,
    pub off: u64,
    pub fd: i32,
    pub flags: u32,
}

/// `munmap(addr, len)`.
pub const OP_UNMAP: u32 = 1;
/// Raw `brk(addr)`; the break must land exactly there.
pub const OP_BRK: u32 = 2;
/// `mmap(addr, len, prot, flags | MAP_FIXED, fd, off)`.
pub const OP_MAP_FILE: u32 = 3;
/// Anonymous read-write mapping, `pread` of its bytes from `fd` at `off`, `mprotect(prot)`.
pub const OP_MAP_DATA: u32 = 4;
/// `pread` into an existing read-write mapping (`[heap]`, `[stack]`), then `mprotect(prot)`.
pub const OP_READ_INTO: u32 = 5;
/// Touch the pages of `[addr, addr+len)` from the top down, growing `[stack]` over them.
pub const OP_GROW_STACK: u32 = 6;
/// Anonymous `PROT_NONE` mapping (guard pages).
pub const OP_MAP_NONE: u32 = 7;
/// `close(fd)`.
pub const OP_CLOSE: u32 = 8;
/// Store the new thread id at `addr` (the thread descriptor's cached id).
pub const OP_SET_TID: u32 = 9;
/// Store `off` (a u64) at `addr`, after every region is in place.
pub const OP_STORE64: u32 = 10;

/// Header of the restorer's plan (`struct sf_plan`); the ops follow it in memory.
#[repr(C)]
#[derive(Debug)]
pub struct PlanHead {
    pub ctx: Context,
    pub self_addr: u64,
    pub self_len: u64,
    pub nops: u32,
    pub pad: u32,
}

/// Signature of the function a checkpoint child runs (returns its exit status).
pub type ChildFn = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

extern "C" {
    /// Saves the context into `ctx` and forks; see `arch/x86_64.c`. Parent: child pid or
    /// -errno. Child: runs `f(arg)` and exits. Restored process: returns 0.
    pub fn sf_checkpoint_fork(ctx: *mut Context, f: ChildFn, arg: *mut c_void) -> c_long;
    /// Switches to the stack ending at `stack_top` and carries out the plan; never returns.
    pub fn sf_restore_enter(plan: *const PlanHead, stack_top: u64) -> !;
}

/// The calling thread's thread pointer (the TCB points to itself at offset 0 on x86-64).
pub fn thread_pointer() -> u64 {
    let tp: u64;
    // SAFETY: fs:0 is the TCB self pointer on x86-64 Linux (glibc and musl).
    unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
    tp
}
