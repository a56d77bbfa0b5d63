/*
 * x86-64 Linux machine layer of steadfast-ckpt: saving and resuming a thread context, the
 * fork at a checkpoint, and the restorer that replaces the process's memory with an image.
 *
 * The restorer (sf_restore_enter and everything it calls) runs while every writable region
 * of the process -- libc's data, every GOT, this library's own .data/.bss -- is being
 * overwritten.  So it uses no libc, no PLT, no global variable and no TLS: only its
 * arguments (the plan, in a private mapping), raw `syscall` instructions, and code and
 * string literals in read-only mappings that are the same in the old and the new layout.
 * The file is compiled with -ffreestanding -fno-builtin -fno-stack-protector so the
 * compiler adds no memcpy/memset calls and no canary read from TLS.
 */
#include <stdint.h>
#include <stddef.h>
#include <errno.h>
#include <unistd.h>

/* Must match `Context` in src/arch.rs. */
struct sf_ctx {
    uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip, fsbase;
    uint32_t mxcsr;
    uint16_t fpucw;
    uint16_t pad;
};

/* Must match `Op` and `Plan` in src/arch.rs. */
struct sf_op {
    uint32_t op;
    uint32_t prot;
    uint64_t addr;
    uint64_t len;
    uint64_t off;
    int32_t fd;
    uint32_t flags;
};

struct sf_plan {
    struct sf_ctx ctx;
    uint64_t self_addr;
    uint64_t self_len;
    uint32_t nops;
    uint32_t pad;
    struct sf_op ops[];
};

enum {
    SF_OP_UNMAP = 1,      /* munmap(addr, len) */
    SF_OP_BRK = 2,        /* brk(addr), must land exactly on addr */
    SF_OP_MAP_FILE = 3,   /* mmap(addr, len, prot, flags|MAP_FIXED, fd, off) */
    SF_OP_MAP_DATA = 4,   /* anonymous rw mapping, pread len bytes from fd at off, mprotect */
    SF_OP_READ_INTO = 5,  /* pread into an existing rw mapping ([heap], [stack]), mprotect */
    SF_OP_GROW_STACK = 6, /* touch every page of [addr, addr+len) from the top down */
    SF_OP_MAP_NONE = 7,   /* anonymous PROT_NONE mapping (guard pages) */
    SF_OP_CLOSE = 8,      /* close(fd) */
    SF_OP_SET_TID = 9,    /* *(int32_t *)addr = gettid() (the thread's cached id) */
    SF_OP_STORE64 = 10,   /* *(uint64_t *)addr = off (a value for the restored process) */
};

/* ---- context save / resume ---------------------------------------------------------- */

/* int sf_ctx_save(struct sf_ctx *ctx): like setjmp, returns 0; returns 1 when
 * sf_ctx_resume jumps back to it (in a restored process). */
__attribute__((returns_twice)) int sf_ctx_save(struct sf_ctx *ctx);

/* sf_ctx_resume(ctx, unmap_addr, unmap_len): sets fs base, loads the callee-saved
 * registers, switches to the saved stack, unmaps [unmap_addr, +unmap_len) (the plan and
 * private stack this code was running on) and returns 1 from sf_ctx_save. */
__attribute__((noreturn)) void sf_ctx_resume(const struct sf_ctx *ctx, uint64_t unmap_addr,
                                             uint64_t unmap_len);

/* sf_restore_enter(plan, stack_top): switches to the private stack and runs the plan. */
__attribute__((noreturn)) void sf_restore_enter(const struct sf_plan *plan, uint64_t stack_top);

