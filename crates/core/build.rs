// Compiles the reduction kernels for binary16, x87 extended and binary128 floats, which
// Rust cannot express on stable (see csrc/reduce_float.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/reduce_float.c");
    cc::Build::new().file("csrc/reduce_float.c").opt_level(2).warnings(true).compile("steadfast_reduce_float");
}
