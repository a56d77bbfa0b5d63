//! Sans-IO reliable channel after LA-MPI (seed 004).
pub mod crc;
pub mod frame;
