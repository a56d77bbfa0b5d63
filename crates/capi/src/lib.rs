//! Steadfast's C ABI (`libmpi_abi.so`): the MPI 5.0 standard ABI over the Steadfast engine.
//!
//! Every `MPI_X` entry point has a `PMPI_X` twin (the profiling interface): the body lives in
//! `PMPI_X`, and `MPI_X` calls it, so a tool library can interpose `MPI_X` and call through.
//! This layer only checks arguments, translates handles and reports errors; MPI semantics
//! live in `steadfast-core`.

#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

pub mod abi;
pub mod coll;
pub mod attr;
pub mod comm;
pub mod datatype;
pub mod env;
pub mod errhandler;
pub mod ext;
pub mod fint;
pub mod global;
pub mod greq;
pub mod image;
pub mod op;
pub mod pt2pt;
pub mod ulfm;
pub mod group;
pub mod info;
pub mod topo;
pub mod io;
pub mod mpi41;
pub mod session;
pub mod rma;
mod rma_mail;
mod rma_net;
pub mod dynamic;
pub mod part;
pub mod tool;

/// Define `PMPI_<name>` with the body and `MPI_<name>` forwarding to it.
#[macro_export]
macro_rules! mpi_api {
    ($(
        $(#[$m:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block
    )*) => { paste::paste! { $(
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn [<PMPI_ $name>]($($arg: $ty),*) -> $ret $body
        #[doc = concat!("MPI_", stringify!($name), ": see PMPI_", stringify!($name), ".")]
        #[no_mangle]
        pub unsafe extern "C" fn [<MPI_ $name>]($($arg: $ty),*) -> $ret { [<PMPI_ $name>]($($arg),*) }
    )* } };
}

/// Define `PMPIX_<name>` with the body and `MPIX_<name>` forwarding to it (the extension
/// calls of `mpi-ext.h`).
#[macro_export]
macro_rules! mpix_api {
    ($(
        $(#[$m:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block
    )*) => { paste::paste! { $(
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn [<PMPIX_ $name>]($($arg: $ty),*) -> $ret $body
        #[doc = concat!("MPIX_", stringify!($name), ": see PMPIX_", stringify!($name), ".")]
        #[no_mangle]
        pub unsafe extern "C" fn [<MPIX_ $name>]($($arg: $ty),*) -> $ret { [<PMPIX_ $name>]($($arg),*) }
    )* } };
}