__asm__(
    ".text\n"
    ".globl sf_ctx_save\n"
    ".hidden sf_ctx_save\n"
    ".type sf_ctx_save,@function\n"
    "sf_ctx_save:\n"
    "    movq %rbx, 0(%rdi)\n"
    "    movq %rbp, 8(%rdi)\n"
    "    movq %r12, 16(%rdi)\n"
    "    movq %r13, 24(%rdi)\n"
    "    movq %r14, 32(%rdi)\n"
    "    movq %r15, 40(%rdi)\n"
    "    leaq 8(%rsp), %rdx\n"      /* the caller's stack pointer after we return */
    "    movq %rdx, 48(%rdi)\n"
    "    movq (%rsp), %rdx\n"       /* our return address */
    "    movq %rdx, 56(%rdi)\n"
    "    movq %fs:0, %rdx\n"        /* the TCB points to itself: the fs base */
    "    movq %rdx, 64(%rdi)\n"
    "    stmxcsr 72(%rdi)\n"
    "    fnstcw 76(%rdi)\n"
    "    xorl %eax, %eax\n"
    "    ret\n"
    ".size sf_ctx_save, .-sf_ctx_save\n"

    ".globl sf_ctx_resume\n"
    ".hidden sf_ctx_resume\n"
    ".type sf_ctx_resume,@function\n"
    "sf_ctx_resume:\n"
    "    movq %rdi, %r8\n"
    "    movq %rsi, %r9\n"
    "    movq %rdx, %r10\n"
    "    movl $0x1002, %edi\n"      /* arch_prctl(ARCH_SET_FS, fsbase) */
    "    movq 64(%r8), %rsi\n"
    "    movl $158, %eax\n"
    "    syscall\n"
    "    ldmxcsr 72(%r8)\n"
    "    fldcw 76(%r8)\n"
    "    movq 0(%r8), %rbx\n"
    "    movq 8(%r8), %rbp\n"
    "    movq 16(%r8), %r12\n"
    "    movq 24(%r8), %r13\n"
    "    movq 32(%r8), %r14\n"
    "    movq 40(%r8), %r15\n"
    "    movq 48(%r8), %rsp\n"
    "    pushq 56(%r8)\n"           /* below the saved sp: free at the save point */
    "    movq %r9, %rdi\n"          /* munmap(plan area): ctx is not read after this */
    "    movq %r10, %rsi\n"
    "    movl $11, %eax\n"
    "    syscall\n"
    "    movl $1, %eax\n"
    "    ret\n"
    ".size sf_ctx_resume, .-sf_ctx_resume\n"

    ".globl sf_restore_enter\n"
    ".hidden sf_restore_enter\n"
    ".type sf_restore_enter,@function\n"
    "sf_restore_enter:\n"
    "    movq %rsi, %rsp\n"
    "    andq $-16, %rsp\n"
    "    xorl %ebp, %ebp\n"
    "    call sf_restore_main\n"
    "    ud2\n"
    ".size sf_restore_enter, .-sf_restore_enter\n");

/* ---- checkpoint fork ------------------------------------------------------------------ */

typedef int (*sf_child_fn)(void *arg);

/* Saves the caller's context into *ctx and forks.  In the parent returns the child's pid
 * (> 0) or -errno; in the child runs fn(arg) on the stack below this frame (so every frame
 * from here up stays as it was at the fork, which is what the image must hold) and exits
 * with its result; in a restored process returns 0. */
__attribute__((visibility("hidden"), noinline)) long sf_checkpoint_fork(struct sf_ctx *ctx,
                                                                       sf_child_fn fn,
                                                                       void *arg) {
    if (sf_ctx_save(ctx) != 0)
        return 0;
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn(arg));
    if (pid < 0)
        return -(long)errno;
    return pid;
}

/* ---- restorer: raw system calls only ---------------------------------------------------- */

static inline long sf_sys(long n, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

#define SYS_read_ 0
#define SYS_write_ 1
#define SYS_close_ 3
#define SYS_mmap_ 9
#define SYS_mprotect_ 10
#define SYS_munmap_ 11
#define SYS_brk_ 12
#define SYS_pread64_ 17
#define SYS_gettid_ 186
#define SYS_exit_group_ 231

#define PROT_READ_ 1
#define PROT_WRITE_ 2
#define MAP_PRIVATE_ 0x02
#define MAP_FIXED_ 0x10
#define MAP_ANONYMOUS_ 0x20

static uint64_t sf_strlen(const char *s) {
    uint64_t n = 0;
    while (s[n])
        n++;
    return n;
}

static void sf_puthex(char *buf, uint64_t v) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        buf[i] = digits[v & 15];
        v >>= 4;
    }
}

