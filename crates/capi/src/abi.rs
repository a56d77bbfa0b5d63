//! The MPI 5.0 standard ABI as seen from Rust: types, constants and tables.
//!
//! Every value here mirrors `include/mpi.h` / `include/mpi-ext.h`; the test
//! `tests/abi_header.rs` parses both headers (and compiles a C program against
//! them) and fails on any difference, so the two sides cannot drift.
//!
//! Handle constants are `usize` (the value of the pointer-typed C handle);
//! integer constants are `i32`. Source of the values: MPI-5.0 report, chapter
//! "Application Binary Interface" and annex "Defined Values and Handles",
//! cross-checked with the MPI Forum's reference ABI header.
#![allow(non_camel_case_types, non_snake_case)]

use core::ffi::c_void;

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/// `MPI_Comm`: pointer-sized handle.
pub type MPI_Comm = *mut c_void;
/// `MPI_Datatype`: pointer-sized handle.
pub type MPI_Datatype = *mut c_void;
/// `MPI_Errhandler`: pointer-sized handle.
pub type MPI_Errhandler = *mut c_void;
/// `MPI_File`: pointer-sized handle.
pub type MPI_File = *mut c_void;
/// `MPI_Group`: pointer-sized handle.
pub type MPI_Group = *mut c_void;
/// `MPI_Info`: pointer-sized handle.
pub type MPI_Info = *mut c_void;
/// `MPI_Message`: pointer-sized handle.
pub type MPI_Message = *mut c_void;
/// `MPI_Op`: pointer-sized handle.
pub type MPI_Op = *mut c_void;
/// `MPI_Request`: pointer-sized handle.
pub type MPI_Request = *mut c_void;
/// `MPI_Session`: pointer-sized handle.
pub type MPI_Session = *mut c_void;
/// `MPI_Win`: pointer-sized handle.
pub type MPI_Win = *mut c_void;

/// `MPI_Aint`: `intptr_t`.
pub type MPI_Aint = isize;
/// `MPI_Offset`: `int64_t`.
pub type MPI_Offset = i64;
/// `MPI_Count`: `int64_t` (same as `MPI_Offset`).
pub type MPI_Count = i64;
/// `MPI_Fint`: Fortran default INTEGER (gfortran: 4 bytes). Not part of the standard ABI.
pub type MPI_Fint = i32;

/// `MPI_Status`: 32 bytes, three public fields and five library-private ints.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MPI_Status {
    /// Source rank of the received message.
    pub MPI_SOURCE: i32,
    /// Tag of the received message.
    pub MPI_TAG: i32,
    /// Error code of the operation (set by multi-completion calls).
    pub MPI_ERROR: i32,
    /// `MPI_internal[5]` in C: count, cancelled flag etc., owned by the library.
    pub internal: [i32; 5],
}

/// Largest value the standard reserves for predefined handles (they lie in 1..=4095).
pub const PREDEFINED_HANDLE_MAX: usize = 0xfff;
/// Largest predefined handle value actually assigned by MPI 5.0 (`MPI_COMPLEX32`).
pub const PREDEFINED_HANDLE_MAX_ASSIGNED: usize = 0x2eb;

/// True if `handle` lies in the range the standard reserves for predefined handles.
pub fn is_predefined_handle(handle: usize) -> bool {
    handle != 0 && handle <= PREDEFINED_HANDLE_MAX
}

// ---------------------------------------------------------------------------
// Constant tables. Each macro defines the `pub const`s and a table of
// (name, value) pairs so tests can compare every constant with the headers.
// ---------------------------------------------------------------------------

