#!/usr/bin/env bash
# Process images (crates/ckpt, docs/checkpoint.md), end to end: tests/ckpt/image_prog.c is
# built with our mpicc, computes for a while, takes an image with
# MPIX_Steadfast_image_checkpoint, kills itself with SIGKILL, and is started again with
# STEADFAST_RESTORE_IMAGE; its output must be byte-identical to an uninterrupted run.
# Also: an image taken by a restored process, restoring twice from one image, the re-exec path (STEADFAST_NORANDMAPS=1), a saved
# stack larger and smaller than the restarting process's, a 64 MiB
# malloc, and the refusals (damaged data, damaged header, truncated and missing image, a
# second thread, randomization on), each with its message and exit status.
#
#   tests/ckpt/run.sh [PREFIX]      (PREFIX defaults to ./install)
#
# Skips (exit 0, says so) where the ADDR_NO_RANDOMIZE personality cannot be set or the
# machine is not x86-64 Linux.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${1:-$root/install}
mpicc="$prefix/bin/mpicc"
build="$root/tests/c/build/ckpt"
[ -x "$mpicc" ] || { echo "ckpt/run.sh: $mpicc not found (make install first)" >&2; exit 2; }
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "SKIP process images: implemented for x86-64 Linux only"; exit 0
fi
if ! command -v setarch >/dev/null || ! setarch -R true 2>/dev/null; then
    echo "SKIP process images: the ADDR_NO_RANDOMIZE personality cannot be set here (setarch -R fails)"
    exit 0
fi
rm -rf "$build"; mkdir -p "$build"
cd "$build" || exit 2
if ! "$mpicc" -O2 -Wall -Werror -o prog "$here/image_prog.c" -ldl -lpthread >build.log 2>&1; then
    cat build.log; echo "FAIL compile"; exit 1
fi

passed=0; failed=0
pass() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
run() { timeout -k 5 60 "$@" </dev/null; }

# expect_refusal NAME STATUS PATTERN COMMAND...: exits STATUS and says PATTERN on stderr.
expect_refusal() {
    local name=$1 want=$2 pat=$3; shift 3
    run "$@" >"$name.out" 2>"$name.err"; local rc=$?
    if [ "$rc" -ne "$want" ]; then fail "$name" "exit status $rc, expected $want ($(head -c 300 "$name.err"))"
    elif ! grep -q -- "$pat" "$name.err"; then fail "$name" "no '$pat' on stderr: $(head -c 300 "$name.err")"
    else pass "$name: $(grep -m1 -- "$pat" "$name.err")"; fi
}

# kill_and_restore NAME MIB START_PREFIX...: reference run, run killed after its checkpoint,
# restore; the restored output must equal the reference. ORIG_ENV / RESTART_ENV: an `env`
# prefix for the first two runs / for the restart.
kill_and_restore() {
    local name=$1 mib=$2; shift 2
    local img="$build/$name.img"
    run ${ORIG_ENV:-} "$@" ./prog "$img.ref" "$mib" >"$name.ref" 2>"$name.ref.err" || { fail "$name" "reference run failed"; return; }
    rm -f "$img.ref"
    run ${ORIG_ENV:-} "$@" ./prog "$img" "$mib" kill >"$name.killed" 2>"$name.killed.err"; local rc=$?
    if [ "$rc" -ne 137 ]; then fail "$name" "killed run exited $rc, expected 137"; return; fi
    if [ ! -s "$img" ] || [ -e "$img.partial" ]; then fail "$name" "no complete image (or a .partial left)"; return; fi
    # Everything printed before the kill was still in stdout's buffer: the restored run
    # prints it from the saved buffer.
    if [ -s "$name.killed" ]; then fail "$name" "the killed run flushed stdout (the stdio buffer is not tested)"; return; fi
    STEADFAST_RESTORE_IMAGE="$img" run ${RESTART_ENV:-} "$@" ./prog "$img" "$mib" >"$name.restored" 2>"$name.restored.err"; rc=$?
    if [ "$rc" -ne 0 ]; then fail "$name" "restored run exited $rc: $(tail -c 300 "$name.restored.err")"; return; fi
    if ! grep -q "restored=1" "$name.restored.err"; then fail "$name" "the restored run did not come back from the checkpoint"; return; fi
    if ! cmp -s "$name.ref" "$name.restored"; then fail "$name" "output differs from the uninterrupted run"; diff "$name.ref" "$name.restored" | head; return; fi
    pass "$name: restored output identical ($(wc -c <"$name.ref") bytes; image $(stat -c %s "$img") bytes; $(grep -o 'after [0-9.]* ms' "$name.killed.err"))"
}

