// The library is installed as libmpi_abi.so.1 (the standard ABI's soname) with libmpi.so and
// libmpi_abi.so as links; applications record the soname, not the link they were built with.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
}