macro_rules! handle_consts {
    ($(#[$tm:meta])* $table:ident, $ctype:literal: $($(#[$m:meta])* $name:ident = $val:expr;)*) => {
        $($(#[$m])* pub const $name: usize = $val;)*
        $(#[$tm])*
        pub static $table: HandleTable = HandleTable {
            c_type: $ctype,
            entries: &[$((stringify!($name), $name),)*],
        };
    };
}

macro_rules! int_consts {
    ($(#[$tm:meta])* $table:ident: $($(#[$m:meta])* $name:ident = $val:expr;)*) => {
        $($(#[$m])* pub const $name: i32 = $val;)*
        $(#[$tm])*
        pub static $table: &[(&str, i32)] = &[$((stringify!($name), $name),)*];
    };
}

macro_rules! address_consts {
    ($(#[$tm:meta])* $table:ident: $($(#[$m:meta])* $name:ident = $val:expr;)*) => {
        $($(#[$m])* pub const $name: usize = $val;)*
        $(#[$tm])*
        pub static $table: &[(&str, usize)] = &[$((stringify!($name), $name),)*];
    };
}

/// Predefined handles of one C handle type.
#[derive(Debug)]
pub struct HandleTable {
    /// C type the header casts these values to, e.g. `"MPI_Comm"`.
    pub c_type: &'static str,
    /// (name, value) of every predefined handle of that type, aliases included.
    pub entries: &'static [(&'static str, usize)],
}

handle_consts! {
    /// Predefined reduction operations (and `MPI_OP_NULL`).
    OP_HANDLES, "MPI_Op":
    /// No operation handle.
    MPI_OP_NULL = 0x020;
    /// Sum.
    MPI_SUM = 0x021;
    /// Minimum.
    MPI_MIN = 0x022;
    /// Maximum.
    MPI_MAX = 0x023;
    /// Product.
    MPI_PROD = 0x024;
    /// Bitwise and.
    MPI_BAND = 0x028;
    /// Bitwise or.
    MPI_BOR = 0x029;
    /// Bitwise exclusive or.
    MPI_BXOR = 0x02a;
    /// Logical and.
    MPI_LAND = 0x030;
    /// Logical or.
    MPI_LOR = 0x031;
    /// Logical exclusive or.
    MPI_LXOR = 0x032;
    /// Minimum value and its index.
    MPI_MINLOC = 0x038;
    /// Maximum value and its index.
    MPI_MAXLOC = 0x039;
    /// Replace (one-sided accumulate).
    MPI_REPLACE = 0x03c;
    /// No operation (one-sided fetch).
    MPI_NO_OP = 0x03d;
}

handle_consts! {
    /// Predefined communicators.
    COMM_HANDLES, "MPI_Comm":
    /// Null communicator.
    MPI_COMM_NULL = 0x100;
    /// All processes of the World Model.
    MPI_COMM_WORLD = 0x101;
    /// The calling process alone.
    MPI_COMM_SELF = 0x102;
}

handle_consts! {
    /// Predefined groups.
    GROUP_HANDLES, "MPI_Group":
    /// Null group.
    MPI_GROUP_NULL = 0x108;
    /// Group without members.
    MPI_GROUP_EMPTY = 0x109;
}

handle_consts! {
    /// Predefined windows.
    WIN_HANDLES, "MPI_Win":
    /// Null window.
    MPI_WIN_NULL = 0x110;
}

handle_consts! {
    /// Predefined files.
    FILE_HANDLES, "MPI_File":
    /// Null file.
    MPI_FILE_NULL = 0x118;
}

handle_consts! {
    /// Predefined sessions.
    SESSION_HANDLES, "MPI_Session":
    /// Null session.
    MPI_SESSION_NULL = 0x120;
}

handle_consts! {
    /// Predefined messages.
    MESSAGE_HANDLES, "MPI_Message":
    /// Null message.
    MPI_MESSAGE_NULL = 0x128;
    /// Message matched from `MPI_PROC_NULL`.
    MPI_MESSAGE_NO_PROC = 0x129;
}

handle_consts! {
    /// Predefined info objects.
    INFO_HANDLES, "MPI_Info":
    /// Null info.
    MPI_INFO_NULL = 0x130;
    /// Info describing the execution environment.
    MPI_INFO_ENV = 0x131;
}

handle_consts! {
    /// Predefined error handlers.
    ERRHANDLER_HANDLES, "MPI_Errhandler":
    /// Null error handler.
    MPI_ERRHANDLER_NULL = 0x140;
    /// Abort all connected processes on error.
    MPI_ERRORS_ARE_FATAL = 0x141;
    /// Return the error code to the caller.
    MPI_ERRORS_RETURN = 0x142;
    /// Abort the processes of the object's group on error.
    MPI_ERRORS_ABORT = 0x143;
}

handle_consts! {
    /// Predefined requests.
    REQUEST_HANDLES, "MPI_Request":
    /// Null request.
    MPI_REQUEST_NULL = 0x180;
}

handle_consts! {
    /// Predefined datatypes, aliases (`MPI_LONG_LONG_INT`, `MPI_C_COMPLEX`) included.
    DATATYPE_HANDLES, "MPI_Datatype":
    /// Null datatype.
    MPI_DATATYPE_NULL = 0x200;
    /// `MPI_Aint`.
    MPI_AINT = 0x201;
    /// `MPI_Count`.
    MPI_COUNT = 0x202;
    /// `MPI_Offset`.
    MPI_OFFSET = 0x203;
    /// Packed bytes (`MPI_Pack`).
    MPI_PACKED = 0x207;
    /// `short`.
    MPI_SHORT = 0x208;
    /// `int`.
    MPI_INT = 0x209;
    /// `long`.
    MPI_LONG = 0x20a;
    /// `long long`.
    MPI_LONG_LONG = 0x20b;
    /// Alias of `MPI_LONG_LONG`.
    MPI_LONG_LONG_INT = MPI_LONG_LONG;
    /// `unsigned short`.
    MPI_UNSIGNED_SHORT = 0x20c;
    /// `unsigned`.
    MPI_UNSIGNED = 0x20d;
    /// `unsigned long`.
    MPI_UNSIGNED_LONG = 0x20e;
    /// `unsigned long long`.
    MPI_UNSIGNED_LONG_LONG = 0x20f;
    /// `float`.
    MPI_FLOAT = 0x210;
    /// `float _Complex`.
    MPI_C_FLOAT_COMPLEX = 0x212;
    /// Alias of `MPI_C_FLOAT_COMPLEX`.
    MPI_C_COMPLEX = MPI_C_FLOAT_COMPLEX;
    /// `std::complex<float>`.
    MPI_CXX_FLOAT_COMPLEX = 0x213;
    /// `double`.
    MPI_DOUBLE = 0x214;
    /// `double _Complex`.
    MPI_C_DOUBLE_COMPLEX = 0x216;
    /// `std::complex<double>`.
    MPI_CXX_DOUBLE_COMPLEX = 0x217;
    /// Fortran `LOGICAL`.
    MPI_LOGICAL = 0x218;
    /// Fortran `INTEGER`.
    MPI_INTEGER = 0x219;
    /// Fortran `REAL`.
    MPI_REAL = 0x21a;
    /// Fortran `COMPLEX`.
    MPI_COMPLEX = 0x21b;
    /// Fortran `DOUBLE PRECISION`.
    MPI_DOUBLE_PRECISION = 0x21c;
    /// Fortran `DOUBLE COMPLEX`.
    MPI_DOUBLE_COMPLEX = 0x21d;
    /// Fortran `CHARACTER(1)`.
    MPI_CHARACTER = 0x21e;
    /// `long double`.
    MPI_LONG_DOUBLE = 0x220;
    /// `long double _Complex`.
    MPI_C_LONG_DOUBLE_COMPLEX = 0x224;
    /// `std::complex<long double>`.
    MPI_CXX_LONG_DOUBLE_COMPLEX = 0x225;
    /// `struct { float; int; }`.
    MPI_FLOAT_INT = 0x228;
    /// `struct { double; int; }`.
    MPI_DOUBLE_INT = 0x229;
    /// `struct { long; int; }`.
    MPI_LONG_INT = 0x22a;
    /// `struct { int; int; }`.
    MPI_2INT = 0x22b;
    /// `struct { short; int; }`.
    MPI_SHORT_INT = 0x22c;
    /// `struct { long double; int; }`.
    MPI_LONG_DOUBLE_INT = 0x22d;
    /// Fortran pair of `REAL`.
    MPI_2REAL = 0x230;
    /// Fortran pair of `DOUBLE PRECISION`.
    MPI_2DOUBLE_PRECISION = 0x231;
    /// Fortran pair of `INTEGER`.
    MPI_2INTEGER = 0x232;
    /// `_Bool`.
    MPI_C_BOOL = 0x238;
    /// C++ `bool`.
    MPI_CXX_BOOL = 0x239;
    /// `wchar_t`.
    MPI_WCHAR = 0x23c;
    /// `int8_t`.
    MPI_INT8_T = 0x240;
    /// `uint8_t`.
    MPI_UINT8_T = 0x241;
    /// `char` (printable character).
    MPI_CHAR = 0x243;
    /// `signed char` (integer).
    MPI_SIGNED_CHAR = 0x244;
    /// `unsigned char` (integer).
    MPI_UNSIGNED_CHAR = 0x245;
    /// Uninterpreted byte.
    MPI_BYTE = 0x247;
    /// `int16_t`.
    MPI_INT16_T = 0x248;
    /// `uint16_t`.
    MPI_UINT16_T = 0x249;
    /// `int32_t`.
    MPI_INT32_T = 0x250;
    /// `uint32_t`.
    MPI_UINT32_T = 0x251;
    /// `int64_t`.
    MPI_INT64_T = 0x258;
    /// `uint64_t`.
    MPI_UINT64_T = 0x259;
    /// Fortran `LOGICAL*1`.
    MPI_LOGICAL1 = 0x2c0;
    /// Fortran `INTEGER*1`.
    MPI_INTEGER1 = 0x2c1;
    /// Fortran `LOGICAL*2`.
    MPI_LOGICAL2 = 0x2c8;
    /// Fortran `INTEGER*2`.
    MPI_INTEGER2 = 0x2c9;
    /// Fortran `REAL*2`.
    MPI_REAL2 = 0x2ca;
    /// Fortran `LOGICAL*4`.
    MPI_LOGICAL4 = 0x2d0;
    /// Fortran `INTEGER*4`.
    MPI_INTEGER4 = 0x2d1;
    /// Fortran `REAL*4`.
    MPI_REAL4 = 0x2d2;
    /// Fortran `COMPLEX*4`.
    MPI_COMPLEX4 = 0x2d3;
    /// Fortran `LOGICAL*8`.
    MPI_LOGICAL8 = 0x2d8;
    /// Fortran `INTEGER*8`.
    MPI_INTEGER8 = 0x2d9;
    /// Fortran `REAL*8`.
    MPI_REAL8 = 0x2da;
    /// Fortran `COMPLEX*8`.
    MPI_COMPLEX8 = 0x2db;
    /// Fortran `LOGICAL*16`.
    MPI_LOGICAL16 = 0x2e0;
    /// Fortran `INTEGER*16`.
    MPI_INTEGER16 = 0x2e1;
    /// Fortran `REAL*16`.
    MPI_REAL16 = 0x2e2;
    /// Fortran `COMPLEX*16`.
    MPI_COMPLEX16 = 0x2e3;
    /// Fortran `COMPLEX*32`.
    MPI_COMPLEX32 = 0x2eb;
}

/// Every handle table, for code that needs to walk all predefined handles.
pub static ALL_HANDLE_TABLES: &[&HandleTable] = &[
    &OP_HANDLES,
    &COMM_HANDLES,
    &GROUP_HANDLES,
    &WIN_HANDLES,
    &FILE_HANDLES,
    &SESSION_HANDLES,
    &MESSAGE_HANDLES,
    &INFO_HANDLES,
    &ERRHANDLER_HANDLES,
    &REQUEST_HANDLES,
    &DATATYPE_HANDLES,
];

int_consts! {
    /// Version numbers.
    VERSION_CONSTANTS:
    /// Version of the standard implemented.
    MPI_VERSION = 5;
    /// Subversion of the standard implemented.
    MPI_SUBVERSION = 0;
    /// Version of the standard ABI.
    MPI_ABI_VERSION = 1;
    /// Subversion of the standard ABI.
    MPI_ABI_SUBVERSION = 0;
}

int_consts! {
    /// Error classes of MPI 5.0, plus `MPI_ERR_LASTCODE`.
    ERROR_CLASS_CONSTANTS:
    /// Success.
    MPI_SUCCESS = 0;
    /// Invalid buffer pointer.
    MPI_ERR_BUFFER = 1;
    /// Invalid count.
    MPI_ERR_COUNT = 2;
    /// Invalid datatype.
    MPI_ERR_TYPE = 3;
    /// Invalid tag.
    MPI_ERR_TAG = 4;
    /// Invalid communicator.
    MPI_ERR_COMM = 5;
    /// Invalid rank.
    MPI_ERR_RANK = 6;
    /// Invalid request.
    MPI_ERR_REQUEST = 7;
    /// Invalid root.
    MPI_ERR_ROOT = 8;
    /// Invalid group.
    MPI_ERR_GROUP = 9;
    /// Invalid operation.
    MPI_ERR_OP = 10;
    /// Invalid topology.
    MPI_ERR_TOPOLOGY = 11;
    /// Invalid dimensions.
    MPI_ERR_DIMS = 12;
    /// Invalid argument.
    MPI_ERR_ARG = 13;
    /// Unknown error.
    MPI_ERR_UNKNOWN = 14;
    /// Message truncated.
    MPI_ERR_TRUNCATE = 15;
    /// Other error.
    MPI_ERR_OTHER = 16;
    /// Internal error.
    MPI_ERR_INTERN = 17;
    /// Operation pending.
    MPI_ERR_PENDING = 18;
    /// Error code is in the status.
    MPI_ERR_IN_STATUS = 19;
    /// File permission denied.
    MPI_ERR_ACCESS = 20;
    /// Invalid file access mode.
    MPI_ERR_AMODE = 21;
    /// Invalid assertion.
    MPI_ERR_ASSERT = 22;
    /// Invalid file name.
    MPI_ERR_BAD_FILE = 23;
    /// Invalid window base.
    MPI_ERR_BASE = 24;
    /// Data conversion failed.
    MPI_ERR_CONVERSION = 25;
    /// Invalid displacement.
    MPI_ERR_DISP = 26;
    /// Data representation already defined.
    MPI_ERR_DUP_DATAREP = 27;
    /// File exists.
    MPI_ERR_FILE_EXISTS = 28;
    /// File in use.
    MPI_ERR_FILE_IN_USE = 29;
    /// Invalid file handle.
    MPI_ERR_FILE = 30;
    /// Invalid info key.
    MPI_ERR_INFO_KEY = 31;
    /// Info key not found.
    MPI_ERR_INFO_NOKEY = 32;
    /// Invalid info value.
    MPI_ERR_INFO_VALUE = 33;
    /// Invalid info object.
    MPI_ERR_INFO = 34;
    /// I/O error.
    MPI_ERR_IO = 35;
    /// Invalid attribute key.
    MPI_ERR_KEYVAL = 36;
    /// Invalid lock type.
    MPI_ERR_LOCKTYPE = 37;
    /// Name not published.
    MPI_ERR_NAME = 38;
    /// Out of memory.
    MPI_ERR_NO_MEM = 39;
    /// Collective arguments differ between processes.
    MPI_ERR_NOT_SAME = 40;
    /// No space left.
    MPI_ERR_NO_SPACE = 41;
    /// No such file.
    MPI_ERR_NO_SUCH_FILE = 42;
    /// Invalid port.
    MPI_ERR_PORT = 43;
    /// Quota exceeded.
    MPI_ERR_QUOTA = 44;
    /// Read-only file.
    MPI_ERR_READ_ONLY = 45;
    /// Window attach error.
    MPI_ERR_RMA_ATTACH = 46;
    /// Conflicting window accesses.
    MPI_ERR_RMA_CONFLICT = 47;
    /// Target memory outside the window.
    MPI_ERR_RMA_RANGE = 48;
    /// Memory cannot be shared.
    MPI_ERR_RMA_SHARED = 49;
    /// Wrong window synchronization.
    MPI_ERR_RMA_SYNC = 50;
    /// Service error.
    MPI_ERR_SERVICE = 51;
    /// Invalid size.
    MPI_ERR_SIZE = 52;
    /// Spawn error.
    MPI_ERR_SPAWN = 53;
    /// Unsupported data representation.
    MPI_ERR_UNSUPPORTED_DATAREP = 54;
    /// Unsupported operation.
    MPI_ERR_UNSUPPORTED_OPERATION = 55;
    /// Invalid window.
    MPI_ERR_WIN = 56;
    /// Wrong window flavor.
    MPI_ERR_RMA_FLAVOR = 57;
    /// A process aborted.
    MPI_ERR_PROC_ABORTED = 58;
    /// Value too large for the output argument.
    MPI_ERR_VALUE_TOO_LARGE = 59;
    /// Invalid session.
    MPI_ERR_SESSION = 60;
    /// Invalid error handler.
    MPI_ERR_ERRHANDLER = 61;
    /// ABI error.
    MPI_ERR_ABI = 62;
    /// MPI_T: cannot initialize.
    MPI_T_ERR_CANNOT_INIT = 1001;
    /// MPI_T: not accessible.
    MPI_T_ERR_NOT_ACCESSIBLE = 1002;
    /// MPI_T: not initialized.
    MPI_T_ERR_NOT_INITIALIZED = 1003;
    /// MPI_T: not supported.
    MPI_T_ERR_NOT_SUPPORTED = 1004;
    /// MPI_T: out of memory.
    MPI_T_ERR_MEMORY = 1005;
    /// MPI_T: invalid argument.
    MPI_T_ERR_INVALID = 1006;
    /// MPI_T: invalid index.
    MPI_T_ERR_INVALID_INDEX = 1007;
    /// MPI_T: invalid item (deprecated).
    MPI_T_ERR_INVALID_ITEM = 1008;
    /// MPI_T: invalid session.
    MPI_T_ERR_INVALID_SESSION = 1009;
    /// MPI_T: invalid handle.
    MPI_T_ERR_INVALID_HANDLE = 1010;
    /// MPI_T: invalid name.
    MPI_T_ERR_INVALID_NAME = 1011;
    /// MPI_T: out of handles.
    MPI_T_ERR_OUT_OF_HANDLES = 1012;
    /// MPI_T: out of sessions.
    MPI_T_ERR_OUT_OF_SESSIONS = 1013;
    /// MPI_T: control variable cannot be set now.
    MPI_T_ERR_CVAR_SET_NOT_NOW = 1014;
    /// MPI_T: control variable can never be set.
    MPI_T_ERR_CVAR_SET_NEVER = 1015;
    /// MPI_T: performance variable not writable.
    MPI_T_ERR_PVAR_NO_WRITE = 1016;
    /// MPI_T: performance variable cannot be started or stopped.
    MPI_T_ERR_PVAR_NO_STARTSTOP = 1017;
    /// MPI_T: performance variable cannot be read and reset atomically.
    MPI_T_ERR_PVAR_NO_ATOMIC = 1018;
    /// Upper bound of every predefined error class and code (0x3fff).
    MPI_ERR_LASTCODE = 0x3fff;
}

int_consts! {
    /// All other integer constants of mpi.h.
    MISC_INT_CONSTANTS:
    /// Fortran status array length.
    MPI_F_STATUS_SIZE = 8;
    /// Index of the source in a Fortran status.
    MPI_F_SOURCE = 0;
    /// Index of the tag in a Fortran status.
    MPI_F_TAG = 1;
    /// Index of the error in a Fortran status.
    MPI_F_ERROR = 2;
    /// Length of a data representation name buffer.
    MPI_MAX_DATAREP_STRING = 128;
    /// Length of an error string buffer.
    MPI_MAX_ERROR_STRING = 512;
    /// Length of an info key buffer.
    MPI_MAX_INFO_KEY = 256;
    /// Length of an info value buffer.
    MPI_MAX_INFO_VAL = 1024;
    /// Length of the library version string buffer.
    MPI_MAX_LIBRARY_VERSION_STRING = 8192;
    /// Length of an object name buffer.
    MPI_MAX_OBJECT_NAME = 128;
    /// Length of a port name buffer.
    MPI_MAX_PORT_NAME = 1024;
    /// Length of a processor name buffer.
    MPI_MAX_PROCESSOR_NAME = 256;
    /// Length of a string tag buffer.
    MPI_MAX_STRINGTAG_LEN = 1024;
    /// Length of a process set name buffer.
    MPI_MAX_PSET_NAME_LEN = 1024;
    /// Per-message space `MPI_Bsend` needs in the attached buffer.
    MPI_BSEND_OVERHEAD = 512;
    /// File mode: append.
    MPI_MODE_APPEND = 1;
    /// File mode: create.
    MPI_MODE_CREATE = 2;
    /// File mode: delete on close.
    MPI_MODE_DELETE_ON_CLOSE = 4;
    /// File mode: fail if it exists.
    MPI_MODE_EXCL = 8;
    /// File mode: read only.
    MPI_MODE_RDONLY = 16;
    /// File mode: read and write.
    MPI_MODE_RDWR = 32;
    /// File mode: sequential access.
    MPI_MODE_SEQUENTIAL = 64;
    /// File mode: not opened concurrently elsewhere.
    MPI_MODE_UNIQUE_OPEN = 128;
    /// File mode: write only.
    MPI_MODE_WRONLY = 256;
    /// RMA assertion: no check.
    MPI_MODE_NOCHECK = 1024;
    /// RMA assertion: no preceding epoch.
    MPI_MODE_NOPRECEDE = 2048;
    /// RMA assertion: no put.
    MPI_MODE_NOPUT = 4096;
    /// RMA assertion: no local store.
    MPI_MODE_NOSTORE = 8192;
    /// RMA assertion: no succeeding epoch.
    MPI_MODE_NOSUCCEED = 16384;
    /// Wildcard source.
    MPI_ANY_SOURCE = -1;
    /// Wildcard tag.
    MPI_ANY_TAG = -2;
    /// Null process rank.
    MPI_PROC_NULL = -3;
    /// Root marker in intercommunicator collectives.
    MPI_ROOT = -4;
    /// Undefined value.
    MPI_UNDEFINED = -32766;
    /// Thread level: single.
    MPI_THREAD_SINGLE = 0;
    /// Thread level: funneled.
    MPI_THREAD_FUNNELED = 1024;
    /// Thread level: serialized.
    MPI_THREAD_SERIALIZED = 2048;
    /// Thread level: multiple.
    MPI_THREAD_MULTIPLE = 4096;
    /// Row-major array order.
    MPI_ORDER_C = 12;
    /// Column-major array order.
    MPI_ORDER_FORTRAN = 15;
    /// Distribution: none.
    MPI_DISTRIBUTE_NONE = 16;
    /// Distribution: block.
    MPI_DISTRIBUTE_BLOCK = 17;
    /// Distribution: cyclic.
    MPI_DISTRIBUTE_CYCLIC = 18;
    /// Default distribution argument.
    MPI_DISTRIBUTE_DFLT_DARG = 19;
    /// Combiner: named (predefined) type.
    MPI_COMBINER_NAMED = 101;
    /// Combiner: `MPI_Type_dup`.
    MPI_COMBINER_DUP = 102;
    /// Combiner: contiguous.
    MPI_COMBINER_CONTIGUOUS = 103;
    /// Combiner: vector.
    MPI_COMBINER_VECTOR = 104;
    /// Combiner: hvector.
    MPI_COMBINER_HVECTOR = 105;
    /// Combiner: indexed.
    MPI_COMBINER_INDEXED = 106;
    /// Combiner: hindexed.
    MPI_COMBINER_HINDEXED = 107;
    /// Combiner: indexed block.
    MPI_COMBINER_INDEXED_BLOCK = 108;
    /// Combiner: hindexed block.
    MPI_COMBINER_HINDEXED_BLOCK = 109;
    /// Combiner: struct.
    MPI_COMBINER_STRUCT = 110;
    /// Combiner: subarray.
    MPI_COMBINER_SUBARRAY = 111;
    /// Combiner: darray.
    MPI_COMBINER_DARRAY = 112;
    /// Combiner: F90 integer.
    MPI_COMBINER_F90_INTEGER = 113;
    /// Combiner: F90 real.
    MPI_COMBINER_F90_REAL = 114;
    /// Combiner: F90 complex.
    MPI_COMBINER_F90_COMPLEX = 115;
    /// Combiner: resized.
    MPI_COMBINER_RESIZED = 116;
    /// Combiner: value-index pair.
    MPI_COMBINER_VALUE_INDEX = 117;
    /// Type class: integer.
    MPI_TYPECLASS_INTEGER = 192;
    /// Type class: real.
    MPI_TYPECLASS_REAL = 193;
    /// Type class: complex.
    MPI_TYPECLASS_COMPLEX = 194;
    /// Comparison: identical.
    MPI_IDENT = 201;
    /// Comparison: same members and order, different context.
    MPI_CONGRUENT = 202;
    /// Comparison: same members, different order.
    MPI_SIMILAR = 203;
    /// Comparison: different.
    MPI_UNEQUAL = 204;
    /// Topology: Cartesian.
    MPI_CART = 211;
    /// Topology: graph.
    MPI_GRAPH = 212;
    /// Topology: distributed graph.
    MPI_DIST_GRAPH = 213;
    /// Split type: shared memory.
    MPI_COMM_TYPE_SHARED = 221;
    /// Split type: hardware, unguided.
    MPI_COMM_TYPE_HW_UNGUIDED = 222;
    /// Split type: hardware, guided.
    MPI_COMM_TYPE_HW_GUIDED = 223;
    /// Split type: resource, guided.
    MPI_COMM_TYPE_RESOURCE_GUIDED = 224;
    /// Window lock: exclusive.
    MPI_LOCK_EXCLUSIVE = 301;
    /// Window lock: shared.
    MPI_LOCK_SHARED = 302;
    /// Window flavor: create.
    MPI_WIN_FLAVOR_CREATE = 311;
    /// Window flavor: allocate.
    MPI_WIN_FLAVOR_ALLOCATE = 312;
    /// Window flavor: dynamic.
    MPI_WIN_FLAVOR_DYNAMIC = 313;
    /// Window flavor: shared.
    MPI_WIN_FLAVOR_SHARED = 314;
    /// Window memory model: unified.
    MPI_WIN_UNIFIED = 321;
    /// Window memory model: separate.
    MPI_WIN_SEPARATE = 322;
    /// Seek from start.
    MPI_SEEK_SET = 401;
    /// Seek from current position.
    MPI_SEEK_CUR = 402;
    /// Seek from end.
    MPI_SEEK_END = 403;
    /// Invalid attribute key.
    MPI_KEYVAL_INVALID = 0;
    /// Attribute: largest tag value.
    MPI_TAG_UB = 501;
    /// Attribute: rank that can do I/O.
    MPI_IO = 502;
    /// Attribute: host rank (deprecated).
    MPI_HOST = 503;
    /// Attribute: clocks are synchronized.
    MPI_WTIME_IS_GLOBAL = 504;
    /// Attribute: universe size.
    MPI_UNIVERSE_SIZE = 505;
    /// Attribute: application number.
    MPI_APPNUM = 506;
    /// Attribute: last used error code.
    MPI_LASTUSEDCODE = 507;
    /// Window attribute: base.
    MPI_WIN_BASE = 601;
    /// Window attribute: displacement unit.
    MPI_WIN_DISP_UNIT = 602;
    /// Window attribute: size.
    MPI_WIN_SIZE = 603;
    /// Window attribute: flavor.
    MPI_WIN_CREATE_FLAVOR = 604;
    /// Window attribute: memory model.
    MPI_WIN_MODEL = 605;
    /// MPI_T callback safety: none required.
    MPI_T_CB_REQUIRE_NONE = 0x00;
    /// MPI_T callback safety: MPI restricted.
    MPI_T_CB_REQUIRE_MPI_RESTRICTED = 0x03;
    /// MPI_T callback safety: thread safe.
    MPI_T_CB_REQUIRE_THREAD_SAFE = 0x0f;
    /// MPI_T callback safety: async-signal safe.
    MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE = 0x3f;
    /// MPI_T source: ordered.
    MPI_T_SOURCE_ORDERED = 1;
    /// MPI_T source: unordered.
    MPI_T_SOURCE_UNORDERED = 2;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_USER_BASIC = 0x09;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_USER_DETAIL = 0x0a;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_USER_ALL = 0x0c;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_TUNER_BASIC = 0x11;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_TUNER_DETAIL = 0x12;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_TUNER_ALL = 0x14;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_MPIDEV_BASIC = 0x21;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_MPIDEV_DETAIL = 0x22;
    /// MPI_T verbosity.
    MPI_T_VERBOSITY_MPIDEV_ALL = 0x24;
    /// MPI_T binding.
    MPI_T_BIND_NO_OBJECT = 1;
    /// MPI_T binding.
    MPI_T_BIND_MPI_COMM = 2;
    /// MPI_T binding.
    MPI_T_BIND_MPI_DATATYPE = 3;
    /// MPI_T binding.
    MPI_T_BIND_MPI_ERRHANDLER = 4;
    /// MPI_T binding.
    MPI_T_BIND_MPI_FILE = 5;
    /// MPI_T binding.
    MPI_T_BIND_MPI_GROUP = 6;
    /// MPI_T binding.
    MPI_T_BIND_MPI_OP = 7;
    /// MPI_T binding.
    MPI_T_BIND_MPI_REQUEST = 8;
    /// MPI_T binding.
    MPI_T_BIND_MPI_WIN = 9;
    /// MPI_T binding.
    MPI_T_BIND_MPI_MESSAGE = 10;
    /// MPI_T binding.
    MPI_T_BIND_MPI_INFO = 11;
    /// MPI_T binding.
    MPI_T_BIND_MPI_SESSION = 12;
    /// MPI_T scope.
    MPI_T_SCOPE_CONSTANT = 1;
    /// MPI_T scope.
    MPI_T_SCOPE_READONLY = 2;
    /// MPI_T scope.
    MPI_T_SCOPE_LOCAL = 3;
    /// MPI_T scope.
    MPI_T_SCOPE_GROUP = 4;
    /// MPI_T scope.
    MPI_T_SCOPE_GROUP_EQ = 5;
    /// MPI_T scope.
    MPI_T_SCOPE_ALL = 6;
    /// MPI_T scope.
    MPI_T_SCOPE_ALL_EQ = 7;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_STATE = 1;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_LEVEL = 2;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_SIZE = 3;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_PERCENTAGE = 4;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_HIGHWATERMARK = 5;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_LOWWATERMARK = 6;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_COUNTER = 7;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_AGGREGATE = 8;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_TIMER = 9;
    /// MPI_T performance variable class.
    MPI_T_PVAR_CLASS_GENERIC = 10;
}

int_consts! {
    /// Steadfast extension constants of mpi-ext.h.
    EXT_INT_CONSTANTS:
    /// Set when compiling against Steadfast's headers.
    STEADFAST_MPI = 1;
    /// The ULFM fault-tolerance interface is available.
    MPIX_ULFM = 1;
    /// A process involved in the operation failed (0x3ff0).
    MPIX_ERR_PROC_FAILED = 0x3ff0;
    /// A process failure prevents a wildcard receive from completing (0x3ff1).
    MPIX_ERR_PROC_FAILED_PENDING = 0x3ff1;
    /// The communicator was revoked (0x3ff2).
    MPIX_ERR_REVOKED = 0x3ff2;
    /// MPI 6 spelling of `MPIX_ERR_PROC_FAILED`.
    MPI_ERR_PROC_FAILED = MPIX_ERR_PROC_FAILED;
    /// MPI 6 spelling of `MPIX_ERR_PROC_FAILED_PENDING`.
    MPI_ERR_PROC_FAILED_PENDING = MPIX_ERR_PROC_FAILED_PENDING;
    /// MPI 6 spelling of `MPIX_ERR_REVOKED`.
    MPI_ERR_REVOKED = MPIX_ERR_REVOKED;
}

/// `MPI_DISPLACEMENT_CURRENT`: file view displacement meaning "current position".
pub const MPI_DISPLACEMENT_CURRENT: MPI_Offset = -1;

address_consts! {
    /// Pointer-valued sentinels (buffer addresses, ignored arguments,
    /// predefined callbacks, null MPI_T handles) as integer addresses.
    ADDRESS_CONSTANTS:
    /// Start of the address space (absolute addresses in datatypes).
    MPI_BOTTOM = 0;
    /// Operate in place (collectives).
    MPI_IN_PLACE = 1;
    /// Let the library manage the buffered-mode buffer.
    MPI_BUFFER_AUTOMATIC = 2;
    /// No arguments for spawn.
    MPI_ARGV_NULL = 0;
    /// No arguments for spawn_multiple.
    MPI_ARGVS_NULL = 0;
    /// Error codes not wanted.
    MPI_ERRCODES_IGNORE = 0;
    /// Status not wanted.
    MPI_STATUS_IGNORE = 0;
    /// Statuses not wanted.
    MPI_STATUSES_IGNORE = 0;
    /// Graph edges carry no weights.
    MPI_UNWEIGHTED = 10;
    /// Empty weight array.
    MPI_WEIGHTS_EMPTY = 11;
    /// Deprecated null copy callback: do not copy.
    MPI_NULL_COPY_FN = 0;
    /// Deprecated dup callback: copy the attribute value.
    MPI_DUP_FN = 1;
    /// Deprecated null delete callback.
    MPI_NULL_DELETE_FN = 0;
    /// Null copy callback: do not copy.
    MPI_COMM_NULL_COPY_FN = 0;
    /// Dup callback: copy the attribute value.
    MPI_COMM_DUP_FN = 1;
    /// Null delete callback.
    MPI_COMM_NULL_DELETE_FN = 0;
    /// Null copy callback: do not copy.
    MPI_TYPE_NULL_COPY_FN = 0;
    /// Dup callback: copy the attribute value.
    MPI_TYPE_DUP_FN = 1;
    /// Null delete callback.
    MPI_TYPE_NULL_DELETE_FN = 0;
    /// Null copy callback: do not copy.
    MPI_WIN_NULL_COPY_FN = 0;
    /// Dup callback: copy the attribute value.
    MPI_WIN_DUP_FN = 1;
    /// Null delete callback.
    MPI_WIN_NULL_DELETE_FN = 0;
    /// No data conversion.
    MPI_CONVERSION_FN_NULL = 0;
    /// No data conversion (large count).
    MPI_CONVERSION_FN_NULL_C = 0;
    /// Null MPI_T enumeration.
    MPI_T_ENUM_NULL = 0;
    /// Null MPI_T control variable handle.
    MPI_T_CVAR_HANDLE_NULL = 0;
    /// Null MPI_T performance session.
    MPI_T_PVAR_SESSION_NULL = 0;
    /// Null MPI_T performance variable handle.
    MPI_T_PVAR_HANDLE_NULL = 0;
    /// All performance variable handles of a session.
    MPI_T_PVAR_ALL_HANDLES = 1;
}

/// Callback sentinel meaning "no copy / no delete" (`MPI_*_NULL_COPY_FN`, `MPI_*_NULL_DELETE_FN`).
pub const CALLBACK_NULL_FN: usize = 0;
/// Callback sentinel meaning "copy the attribute value" (`MPI_*_DUP_FN`).
pub const CALLBACK_DUP_FN: usize = 1;

// ---------------------------------------------------------------------------
// Predefined datatypes: sizes and meaning on x86_64 Linux (LP64), gfortran
// defaults for the Fortran types.
// ---------------------------------------------------------------------------

/// Binary format of a floating-point value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatFormat {
    /// IEEE binary16 (Fortran `REAL*2`).
    Binary16,
    /// IEEE binary32 (`float`, `REAL`).
    Binary32,
    /// IEEE binary64 (`double`, `DOUBLE PRECISION`).
    Binary64,
    /// x87 80-bit extended (`long double` on x86_64): 16 bytes of storage,
    /// only the first 10 are significant, the last 6 are padding.
    X87Extended,
    /// IEEE binary128 (gfortran `REAL*16`, i.e. `__float128`).
    Binary128,
}

impl FloatFormat {
    /// Bytes of storage one value occupies.
    pub const fn storage_bytes(self) -> usize {
        match self {
            FloatFormat::Binary16 => 2,
            FloatFormat::Binary32 => 4,
            FloatFormat::Binary64 => 8,
            FloatFormat::X87Extended | FloatFormat::Binary128 => 16,
        }
    }

    /// Bytes that carry the value (10 for x87 extended, else the storage size).
    pub const fn significant_bytes(self) -> usize {
        match self {
            FloatFormat::X87Extended => 10,
            other => other.storage_bytes(),
        }
    }
}

/// What a predefined datatype's elements are, i.e. which reductions apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeKind {
    /// Two's complement signed integer of `bytes` bytes.
    SignedInt {
        /// Size in bytes.
        bytes: usize,
    },
    /// Unsigned integer of `bytes` bytes.
    UnsignedInt {
        /// Size in bytes.
        bytes: usize,
    },
    /// Floating-point number.
    Float(FloatFormat),
    /// Complex number: two floats (real, imaginary).
    Complex(FloatFormat),
    /// Boolean of `bytes` bytes: C `_Bool`, C++ `bool` or Fortran `LOGICAL`.
    /// Logical reductions only.
    Bool {
        /// Size in bytes.
        bytes: usize,
        /// Fortran LOGICAL (truth values set by `MPI_Abi_set_fortran_booleans`;
        /// gfortran uses 1 / 0) rather than a C or C++ boolean.
        fortran: bool,
    },
    /// Printable character (`char`, `wchar_t`, `CHARACTER`): no reductions.
    Char {
        /// Size in bytes.
        bytes: usize,
    },
    /// Uninterpreted byte: bitwise reductions only.
    Byte,
    /// Packed data: no reductions.
    Packed,
    /// Value-index pair for `MPI_MINLOC` / `MPI_MAXLOC`.
    Pair {
        /// Kind of the value (first member).
        value: &'static TypeKind,
        /// Kind of the index (second member): `int` in C, same as the value in Fortran.
        index: &'static TypeKind,
        /// Byte offset of the index inside the pair.
        index_offset: usize,
    },
}

/// One predefined datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PredefinedType {
    /// Handle value (`MPI_Datatype` cast to integer).
    pub handle: usize,
    /// Name as in the C header, e.g. `"MPI_INT"`.
    pub name: &'static str,
    /// `MPI_Type_size`: bytes of data, padding excluded.
    pub size: usize,
    /// `MPI_Type_get_extent`: distance between consecutive elements (C `sizeof`).
    pub extent: usize,
    /// Element kind.
    pub kind: TypeKind,
}

const I1: TypeKind = TypeKind::SignedInt { bytes: 1 };
const I2: TypeKind = TypeKind::SignedInt { bytes: 2 };
const I4: TypeKind = TypeKind::SignedInt { bytes: 4 };
const I8: TypeKind = TypeKind::SignedInt { bytes: 8 };
const I16: TypeKind = TypeKind::SignedInt { bytes: 16 };
const U1: TypeKind = TypeKind::UnsignedInt { bytes: 1 };
const U2: TypeKind = TypeKind::UnsignedInt { bytes: 2 };
const U4: TypeKind = TypeKind::UnsignedInt { bytes: 4 };
const U8: TypeKind = TypeKind::UnsignedInt { bytes: 8 };
const F2: TypeKind = TypeKind::Float(FloatFormat::Binary16);
const F4: TypeKind = TypeKind::Float(FloatFormat::Binary32);
const F8: TypeKind = TypeKind::Float(FloatFormat::Binary64);
const FX: TypeKind = TypeKind::Float(FloatFormat::X87Extended);
const F16: TypeKind = TypeKind::Float(FloatFormat::Binary128);
const C2: TypeKind = TypeKind::Complex(FloatFormat::Binary16);
const C4: TypeKind = TypeKind::Complex(FloatFormat::Binary32);
const C8: TypeKind = TypeKind::Complex(FloatFormat::Binary64);
const CX: TypeKind = TypeKind::Complex(FloatFormat::X87Extended);
const C16: TypeKind = TypeKind::Complex(FloatFormat::Binary128);
const fn logical(bytes: usize) -> TypeKind {
    TypeKind::Bool {
        bytes,
        fortran: true,
    }
}
const fn pair(value: &'static TypeKind, index: &'static TypeKind, index_offset: usize) -> TypeKind {
    TypeKind::Pair {
        value,
        index,
        index_offset,
    }
}

const fn t(
    handle: usize,
    name: &'static str,
    size: usize,
    extent: usize,
    kind: TypeKind,
) -> PredefinedType {
    PredefinedType {
        handle,
        name,
        size,
        extent,
        kind,
    }
}
const fn s(handle: usize, name: &'static str, size: usize, kind: TypeKind) -> PredefinedType {
    t(handle, name, size, size, kind)
}

/// Every predefined datatype (aliases and `MPI_DATATYPE_NULL` excluded), with
/// x86_64 Linux LP64 sizes and gfortran default kinds.
pub static PREDEFINED_TYPES: &[PredefinedType] = &[
    // Language-independent
    s(MPI_AINT, "MPI_AINT", 8, I8),
    s(MPI_COUNT, "MPI_COUNT", 8, I8),
    s(MPI_OFFSET, "MPI_OFFSET", 8, I8),
    s(MPI_PACKED, "MPI_PACKED", 1, TypeKind::Packed),
    s(MPI_BYTE, "MPI_BYTE", 1, TypeKind::Byte),
    // C integers
    s(MPI_CHAR, "MPI_CHAR", 1, TypeKind::Char { bytes: 1 }),
    s(MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, I1),
    s(MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, U1),
    s(MPI_WCHAR, "MPI_WCHAR", 4, TypeKind::Char { bytes: 4 }),
    s(MPI_SHORT, "MPI_SHORT", 2, I2),
    s(MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2, U2),
    s(MPI_INT, "MPI_INT", 4, I4),
    s(MPI_UNSIGNED, "MPI_UNSIGNED", 4, U4),
    s(MPI_LONG, "MPI_LONG", 8, I8),
    s(MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 8, U8),
    s(MPI_LONG_LONG, "MPI_LONG_LONG", 8, I8),
    s(MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8, U8),
    s(MPI_INT8_T, "MPI_INT8_T", 1, I1),
    s(MPI_UINT8_T, "MPI_UINT8_T", 1, U1),
    s(MPI_INT16_T, "MPI_INT16_T", 2, I2),
    s(MPI_UINT16_T, "MPI_UINT16_T", 2, U2),
    s(MPI_INT32_T, "MPI_INT32_T", 4, I4),
    s(MPI_UINT32_T, "MPI_UINT32_T", 4, U4),
    s(MPI_INT64_T, "MPI_INT64_T", 8, I8),
    s(MPI_UINT64_T, "MPI_UINT64_T", 8, U8),
    // C and C++ floating point; long double is x87 extended (10 of 16 bytes significant)
    s(MPI_FLOAT, "MPI_FLOAT", 4, F4),
    s(MPI_DOUBLE, "MPI_DOUBLE", 8, F8),
    s(MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", 16, FX),
    s(MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", 8, C4),
    s(MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16, C8),
    s(
        MPI_C_LONG_DOUBLE_COMPLEX,
        "MPI_C_LONG_DOUBLE_COMPLEX",
        32,
        CX,
    ),
    s(MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", 8, C4),
    s(MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", 16, C8),
    s(
        MPI_CXX_LONG_DOUBLE_COMPLEX,
        "MPI_CXX_LONG_DOUBLE_COMPLEX",
        32,
        CX,
    ),
    // Booleans
    s(
        MPI_C_BOOL,
        "MPI_C_BOOL",
        1,
        TypeKind::Bool {
            bytes: 1,
            fortran: false,
        },
    ),
    s(
        MPI_CXX_BOOL,
        "MPI_CXX_BOOL",
        1,
        TypeKind::Bool {
            bytes: 1,
            fortran: false,
        },
    ),
    // C pairs: size counts value + int, extent is the padded struct
    s(MPI_FLOAT_INT, "MPI_FLOAT_INT", 8, pair(&F4, &I4, 4)),
    t(MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 12, 16, pair(&F8, &I4, 8)),
    t(MPI_LONG_INT, "MPI_LONG_INT", 12, 16, pair(&I8, &I4, 8)),
    s(MPI_2INT, "MPI_2INT", 8, pair(&I4, &I4, 4)),
    t(MPI_SHORT_INT, "MPI_SHORT_INT", 6, 8, pair(&I2, &I4, 4)),
    t(
        MPI_LONG_DOUBLE_INT,
        "MPI_LONG_DOUBLE_INT",
        20,
        32,
        pair(&FX, &I4, 16),
    ),
    // Fortran (gfortran defaults: INTEGER, REAL, LOGICAL are 4 bytes)
    s(MPI_LOGICAL, "MPI_LOGICAL", 4, logical(4)),
    s(MPI_INTEGER, "MPI_INTEGER", 4, I4),
    s(MPI_REAL, "MPI_REAL", 4, F4),
    s(MPI_COMPLEX, "MPI_COMPLEX", 8, C4),
    s(MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8, F8),
    s(MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", 16, C8),
    s(
        MPI_CHARACTER,
        "MPI_CHARACTER",
        1,
        TypeKind::Char { bytes: 1 },
    ),
    // Fortran pairs: the index has the value's type
    s(MPI_2REAL, "MPI_2REAL", 8, pair(&F4, &F4, 4)),
    s(
        MPI_2DOUBLE_PRECISION,
        "MPI_2DOUBLE_PRECISION",
        16,
        pair(&F8, &F8, 8),
    ),
    s(MPI_2INTEGER, "MPI_2INTEGER", 8, pair(&I4, &I4, 4)),
    // Fortran fixed-size types
    s(MPI_LOGICAL1, "MPI_LOGICAL1", 1, logical(1)),
    s(MPI_LOGICAL2, "MPI_LOGICAL2", 2, logical(2)),
    s(MPI_LOGICAL4, "MPI_LOGICAL4", 4, logical(4)),
    s(MPI_LOGICAL8, "MPI_LOGICAL8", 8, logical(8)),
    s(MPI_LOGICAL16, "MPI_LOGICAL16", 16, logical(16)),
    s(MPI_INTEGER1, "MPI_INTEGER1", 1, I1),
    s(MPI_INTEGER2, "MPI_INTEGER2", 2, I2),
    s(MPI_INTEGER4, "MPI_INTEGER4", 4, I4),
    s(MPI_INTEGER8, "MPI_INTEGER8", 8, I8),
    s(MPI_INTEGER16, "MPI_INTEGER16", 16, I16),
    s(MPI_REAL2, "MPI_REAL2", 2, F2),
    s(MPI_REAL4, "MPI_REAL4", 4, F4),
    s(MPI_REAL8, "MPI_REAL8", 8, F8),
    s(MPI_REAL16, "MPI_REAL16", 16, F16),
    s(MPI_COMPLEX4, "MPI_COMPLEX4", 4, C2),
    s(MPI_COMPLEX8, "MPI_COMPLEX8", 8, C4),
    s(MPI_COMPLEX16, "MPI_COMPLEX16", 16, C8),
    s(MPI_COMPLEX32, "MPI_COMPLEX32", 32, C16),
];

/// The predefined datatype with this handle value, if any.
pub fn predefined_type(handle: usize) -> Option<&'static PredefinedType> {
    PREDEFINED_TYPES.iter().find(|t| t.handle == handle)
}

// ---------------------------------------------------------------------------
// Predefined operations and error classes
// ---------------------------------------------------------------------------

/// Predefined reduction operations (`MPI_OP_NULL` excluded): (handle, name).
pub static PREDEFINED_OPS: &[(usize, &str)] = &[
    (MPI_SUM, "MPI_SUM"),
    (MPI_MIN, "MPI_MIN"),
    (MPI_MAX, "MPI_MAX"),
    (MPI_PROD, "MPI_PROD"),
    (MPI_BAND, "MPI_BAND"),
    (MPI_BOR, "MPI_BOR"),
    (MPI_BXOR, "MPI_BXOR"),
    (MPI_LAND, "MPI_LAND"),
    (MPI_LOR, "MPI_LOR"),
    (MPI_LXOR, "MPI_LXOR"),
    (MPI_MINLOC, "MPI_MINLOC"),
    (MPI_MAXLOC, "MPI_MAXLOC"),
    (MPI_REPLACE, "MPI_REPLACE"),
    (MPI_NO_OP, "MPI_NO_OP"),
];

/// Every error class (standard, MPI_T and Steadfast's fault-tolerance
/// classes): (value, name, text for `MPI_Error_string`).
pub static ERROR_CLASSES: &[(i32, &str, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS", "no error"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT", "invalid count argument"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE", "invalid datatype"),
    (MPI_ERR_TAG, "MPI_ERR_TAG", "invalid tag argument"),
    (MPI_ERR_COMM, "MPI_ERR_COMM", "invalid communicator"),
    (MPI_ERR_RANK, "MPI_ERR_RANK", "invalid rank"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST", "invalid request"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT", "invalid root"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP", "invalid group"),
    (MPI_ERR_OP, "MPI_ERR_OP", "invalid reduction operation"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS", "invalid dimension argument"),
    (MPI_ERR_ARG, "MPI_ERR_ARG", "invalid argument"),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN", "unknown error"),
    (
        MPI_ERR_TRUNCATE,
        "MPI_ERR_TRUNCATE",
        "message truncated on receive",
    ),
    (
        MPI_ERR_OTHER,
        "MPI_ERR_OTHER",
        "other error; see the error string of the code",
    ),
    (
        MPI_ERR_INTERN,
        "MPI_ERR_INTERN",
        "internal error in the MPI library",
    ),
    (
        MPI_ERR_PENDING,
        "MPI_ERR_PENDING",
        "operation still pending",
    ),
    (
        MPI_ERR_IN_STATUS,
        "MPI_ERR_IN_STATUS",
        "error code is in the status",
    ),
    (MPI_ERR_ACCESS, "MPI_ERR_ACCESS", "permission denied"),
    (MPI_ERR_AMODE, "MPI_ERR_AMODE", "invalid file access mode"),
    (
        MPI_ERR_ASSERT,
        "MPI_ERR_ASSERT",
        "invalid assertion argument",
    ),
    (MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE", "invalid file name"),
    (MPI_ERR_BASE, "MPI_ERR_BASE", "invalid base address"),
    (
        MPI_ERR_CONVERSION,
        "MPI_ERR_CONVERSION",
        "data conversion function failed",
    ),
    (
        MPI_ERR_DISP,
        "MPI_ERR_DISP",
        "invalid displacement argument",
    ),
    (
        MPI_ERR_DUP_DATAREP,
        "MPI_ERR_DUP_DATAREP",
        "data representation already registered",
    ),
    (
        MPI_ERR_FILE_EXISTS,
        "MPI_ERR_FILE_EXISTS",
        "file already exists",
    ),
    (MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE", "file is in use"),
    (MPI_ERR_FILE, "MPI_ERR_FILE", "invalid file handle"),
    (
        MPI_ERR_INFO_KEY,
        "MPI_ERR_INFO_KEY",
        "info key too long or empty",
    ),
    (
        MPI_ERR_INFO_NOKEY,
        "MPI_ERR_INFO_NOKEY",
        "info key not found",
    ),
    (
        MPI_ERR_INFO_VALUE,
        "MPI_ERR_INFO_VALUE",
        "info value too long or empty",
    ),
    (MPI_ERR_INFO, "MPI_ERR_INFO", "invalid info object"),
    (MPI_ERR_IO, "MPI_ERR_IO", "I/O error"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL", "invalid attribute key"),
    (MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (MPI_ERR_NAME, "MPI_ERR_NAME", "service name not published"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM", "out of memory"),
    (
        MPI_ERR_NOT_SAME,
        "MPI_ERR_NOT_SAME",
        "collective arguments differ between processes",
    ),
    (
        MPI_ERR_NO_SPACE,
        "MPI_ERR_NO_SPACE",
        "no space left on device",
    ),
    (
        MPI_ERR_NO_SUCH_FILE,
        "MPI_ERR_NO_SUCH_FILE",
        "file does not exist",
    ),
    (MPI_ERR_PORT, "MPI_ERR_PORT", "invalid port name"),
    (MPI_ERR_QUOTA, "MPI_ERR_QUOTA", "quota exceeded"),
    (MPI_ERR_READ_ONLY, "MPI_ERR_READ_ONLY", "file is read-only"),
    (
        MPI_ERR_RMA_ATTACH,
        "MPI_ERR_RMA_ATTACH",
        "memory cannot be attached to the window",
    ),
    (
        MPI_ERR_RMA_CONFLICT,
        "MPI_ERR_RMA_CONFLICT",
        "conflicting accesses to a window",
    ),
    (
        MPI_ERR_RMA_RANGE,
        "MPI_ERR_RMA_RANGE",
        "target memory outside the window",
    ),
    (
        MPI_ERR_RMA_SHARED,
        "MPI_ERR_RMA_SHARED",
        "memory cannot be shared",
    ),
    (
        MPI_ERR_RMA_SYNC,
        "MPI_ERR_RMA_SYNC",
        "wrong synchronization of one-sided calls",
    ),
    (MPI_ERR_SERVICE, "MPI_ERR_SERVICE", "invalid service name"),
    (MPI_ERR_SIZE, "MPI_ERR_SIZE", "invalid size argument"),
    (MPI_ERR_SPAWN, "MPI_ERR_SPAWN", "error spawning processes"),
    (
        MPI_ERR_UNSUPPORTED_DATAREP,
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    (
        MPI_ERR_UNSUPPORTED_OPERATION,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "unsupported operation",
    ),
    (MPI_ERR_WIN, "MPI_ERR_WIN", "invalid window"),
    (
        MPI_ERR_RMA_FLAVOR,
        "MPI_ERR_RMA_FLAVOR",
        "wrong window flavor for this call",
    ),
    (
        MPI_ERR_PROC_ABORTED,
        "MPI_ERR_PROC_ABORTED",
        "operation involves a process that aborted",
    ),
    (
        MPI_ERR_VALUE_TOO_LARGE,
        "MPI_ERR_VALUE_TOO_LARGE",
        "value too large for the output argument",
    ),
    (MPI_ERR_SESSION, "MPI_ERR_SESSION", "invalid session"),
    (
        MPI_ERR_ERRHANDLER,
        "MPI_ERR_ERRHANDLER",
        "invalid error handler",
    ),
    (
        MPI_ERR_ABI,
        "MPI_ERR_ABI",
        "ABI setting conflicts with an earlier setting",
    ),
    (
        MPI_T_ERR_CANNOT_INIT,
        "MPI_T_ERR_CANNOT_INIT",
        "tool interface cannot be initialized",
    ),
    (
        MPI_T_ERR_NOT_ACCESSIBLE,
        "MPI_T_ERR_NOT_ACCESSIBLE",
        "tool interface not accessible",
    ),
    (
        MPI_T_ERR_NOT_INITIALIZED,
        "MPI_T_ERR_NOT_INITIALIZED",
        "tool interface not initialized",
    ),
    (
        MPI_T_ERR_NOT_SUPPORTED,
        "MPI_T_ERR_NOT_SUPPORTED",
        "tool interface call not supported",
    ),
    (
        MPI_T_ERR_MEMORY,
        "MPI_T_ERR_MEMORY",
        "tool interface out of memory",
    ),
    (
        MPI_T_ERR_INVALID,
        "MPI_T_ERR_INVALID",
        "invalid tool interface argument",
    ),
    (
        MPI_T_ERR_INVALID_INDEX,
        "MPI_T_ERR_INVALID_INDEX",
        "invalid tool interface index",
    ),
    (
        MPI_T_ERR_INVALID_ITEM,
        "MPI_T_ERR_INVALID_ITEM",
        "invalid tool interface item",
    ),
    (
        MPI_T_ERR_INVALID_SESSION,
        "MPI_T_ERR_INVALID_SESSION",
        "invalid performance variable session",
    ),
    (
        MPI_T_ERR_INVALID_HANDLE,
        "MPI_T_ERR_INVALID_HANDLE",
        "invalid tool interface handle",
    ),
    (
        MPI_T_ERR_INVALID_NAME,
        "MPI_T_ERR_INVALID_NAME",
        "invalid tool interface variable name",
    ),
    (
        MPI_T_ERR_OUT_OF_HANDLES,
        "MPI_T_ERR_OUT_OF_HANDLES",
        "no more tool interface handles",
    ),
    (
        MPI_T_ERR_OUT_OF_SESSIONS,
        "MPI_T_ERR_OUT_OF_SESSIONS",
        "no more performance variable sessions",
    ),
    (
        MPI_T_ERR_CVAR_SET_NOT_NOW,
        "MPI_T_ERR_CVAR_SET_NOT_NOW",
        "control variable cannot be set now",
    ),
    (
        MPI_T_ERR_CVAR_SET_NEVER,
        "MPI_T_ERR_CVAR_SET_NEVER",
        "control variable can never be set",
    ),
    (
        MPI_T_ERR_PVAR_NO_WRITE,
        "MPI_T_ERR_PVAR_NO_WRITE",
        "performance variable cannot be written",
    ),
    (
        MPI_T_ERR_PVAR_NO_STARTSTOP,
        "MPI_T_ERR_PVAR_NO_STARTSTOP",
        "performance variable cannot be started or stopped",
    ),
    (
        MPI_T_ERR_PVAR_NO_ATOMIC,
        "MPI_T_ERR_PVAR_NO_ATOMIC",
        "performance variable cannot be read and reset atomically",
    ),
    (
        MPIX_ERR_PROC_FAILED,
        "MPIX_ERR_PROC_FAILED",
        "a process involved in the operation has failed",
    ),
    (
        MPIX_ERR_PROC_FAILED_PENDING,
        "MPIX_ERR_PROC_FAILED_PENDING",
        "a process failure prevents a wildcard receive from completing",
    ),
    (
        MPIX_ERR_REVOKED,
        "MPIX_ERR_REVOKED",
        "the communicator has been revoked",
    ),
];

/// Readable text of an error class, if `class` is one.
pub fn error_class_text(class: i32) -> Option<&'static str> {
    ERROR_CLASSES
        .iter()
        .find(|(v, _, _)| *v == class)
        .map(|(_, _, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_32_bytes() {
        assert_eq!(core::mem::size_of::<MPI_Status>(), 32);
        assert_eq!(core::mem::align_of::<MPI_Status>(), 4);
    }

    #[test]
    fn predefined_handles_fit_the_reserved_range() {
        let mut max = 0;
        for table in ALL_HANDLE_TABLES {
            for &(name, value) in table.entries {
                assert!(
                    is_predefined_handle(value),
                    "{name} = {value:#x} outside 1..=0xfff"
                );
                max = max.max(value);
            }
        }
        assert_eq!(max, PREDEFINED_HANDLE_MAX_ASSIGNED);
    }

    #[test]
    fn predefined_handles_are_distinct_except_aliases() {
        let aliases = ["MPI_LONG_LONG_INT", "MPI_C_COMPLEX"];
        let mut seen = std::collections::HashMap::new();
        for table in ALL_HANDLE_TABLES {
            for &(name, value) in table.entries {
                if aliases.contains(&name) {
                    continue;
                }
                if let Some(other) = seen.insert(value, name) {
                    panic!("{name} and {other} share {value:#x}");
                }
            }
        }
    }

    #[test]
    fn error_classes_are_unique_and_bounded() {
        let mut values: Vec<i32> = ERROR_CLASSES.iter().map(|e| e.0).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), ERROR_CLASSES.len());
        for &(value, name, text) in ERROR_CLASSES {
            assert!((0..=MPI_ERR_LASTCODE).contains(&value), "{name}");
            assert!(!text.is_empty(), "{name}");
        }
        assert_eq!(
            error_class_text(MPI_ERR_COUNT),
            Some("invalid count argument")
        );
        assert_eq!(error_class_text(-5), None);
    }

    #[test]
    fn type_table_is_consistent() {
        for ty in PREDEFINED_TYPES {
            assert!(ty.size <= ty.extent, "{}", ty.name);
            match ty.kind {
                TypeKind::SignedInt { bytes }
                | TypeKind::UnsignedInt { bytes }
                | TypeKind::Bool { bytes, .. }
                | TypeKind::Char { bytes } => assert_eq!(bytes, ty.size, "{}", ty.name),
                TypeKind::Float(f) => assert_eq!(f.storage_bytes(), ty.size, "{}", ty.name),
                TypeKind::Complex(f) => assert_eq!(2 * f.storage_bytes(), ty.size, "{}", ty.name),
                TypeKind::Byte | TypeKind::Packed => assert_eq!(ty.size, 1, "{}", ty.name),
                TypeKind::Pair {
                    value,
                    index,
                    index_offset,
                } => {
                    let v = kind_bytes(value);
                    let i = kind_bytes(index);
                    assert_eq!(v + i, ty.size, "{}", ty.name);
                    assert!(
                        index_offset >= v && index_offset + i <= ty.extent,
                        "{}",
                        ty.name
                    );
                }
            }
        }
        assert_eq!(FloatFormat::X87Extended.significant_bytes(), 10);
        assert_eq!(predefined_type(MPI_INT).map(|t| t.size), Some(4));
        assert_eq!(predefined_type(MPI_DATATYPE_NULL), None);
    }

    fn kind_bytes(kind: &TypeKind) -> usize {
        match *kind {
            TypeKind::SignedInt { bytes } | TypeKind::UnsignedInt { bytes } => bytes,
            TypeKind::Float(f) => f.storage_bytes(),
            other => panic!("unexpected pair member {other:?}"),
        }
    }
}
