//! Datatype queries available for every type.

use std::ffi::{c_char, c_int};

use steadfast_core::{ErrorClass, MpiError};

use crate::abi::{self, MPI_Aint, MPI_Count, MPI_Datatype};
use crate::env::write_cstr;
use crate::global::{api, dtype};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

unsafe fn size_impl(func: &str, t: MPI_Datatype, out: &mut i64) -> c_int {
    api(func, None, |g| {
        *out = dtype(g, t as usize)?.size as i64;
        Ok(())
    })
}

unsafe fn extent_impl(func: &str, t: MPI_Datatype, truth: bool, lb: &mut i64, extent: &mut i64) -> c_int {
    api(func, None, |g| {
        let d = dtype(g, t as usize)?;
        if truth {
            *lb = d.true_lb as i64;
            *extent = d.true_extent as i64;
        } else {
            *lb = d.lb as i64;
            *extent = d.extent as i64;
        }
        Ok(())
    })
}

mpi_api! {
    fn Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
        let mut s = 0;
        let rc = size_impl("MPI_Type_size", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = if s > i32::MAX as i64 { abi::MPI_UNDEFINED } else { s as c_int };
        }
        rc
    }
    fn Type_size_c(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
        let mut s = 0;
        let rc = size_impl("MPI_Type_size_c", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }
    fn Type_size_x(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
        let mut s = 0;
        let rc = size_impl("MPI_Type_size_x", datatype, &mut s);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = s;
        }
        rc
    }
    fn Type_get_extent(datatype: MPI_Datatype, lb: *mut MPI_Aint, extent: *mut MPI_Aint) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l as MPI_Aint;
            *extent = e as MPI_Aint;
        }
        rc
    }
    fn Type_get_extent_c(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent_c", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_extent_x(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_extent_x", datatype, false, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_true_extent(datatype: MPI_Datatype, lb: *mut MPI_Aint, extent: *mut MPI_Aint) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l as MPI_Aint;
            *extent = e as MPI_Aint;
        }
        rc
    }
    fn Type_get_true_extent_c(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent_c", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_true_extent_x(datatype: MPI_Datatype, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
        let (mut l, mut e) = (0, 0);
        let rc = extent_impl("MPI_Type_get_true_extent_x", datatype, true, &mut l, &mut e);
        if rc == abi::MPI_SUCCESS && !lb.is_null() && !extent.is_null() {
            *lb = l;
            *extent = e;
        }
        rc
    }
    fn Type_get_name(datatype: MPI_Datatype, type_name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api("MPI_Type_get_name", None, |g| {
            if type_name.is_null() || resultlen.is_null() {
                return Err(err(ErrorClass::Arg, "name or resultlen is NULL"));
            }
            let d = dtype(g, datatype as usize)?;
            *resultlen = write_cstr(type_name, &d.name, abi::MPI_MAX_OBJECT_NAME as usize);
            Ok(())
        })
    }
}