kill_and_restore small 1 setarch -R
kill_and_restore large-malloc 64 setarch -R
kill_and_restore reexec 4 env STEADFAST_NORANDMAPS=1
# The saved stack is larger than the restarting process's (grown down page by page), then
# smaller (200 KB more environment on one side).
big=$(head -c 100000 /dev/zero | tr '\0' x)
ORIG_ENV="env BIG1=$big BIG2=$big"; kill_and_restore stack-grows 1 setarch -R; ORIG_ENV=
RESTART_ENV="env BIG1=$big BIG2=$big"; kill_and_restore stack-shrinks 1 setarch -R; RESTART_ENV=

# A restored process takes an image itself: original killed after IMAGE, its restore killed
# after IMAGE.2, the restore from IMAGE.2 finishes.
chain() {
    local img="$build/chain.img"
    run setarch -R ./prog "$img" 1 killall >chain.1 2>chain.1.err; local r1=$?
    STEADFAST_RESTORE_IMAGE="$img" run setarch -R ./prog "$img" 1 >chain.2 2>chain.2.err; local r2=$?
    STEADFAST_RESTORE_IMAGE="$img.2" run setarch -R ./prog "$img" 1 >chain.3 2>chain.3.err; local r3=$?
    if [ "$r1 $r2 $r3" != "137 137 0" ]; then fail "chain" "exit statuses $r1 $r2 $r3, expected 137 137 0: $(tail -c 300 chain.3.err)"
    elif ! cat chain.1 chain.2 chain.3 | cmp -s - small.ref; then fail "chain" "output differs from the uninterrupted run"
    else pass "image taken by a restored process, restored: output identical"; fi
}
chain

# A Python program that loads the library with ctypes (dlopen after main): what the killed
# run printed followed by what the restored run prints must equal the uninterrupted output.
if command -v python3 >/dev/null; then
    lib="$prefix/lib/libmpi_abi.so.1"
    run setarch -R python3 "$here/image_prog.py" "$lib" py-ref.img >py.ref 2>py.ref.err
    run setarch -R python3 "$here/image_prog.py" "$lib" py.img kill >py.killed 2>py.killed.err; rc=$?
    STEADFAST_RESTORE_IMAGE=py.img run setarch -R python3 "$here/image_prog.py" "$lib" py.img >py.restored 2>py.restored.err; rrc=$?
    if [ "$rc" -ne 137 ] || [ "$rrc" -ne 0 ] || ! grep -q "restored=1" py.restored.err; then
        fail python "killed run $rc, restored run $rrc: $(tail -c 300 py.restored.err)"
    elif ! cat py.killed py.restored | cmp -s - py.ref; then
        fail python "output differs from the uninterrupted run"
    else
        pass "python (ctypes): restored output identical (image $(stat -c %s py.img) bytes)"
    fi
else
    echo "SKIP python case: no python3"
fi

# One image restores any number of times.
STEADFAST_RESTORE_IMAGE="$build/small.img" run setarch -R ./prog "$build/small.img" 1 >again.out 2>again.err
if [ $? -eq 0 ] && cmp -s small.ref again.out; then pass "second restore from the same image"; else fail "second restore" "$(tail -c 300 again.err)"; fi

img="$build/small.img"
size=$(stat -c %s "$img")
cp "$img" bad-data.img
# Flip every bit of one data byte (writing a fixed value does nothing when the byte already
# has it, which happened once on a clean machine).
byte=$(od -An -tu1 -j $((size - 5000)) -N1 bad-data.img | tr -d ' ')
printf "\\$(printf '%03o' $((255 - byte)))" | dd of=bad-data.img bs=1 seek=$((size - 5000)) conv=notrunc 2>/dev/null
cmp -s "$img" bad-data.img && fail damaged-data "the damaged copy is identical to the image"
cp "$img" bad-header.img
printf 'X' | dd of=bad-header.img bs=1 seek=300 conv=notrunc 2>/dev/null
head -c $((size / 2)) "$img" >truncated.img
expect_refusal damaged-data 70 "checksum mismatch in region" env STEADFAST_RESTORE_IMAGE=bad-data.img setarch -R ./prog x 1
expect_refusal damaged-header 70 "header checksum mismatch" env STEADFAST_RESTORE_IMAGE=bad-header.img setarch -R ./prog x 1
expect_refusal truncated 70 "truncated" env STEADFAST_RESTORE_IMAGE=truncated.img setarch -R ./prog x 1
expect_refusal missing 70 "cannot restore process image: opening image" env STEADFAST_RESTORE_IMAGE=no-such.img setarch -R ./prog x 1
expect_refusal second-thread 3 "thread(s) besides the caller" setarch -R ./prog thread.img 1 thread
if [ "$(cat /proc/sys/kernel/randomize_va_space 2>/dev/null)" != 0 ]; then
    expect_refusal randomized 3 "address-space randomization" ./prog random.img 1
fi
[ -e thread.img ] || [ -e random.img ] && fail "refused checkpoints" "an image was written anyway"

echo "process images: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
