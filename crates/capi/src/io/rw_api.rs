// Generated list of the MPI_File read/write entry points (included by api.rs).
mpi_api! {
    fn File_read_at(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_at", fh, Pos::At(offset), false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_at_c(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_at_c", fh, Pos::At(offset), false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_at_all(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_at_all", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_at_all_c(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_at_all_c", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iread_at(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_at", fh, Pos::At(offset), false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_at_c(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_at_c", fh, Pos::At(offset), false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_at_all(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_at_all", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_at_all_c(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_at_all_c", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_read_at_all_begin(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_at_all_begin", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read_at_all_begin_c(fh: MPI_File, offset: MPI_Offset, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_at_all_begin_c", fh, Pos::At(offset), false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read", fh, Pos::Indiv, false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_c", fh, Pos::Indiv, false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_all(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_all", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_all_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_all_c", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iread(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread", fh, Pos::Indiv, false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_c", fh, Pos::Indiv, false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_all(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_all", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_all_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_all_c", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_read_all_begin(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_all_begin", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read_all_begin_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_all_begin_c", fh, Pos::Indiv, false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read_shared(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_shared", fh, Pos::Shared, false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_shared_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_shared_c", fh, Pos::Shared, false, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iread_shared(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_shared", fh, Pos::Shared, false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iread_shared_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iread_shared_c", fh, Pos::Shared, false, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_read_ordered(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_ordered", fh, Pos::Ordered, false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_ordered_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_read_ordered_c", fh, Pos::Ordered, false, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_read_ordered_begin(fh: MPI_File, buf: *mut c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_ordered_begin", fh, Pos::Ordered, false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read_ordered_begin_c(fh: MPI_File, buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_read_ordered_begin_c", fh, Pos::Ordered, false, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write_at(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_at", fh, Pos::At(offset), true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_at_c(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_at_c", fh, Pos::At(offset), true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_at_all(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_at_all", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_at_all_c(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_at_all_c", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iwrite_at(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_at", fh, Pos::At(offset), true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_at_c(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_at_c", fh, Pos::At(offset), true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_at_all(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_at_all", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_at_all_c(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_at_all_c", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_write_at_all_begin(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_at_all_begin", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write_at_all_begin_c(fh: MPI_File, offset: MPI_Offset, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_at_all_begin_c", fh, Pos::At(offset), true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write", fh, Pos::Indiv, true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_c", fh, Pos::Indiv, true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_all(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_all", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_all_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_all_c", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iwrite(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite", fh, Pos::Indiv, true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_c", fh, Pos::Indiv, true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_all(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_all", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_all_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_all_c", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_write_all_begin(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_all_begin", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write_all_begin_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_all_begin_c", fh, Pos::Indiv, true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write_shared(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_shared", fh, Pos::Shared, true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_shared_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_shared_c", fh, Pos::Shared, true, false, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_iwrite_shared(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_shared", fh, Pos::Shared, true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_iwrite_shared_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, request: *mut abi::MPI_Request) -> c_int {
        rw("MPI_File_iwrite_shared_c", fh, Pos::Shared, true, false, buf as *mut c_void, count as i64, datatype, Out::Request(request))
    }
    fn File_write_ordered(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_ordered", fh, Pos::Ordered, true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_ordered_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, status: *mut MPI_Status) -> c_int {
        rw("MPI_File_write_ordered_c", fh, Pos::Ordered, true, true, buf as *mut c_void, count as i64, datatype, Out::Status(status))
    }
    fn File_write_ordered_begin(fh: MPI_File, buf: *const c_void, count: c_int, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_ordered_begin", fh, Pos::Ordered, true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_write_ordered_begin_c(fh: MPI_File, buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype) -> c_int {
        rw("MPI_File_write_ordered_begin_c", fh, Pos::Ordered, true, true, buf as *mut c_void, count as i64, datatype, Out::Begin)
    }
    fn File_read_at_all_end(fh: MPI_File, _buf: *mut c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_read_at_all_end", fh, status)
    }
    fn File_read_all_end(fh: MPI_File, _buf: *mut c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_read_all_end", fh, status)
    }
    fn File_read_ordered_end(fh: MPI_File, _buf: *mut c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_read_ordered_end", fh, status)
    }
    fn File_write_at_all_end(fh: MPI_File, _buf: *const c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_write_at_all_end", fh, status)
    }
    fn File_write_all_end(fh: MPI_File, _buf: *const c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_write_all_end", fh, status)
    }
    fn File_write_ordered_end(fh: MPI_File, _buf: *const c_void, status: *mut MPI_Status) -> c_int {
        split_end("MPI_File_write_ordered_end", fh, status)
    }
}
