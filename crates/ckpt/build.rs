// The machine layer (context save/resume, the checkpoint fork, the restorer) is C with inline
// assembly. The restorer runs while libc's data and every GOT are being overwritten, so it is
// built freestanding: no builtins turned into memcpy/memset calls, no stack-protector canary.
fn main() {
    let target_arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    println!("cargo:rerun-if-changed=src/arch/x86_64.c");
    if target_arch != "x86_64" || target_os != "linux" {
        return; // the crate compiles to "unsupported" errors elsewhere
    }
    cc::Build::new()
        .file("src/arch/x86_64.c")
        .flag("-ffreestanding")
        .flag("-fno-builtin")
        .flag("-fno-stack-protector")
        .flag("-fno-tree-loop-distribute-patterns")
        .flag("-fPIC")
        .opt_level(2)
        .warnings(true)
        .compile("steadfast_ckpt_arch");
}