/* The process is half replaced: say what failed and end it.  Exit status 71 (EX_OSERR). */
__attribute__((noreturn)) static void sf_die(const char *what, uint64_t addr, long err) {
    char num[16];
    static const char head[] = "steadfast: restore failed while the image was being loaded: ";
    sf_sys(SYS_write_, 2, (long)head, sizeof head - 1, 0, 0, 0);
    sf_sys(SYS_write_, 2, (long)what, (long)sf_strlen(what), 0, 0, 0);
    sf_sys(SYS_write_, 2, (long)" at 0x", 6, 0, 0, 0);
    sf_puthex(num, addr);
    sf_sys(SYS_write_, 2, (long)num, 16, 0, 0, 0);
    sf_sys(SYS_write_, 2, (long)" errno ", 7, 0, 0, 0);
    sf_puthex(num, (uint64_t)(-err));
    sf_sys(SYS_write_, 2, (long)num + 12, 4, 0, 0, 0);
    sf_sys(SYS_write_, 2, (long)"\n", 1, 0, 0, 0);
    for (;;)
        sf_sys(SYS_exit_group_, 71, 0, 0, 0, 0, 0);
}

static void sf_pread_all(int fd, uint64_t addr, uint64_t len, uint64_t off) {
    while (len > 0) {
        uint64_t chunk = len > (1u << 30) ? (1u << 30) : len;
        long n = sf_sys(SYS_pread64_, fd, (long)addr, (long)chunk, (long)off, 0, 0);
        if (n == -EINTR)
            continue;
        if (n <= 0)
            sf_die("reading region data", addr, n == 0 ? -EIO : n);
        addr += (uint64_t)n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
}

__attribute__((visibility("hidden"), used, noreturn)) void
sf_restore_main(const struct sf_plan *plan) {
    for (uint32_t i = 0; i < plan->nops; i++) {
        const struct sf_op *o = &plan->ops[i];
        long r;
        switch (o->op) {
        case SF_OP_UNMAP:
            r = sf_sys(SYS_munmap_, (long)o->addr, (long)o->len, 0, 0, 0, 0);
            if (r < 0)
                sf_die("munmap", o->addr, r);
            break;
        case SF_OP_BRK:
            r = sf_sys(SYS_brk_, (long)o->addr, 0, 0, 0, 0, 0);
            if ((uint64_t)r != o->addr)
                sf_die("brk", o->addr, -ENOMEM);
            break;
        case SF_OP_MAP_FILE:
            r = sf_sys(SYS_mmap_, (long)o->addr, (long)o->len, (long)o->prot,
                       (long)(o->flags | MAP_FIXED_), o->fd, (long)o->off);
            if ((uint64_t)r != o->addr)
                sf_die("mapping a file", o->addr, r);
            break;
        case SF_OP_MAP_DATA:
            r = sf_sys(SYS_mmap_, (long)o->addr, (long)o->len, PROT_READ_ | PROT_WRITE_,
                       MAP_PRIVATE_ | MAP_FIXED_ | MAP_ANONYMOUS_, -1, 0);
            if ((uint64_t)r != o->addr)
                sf_die("mapping a region", o->addr, r);
            /* fall through */
        case SF_OP_READ_INTO:
            sf_pread_all(o->fd, o->addr, o->len, o->off);
            if (o->prot != (PROT_READ_ | PROT_WRITE_)) {
                r = sf_sys(SYS_mprotect_, (long)o->addr, (long)o->len, (long)o->prot, 0, 0, 0);
                if (r < 0)
                    sf_die("mprotect", o->addr, r);
            }
            break;
        case SF_OP_GROW_STACK: {
            /* A write below a grows-down mapping extends it, one page at a time. */
            uint64_t a = o->addr + o->len;
            while (a > o->addr) {
                a -= 4096;
                *(volatile char *)a = 0;
            }
            break;
        }
        case SF_OP_MAP_NONE:
            r = sf_sys(SYS_mmap_, (long)o->addr, (long)o->len, 0,
                       MAP_PRIVATE_ | MAP_FIXED_ | MAP_ANONYMOUS_, -1, 0);
            if ((uint64_t)r != o->addr)
                sf_die("mapping a guard region", o->addr, r);
            break;
        case SF_OP_CLOSE:
            sf_sys(SYS_close_, o->fd, 0, 0, 0, 0, 0);
            break;
        case SF_OP_SET_TID:
            *(volatile int32_t *)o->addr = (int32_t)sf_sys(SYS_gettid_, 0, 0, 0, 0, 0, 0);
            break;
        case SF_OP_STORE64:
            *(volatile uint64_t *)o->addr = o->off;
            break;
        default:
            sf_die("unknown plan step", o->op, -EINVAL);
        }
    }
    sf_ctx_resume(&plan->ctx, plan->self_addr, plan->self_len);
}
